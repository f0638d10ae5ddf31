"""Faults inside one trajectory end that trajectory only, through ms-swift's own colocate driver.

ms-swift gathers ``on_turn_end`` of a whole batch with ``asyncio.gather`` and calls
``on_trajectory_start`` once for the batch: one exception out of either loses every trajectory of the
step. Here one batch carries, next to healthy trajectories, every kind of failure a run meets: a per-row
``env`` file that is missing, broken or not a path; a tool that raises, one that hangs in a thread, one
that swallows cancellation (its timeout cannot stop it); a tokenizer that raises on one observation; an
exception inside ``on_turn_end`` and inside ``step``. The batch must finish, the healthy trajectories must
be intact, a tool's failure must be an observation the model reads (the executor abandons a call that
swallows its cancellation), and each other failed trajectory must end with stop reason ``error``, its
cause, and reward 0 through ms-swift's own reward call.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from types import SimpleNamespace

import pytest
import torch
from swift.rl_core.data import OnPolicySample
from swift.rl_core.grpo_algorithm import compute_rewards_per_func

from swift_rlfactory import redaction
from swift_rlfactory.adapters import swift as adapter
from swift_rlfactory.adapters.swift import INFO_KEY, RLFactoryReward, RLFactoryScheduler
from swift_rlfactory.rollout.episode import Generation, run_episode
from swift_rlfactory.rollout.metrics import tool_metrics
from swift_rlfactory.runs.log import read_trajectories
from swift_rlfactory.trajectory import Trajectory

from .driver import ANSWER, ENV, ENV_DIR, call, fresh_run, qwen3_template, request, run_batch

pytestmark = pytest.mark.timeout(120)


class PoisonedTokenizer:
    """The real tokenizer, except that encoding a text containing ``POISON`` raises."""

    def __init__(self, inner):
        self._inner = inner

    def encode(self, text, *args, **kwargs):
        if "POISON" in text:
            raise ValueError("cannot encode this text")
        return self._inner.encode(text, *args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._inner, name)


@pytest.fixture(scope="module")
def template(agent_model):
    return qwen3_template(agent_model)


@pytest.fixture(scope="module")
def run_state(template):
    with fresh_run(template.tokenizer) as state:
        yield state


def test_one_batch_survives_every_kind_of_trajectory_fault(
    run_state, template, tmp_path, monkeypatch, caplog
):
    broken = tmp_path / "broken.yaml"
    broken.write_text("tools: {python: [%s]}\nlimits: {call_timeout_s: .inf}\n" % (ENV_DIR / "tools.py"))
    impatient = tmp_path / "impatient.yaml"  # a valid per-row env whose timeout the stubborn tool ignores
    impatient.write_text(
        "tools: {python: [%s]}\nlimits: {call_timeout_s: 0.5, retries: 0}\nreward: [{name: em}]\n"
        % (ENV_DIR / "tools.py")
    )
    real_plan, real_messages = adapter.plan_turn, adapter.tool_messages

    def plan_turn(response, *args, **kwargs):
        if "HOOK-FAULT" in response:
            raise RuntimeError("injected fault in on_turn_end")
        return real_plan(response, *args, **kwargs)

    def tool_messages(records):
        if any(r.observation == "STEP-FAULT" for r in records):
            raise RuntimeError("injected fault in step")
        return real_messages(records)

    monkeypatch.setattr(adapter, "plan_turn", plan_turn)
    monkeypatch.setattr(adapter, "tool_messages", tool_messages)

    rows = {
        "healthy": (None, [call("echo", text="fine")]),
        "healthy-row-env": (str(ENV), [call("echo", text="fine too")]),
        "missing-env": (str(tmp_path / "nope.yaml"), [call("echo", text="never")]),
        "broken-env": (str(broken), [call("echo", text="never")]),
        "env-not-a-path": (42, [call("echo", text="never")]),
        "tool-raises": (None, [call("boom")]),
        "tool-hangs": (None, [call("stuck")]),
        "tool-ignores-timeout": (str(impatient), [call("stubborn")]),
        "counter-raises": (None, [call("echo", text="POISON")]),
        "turn-hook-raises": (None, ["HOOK-FAULT " + call("echo", text="x")]),
        "step-raises": (None, [call("echo", text="STEP-FAULT")]),
    }
    requests = [request(uuid, env=env) for uuid, (env, _) in rows.items()]
    scheduler = RLFactoryScheduler(
        max_turns=4, tokenizer=PoisonedTokenizer(template.tokenizer), template=template
    )
    started = time.perf_counter()
    with caplog.at_level(logging.INFO, logger="swift_rlfactory"):
        outputs = run_batch(scheduler, template, requests, {u: s for u, (_, s) in rows.items()}, max_turns=4)
    elapsed = time.perf_counter() - started

    infos = {uuid: out.rollout_infos[INFO_KEY] for uuid, out in outputs.items()}
    stops = {uuid: info["stop_reason"] for uuid, info in infos.items()}
    assert (
        stops
        == {
            "healthy": "answer",
            "healthy-row-env": "answer",
            "missing-env": "error",
            "broken-env": "error",
            "env-not-a-path": "error",
            "tool-raises": "answer",  # a failing tool is an observation the model reads, not a failure
            "tool-hangs": "answer",
            "tool-ignores-timeout": "answer",  # abandoned at its timeout + grace: the executor's, not the watchdog's
            "counter-raises": "error",
            "turn-hook-raises": "error",
            "step-raises": "error",
        }
    )
    assert elapsed < 30  # the stubborn call was abandoned (0.5 s + 1 s of grace), not waited for (30 s)
    assert not scheduler.episodes  # every trajectory was finished and forgotten

    # The healthy ones are intact: their calls ran and came back into the conversation.
    for uuid, text in [("healthy", "fine"), ("healthy-row-env", "fine too")]:
        assert [(c["tool"], c["observation"]) for c in infos[uuid]["tool_calls"]] == [("echo", text)]
        assert {"role": "tool", "content": text} in outputs[uuid].messages
        assert infos[uuid]["error"] is None
    assert "the tool broke" in infos["tool-raises"]["tool_calls"][0]["error"]
    assert "timed out" in infos["tool-hangs"]["tool_calls"][0]["error"]
    assert "timed out" in infos["tool-ignores-timeout"]["tool_calls"][0]["error"]

    # Each failed one says where and why.
    causes = {uuid: infos[uuid]["error"] for uuid, stop in stops.items() if stop == "error"}
    assert causes["missing-env"].startswith("on_trajectory_start: EnvConfigError")
    assert "not found" in causes["missing-env"] and "nope.yaml" in causes["missing-env"]
    assert "limits.call_timeout_s" in causes["broken-env"]
    assert "env column must be a path string" in causes["env-not-a-path"]
    assert causes["counter-raises"] == "on_turn_end: ValueError: cannot encode this text"
    assert causes["turn-hook-raises"] == "on_turn_end: RuntimeError: injected fault in on_turn_end"
    assert causes["step-raises"] == "step: RuntimeError: injected fault in step"
    assert infos["missing-env"]["turns"] == 1 and infos["step-raises"]["turns"] == 2
    assert any("ends with stop reason 'error'" in r.getMessage() for r in caplog.records)

    # ms-swift's reward call: 0 for every failed trajectory, the cause in trajectories.jsonl, and the
    # share of failures in the stop/error metric. A row another scheduler rolled out (no rollout infos)
    # whose env file is missing is scored 0 as an error too, instead of crashing the step.
    reward = RLFactoryReward(args=SimpleNamespace(output_dir=str(tmp_path)))
    samples = [
        OnPolicySample(
            messages=outputs[uuid].messages,
            request_id=uuid,
            rollout_infos=outputs[uuid].rollout_infos,
            extra={"env": env, "solution": "done"},
        )
        for uuid, (env, _) in rows.items()
    ]
    samples.append(
        OnPolicySample(
            messages=[
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "<answer>done</answer>"},
            ],
            extra={"env": str(tmp_path / "gone.yaml"), "solution": "done"},
        )
    )
    scores = compute_rewards_per_func(samples, [reward], None, torch.device("cpu"))[:, 0].tolist()
    expected = [0.0 if stops[uuid] == "error" else 1.0 for uuid in rows] + [0.0]
    assert scores == expected
    logged = read_trajectories(reward.log.path)
    assert [t["stop_reason"] for t in logged] == [stops[u] for u in rows] + ["error"]
    assert [t["error"] for t in logged[:-1]] == [infos[u]["error"] for u in rows]
    assert logged[-1]["error"].startswith("reward: EnvConfigError") and "gone.yaml" in logged[-1]["error"]
    fields = {f.name for f in dataclasses.fields(Trajectory)}
    metrics = tool_metrics([Trajectory(**{k: v for k, v in t.items() if k in fields}) for t in logged])
    assert metrics["stop/error"] == pytest.approx(7 / 12)  # the share ms-swift logs as stop/error


def test_a_broken_row_env_is_loaded_once_not_once_per_sampled_row(run_state, template, tmp_path):
    broken = tmp_path / "env.yaml"
    broken.write_text("")  # an empty file is not an environment
    scheduler = RLFactoryScheduler(max_turns=2, tokenizer=template.tokenizer, template=template)
    requests = [request(f"r{i}", env=str(broken)) for i in range(4)]
    outputs = run_batch(scheduler, template, requests, {}, max_turns=2)
    assert {out.rollout_infos[INFO_KEY]["stop_reason"] for out in outputs.values()} == {"error"}
    assert "the environment file is empty" in outputs["r0"].rollout_infos[INFO_KEY]["error"]
    broken.write_text(json.dumps({"tools": {"python": [str(ENV_DIR / "tools.py")]}}))  # fixed on disk ...
    [out] = run_batch(scheduler, template, [request("r4", env=str(broken))], {}, max_turns=2).values()
    assert out.rollout_infos[INFO_KEY]["stop_reason"] == "error"  # ... but not retried within 300 s


def test_the_evaluation_loop_ends_a_failing_trajectory_with_error(run_state):
    """``run_episode`` (eval and any loop of our own) keeps the same boundary around its tool steps."""
    env = run_state.env(str(ENV), start=True)

    def overflowing(messages) -> bool:
        raise OverflowError("budget check broke")

    async def generate(messages):
        return Generation(call("echo", text="hi") if len(messages) == 1 else ANSWER)

    prompt = [{"role": "user", "content": "Go."}]
    broken = asyncio.run(run_episode(prompt, generate, env.executor, 4, fits=overflowing))
    healthy = asyncio.run(run_episode(prompt, generate, env.executor, 4))
    assert (broken.stop_reason, broken.error) == ("error", "OverflowError: budget check broke")
    assert [c["observation"] for c in broken.tool_calls] == ["hi"]  # what happened before is kept
    assert (healthy.stop_reason, healthy.error, healthy.turns) == ("answer", None, 2)


def test_an_error_cause_cut_to_its_length_keeps_no_part_of_a_secret(run_state, template, monkeypatch, caplog):
    """A failure whose message holds a recorded secret where the cause's cut falls: the cause is redacted
    whole, then cut, so neither the log nor the trajectory's error shows the secret's first characters."""
    secret = "sk-cause-1234567890abcdef"
    redaction.remember(secret, "${CAUSE_KEY}")

    def plan_turn(response, *args, **kwargs):
        raise RuntimeError("x" * (adapter.MAX_CAUSE_CHARS - 40) + secret)  # the cut falls inside it

    monkeypatch.setattr(adapter, "plan_turn", plan_turn)
    scheduler = RLFactoryScheduler(max_turns=2, tokenizer=template.tokenizer, template=template)
    with caplog.at_level(logging.ERROR, logger="swift_rlfactory"):
        [out] = run_batch(scheduler, template, [request("leaky")], {}, max_turns=2).values()
    info = out.rollout_infos[INFO_KEY]
    assert info["stop_reason"] == "error" and info["error"].endswith("${CAUSE_KEY}")
    assert secret[:10] not in info["error"] and secret[:10] not in caplog.text
