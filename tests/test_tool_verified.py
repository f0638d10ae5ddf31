"""Tool-verified rewards: a reward runs hidden tests on the model's code through the env's own run_python.

Both places rewards run are exercised with the real ``examples/code`` environment and real sandboxes:
``swift-rlfactory eval`` against a scripted OpenAI-compatible server (only the model is scripted), and the
training reward ``RLFactoryReward`` fed the batch ms-swift hands it.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from swift_rlfactory.env.environment import Environment
from swift_rlfactory.trajectory import Trajectory

from .conftest import ScriptedChat

ROOT = Path(__file__).resolve().parents[1]
CODE_ENV = ROOT / "examples" / "code" / "env.yaml"
pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None,
    reason="bubblewrap (bwrap) is not installed: apt-get install bubblewrap (CI installs it)",
)

ROTATE = {
    "messages": [
        {"role": "user", "content": "Write a Python function `rotate_left(s: str, k: int) -> str` ..."}
    ],
    "entry_point": "rotate_left",
    "tests": json.dumps([[["", 3], ""], [["abc", 1], "bca"], [["abc", 4], "bca"], [["hello", 2], "llohe"]]),
}
GOOD = "def rotate_left(s, k):\n    if not s:\n        return s\n    k %= len(s)\n    return s[k:] + s[:k]\n"
WRONG = "def rotate_left(s, k):\n    return s[k:] + s[:k]\n"  # no wrap-around: passes 3 of 4
HACKS = {
    "fake score": "print('0' * 16, 4, 4)\ndef rotate_left(s, k):\n    return s\n",
    "always equal": "class Eq(str):\n    def __eq__(self, other): return True\n"
    "def rotate_left(s, k):\n    return Eq(s)\n",
    "crash at load": "raise SystemExit(0)\n",
    "hang": "def rotate_left(s, k):\n    while True: pass\n",
}


def answer(code: str) -> str:
    return f"Here it is:\n```python\n{code}```"


def trajectory(final: str, row: dict[str, Any] = ROTATE) -> Trajectory:
    messages = [*row["messages"], {"role": "assistant", "content": final}]
    return Trajectory(messages=messages, turns=1, stop_reason="answer", row=dict(row))


@pytest.mark.timeout(60)
def test_hidden_tests_reward_scores_the_share_passed_and_resists_tricks():
    with Environment.load(CODE_ENV) as env:
        cases = [trajectory(answer(GOOD)), trajectory(answer(WRONG)), trajectory("no code at all")]
        cases += [trajectory(answer(code)) for code in HACKS.values()]
        # the visible reply counts, as the parser reads it: code only in reasoning is no answer, and
        # reasoning that mentions a tool call is no call
        cases += [
            trajectory(f"<think>{answer(GOOD)}</think>I could not solve it."),
            trajectory(f"<think>maybe try <tool_call> first</think>{answer(GOOD)}"),
            # a Qwen3-Coder call without its <tool_call> tags is a call, whose code is no answer
            trajectory(f"<function=run_python>\n<parameter=code>\n{answer(GOOD)}\n</parameter>\n</function>"),
        ]
        for t in cases:
            t.tool_env = env
        asyncio.run(env.reward.ascore(cases))
    scores = [t.rewards["rewards.py:hidden_tests"] for t in cases]
    # the tricks pass ("", 3)
    assert scores == [1.0, 0.75, 0.0] + [0.25, 0.25, 0.0, 0.0] + [0.0, 1.0, 0.0], scores
    assert env.reward.errors == 0  # failures were scores, not exceptions


@pytest.mark.timeout(60)
def test_call_tool_errors_are_records_never_exceptions():
    async def calls(env: Environment) -> list[Any]:
        t = trajectory("x")
        t.tool_env = env
        return await asyncio.gather(
            t.call_tool("run_python", {"code": "print(40 + 2)"}),
            t.call_tool("run_python", {"code": "1 / 0"}),
            t.call_tool("no_such_tool", {}),
            t.call_tool("run_python", {"cod": "typo"}),
        )

    env = Environment.load(CODE_ENV)  # not started: the first call_tool starts it (a trainer in server mode)
    try:
        ok, crash, unknown, typo = asyncio.run(calls(env))
    finally:
        env.close()
    assert ok.ok and ok.observation == "42"
    assert "ZeroDivisionError" in crash.error and "unknown tool 'no_such_tool'" in unknown.error
    assert "needs a 'code' argument" in typo.error
    with pytest.raises(RuntimeError, match="no environment attached"):
        asyncio.run(trajectory("x").call_tool("run_python", {"code": "pass"}))
    assert "tool_env" not in trajectory("x").to_dict()


def scripted_coder(solutions: dict[str, str]) -> ScriptedChat:
    """A served model that tries its function with run_python, then answers with it. Only the model is
    scripted; the tool call and the hidden tests run for real."""

    def reply(body: dict[str, Any]) -> str:
        question = next(m["content"] for m in body["messages"] if m["role"] == "user")
        code = solutions[re.search(r"`(\w+)\(", question).group(1)]
        if body["messages"][-1]["role"] == "user":
            call = json.dumps({"name": "run_python", "arguments": {"code": code + "print('loaded')"}})
            return f"<tool_call>\n{call}\n</tool_call>"
        return answer(code)

    return ScriptedChat(reply)


@pytest.mark.timeout(120)
def test_eval_cli_scores_code_with_hidden_tests_in_the_sandbox(tmp_path: Path, capsys):
    from swift_rlfactory.cli import main

    rows = [json.loads(line) for line in (ROOT / "examples/code/data/test.jsonl").read_text().splitlines()]
    summul = next(r for r in rows if r["entry_point"] == "sum_multiples")
    a, b = map(int, re.search(r"multiples of (\d+) or (\d+)", summul["messages"][0]["content"]).groups())
    dataset = tmp_path / "test.jsonl"
    dataset.write_text(json.dumps(ROTATE) + "\n" + json.dumps(summul) + "\n")
    solutions = {
        "rotate_left": GOOD,
        "sum_multiples": f"def sum_multiples(n):\n    return sum(x for x in range(n) if x % {a} == 0 and x % {b} == 0)\n",
    }  # the second reads "or" as "and": wrong on most inputs
    out = tmp_path / "out"
    with scripted_coder(solutions) as server:
        code = main([
            "eval", "--env", str(CODE_ENV), "--base-url", f"http://127.0.0.1:{server.port}/v1",
            "--served-model", "scripted", "--api-key", "k", "--dataset", str(dataset), "--output", str(out),
        ])  # fmt: skip
    assert code == 0, capsys.readouterr().out
    records = {
        r["row"]["entry_point"]: r
        for r in map(json.loads, (out / "trajectories.jsonl").read_text().splitlines())
    }
    good, wrong = records["rotate_left"], records["sum_multiples"]
    assert [c["observation"] for c in good["tool_calls"]] == ["loaded"]  # the model's own call ran too
    assert good["rewards"]["rewards.py:hidden_tests"] == 1.0
    assert 0.0 < wrong["rewards"]["rewards.py:hidden_tests"] < 0.5  # only the edge cases 0 and 1 pass
    assert len(server.requests) == 4


@pytest.mark.timeout(120)
def test_training_reward_runs_hidden_tests_through_the_env(tmp_path: Path, monkeypatch):
    from swift_rlfactory.adapters.swift import INFO_KEY, RLFactoryReward

    monkeypatch.setenv("RLFACTORY_ENV", str(CODE_ENV))
    monkeypatch.setenv("RLFACTORY_TRAJECTORIES", str(tmp_path / "trajectories.jsonl"))
    finals = [answer(GOOD), answer(WRONG), "I give up"]
    infos = [
        {
            INFO_KEY: {
                "messages": trajectory(f).messages,
                "tool_calls": [],
                "turns": 1,
                "stop_reason": "answer",
            }
        }
        for f in finals
    ]
    reward = RLFactoryReward(SimpleNamespace(output_dir=str(tmp_path)))
    totals = asyncio.run(
        reward(
            finals,
            rollout_infos=infos,
            entry_point=[ROTATE["entry_point"]] * 3,
            tests=[ROTATE["tests"]] * 3,
            trainer_state=SimpleNamespace(global_step=1),
        )
    )
    assert totals == [1.0, 0.75, 0.0]
    [line, *_] = (tmp_path / "trajectories.jsonl").read_text().splitlines()
    assert json.loads(line)["rewards"]["rewards.py:hidden_tests"] == 1.0
