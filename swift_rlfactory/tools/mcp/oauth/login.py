"""``swift-rlfactory tools login``: the one interactive authorization, for a server whose authorization
server wants a person. The authorization URL is printed (and opened where a browser is), its redirect is
received on 127.0.0.1 at the callback port, and the tokens go to the token store later runs read."""

from __future__ import annotations

import asyncio
import sys
import webbrowser
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.shared.auth import AuthorizationCodeResult

from .flow import oauth_for

if TYPE_CHECKING:
    from ..config import McpServerConfig

_PAGE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n"
_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "swift-rlfactory"},
    },
}


async def login(config: McpServerConfig, say: Callable[[str], None], wait_s: float = 300.0) -> None:
    """Authorize ``config``'s server for its token store: an MCP ``initialize`` request sent through the
    OAuth client, whose 401 starts the flow; stored tokens that still work need no login."""
    assert config.auth is not None and config.url is not None
    received: asyncio.Future[dict[str, str]] = asyncio.get_running_loop().create_future()

    async def on_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = (await reader.readline()).decode("latin-1").split()
        query = parse_qs(urlsplit(line[1]).query) if len(line) > 1 else {}
        if "code" in query or "error" in query:
            writer.write(_PAGE + b"swift-rlfactory: authorization received; you may close this page.\n")
            if not received.done():
                received.set_result({key: values[0] for key, values in query.items()})
        else:
            writer.write(_PAGE + b"swift-rlfactory: waiting for the authorization server's redirect.\n")
        await writer.drain()
        writer.close()

    async def redirect(url: str) -> None:
        say(f"Open this URL to authorize {config.url}:\n{url}")
        if sys.stdout.isatty():
            webbrowser.open(url)

    async def callback() -> AuthorizationCodeResult:
        query = await asyncio.wait_for(received, wait_s)
        if "error" in query:
            raise PermissionError(
                f"authorization refused: {query['error']} {query.get('error_description', '')}"
            )
        return AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))

    server = await asyncio.start_server(on_request, "127.0.0.1", config.auth.callback_port)
    headers = {"Accept": "application/json, text/event-stream", **config.headers}
    try:
        async with httpx2.AsyncClient(auth=oauth_for(config, redirect, callback), timeout=30.0) as http:
            response = await http.post(config.url, json=_INITIALIZE, headers=headers)
    finally:
        server.close()
    if response.status_code >= 400:
        raise PermissionError(f"{config.url} still answers HTTP {response.status_code} after the login")
    say(f"Logged in to {config.url}; tokens stored in {config.auth.store_path(config.url)}")
