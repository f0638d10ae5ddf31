"""The slow server over streamable HTTP behind a bearer-token check, as a hosted MCP server would be.

Every request without ``Authorization: Bearer <token>`` is answered ``401 Unauthorized`` with a JSON body
that is no JSON-RPC message (``{"error": "invalid_token"}``), the way an OAuth-protected server answers.
The ``revoke`` tool makes the server answer every later request with the status it is given, as a server
does whose token expired or was revoked mid-run (401/403), or whose backend broke (500)::

    python auth_server.py --port 8933 --token s3cret-token                   # http://127.0.0.1:8933/mcp
    python auth_server.py --port 8934 --token s3cret-token --transport sse   # http://127.0.0.1:8934/sse
"""

from __future__ import annotations

import argparse
import json
from http import HTTPStatus
from typing import Any

import uvicorn
from slow_server import mcp

_refusing: list[int] = []  # the status every request gets once ``revoke`` was called


@mcp.tool()
def revoke(status: int) -> str:
    """From now on, answer every HTTP request with ``status`` (this call itself still succeeds)."""
    _refusing[:] = [status]
    return f"revoked: {status}"


def require_token(app: Any, token: str) -> Any:
    """``app`` with every HTTP request checked for the bearer token first (and for a revocation)."""
    expected = f"Bearer {token}".encode()

    async def checked(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        status = _refusing[0] if _refusing else 401
        if _refusing or dict(scope["headers"]).get(b"authorization") != expected:
            error = "invalid_token" if status == 401 else HTTPStatus(status).phrase
            body = json.dumps({"error": error}).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            if status == 401:
                headers.append((b"www-authenticate", b'Bearer error="invalid_token"'))
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return checked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--transport", choices=["streamable-http", "sse"], default="streamable-http")
    args = parser.parse_args()
    app = require_token(mcp.sse_app() if args.transport == "sse" else mcp.streamable_http_app(), args.token)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
