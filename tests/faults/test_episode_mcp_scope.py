"""A per-trajectory MCP server through ms-swift's own drivers (colocate, and ``swift rollout``'s server mode),
in an environment without ``episode:``.

A GRPO group of 8 trajectories of one row each writes its own id into the kv server's store and reads it
back; beside them a trajectory that runs out of turns and one whose reply is cut by the length limit. Each
reads only its own store, the tool-verified reward reads each trajectory's store before its process is
given back, and after the rewards every lease is released and no process runs beyond the pool (10: a colocated batch holds its processes until its rewards).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import psutil
import pytest
import torch
from swift.infer_engine.protocol import RolloutInferRequest
from swift.rl_core.data import OnPolicySample
from swift.rl_core.grpo_algorithm import compute_rewards_per_func

from swift_rlfactory.adapters.swift import INFO_KEY, RLFactoryReward, RLFactoryScheduler
from swift_rlfactory.runtime.user_code import import_target
from swift_rlfactory.tools.mcp import McpProvider

from .driver import Reply, ServerEngine, call, fresh_run, qwen3_template, run_batch, serve_cutting_one

pytestmark = pytest.mark.timeout(300)

KV_ENV = Path(__file__).parent / "kv_scope_env" / "env.yaml"


@pytest.fixture(scope="module")
def template(agent_model):
    return qwen3_template(agent_model)


def row_request(uuid: str) -> RolloutInferRequest:
    return RolloutInferRequest(
        messages=[{"role": "user", "content": "Remember who you are."}],
        uuid=uuid,
        data_dict={"env": str(KV_ENV), "me": uuid},
    )


def test_a_grpo_group_keeps_its_server_stores_apart_and_every_lease_ends_after_the_rewards(
    template, tmp_path
):
    rewards = import_target(str(KV_ENV.parent / "rewards.py"), KV_ENV.parent)
    rewards.SEEN.clear()  # the module is shared with other tests of this env in one process
    group = [f"g{i}" for i in range(8)]
    requests = [row_request(u) for u in [*group, "turns", "cut"]]
    scripts: dict[str, list] = {u: [call("put", key="k", value=u), call("get", key="k")] for u in group}
    scripts["turns"] = [call("put", key="k", value="turns")] * 10  # never answers: max turns
    scripts["cut"] = [call("put", key="k", value="cut"), Reply("I was about to", finish_reason="length")]
    with fresh_run(template.tokenizer) as state:
        state.trainer = SimpleNamespace(
            control=SimpleNamespace(should_evaluate=False), _metrics={"train": defaultdict(list)}
        )
        scheduler = RLFactoryScheduler(max_turns=4, tokenizer=template.tokenizer, template=template)
        outputs = run_batch(scheduler, template, requests, scripts, max_turns=4)
        infos = {u: out.rollout_infos[INFO_KEY] for u, out in outputs.items()}
        env = state.env(str(KV_ENV))
        (server,) = [p for p in env.episodes.backends if isinstance(p, McpProvider)]
        leases = server.leases
        assert leases is not None

        for u in group:  # each read its own value, and only its own
            reads = [c["observation"] for c in infos[u]["tool_calls"] if c["tool"] == "get"]
            assert reads == [u], (u, infos[u]["tool_calls"])
            assert infos[u]["stop_reason"] == "answer" and infos[u]["episode"] == u
        assert infos["turns"]["stop_reason"] == "max_turns"
        assert infos["cut"]["stop_reason"] == "length"
        assert leases.leased == 10 and env.episodes.live == 10  # ended, waiting for their rewards

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
        assert scores == [1.0] * 10  # each reward read its own trajectory's store, still leased
        assert {u: u for u in [*group, "turns", "cut"]} == rewards.SEEN
        assert leases.leased == 0 and env.episodes.live == 0
        pids = server.pids
        assert len(pids) <= 10
    assert not [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"]


def test_server_mode_releases_each_lease_at_its_trajectorys_end_a_cancelled_one_included(agent_model):
    template = qwen3_template(agent_model)
    served = [f"s{i}" for i in range(4)]
    scripts: dict[str, list[str | None]] = {
        u: [call("put", key="k", value=u), call("get", key="k")] for u in served
    }
    scripts["cut"] = [call("put", key="k", value="cut"), None]  # cancelled while its second turn generates
    requests = {u: row_request(u) for u in [*served, "cut"]}
    with fresh_run(template.tokenizer) as state:
        engine = ServerEngine(template, scripts)
        scheduler = RLFactoryScheduler(
            infer_engine=engine, max_turns=4, tokenizer=template.tokenizer, template=template
        )

        def settled() -> bool:  # the releases started at each end run on the server's loop
            env = state.env(str(KV_ENV))
            (server,) = [p for p in env.episodes.backends if isinstance(p, McpProvider)]
            return not (env.episodes.live or server.leases.leased)

        outputs = serve_cutting_one(scheduler, engine, requests, "cut", settled)
        env = state.env(str(KV_ENV))
        (server,) = [p for p in env.episodes.backends if isinstance(p, McpProvider)]
        assert server.leases is not None and server.leases.leased == 0 and env.episodes.live == 0
        for u in served:
            infos = outputs[u].rollout_infos[INFO_KEY]
            reads = [c["observation"] for c in infos["tool_calls"] if c["tool"] == "get"]
            assert reads == [u] and infos["stop_reason"] == "answer"
            assert infos["state"] == {}  # no episode: the lifecycle's empty state, as plain JSON
