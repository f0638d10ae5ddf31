"""Concurrency limits for the whole run: ``limits.concurrency_scope`` divides ``max_concurrency`` and
``per_tool_concurrency`` by the ranks that share them, read from the launcher's variables of a real
subprocess, and the executor there holds that many calls in flight at most; a judge's
``concurrency_scope`` does the same for its requests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

from swift_rlfactory.rewards.registry import RewardSpec
from swift_rlfactory.rewards.terms import RewardTerm
from swift_rlfactory.tools.limit_scope import rank_share, ranks_sharing

from .conftest import judge_server
from .test_judge import traj

ROOT = Path(__file__).resolve().parents[1]

TOOLS = textwrap.dedent(
    """
    import asyncio
    from swift_rlfactory.tools import tool

    def _hold(state):
        async def hold(i: int) -> str:
            state["now"] += 1
            state["peak"] = max(state["peak"], state["now"])
            await asyncio.sleep(0.3)
            state["now"] -= 1
            return str(state["peak"])
        return hold

    slow = tool(name="slow", description="Hold a slot of the per-tool limit.")(_hold({"now": 0, "peak": 0}))
    free = tool(name="free", description="Hold a slot of the global limit.")(_hold({"now": 0, "peak": 0}))
    """
)
RANK = textwrap.dedent(
    """
    import json, sys
    from swift_rlfactory.env.environment import Environment
    from swift_rlfactory.tools import ToolCall

    with Environment.load(sys.argv[1]) as env:
        peaks = {}
        for name in ("slow", "free"):
            records = env.executor.execute([ToolCall(name=name, arguments={"i": i}) for i in range(8)])
            assert all(r.ok for r in records), records
            peaks[name] = max(int(r.observation) for r in records)
    print(json.dumps(peaks))
    """
)


@pytest.mark.parametrize(
    ("scope", "ranks", "peaks"),
    [
        ("rank", {"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}, {"slow": 4, "free": 8}),
        ("node", {"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}, {"slow": 2, "free": 4}),
        ("run", {"WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}, {"slow": 1, "free": 2}),
        ("run", {}, {"slow": 4, "free": 8}),  # started alone: the whole limit
    ],
)
@pytest.mark.timeout(120)
def test_a_rank_holds_its_share_of_a_run_wide_limit(tmp_path, scope, ranks, peaks):
    (tmp_path / "tools.py").write_text(TOOLS)
    env_file = tmp_path / "env.yaml"
    env_file.write_text(
        "tools: {python: [tools.py]}\n"
        f"limits: {{max_concurrency: 8, per_tool_concurrency: {{slow: 4}}, concurrency_scope: {scope}}}\n"
    )
    environ = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "LOCAL_WORLD_SIZE")}
    environ["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", RANK, str(env_file)],
        env={**environ, **ranks},
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == peaks


def test_a_share_is_at_least_one_call_and_odd_variables_count_as_one_rank():
    assert rank_share(3, "run", {"WORLD_SIZE": "8"}) == 1
    assert rank_share(10, "run", {"WORLD_SIZE": "4"}) == 2
    assert rank_share(10, "node", {"WORLD_SIZE": "4"}) == 10  # LOCAL_WORLD_SIZE unset
    assert [ranks_sharing("run", {"WORLD_SIZE": w}) for w in ("", "0", "-2", "two", " 3 ")] == [1, 1, 1, 1, 3]


def test_a_judge_with_a_run_wide_limit_holds_its_share(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with judge_server() as url:
        term = RewardTerm(
            name="judge",
            args={"base_url": f"{url}/v1", "model": "slow", "max_concurrency": 4, "concurrency_scope": "run"},
        )
        spec = RewardSpec([term])
        try:
            spec.score([traj(f"city {i}") for i in range(6)])
        finally:
            spec.close()
        assert httpx.get(f"{url}/stats").json()["max_in_flight"] == 2  # 4 for the run, 2 ranks
