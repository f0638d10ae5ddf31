"""The episode lifecycle through ms-swift's own colocate driver: isolation, failures, teardown after rewards.

A GRPO group of 8 trajectories of one row writes its own id into its episode state over two turns and
reads it back; next to it, a row whose setup raises and one whose teardown hangs. No trajectory reads
another's notes, the failed setup ends its trajectory with stop ``error`` and the batch goes on, the reward
reads each final state while it is live, and afterwards every state is torn down (the hung teardown
bounded by ``teardown_timeout_s`` and counted).
"""

from __future__ import annotations

import time
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from swift.infer_engine.protocol import RolloutInferRequest
from swift.rl_core.data import OnPolicySample
from swift.rl_core.grpo_algorithm import compute_rewards_per_func

from swift_rlfactory.adapters.swift import INFO_KEY, RLFactoryReward, RLFactoryScheduler
from swift_rlfactory.runtime.user_code import import_target

from .driver import call, fresh_run, qwen3_template, run_batch

pytestmark = pytest.mark.timeout(120)

EPISODE_ENV = Path(__file__).parent / "episode_env" / "env.yaml"


@pytest.fixture(scope="module")
def template(agent_model):
    return qwen3_template(agent_model)


def row_request(uuid: str, **fields) -> RolloutInferRequest:
    return RolloutInferRequest(
        messages=[{"role": "user", "content": "Keep notes."}],
        uuid=uuid,
        data_dict={"env": str(EPISODE_ENV), "solution": "done", **fields},
    )


def test_a_grpo_group_keeps_eight_states_apart_and_every_state_is_torn_down_after_its_reward(
    template, tmp_path
):
    module = import_target(str(EPISODE_ENV.parent / "state.py"), EPISODE_ENV.parent)
    group = [f"g{i}" for i in range(8)]
    requests = [row_request(u) for u in group]
    requests += [row_request("no-world", fail_setup=True), row_request("hangs", hang_teardown=True)]
    scripts = {
        u: [call("write", note=u), call("write", note=f"{u}-2"), call("read")] for u in [*group, "hangs"]
    }
    with fresh_run(template.tokenizer) as state:
        metrics: dict = {"train": defaultdict(list)}
        state.trainer = SimpleNamespace(control=SimpleNamespace(should_evaluate=False), _metrics=metrics)
        scheduler = RLFactoryScheduler(max_turns=6, tokenizer=template.tokenizer, template=template)
        outputs = run_batch(scheduler, template, requests, scripts, max_turns=6)
        infos = {u: out.rollout_infos[INFO_KEY] for u, out in outputs.items()}
        env = state.env(str(EPISODE_ENV))

        for u in [*group, "hangs"]:  # each read its own notes, and only its own
            reads = [c["observation"] for c in infos[u]["tool_calls"] if c["tool"] == "read"]
            assert reads == [f"{u}|{u}-2"], (u, infos[u]["tool_calls"])
            assert infos[u]["stop_reason"] == "answer" and infos[u]["episode"] == u
        assert infos["no-world"]["stop_reason"] == "error"
        assert "episode setup failed: RuntimeError: no world for this row" in infos["no-world"]["error"]
        assert env.episodes.live == 9  # ended, waiting for their rewards

        reward = RLFactoryReward(args=SimpleNamespace(output_dir=str(tmp_path)))
        samples = [
            OnPolicySample(
                messages=outputs[r.uuid].messages,
                request_id=r.uuid,
                rollout_infos=outputs[r.uuid].rollout_infos,
                extra={k: v for k, v in r.data_dict.items()},
            )
            for r in requests
        ]
        started = time.perf_counter()
        scores = compute_rewards_per_func(samples, [reward], None, torch.device("cpu"))[:, 0].tolist()
        assert time.perf_counter() - started < 10  # the hung teardown is abandoned after 0.5 s
        assert scores == [2.0] * 8 + [0.0, 2.0]
        assert env.episodes.live == 0 and not module.LIVE  # nothing left: setups minus teardowns is 0
        torn = {n["notes"][0]: n for n in module.TORN if n["notes"]}
        assert all(torn[u]["scored"] for u in [*group, "hangs"])  # the reward read each state while live
        assert metrics["train"]["episode/setups"] == [9.0]
        assert metrics["train"]["episode/setup_errors"] == [1.0]
        assert metrics["train"]["episode/teardowns"] == [9.0]
        assert metrics["train"]["episode/teardown_timeouts"] == [1.0]
        assert metrics["train"]["episode/live"] == [0.0]
