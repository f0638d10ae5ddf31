"""Persistent ``run_python`` through ms-swift's own colocate driver and the plugin's reward, with no
``episode:`` in the environment: a GRPO group keeps one interpreter per trajectory, and the interpreters of
trajectories that end by answer, max turns and length are all killed once the reward has scored them."""

from __future__ import annotations

import shutil
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch
from swift.infer_engine.protocol import RolloutInferRequest
from swift.rl_core.data import OnPolicySample
from swift.rl_core.grpo_algorithm import compute_rewards_per_func

from swift_rlfactory.adapters.swift import INFO_KEY, RLFactoryReward, RLFactoryScheduler

from ..test_persistent_python import wait_no_interpreters
from .driver import Reply, call, fresh_run, qwen3_template, run_batch

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap (bwrap) is not installed"),
]

ENV = """\
name: persistent-python
system_prompt: Use run_python, then answer in <answer></answer>.
tools:
  builtin:
    - run_python: {persistent: true, timeout_s: 60}
limits: {max_turns: 4, call_timeout_s: 120, retries: 0}
reward:
  - {name: em, weight: 1.0}
"""


@pytest.fixture(scope="module")
def template(agent_model):
    return qwen3_template(agent_model)


def test_a_grpo_group_keeps_one_interpreter_each_and_every_one_is_killed_after_the_reward(template, tmp_path):
    (tmp_path / "env.yaml").write_text(ENV)
    group = [f"g{i}" for i in range(6)]
    requests = [
        RolloutInferRequest(
            messages=[{"role": "user", "content": "Keep a variable."}],
            uuid=u,
            data_dict={"env": str(tmp_path / "env.yaml"), "solution": "done"},
        )
        for u in group
    ]
    keep, read = (lambda u: call("run_python", code=f"me = {u!r}")), call("run_python", code="me")
    scripts = {u: [keep(u), read] for u in group[:4]}  # these answer
    scripts["g4"] = [keep("g4"), read, read, read]  # ends at max turns
    scripts["g5"] = [keep("g5"), read, Reply("and so", finish_reason="length")]
    with fresh_run(template.tokenizer) as state:
        state.trainer = SimpleNamespace(
            control=SimpleNamespace(should_evaluate=False), _metrics={"train": defaultdict(list)}
        )
        scheduler = RLFactoryScheduler(max_turns=4, tokenizer=template.tokenizer, template=template)
        outputs = run_batch(scheduler, template, requests, scripts, max_turns=4)
        infos = {u: out.rollout_infos[INFO_KEY] for u, out in outputs.items()}
        env = state.env(str(tmp_path / "env.yaml"))
        assert {u: infos[u]["stop_reason"] for u in group} == {
            **dict.fromkeys(group[:4], "answer"),
            "g4": "max_turns",
            "g5": "length",
        }
        for u in group:
            reads = [c["observation"] for c in infos[u]["tool_calls"] if c["arguments"]["code"] == "me"]
            assert reads and set(reads) == {repr(u)}, infos[u]["tool_calls"]
        [provider] = [p for p in env.executor.toolset.providers if getattr(p, "per_episode", False)]
        assert env.episodes.live == 6 and provider.pool.live == 6  # ended, waiting for their reward

        reward = RLFactoryReward(args=SimpleNamespace(output_dir=str(tmp_path)))
        samples = [
            OnPolicySample(
                messages=outputs[r.uuid].messages,
                request_id=r.uuid,
                rollout_infos=outputs[r.uuid].rollout_infos,
                extra=dict(r.data_dict),
            )
            for r in requests
        ]
        scores = compute_rewards_per_func(samples, [reward], None, torch.device("cpu"))[:, 0].tolist()
        assert scores == [1.0] * 4 + [0.0, 0.0]
        assert env.episodes.live == 0 and provider.pool.live == 0
        assert wait_no_interpreters() == []
