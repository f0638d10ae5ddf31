"""The SDK's OAuth client (an ``httpx2.Auth``) for one server entry's ``auth`` setting, with the headless
authorization step a training run takes: the authorization URL is fetched without following redirects and
the code is read from the redirect back to us, as auto-approving servers send it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import warnings
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider, OAuthFlowError
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata

from .settings import OAuthSettings
from .store import FileTokenStorage

if TYPE_CHECKING:
    from ..config import McpServerConfig

# The SDK logs each failed flow with its traceback; the same error then fails the server's start, which
# reports it in one line, so that record is dropped.
logging.getLogger("mcp.client.auth.oauth2").addFilter(
    lambda record: record.getMessage() != "OAuth flow error"
)

Redirect = Callable[[str], Awaitable[None]]
Callback = Callable[[], Awaitable[AuthorizationCodeResult]]


class OAuthLoginNeeded(OAuthFlowError):
    """The authorization server wants a person (a login or consent page): a headless run cannot go on."""


class HeadlessAuthorization:
    """The SDK's redirect and callback handlers without a browser: the authorization request is sent as a
    plain GET, and its redirect to our callback URL carries ``code`` and ``state`` (or ``error``)."""

    def __init__(self, server_url: str, callback_url: str):
        self.server_url, self.callback_url = server_url, callback_url
        self.result: AuthorizationCodeResult | None = None

    async def redirect(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient(follow_redirects=False, timeout=30.0) as http:
            response = await http.get(authorization_url)
        location = response.headers.get("location", "")
        query = parse_qs(urlsplit(location).query) if response.is_redirect else {}
        if location.startswith(self.callback_url) and "error" in query:
            said = " ".join(query["error"] + query.get("error_description", []))
            raise OAuthFlowError(f"the authorization server refused the authorization request: {said}")
        if location.startswith(self.callback_url) and "code" in query:
            first = {key: values[0] for key, values in query.items()}
            self.result = AuthorizationCodeResult(
                code=first["code"], state=first.get("state"), iss=first.get("iss")
            )
            return
        raise OAuthLoginNeeded(
            f"the authorization server of {self.server_url} asks a person to log in (HTTP "
            f"{response.status_code}, no redirect back with a code): run "
            "`swift-rlfactory tools login ENV_OR_URL` once where a browser can open; this and later runs reuse and refresh the tokens it stores"
        )

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


class _SharedStore:
    """The token store as the one copy of the tokens for every process that shares it: the stored expiry
    comes along (an expired token is refreshed before it is sent), and a process whose token expired reads
    the store again under the store's lock before it refreshes, holding the lock until its request goes out.
    On a server that rotates refresh tokens, processes that each refreshed their own copy spent one
    another's: all but one then wanted a new authorization, which a headless run cannot give."""

    context: Any
    _initialized: bool

    async def _initialize(self) -> None:
        await super()._initialize()  # type: ignore[misc]
        self.context.token_expiry_time = self.context.storage.expires_at

    async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        if not self._initialized:  # a new process: what the store holds decides
            await self._initialize()
        async with contextlib.AsyncExitStack() as lock:
            if self.context.current_tokens is not None and not self.context.is_token_valid():
                await lock.enter_async_context(self.context.storage.exclusive())
                self._initialized = False  # read the store again: another process may have refreshed
            flow = super()._auth_flow(request)  # type: ignore[misc]
            try:
                outgoing = await flow.__anext__()
                while True:
                    if outgoing is request:  # the tokens are settled: let the lock go as the request goes out
                        await lock.aclose()
                    outgoing = await flow.asend((yield outgoing))
            except StopAsyncIteration:
                pass
            finally:
                await flow.aclose()


class _AuthorizationCode(_SharedStore, OAuthClientProvider):
    pass


class _ClientCredentials(_SharedStore, ClientCredentialsOAuthProvider):
    pass


class _PrivateKeyJWT(_SharedStore, PrivateKeyJWTOAuthProvider):
    pass


def callback_url(settings: OAuthSettings) -> str:
    return f"http://127.0.0.1:{settings.callback_port}/callback"


# One OAuth client per server and event loop, shared by the server's sessions: its lock lets one of them
# authorize or refresh while the others wait for the result, instead of each registering, authorizing and
# refreshing (a rotated refresh token spent by one fails the others). Across processes: _SharedStore.
_shared: dict[tuple[str, str, asyncio.AbstractEventLoop], httpx2.Auth] = {}


def oauth_for(
    config: McpServerConfig, redirect: Redirect | None = None, callback: Callback | None = None
) -> httpx2.Auth | None:
    """The OAuth client for a remote server entry with ``auth`` (``None`` without), its tokens kept in the
    entry's token store; ``redirect`` and ``callback`` replace the headless handlers (``tools login``)."""
    settings, url = config.auth, config.url
    if settings is None or url is None:
        return None
    if redirect is not None or callback is not None:
        return _provider(settings, url, redirect, callback)
    key = (url, settings.model_dump_json(), asyncio.get_running_loop())
    if key not in _shared:
        _shared[key] = _provider(settings, url, None, None)
    return _shared[key]


def _provider(
    settings: OAuthSettings, url: str, redirect: Redirect | None, callback: Callback | None
) -> httpx2.Auth:
    path = settings.store_path(url)
    if settings.grant == "client_credentials":
        return _client_credentials(settings, url, FileTokenStorage(path, url))
    back = callback_url(settings)
    client = None
    if settings.client_id:  # pre-registered: no dynamic registration
        method = settings.token_endpoint_auth_method or (
            "client_secret_basic" if settings.client_secret else "none"
        )
        client = OAuthClientInformationFull(
            client_id=settings.client_id,
            client_secret=settings.client_secret,
            redirect_uris=[back],  # type: ignore[list-item]
            token_endpoint_auth_method=method,
        )
    metadata = OAuthClientMetadata(
        client_name="swift-rlfactory",
        redirect_uris=[back],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        scope=settings.scope,
    )
    headless = HeadlessAuthorization(url, back)
    return _AuthorizationCode(
        url,
        metadata,
        FileTokenStorage(path, url, client),
        redirect or headless.redirect,
        callback or headless.callback,
        client_metadata_url=settings.client_metadata_url,
    )


def _client_credentials(settings: OAuthSettings, url: str, storage: FileTokenStorage) -> httpx2.Auth:
    """The client-credentials grant, authenticated by the client secret or by an assertion signed with the
    private key (RFC 7523, ``private_key_jwt``)."""
    assert settings.client_id
    with warnings.catch_warnings():  # no `issuer`: whichever server the resource names, as documented
        warnings.simplefilter("ignore")
        if settings.private_key:
            signed = SignedJWTParameters(
                issuer=settings.client_id,
                subject=settings.client_id,
                signing_key=settings.private_key,
                signing_algorithm=settings.signing_algorithm,
            )
            return _PrivateKeyJWT(
                url, storage, settings.client_id, signed.create_assertion_provider(), settings.scope
            )
        assert settings.client_secret
        method = settings.token_endpoint_auth_method
        return _ClientCredentials(
            url,
            storage,
            settings.client_id,
            settings.client_secret,
            method if method in ("client_secret_basic", "client_secret_post") else "client_secret_basic",
            settings.scope,
        )
