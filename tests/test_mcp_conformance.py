"""The official MCP conformance suite (npm ``@modelcontextprotocol/conformance``) run against our MCP client,
through the command a user runs (``swift-rlfactory tools list|call URL``), and against
``swift-rlfactory serve-agent`` over streamable HTTP; each scenario must end as docs/mcp.md ("Conformance")
says, the failures by design included, each for its own reason.

``.ci/run`` installs Node 22 and the suite (pinned) into ``tests/.mcp-conformance`` (git-ignored); elsewhere
those tests skip, saying how to install them, unless ``CI`` is set, where a missing suite fails them. The
first test needs no Node: the command the suite drives, against a real server of our own.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from swift_rlfactory import __version__

from .conftest import AGENT_ENV, ROOT, ScriptedChat, wait_for_port
from .test_mcp import free_port
from .test_serve_agent import environ, http_server, scripted, served_flags

PREFIX = ROOT / "tests" / ".mcp-conformance"
VERSION = "0.1.16"
INSTALL = (
    "npm install --prefix tests/.mcp-conformance --no-audit --no-fund "
    f"node@22.23.3 @modelcontextprotocol/conformance@{VERSION}"
)
CLI = f"{shlex.quote(sys.executable)} -m swift_rlfactory.cli"
WHOAMI = ROOT / "tests" / "servers" / "whoami_server.py"
CONTEXT = ROOT / "tests" / "servers" / "conformance_context.py"

# Each client scenario and the command it runs: the suite appends the URL of its test server, which
# `sh -c '... "$0" ...'` puts where `tools call` takes it.
CALLS = {
    "tools_call": 'add_numbers "{\\"a\\": 2, \\"b\\": 3}"',
    "sse-retry": "test_reconnection",
    "elicitation-sep1034-client-defaults": "test_client_elicitation_defaults",
    "auth/metadata-default": "test-tool",
    "auth/scope-step-up": "test-tool",  # the call asks for more scope than the listing
}
# Scenarios that hand the client its credentials (MCP_CONFORMANCE_CONTEXT): an environment file's `auth`
# with that grant, written by tests/servers/conformance_context.py.
GRANTS = {
    "auth/pre-registration": "authorization_code",
    "auth/client-credentials-basic": "client_credentials",
    "auth/client-credentials-jwt": "client_credentials",
}
# Passed, with a warning (which the suite's exit status counts as a failure): a URL given alone has no
# client ID metadata document to offer, so the client registers dynamically.
WARNED = {"auth/basic-cimd"}

# How each scenario ends: "pass", or the start of the message of its first failed check. Servers are asked
# for what serve-agent does not offer (method not found) or for the suite's own fixture tools (unknown).
UNOFFERED = "Failed: MCP error -32601: Method not found"
FIXTURE = "Failed: MCP error -32602: Unknown tool: "
SERVER = {
    "server-initialize": "pass",
    "ping": "pass",
    "tools-list": "pass",
    "server-sse-multiple-streams": "pass",
    # no failed check; warnings of no priming event and no retry field: the suite asks at protocol 2025-03-26,
    # and the SDK primes a stream (ID, retry) from 2025-11-25 on (tests/test_serve_agent_resume.py)
    "server-sse-polling": "pass",
    "dns-rebinding-protection": "pass",
    "logging-set-level": UNOFFERED,
    "completion-complete": UNOFFERED,
    "tools-call-with-logging": UNOFFERED,
    **{f"resources-{s}": UNOFFERED for s in ("list", "read-text", "read-binary", "templates-read")},
    **{f"resources-{s}": UNOFFERED for s in ("subscribe", "unsubscribe")},
    **{f"prompts-{s}": UNOFFERED for s in ("list", "get-simple", "get-with-args")},
    **{f"prompts-{s}": UNOFFERED for s in ("get-embedded-resource", "get-with-image")},
    **{f"tools-call-{s}": FIXTURE for s in ("simple-text", "image", "audio", "embedded-resource")},
    **{f"tools-call-{s}": FIXTURE for s in ("mixed-content", "error", "with-progress", "sampling")},
    "tools-call-elicitation": FIXTURE,
    "elicitation-sep1034-defaults": FIXTURE,
    "elicitation-sep1330-enums": FIXTURE,
    "json-schema-2020-12": "Tool 'json_schema_2020_12_tool' not found",
}
CLIENT = {
    "initialize": "pass",
    "tools_call": "pass",
    "sse-retry": "pass",
    # We declare no elicitation capability; the server asks anyway and is told no (the SDK's -32600).
    "elicitation-sep1034-client-defaults": "Elicitation failed: MCP error -32600: Elicitation not supported",
    # OAuth through the SDK's client: discovery, registration (or a pre-registered client), PKCE, the
    # headless authorization, scopes; docs/mcp.md ("OAuth").
    **{f"auth/metadata-{s}": "pass" for s in ("default", "var1", "var2", "var3")},
    "auth/basic-cimd": "pass",
    **{f"auth/scope-{s}": "pass" for s in ("from-www-authenticate", "from-scopes-supported")},
    **{f"auth/scope-{s}": "pass" for s in ("omitted-when-undefined", "step-up", "retry-limit")},
    **{f"auth/token-endpoint-auth-{s}": "pass" for s in ("basic", "post", "none")},
    "auth/pre-registration": "pass",
    # The SDK checks the metadata's issuer (RFC 8414, 3.3): this one names .../oauth, served at the root.
    "auth/2025-03-26-oauth-metadata-backcompat": "Expected Check Missing: client-registration",
    "auth/2025-03-26-oauth-endpoint-fallback": "pass",
    "auth/resource-mismatch": "pass",  # the SDK refuses metadata naming another resource
    "auth/offline-access-scope": "pass",
    "auth/offline-access-not-supported": "pass",
    "auth/client-credentials-basic": "pass",
    "auth/client-credentials-jwt": "pass",  # a client assertion signed with `auth.private_key` (RFC 7523)
    # Enterprise-managed authorization (SEP-990, an identity provider's ID token exchanged): not offered.
    "auth/cross-app-access-complete-flow": "Client did not perform token exchange",
}


def test_tools_list_and_call_take_a_server_url_and_say_who_we_are(tmp_path: Path):
    """``tools list|call URL`` reach the server there; the handshake names swift-rlfactory and its version
    (not the SDK's placeholder) and claims neither sampling nor elicitation, which we do not offer."""
    port = free_port()
    server = subprocess.Popen([sys.executable, str(WHOAMI), "--port", str(port)])
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_for_port(port, server, timeout_s=30)
        run = [sys.executable, "-m", "swift_rlfactory.cli", "tools"]
        listed = subprocess.run([*run, "list", url], capture_output=True, text=True, env=environ())
        called = subprocess.run([*run, "call", url, "whoami"], capture_output=True, text=True, env=environ())
    finally:
        server.kill()
        server.wait(timeout=10)
    assert listed.returncode == 0, listed.stderr
    assert "whoami" in listed.stdout and "1 tools in environment 'mcp-server'" in listed.stdout
    assert called.returncode == 0, called.stderr
    hello = json.loads(called.stdout.splitlines()[0])
    assert hello["clientInfo"] == {"name": "swift-rlfactory", "version": __version__}
    assert not {"sampling", "elicitation"} & hello["capabilities"].keys(), hello


@pytest.fixture(scope="module")
def suite() -> list[str]:
    """The suite's command line under Node 22, as ``.ci/run`` installs them."""
    node = PREFIX / "node_modules" / "node" / "bin" / "node"
    entry = PREFIX / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
    if not (node.is_file() and entry.is_file()):
        if os.environ.get("CI"):
            pytest.fail(f"the MCP conformance suite is missing: .ci/run installs it ({INSTALL})")
        pytest.skip(f"the MCP conformance suite is not installed: {INSTALL}")
    return [str(node), str(entry)]


def outcomes(results: Path) -> dict[str, list[str]]:
    """The messages of each scenario's failed checks (none: it passed), from a results folder."""
    found = {}
    for checks in results.rglob("checks.json"):
        scenario = checks.parent.relative_to(results).as_posix().rsplit("-", 6)[0]  # less the time stamp
        failed = [c for c in json.loads(checks.read_text()) if c["status"] == "FAILURE"]
        found[scenario.removeprefix("server-")] = [c.get("errorMessage") or c["description"] for c in failed]
    return found


def check(found: dict[str, list[str]], expected: dict[str, str]) -> None:
    """Each scenario passed, or its first failed check (the cause; later ones follow from it) says why."""
    assert found.keys() == expected.keys()
    for scenario, outcome in expected.items():
        if outcome == "pass":
            assert not found[scenario], (scenario, found[scenario])
        else:
            assert found[scenario] and found[scenario][0].startswith(outcome), (scenario, found[scenario])


@pytest.fixture(scope="module")
def serve_agent(suite: list[str]) -> Iterator[str]:
    """serve-agent over streamable HTTP; no scenario reaches its model (its endpoint answers serve-agent's
    start-up check only)."""
    with ScriptedChat(scripted) as endpoint, http_server(AGENT_ENV, served_flags(endpoint.port)) as url:
        yield url


def test_serve_agent_against_every_server_scenario(suite: list[str], serve_agent: str, tmp_path: Path):
    command = [*suite, "server", "--url", serve_agent, "--suite", "all", "-o", str(tmp_path)]
    subprocess.run(command, capture_output=True, text=True, timeout=120, env=environ())
    check(outcomes(tmp_path), SERVER)


def run_client_scenario(
    suite: list[str], scenario: str, folder: Path
) -> tuple[dict[str, list[str]], int, str]:
    """One client scenario driven through our CLI: its outcomes, the suite's exit status and its output."""
    if scenario in CALLS:
        command = f"sh -c 'exec {CLI} tools call \"$0\" {CALLS[scenario]}'"
    elif scenario in GRANTS:
        command = f"{shlex.quote(sys.executable)} {CONTEXT} {GRANTS[scenario]}"
    else:
        command = f"{CLI} tools list"
    results = folder / "results"
    run = [*suite, "client", "--command", command, "--scenario", scenario, "-o", str(results)]
    # OAuth tokens go to a token store under the cache folder: this scenario's own.
    env = environ(RLFACTORY_CACHE=str(folder / "cache"))
    proc = subprocess.run(run, capture_output=True, text=True, timeout=120, env=env)
    return outcomes(results), proc.returncode, proc.stdout[-3000:]


@pytest.fixture(scope="module")
def client_runs(suite: list[str], tmp_path_factory) -> dict[str, tuple[dict[str, list[str]], int, str]]:
    """Every client scenario, three at a time (each is a node process and one or two of our CLI's: mostly
    start-up time; one at a time they took ~100 s of CI), each in a folder of its own."""
    root = tmp_path_factory.mktemp("conformance")
    with ThreadPoolExecutor(max_workers=3) as pool:
        runs = {s: pool.submit(run_client_scenario, suite, s, root / s.replace("/", "-")) for s in CLIENT}
        return {scenario: run.result() for scenario, run in runs.items()}


@pytest.mark.parametrize("scenario", list(CLIENT))
def test_our_client_against_a_client_scenario(client_runs, scenario: str):
    found, returncode, output = client_runs[scenario]
    check(found, {scenario: CLIENT[scenario]})
    passed = CLIENT[scenario] == "pass" and scenario not in WARNED
    assert (returncode == 0) == passed, output
