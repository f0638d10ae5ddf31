"""The slow server over streamable HTTP behind a bearer-token check, as a hosted MCP server would be.

Every request without ``Authorization: Bearer <token>`` is answered ``401 Unauthorized`` with a JSON body
that is no JSON-RPC message (``{"error": "invalid_token"}``), the way an OAuth-protected server answers::

    python auth_server.py --port 8933 --token s3cret-token   # http://127.0.0.1:8933/mcp
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import uvicorn
from slow_server import mcp


def require_token(app: Any, token: str) -> Any:
    """``app`` with every HTTP request checked for the bearer token first."""
    expected = f"Bearer {token}".encode()

    async def checked(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            body = json.dumps({"error": "invalid_token"}).encode()
            headers = [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer error="invalid_token"'),
            ]
            await send({"type": "http.response.start", "status": 401, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await app(scope, receive, send)

    return checked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token", required=True)
    args = parser.parse_args()
    app = require_token(mcp.streamable_http_app(), args.token)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
