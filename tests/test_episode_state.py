"""Episode state: the tool parameter's schema, the load-time checks, and 500 concurrent episodes of the
loop that eval runs (run_episode inside Episodes.scope, rewards before teardown) leaving no state behind."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import pytest

from swift_rlfactory.env.config import EnvConfigError
from swift_rlfactory.env.environment import Environment
from swift_rlfactory.rollout.episode import Generation, run_episode
from swift_rlfactory.runtime.user_code import import_target
from swift_rlfactory.tools import Episode, EpisodeState, PythonTool, tool

EPISODE_ENV = Path(__file__).parent / "faults" / "episode_env" / "env.yaml"


def test_the_state_parameter_is_injected_and_never_in_the_schema():
    @tool
    def note(text: str, state: EpisodeState, book: Annotated[dict, Episode] = None) -> str:
        """Keep a note.

        Args:
            text: what to keep
        """
        return text

    assert note.state_params == ("state", "book")
    assert set(note.spec.parameters["properties"]) == {"text"}
    assert note.spec.parameters["required"] == ["text"]
    stateful = import_target(str(EPISODE_ENV.parent / "state.py"), EPISODE_ENV.parent).write
    with pytest.raises(ValueError, match="episode state.*isolation='process'"):
        PythonTool(stateful.fn, isolation="process")


def test_a_tool_asking_for_state_without_episode_fails_at_load_naming_it(tmp_path):
    (tmp_path / "env.yaml").write_text(f"tools: {{python: ['{EPISODE_ENV.parent / 'state.py'}']}}\n")
    with pytest.raises(EnvConfigError, match="tool 'write' takes the episode state.*declares no episode"):
        Environment.load(tmp_path / "env.yaml")


def test_500_concurrent_episodes_keep_their_states_apart_and_leave_none(tmp_path):
    module = import_target(str(EPISODE_ENV.parent / "state.py"), EPISODE_ENV.parent)

    def script(me: str):
        replies = iter([f"write:{me}", f"write:{me}-2", "read", "<answer>done</answer>"])

        async def generate(messages):
            await asyncio.sleep(0)  # let the other episodes' turns interleave with this one's
            step = next(replies)
            if step.startswith("write:"):
                step = json.dumps({"name": "write", "arguments": {"note": step[6:]}})
            elif step == "read":
                step = json.dumps({"name": "read", "arguments": {}})
            else:
                return Generation(step)
            return Generation(f"<tool_call>\n{step}\n</tool_call>")

        return generate

    async def one(env: Environment, i: int):
        me = f"t{i}"
        async with env.episodes.scope(me, {"solution": "done"}) as state:
            trajectory = await run_episode(
                [{"role": "user", "content": "go"}], script(me), env.executor, 6, row={"solution": "done"},
                state=state,
            )  # fmt: skip
            trajectory.tool_env = env
            await env.reward.ascore([trajectory])
        return me, trajectory

    async def main(env: Environment):
        return await asyncio.gather(*(one(env, i) for i in range(500)))

    # The faults' environment with deadlines no loaded 2-core machine reaches: 500 episodes queue for the
    # same threads (their teardowns too: at 0.5 s, a loaded CI machine abandoned some and their notebooks
    # were still live when counted), and this test is about isolation, not time.
    relaxed = tmp_path / "env.yaml"
    relaxed.write_text(
        EPISODE_ENV.read_text()
        .replace("[state.py]", f"[{EPISODE_ENV.parent / 'state.py'}]")
        .replace("state.py:", f"{EPISODE_ENV.parent / 'state.py'}:")
        .replace("setup_timeout_s: 5", "setup_timeout_s: 300")
        .replace("call_timeout_s: 5", "call_timeout_s: 300")
        .replace("teardown_timeout_s: 0.5", "teardown_timeout_s: 300")
    )
    with Environment.load(relaxed) as env:
        results = asyncio.run(main(env))
        for me, trajectory in results:
            reads = [c["observation"] for c in trajectory.tool_calls if c["tool"] == "read"]
            assert reads == [f"{me}|{me}-2"] and trajectory.stop_reason == "answer"
            assert trajectory.rewards["total"] == 2.0 and trajectory.state["scored"]
        assert env.episodes.live == 0 and not module.LIVE
        metrics = env.episodes.drain_metrics()
        assert metrics["episode/setups"] == metrics["episode/teardowns"] == 500.0
