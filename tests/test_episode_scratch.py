"""A stateful tool tried outside training (``swift-rlfactory tools call``, the UI's "Try a tool") runs in a
scratch episode: set up from an empty row and torn down right after the call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from swift_rlfactory.ui import actions

EPISODE_ENV = Path(__file__).parent / "faults" / "episode_env" / "env.yaml"
SCRATCH_ENV = Path(__file__).parent / "environments" / "scratch_episode" / "env.yaml"


def tools_call(*args: str, log: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "swift_rlfactory.cli", "tools", "call", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SCRATCH_EPISODE_LOG": str(log)},
    )


def events(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_the_cli_calls_a_stateful_tool_in_a_scratch_episode_torn_down_after_each_call(tmp_path):
    log = tmp_path / "episodes.jsonl"
    notebook = tools_call(str(EPISODE_ENV), "write", '{"note": "x"}', log=log)
    assert notebook.returncode == 0, notebook.stdout + notebook.stderr
    assert notebook.stdout.splitlines()[0] == "ok"

    bumped = tools_call(str(SCRATCH_ENV), "bump", "--repeat", "2", log=log)
    assert bumped.returncode == 0, bumped.stdout + bumped.stderr
    lines = bumped.stdout.splitlines()
    assert lines[0] == lines[2] == "1"  # each call has an episode of its own, fresh from setup
    assert events(log) == [{"event": "setup", "row": {}}, {"event": "teardown", "count": 1}] * 2


def test_the_ui_tries_a_stateful_tool_in_a_scratch_episode(tmp_path, monkeypatch):
    log = tmp_path / "episodes.jsonl"
    monkeypatch.setenv("SCRATCH_EPISODE_LOG", str(log))
    envs = actions.Environments()
    try:
        result = actions.call_tool(envs, str(SCRATCH_ENV), "bump", "{}")
        assert (result.observation, result.error) == ("1", None)
        assert events(log) == [{"event": "setup", "row": {}}, {"event": "teardown", "count": 1}]
        assert envs.get(str(SCRATCH_ENV)).episodes.live == 0
        notebook = actions.call_tool(envs, str(EPISODE_ENV), "write", '{"note": "x"}')
        assert (notebook.observation, notebook.error) == ("ok", None)
    finally:
        envs.close()
