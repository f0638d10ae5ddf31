"""An MCP server behind OAuth, with its own authorization server (the SDK's), on 127.0.0.1: protected-
resource and authorization-server metadata, dynamic client registration, PKCE, refresh tokens, and the
client-credentials grant for one pre-registered client. Authorization is approved at once (a redirect back
with the code), or with ``--consent`` answered with a login page, as a server that wants a person does.

Tool ``whoami``: the client id of the token the call came with. Tool ``wait``: sleeps. Tool ``stats``: how many registrations,
authorizations, code exchanges, refreshes and client-credentials grants the server has seen::

    python oauth_server.py --port 8950 [--ttl 2] [--consent] [--client-secret SECRET] [--transport sse]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import secrets
import time
from collections import Counter
from typing import Any
from urllib.parse import parse_qs

import uvicorn
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

CC_CLIENT = "training-robot"  # the pre-registered client of the client-credentials grant
seen: Counter[str] = Counter()


class Provider:
    """The SDK's authorization-server provider, in memory; access tokens live ``ttl`` seconds."""

    def __init__(self, ttl: int, consent: bool, base: str, refresh_delay: float = 0.0):
        self.ttl, self.consent, self.base, self.refresh_delay = ttl, consent, base, refresh_delay
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.access: dict[str, AccessToken] = {}
        self.pending: dict[str, tuple[str, AuthorizationParams]] = {}  # login pages shown, by id

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        seen["registrations"] += 1
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        seen["authorizations"] += 1
        if self.consent:
            self.pending[request := secrets.token_urlsafe(8)] = (client.client_id, params)
            return f"{self.base}/login?id={request}"
        return self.approve(client.client_id, params)

    def approve(self, client_id: str, params: AuthorizationParams) -> str:
        """The redirect back to the client with a fresh code, as a person's approval sends it."""
        code = AuthorizationCode(
            code=secrets.token_urlsafe(16),
            scopes=params.scopes or ["mcp"],
            expires_at=time.time() + 60,
            client_id=client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        self.codes[code.code] = code
        return construct_redirect_uri(str(params.redirect_uri), code=code.code, state=params.state)

    async def load_authorization_code(self, client: Any, authorization_code: str) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: Any, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        seen["code_exchanges"] += 1
        del self.codes[authorization_code.code]
        return self.issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client: Any, refresh_token: str) -> RefreshToken | None:
        await asyncio.sleep(self.refresh_delay)  # a slow token endpoint: refreshes at once overlap
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: Any, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        seen["refreshes"] += 1
        del self.refresh[refresh_token.token]
        return self.issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        return found if found and (found.expires_at or 0) > time.time() else None

    async def revoke_token(self, token: Any) -> None:
        self.access.pop(token.token, None)

    def issue(
        self, client_id: str, scopes: list[str], resource: str | None, refresh: bool = True
    ) -> OAuthToken:
        access = AccessToken(
            token=f"at-{secrets.token_hex(12)}",
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + self.ttl,
            resource=resource,
        )
        self.access[access.token] = access
        token = OAuthToken(access_token=access.token, expires_in=self.ttl, scope=" ".join(scopes))
        if refresh:
            token.refresh_token = f"rt-{secrets.token_hex(12)}"
            self.refresh[token.refresh_token] = RefreshToken(
                token=token.refresh_token, client_id=client_id, scopes=scopes, resource=resource
            )
        return token


def client_credentials(app: Any, provider: Provider, secret: str | None) -> Any:
    """``app`` with the client-credentials grant added to its token endpoint (the SDK's has none), for
    client ``training-robot`` and ``secret``, sent as HTTP Basic authentication; and a login page, whose
    ``/approve?id=`` link is the person's approval."""

    async def answer(
        send: Any, status: int, body: bytes, kind: bytes = b"application/json", to: str = ""
    ) -> None:
        headers = [(b"content-type", kind), (b"content-length", str(len(body)).encode())]
        headers += [(b"location", to.encode())] if to else []
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def wrapped(scope: dict, receive: Any, send: Any) -> None:
        request = parse_qs(scope.get("query_string", b"").decode()).get("id", [""])[0]
        if scope["type"] == "http" and scope["path"] == "/login":
            page = f'<html><body>Log in? <a href="/approve?id={request}">Approve</a></body></html>'
            return await answer(send, 200, page.encode(), b"text/html")
        if scope["type"] == "http" and scope["path"] == "/approve" and request in provider.pending:
            return await answer(
                send, 302, b"", b"text/plain", provider.approve(*provider.pending.pop(request))
            )
        if scope["type"] != "http" or scope["path"] != "/token" or scope["method"] != "POST":
            return await app(scope, receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            body, more = body + message.get("body", b""), message.get("more_body", False)
        form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
        if form.get("grant_type") != "client_credentials":
            replayed = iter([{"type": "http.request", "body": body, "more_body": False}])
            return await app(scope, lambda: _next(replayed, receive), send)
        basic = dict(scope["headers"]).get(b"authorization", b"").removeprefix(b"Basic ")
        if secret is None or base64.b64decode(basic or b"Og==") != f"{CC_CLIENT}:{secret}".encode():
            return await answer(send, 401, json.dumps({"error": "invalid_client"}).encode())
        seen["client_credentials"] += 1
        scopes = form.get("scope", "mcp").split()
        token = provider.issue(CC_CLIENT, scopes, form.get("resource"), refresh=False)
        await answer(send, 200, token.model_dump_json(exclude_none=True).encode())

    return wrapped


async def _next(replayed: Any, receive: Any) -> dict:
    return next(replayed, None) or await receive()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ttl", type=int, default=3600, help="seconds an access token lives")
    parser.add_argument("--consent", action="store_true", help="show a login page instead of approving")
    parser.add_argument("--transport", choices=["streamable-http", "sse"], default="streamable-http")
    parser.add_argument("--client-secret", help="the secret of client training-robot (client credentials)")
    parser.add_argument("--refresh-delay", type=float, default=0.0, help="seconds a refresh waits first")
    args = parser.parse_args()
    base = f"http://127.0.0.1:{args.port}"
    provider = Provider(args.ttl, args.consent, base, args.refresh_delay)
    auth = AuthSettings(
        issuer_url=base,
        resource_server_url=f"{base}/{'sse' if args.transport == 'sse' else 'mcp'}",
        client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=["mcp"]),
        required_scopes=["mcp"],
        validate_token_resource=True,
    )
    mcp = MCPServer("oauth", log_level="WARNING", auth=auth, auth_server_provider=provider)

    @mcp.tool()
    def whoami() -> str:
        """The client id of the token this call came with."""
        from mcp.server.auth.middleware.auth_context import get_access_token

        token = get_access_token()
        return token.client_id if token else "nobody"

    @mcp.tool()
    async def wait(seconds: float) -> str:
        """Sleep ``seconds``, for the tests of parallel calls."""
        await asyncio.sleep(seconds)
        return "waited"

    @mcp.tool()
    def stats() -> str:
        """Registrations, authorizations, code exchanges, refreshes and client-credentials grants so far."""
        return json.dumps(dict(seen))

    served = mcp.sse_app() if args.transport == "sse" else mcp.streamable_http_app()
    app = client_credentials(served, provider, args.client_secret)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
