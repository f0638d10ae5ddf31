"""`swift-rlfactory eval --base-url URL --served-model M` asks the endpoint once at start-up, as
`serve-agent` does (`OpenAIChatPolicy.check_served`): a wrong URL, model name or key ends the command with
one line (exit 2) before an output folder is made, instead of every episode failing, and before ms-swift's
templates (seconds to import) load; an unknown template fails at start-up too.

The endpoint is the scripted OpenAI-compatible server of ``conftest.ScriptedChat`` on 127.0.0.1.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from swift_rlfactory.cli import main

from .conftest import ScriptedChat, free_port
from .test_eval import add_then_answer, served_eval, write_dataset

pytestmark = pytest.mark.timeout(120)

KEY = "sk-evalprobe-7f3e9a1c5b"


def refused_at_start_up(argv: list[str], out: Path, capsys) -> str:
    """Run ``argv``; it must exit 2 with one line on stderr, nothing on stdout, no key and no ``out``."""
    code = main(argv)
    printed = capsys.readouterr()
    assert code == 2, printed
    assert printed.out == "" and KEY not in printed.err
    [line] = printed.err.strip().splitlines()  # one line, no traceback
    assert not out.exists()  # refused before a run folder was made
    return line


def test_an_unreachable_base_url_stops_eval_in_one_line(tmp_path: Path, capsys):
    dataset = write_dataset(tmp_path / "test.jsonl", [(3, 4)])
    out = tmp_path / "out"
    line = refused_at_start_up(served_eval(f"http://127.0.0.1:{free_port()}/v1", dataset, out), out, capsys)
    assert line.startswith("error: --base-url http://127.0.0.1:") and "cannot reach it" in line


def test_a_down_endpoint_is_refused_before_ms_swifts_templates_are_imported():
    probe = (
        "import sys\n"
        "from swift_rlfactory.eval.openai_client import OpenAIChatPolicy\n"
        f"policy = OpenAIChatPolicy('http://127.0.0.1:{free_port()}/v1', 'm', template='qwen2_5')\n"
        "try:\n    policy.check_served()\nexcept ValueError as exc:\n    print(exc)\n"
        "print(sorted(m for m in sys.modules if m == 'swift' or m.startswith('swift.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    refused, imported = done.stdout.strip().splitlines()
    assert "cannot reach it" in refused and imported == "[]", done.stderr


def test_an_unknown_template_stops_eval_at_start_up_naming_it(tmp_path: Path, capsys):
    dataset = write_dataset(tmp_path / "test.jsonl", [(3, 4)])
    out = tmp_path / "out"
    with ScriptedChat(add_then_answer) as server:
        argv = served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, out, "--template", "qwen9_9")
        line = refused_at_start_up(argv, out, capsys)
    assert "qwen9_9" in line and "template" in line
    assert server.requests == []  # no episode was asked


def test_a_model_the_server_does_not_serve_stops_eval_naming_what_it_serves(tmp_path: Path, capsys):
    dataset = write_dataset(tmp_path / "test.jsonl", [(3, 4)])
    out = tmp_path / "out"
    with ScriptedChat(add_then_answer) as server:
        argv = served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, out)
        argv[argv.index("--served-model") + 1] = "qwen-other"
        line = refused_at_start_up(argv, out, capsys)
    assert line.startswith("error: --served-model qwen-other: --base-url http://127.0.0.1:")
    assert line.endswith("does not serve it (it serves: scripted)")
    assert server.requests == []  # no episode was asked


def test_a_refused_key_stops_eval_and_the_key_is_not_shown(tmp_path: Path, capsys):
    from starlette.responses import JSONResponse

    def refuse(request: Any) -> Any:  # echoes the key, as some servers do
        return JSONResponse({"error": f"invalid {request.headers['authorization']}"}, status_code=401)

    dataset = write_dataset(tmp_path / "test.jsonl", [(3, 4)])
    out = tmp_path / "out"
    with ScriptedChat(add_then_answer, models=refuse) as server:
        argv = served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, out, "--api-key", KEY)
        line = refused_at_start_up(argv, out, capsys)
    assert "answered 401 to GET /models (the key: --api-key or $OPENAI_API_KEY)" in line and "invalid" in line
    assert server.requests == []


def test_a_server_without_a_model_list_is_asked_one_token_and_then_evaluated(tmp_path: Path, capsys):
    def greeted(body: dict[str, Any]) -> Any:  # the start-up check's one token, then the scripted model
        return "Hello" if body["messages"][-1]["content"] == "Hi" else add_then_answer(body)

    dataset = write_dataset(tmp_path / "test.jsonl", [(3, 4), (2, 5)])
    out = tmp_path / "out"
    with ScriptedChat(greeted, models=None) as server:
        code = main(served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, out))
        printed = capsys.readouterr()
        assert code == 0, printed
        probe, *episodes = server.requests
    assert probe["model"] == "scripted" and probe["max_tokens"] == 1  # asked once, before any episode
    assert len(episodes) == 4  # 2 questions x 2 turns: the check took none of the scripted replies
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["questions"], metrics["failed_episodes"], metrics["em"]) == (2, 0, 1.0)

    def refused(body: dict[str, Any]) -> Any:  # vLLM's answer for a model it does not serve
        from starlette.responses import JSONResponse

        return JSONResponse({"error": "The model `scripted` does not exist."}, status_code=404)

    out = tmp_path / "refused"
    with ScriptedChat(refused, models=None) as server:
        line = refused_at_start_up(
            served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, out), out, capsys
        )
    assert "refused a chat request for --served-model scripted: 404" in line and "does not exist" in line
