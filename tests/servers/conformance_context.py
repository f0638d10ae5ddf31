"""The conformance suite's client for scenarios that hand the client its credentials: the suite puts them
in ``MCP_CONFORMANCE_CONTEXT`` (JSON: ``client_id``, ``client_secret`` or ``private_key_pem`` and
``signing_algorithm``), which this writes into an environment file's ``auth`` (the secret as
``${CONFORMANCE_CLIENT_SECRET}``, the key as ``${file:key.pem}``, as a user would), then runs
``swift-rlfactory tools call ENV test-tool`` on it::

    python conformance_context.py GRANT URL   # GRANT: authorization_code or client_credentials
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

import yaml


def main() -> None:
    grant, url = sys.argv[1:3]
    context = json.loads(os.environ["MCP_CONFORMANCE_CONTEXT"])
    auth = {"type": "oauth", "grant": grant, "client_id": context["client_id"]}
    if "client_secret" in context:
        auth["client_secret"] = "${CONFORMANCE_CLIENT_SECRET}"
        os.environ["CONFORMANCE_CLIENT_SECRET"] = context["client_secret"]
    folder = Path(tempfile.mkdtemp(prefix="conformance-"))
    if "private_key_pem" in context:  # a key kept in a file, as a user would
        (folder / "key.pem").write_text(context["private_key_pem"])
        auth["private_key"] = "${file:key.pem}"
        auth["signing_algorithm"] = context.get("signing_algorithm", "RS256")
    auth["token_store"] = str(folder / "tokens.json")
    env = {"name": "conformance", "tools": {"mcp": {"mcpServers": {"server": {"url": url, "auth": auth}}}}}
    (folder / "env.yaml").write_text(yaml.safe_dump(env))
    cli = [
        sys.executable,
        "-m",
        "swift_rlfactory.cli",
        "tools",
        "call",
        str(folder / "env.yaml"),
        "test-tool",
    ]
    os.execv(sys.executable, cli)


if __name__ == "__main__":
    main()
