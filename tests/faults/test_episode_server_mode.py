"""The episode lifecycle on the server-mode path (``swift rollout``): ms-swift's ``MultiTurnScheduler.run()``,
one coroutine per trajectory on one event loop, as tests/test_server_mode.py drives it, with the engine's
replies scripted (the subject is the lifecycle, not the model). Each ended trajectory's state goes out as a
JSON copy in ``infos["state"]`` and is torn down at once; the reward, in the trainer's process, reads that
copy as ``trajectory.state``; a trajectory cancelled mid-turn is torn down too.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from swift.infer_engine.protocol import RolloutInferRequest
from swift.rl_core.data import OnPolicySample
from swift.rl_core.grpo_algorithm import compute_rewards_per_func

from swift_rlfactory.adapters.swift import INFO_KEY, RLFactoryReward, RLFactoryScheduler
from swift_rlfactory.runtime.user_code import import_target

from .driver import ServerEngine, call, fresh_run, qwen3_template, serve_cutting_one

pytestmark = pytest.mark.timeout(120)

EPISODE_ENV = Path(__file__).parent / "episode_env" / "env.yaml"


def row_request(uuid: str) -> RolloutInferRequest:
    return RolloutInferRequest(
        messages=[{"role": "user", "content": "Keep notes."}],
        uuid=uuid,
        data_dict={"env": str(EPISODE_ENV), "solution": "done"},
    )


def test_server_mode_sends_a_json_copy_of_the_state_tears_it_down_and_tears_down_a_cancelled_one(
    agent_model, tmp_path
):
    module = import_target(str(EPISODE_ENV.parent / "state.py"), EPISODE_ENV.parent)
    template = qwen3_template(agent_model)
    served = [f"s{i}" for i in range(4)]
    scripts: dict[str, list[str | None]] = {
        u: [call("write", note=u), call("write", note=f"{u}-2"), call("read")] for u in served
    }
    scripts["cut"] = [call("write", note="cut"), None]  # cancelled while its second turn generates
    requests = {u: row_request(u) for u in [*served, "cut"]}
    torn_before = len(module.TORN)

    with fresh_run(template.tokenizer) as state:
        engine = ServerEngine(template, scripts)
        scheduler = RLFactoryScheduler(
            infer_engine=engine, max_turns=6, tokenizer=template.tokenizer, template=template
        )
        # a rollout server's loop outlives its requests: the teardowns started at each end run there
        outputs = serve_cutting_one(scheduler, engine, requests, "cut", lambda: not module.LIVE)
        env = state.env(str(EPISODE_ENV))
        assert env.episodes.live == 0  # torn down in the rollout server, the cancelled one included
        assert not module.LIVE
        counts = env.episodes.drain_metrics()
        assert counts["episode/setups"] == counts["episode/teardowns"] == len(served) + 1
        torn = [n["notes"] for n in module.TORN[torn_before:]]
        assert ["cut"] in torn  # the cancelled trajectory's state, as it was when cut

        infos = {u: out.rollout_infos[INFO_KEY] for u, out in outputs.items()}
        for u in served:  # each read its own notes, and sent them as plain JSON
            reads = [c["observation"] for c in infos[u]["tool_calls"] if c["tool"] == "read"]
            assert reads == [f"{u}|{u}-2"] and infos[u]["stop_reason"] == "answer"
            assert infos[u]["state"] == {"notes": [u, f"{u}-2"], "hang": False, "scored": False}

        reward = RLFactoryReward(args=SimpleNamespace(output_dir=str(tmp_path)))
        samples = [
            OnPolicySample(
                messages=outputs[u].messages,
                request_id=u,
                rollout_infos=outputs[u].rollout_infos,
                extra=dict(requests[u].data_dict),
            )
            for u in served
        ]
        scores = compute_rewards_per_func(samples, [reward], None, torch.device("cpu"))[:, 0].tolist()
        assert scores == [2.0] * len(served)  # notes_kept read the JSON copy: the live state was gone
        assert env.episodes.live == 0 and not module.LIVE
