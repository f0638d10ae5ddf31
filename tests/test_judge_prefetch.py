"""Judge calls start inside the rollout: ms-swift's own multi-turn driver runs our scheduler, whose
``_finish`` hands each finished trajectory to the judge; the reward call then finds the judgments made.

The model's replies are scripted (the subject is when the judge is called, not the model); the judge is the
real HTTP server of ``tests/servers/judge_server.py``.
"""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from swift.infer_engine.protocol import RequestConfig, RolloutInferRequest
from swift.rollout.agent_loop import run_multi_turn

from swift_rlfactory.adapters.swift import RUN, RLFactoryReward, RLFactoryScheduler

from .faults.driver import ENV_DIR, qwen3_template, scripted_output
from .test_judge import judge_url, server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.timeout(120)
TOOLS = ENV_DIR / "tools.py"  # echo, for a trajectory that takes a second turn


@pytest.mark.parametrize("mode", ["pointwise", "group"])
def test_scheduler_starts_the_judge_before_the_reward_call(
    agent_model,
    server,  # noqa: F811  (the fixture imported above)
    monkeypatch,
    tmp_path,
    caplog,
    mode,
):
    env = tmp_path / "env.yaml"
    env.write_text(
        "name: judged\nreward:\n"
        f"  - {{name: judge, args: {{mode: {mode}, base_url: '{server.url}', model: rule}}}}\n"
        "  - {name: turn_format, weight: 0.5}\n"
    )
    monkeypatch.setenv("RLFACTORY_ENV", str(env))
    monkeypatch.setenv("RLFACTORY_TRAJECTORIES", str(tmp_path / "trajectories.jsonl"))
    template = qwen3_template(agent_model, max_length=4096)
    template.set_mode("train")
    tokenizer = template.tokenizer
    scheduler = RLFactoryScheduler(max_turns=3, tokenizer=tokenizer, template=template)
    answers = ["<answer>4242</answer>", "<answer>13</answer>", "<answer>4242</answer>"]
    requests = [
        RolloutInferRequest(
            messages=[{"role": "user", "content": "What is 4000 + 242?"}],
            uuid=f"t-{i}",
            data_dict={"golden_answers": ["4242"]},
        )
        for i in range(len(answers))
    ]
    asyncio.run(scheduler.on_trajectory_start(requests))
    outs = run_multi_turn(
        requests,
        [scripted_output(tokenizer, "", a) for a in answers],
        scheduler,
        lambda reqs, cfg: [] if not reqs else pytest.fail("every trajectory answered in one turn"),
        RequestConfig(),
        max_turns=3,
    )
    deadline = time.monotonic() + 10
    while server.requests() < (2 if mode == "pointwise" else 1):  # sent during the rollout
        assert time.monotonic() < deadline, "the scheduler did not start the judge"
        time.sleep(0.02)

    reward = RLFactoryReward()
    kwargs = {
        "messages": [o.messages for o in outs],
        "rollout_infos": [o.rollout_infos for o in outs],
        "golden_answers": [["4242"]] * len(outs),
    }
    with caplog.at_level(logging.INFO, logger="swift_rlfactory"):
        totals = asyncio.run(reward([a for a in answers], **kwargs))
    assert totals == [1.5, 0.5, 1.5]
    assert server.requests() == (2 if mode == "pointwise" else 1)  # nothing judged twice
    if mode == "group":
        assert server.stats()["group_sizes"] == [2]
    logged = caplog.text
    assert "'judge/calls'" in logged and "'rlfactory/turn/turn_format': 1.0" in logged
    RUN.envs.pop(str(env.resolve())).close()


def test_a_question_written_as_content_parts_reaches_the_reward_as_its_text(
    agent_model, monkeypatch, tmp_path
):
    """A row whose user message is a list of content parts (OpenAI clients and the eval accept it): the
    trajectory the rewards score carried an empty question, so a judge or a question-reading rule saw none."""
    env = tmp_path / "env.yaml"
    env.write_text("name: parts\nreward:\n  - {name: em}\n")
    monkeypatch.setenv("RLFACTORY_ENV", str(env))
    log = tmp_path / "trajectories.jsonl"
    monkeypatch.setenv("RLFACTORY_TRAJECTORIES", str(log))
    template = qwen3_template(agent_model, max_length=4096)
    template.set_mode("train")
    tokenizer = template.tokenizer
    scheduler = RLFactoryScheduler(max_turns=2, tokenizer=tokenizer, template=template)
    question = "What is 4000 + 242?"
    request = RolloutInferRequest(
        messages=[{"role": "user", "content": [{"type": "text", "text": question}]}],
        uuid="parts-0",
        data_dict={"golden_answers": ["4242"]},
    )
    asyncio.run(scheduler.on_trajectory_start([request]))
    [out] = run_multi_turn(
        [request], [scripted_output(tokenizer, "", "<answer>4242</answer>")], scheduler,
        lambda reqs, cfg: [] if not reqs else pytest.fail("answered in one turn"), RequestConfig(), max_turns=2,
    )  # fmt: skip
    users = [m for m in out.rollout_infos["rlfactory"]["messages"] if m["role"] == "user"]
    assert [m["content"] for m in users] == [question]
    RUN.envs.pop(str(env.resolve())).close()


def test_the_judge_starts_on_a_trajectory_while_the_rest_of_the_batch_still_generates(
    agent_model,
    server,  # noqa: F811  (the fixture imported above)
    monkeypatch,
    tmp_path,
):
    """Trajectories finish at different turns: ``early`` answers at once, ``late`` calls a tool and answers
    at its second turn. The judge must have ``early``'s request while ``late`` is still generating, not once
    the whole batch has ended."""
    env = tmp_path / "env.yaml"
    env.write_text(
        f"name: staggered\ntools:\n  python: ['{TOOLS}']\nreward:\n"
        f"  - {{name: judge, args: {{mode: pointwise, base_url: '{server.url}', model: rule}}}}\n"
    )
    monkeypatch.setenv("RLFACTORY_ENV", str(env))
    monkeypatch.setenv("RLFACTORY_TRAJECTORIES", str(tmp_path / "trajectories.jsonl"))
    template = qwen3_template(agent_model, max_length=4096)
    template.set_mode("train")
    tokenizer = template.tokenizer
    scheduler = RLFactoryScheduler(max_turns=3, tokenizer=tokenizer, template=template)
    requests = [
        RolloutInferRequest(
            messages=[{"role": "user", "content": f"What is 4000 + 242? ({name})"}],
            uuid=name,
            data_dict={"golden_answers": ["4242"]},
        )
        for name in ("early", "late")
    ]
    seen_while_late_generated = []

    def second_turn(reqs, cfg):
        if not reqs:  # the driver asks once more when every trajectory has ended
            return []
        assert [r.uuid for r in reqs] == ["late"]
        deadline = time.monotonic() + 10
        while server.requests() < 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        seen_while_late_generated.append(server.requests())
        return [scripted_output(tokenizer, "", "<answer>4242</answer>")]

    asyncio.run(scheduler.on_trajectory_start(requests))
    call = '<tool_call>\n{"name": "echo", "arguments": {"text": "4242"}}\n</tool_call>'
    first = [scripted_output(tokenizer, "", "<answer>4242</answer>"), scripted_output(tokenizer, "", call)]
    outs = run_multi_turn(requests, first, scheduler, second_turn, RequestConfig(), max_turns=3)

    assert [o.rollout_infos["rlfactory"]["turns"] for o in outs] == [1, 2]
    assert seen_while_late_generated == [1]  # early's judgment, and only early's: late had not finished
    deadline = time.monotonic() + 10
    while server.requests() < 2:  # late's goes out as it finishes
        assert time.monotonic() < deadline, "the judge never got the late trajectory"
        time.sleep(0.02)
    RUN.envs.pop(str(env.resolve())).close()
