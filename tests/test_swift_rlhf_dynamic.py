"""DAPO's dynamic sampling (`--dynamic_sample true`) through the real `swift rlhf` CLI with our plugin.

ms-swift regenerates the groups whose rewards are all equal (no GRPO signal) from fresh dataset rows, up
to ``--max_resample_times``: each regeneration runs our multi-turn scheduler, tools and reward again, in
the middle of a training step. The arithmetic run from the base model uses it (examples/arithmetic/train.sh
``DYNAMIC_SAMPLE=1``): there, from step 40 on, 3 of 4 groups had one reward for all 8 samples.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from swift_rlfactory.runs.log import read_trajectories

from .conftest import AGENT_ENV, AGENT_PAIRS, run_cpu_grpo
from .test_recipe_defaults import recipe_argv

ROOT = Path(__file__).resolve().parents[1]


def test_dynamic_sampling_regenerates_groups_through_the_scheduler(agent_model: Path, tmp_path: Path):
    # Every solution is off by a thousand: each sample scores em 0 and the same format and tool reward, so
    # every group has one reward and ms-swift regenerates the whole step until it gives up.
    rows = [
        {"messages": [{"role": "user", "content": f"What is {a} + {b}?"}], "solution": str(a + b + 1000)}
        for a, b in AGENT_PAIRS
    ]
    env = {"RLFACTORY_ENV": str(AGENT_ENV)}
    run = run_cpu_grpo(
        tmp_path, agent_model, rows, env, "--max_steps", "1", "--temperature", "0.7",
        "--dynamic_sample", "true", "--max_resample_times", "2",
    )  # fmt: skip
    log = (tmp_path / "run.log").read_text()
    assert "There are still std=0 groups present after 2 retries" in log
    episodes = read_trajectories(run / "trajectories.jsonl")
    # one step's 4 completions (2 rows x 2 samples), generated three times: the step's own, 2 regenerations
    assert len(episodes) == 3 * 4, len(episodes)
    assert all(e["tool_calls"] for e in episodes)


@pytest.mark.parametrize("example", ["arithmetic", "deepsearch"])
@pytest.mark.parametrize("switch", ["1", "0", None])
def test_train_scripts_pass_dynamic_sampling_only_when_asked(
    example: str, switch: str | None, tmp_path: Path
):
    knobs = {} if switch is None else {"DYNAMIC_SAMPLE": switch}
    args = recipe_argv(example, tmp_path, "--max_steps", "3", **knobs)
    flags = dict(zip(args[::2], args[1::2], strict=True))  # every flag of both scripts takes one value
    assert flags["--max_steps"] == "3"  # the caller's flags still come last
    if switch == "1":
        assert (flags["--dynamic_sample"], flags["--max_resample_times"]) == ("true", "6")
    else:
        assert "--dynamic_sample" not in args
