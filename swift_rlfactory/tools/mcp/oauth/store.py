"""The token store: one JSON file (mode 0600) per server holding its OAuth client registration and tokens,
so that later runs (training, eval, ``tools list|call``) reuse and refresh them instead of logging in."""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from swift_rlfactory import redaction

logger = logging.getLogger(__name__)
LOCK_WAIT_S = 30.0  # a process that holds the lock longer (a token endpoint that hangs) is not waited for


class FileTokenStorage:
    """The SDK's ``TokenStorage`` over one file; a configured client (``client_id``) wins over a stored
    registration. Every token read or written is recorded as a secret for redaction."""

    def __init__(self, path: Path, server_url: str, client: OAuthClientInformationFull | None = None):
        self.path, self.server_url, self.client = path, server_url, client

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ValueError(f"token store {self.path} cannot be read: {type(exc).__name__}") from None
        return data if isinstance(data, dict) and data.get("server_url") == self.server_url else {}

    def _write(self, **update: Any) -> None:
        data = {**self._read(), "server_url": self.server_url, **update}
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        part = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as file:
            json.dump(data, file, indent=1)
        os.replace(part, self.path)

    @contextlib.asynccontextmanager
    async def exclusive(self, wait_s: float = LOCK_WAIT_S) -> AsyncIterator[None]:
        """The store's lock (a file beside it), held while expired tokens are refreshed, so that the
        processes sharing the store (ranks, eval workers) take turns; after ``wait_s`` a waiter goes on."""
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(self.path.with_name(f".{self.path.name}.lock"), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + wait_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        logger.warning(
                            "token store %s: still locked after %.0f s; going on", self.path, wait_s
                        )
                        break
                    await anyio.sleep(0.05)
            yield
        finally:
            os.close(fd)  # and with it the lock

    @property
    def expires_at(self) -> float | None:
        """When the stored access token expires (seconds since the epoch), if the server said."""
        return self._read().get("expires_at")

    async def get_tokens(self) -> OAuthToken | None:
        stored = self._read().get("tokens")
        if not stored:
            return None
        tokens = OAuthToken.model_validate(stored)
        _remember(tokens)
        return tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        _remember(tokens)
        expires_at = time.time() + tokens.expires_in if tokens.expires_in else None
        self._write(tokens=tokens.model_dump(mode="json", exclude_none=True), expires_at=expires_at)

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self.client is not None:
            return self.client
        stored = self._read().get("client")
        return OAuthClientInformationFull.model_validate(stored) if stored else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if client_info.client_secret:
            redaction.remember(client_info.client_secret, "<OAuth client secret>")
        if self.client is None:
            self._write(client=client_info.model_dump(mode="json", exclude_none=True))


def _remember(tokens: OAuthToken) -> None:
    redaction.remember(tokens.access_token, "<OAuth access token>")
    if tokens.refresh_token:
        redaction.remember(tokens.refresh_token, "<OAuth refresh token>")
