"""The scheduler's behaviours that instant test tools cannot show, through ms-swift's own driver.

* Overlap: one batch's tool calls run together. Every trajectory of the batch calls a Python tool and an
  MCP server tool that each take 1 s; run one after another that is 16 s, overlapped about 1 s.
* Every stop reason is reached by the real scheduler, and the limit's other side is checked too (the call
  under the limit runs, the trajectory under the budget continues): ``length``, ``max_turns`` (both the
  ``--max_turns`` and the environment's ``limits.max_turns``, the smaller one wins), the environment's
  ``max_calls_per_turn``, and the context budget.
"""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest

from swift_rlfactory.adapters.swift import INFO_KEY, RLFactoryCallback, RLFactoryScheduler
from swift_rlfactory.runtime.user_code import import_target

from .driver import ENV_DIR, Reply, call, fresh_run, qwen3_template, request, run_batch

pytestmark = pytest.mark.timeout(120)
TOOLS = import_target("tools.py", ENV_DIR)


@pytest.fixture(scope="module")
def template(agent_model):
    return qwen3_template(agent_model)


@pytest.fixture(scope="module")
def run_state(template):
    with fresh_run(template.tokenizer) as state:
        yield state


def scheduler(template, max_turns: int | None = 6) -> RLFactoryScheduler:
    return RLFactoryScheduler(max_turns=max_turns, tokenizer=template.tokenizer, template=template)


def info(output) -> dict:
    return output.rollout_infos[INFO_KEY]


def test_a_batch_runs_its_tool_calls_together(run_state, template):
    requests = [request(f"overlap-{i}") for i in range(8)]
    both = call("nap", seconds=1.0) + "\n" + call("sleep", seconds=1.0)
    scripts = {r.uuid: [both] for r in requests}
    started = time.perf_counter()
    outputs = run_batch(scheduler(template), template, requests, scripts, max_turns=6)
    elapsed = time.perf_counter() - started

    for out in outputs.values():
        calls = info(out)["tool_calls"]
        assert [(c["tool"], c["observation"], c["error"]) for c in calls] == [
            ("nap", "rested", None),
            ("sleep", "slept", None),
        ]
        assert all(c["latency_s"] >= 0.9 for c in calls)  # each call really took its second
        assert info(out)["stop_reason"] == "answer"
    # 16 one-second calls: about 1 s when they overlap, 16 s one after another.
    assert elapsed < 6, f"the batch's tool calls did not overlap: {elapsed:.1f} s for 16 x 1 s"


def test_a_turn_cut_by_the_completion_limit_stops_without_running_its_call(run_state, template):
    TOOLS.CALLS.clear()
    cut = Reply('<tool_call>\n{"name": "echo", "arguments": {"text": "half', finish_reason="length")
    requests = [request("cut"), request("whole")]
    scripts = {"cut": [cut], "whole": [call("echo", text="whole")]}
    outputs = run_batch(scheduler(template), template, requests, scripts, max_turns=6)

    assert info(outputs["cut"])["stop_reason"] == "length" and info(outputs["cut"])["tool_calls"] == []
    assert outputs["cut"].rollout_infos["num_turns"] == 1
    assert info(outputs["whole"])["stop_reason"] == "answer"
    assert TOOLS.CALLS == ["echo"]  # only the whole call ran


@pytest.mark.parametrize("swift_max_turns, expected", [(3, 3), (6, 4)])  # the environment allows 4
def test_max_turns_stops_at_the_smaller_limit_without_running_the_last_calls(
    run_state, template, swift_max_turns, expected
):
    TOOLS.CALLS.clear()
    requests = [request("looping")]
    scripts = {"looping": [call("echo", text=f"turn {t}") for t in range(1, 8)]}
    outputs = run_batch(scheduler(template, swift_max_turns), template, requests, scripts, swift_max_turns)

    out = info(outputs["looping"])
    assert out["stop_reason"] == "max_turns" and out["turns"] == expected
    assert outputs["looping"].rollout_infos["num_turns"] == expected
    # Every turn but the last ran its call; the last one's call never ran.
    assert [c["observation"] for c in out["tool_calls"]] == [f"turn {t}" for t in range(1, expected)]
    assert TOOLS.CALLS.count("echo") == expected - 1


def test_calls_beyond_max_calls_per_turn_become_error_observations(run_state, template):
    TOOLS.CALLS.clear()
    four = "\n".join(call("echo", text=t) for t in "abcd")  # the environment allows 3 per turn
    outputs = run_batch(scheduler(template), template, [request("many")], {"many": [four]}, max_turns=6)

    out = info(outputs["many"])
    assert [c["observation"] for c in out["tool_calls"][:3]] == ["a", "b", "c"]
    assert all(c["error"] is None for c in out["tool_calls"][:3])
    assert "too many tool calls in one turn (limit 3)" in out["tool_calls"][3]["error"]
    # refused by the limit, not misread: rewards that count malformed calls read error_kind
    assert [c["error_kind"] for c in out["tool_calls"]] == [None, None, None, "limit"]
    assert not out["tool_calls"][3]["observation"].startswith("Error: could not parse")
    assert TOOLS.CALLS.count("echo") == 3
    tool_messages = [m["content"] for m in outputs["many"].messages if m["role"] == "tool"]
    assert len(tool_messages) == 4 and "too many tool calls" in tool_messages[3]  # the model is told
    assert out["stop_reason"] == "answer"


def test_a_flood_of_calls_adds_a_bounded_number_of_tool_messages(run_state, template):
    TOOLS.CALLS.clear()
    flood = "\n".join(call("echo", text=str(i)) for i in range(40))  # the environment allows 3 per turn
    outputs = run_batch(scheduler(template), template, [request("flood")], {"flood": [flood]}, max_turns=6)

    out = info(outputs["flood"])
    assert TOOLS.CALLS.count("echo") == 3
    assert [c["error_kind"] for c in out["tool_calls"]] == [None] * 3 + ["limit"] * 3
    tool_messages = [m["content"] for m in outputs["flood"].messages if m["role"] == "tool"]
    assert len(tool_messages) == 6  # 3 ran, 3 refused; the other 34 are counted, not shown
    assert "the 34 calls after this one were not run either" in tool_messages[-1]
    assert out["stop_reason"] == "answer"


def test_an_observation_that_overflows_the_context_budget_stops_the_trajectory(run_state, agent_model):
    # The prompt (system prompt and every tool schema) is ~900 tokens and 600 words ~2300: each fits 3072
    # alone, so this stop also proves that the prompt is counted.
    template = qwen3_template(agent_model, max_length=3072)
    requests = [request("huge"), request("small")]
    scripts = {"huge": [call("words", n=600)], "small": [call("words", n=10)]}
    sched = scheduler(template)
    assert sched.max_context == 3072
    outputs = run_batch(sched, template, requests, scripts, max_turns=6)

    huge, small = info(outputs["huge"]), info(outputs["small"])
    assert huge["stop_reason"] == "context" and huge["turns"] == 1
    assert len(huge["tool_calls"]) == 1  # the call ran; its observation is what did not fit
    assert len(template.tokenizer.encode(huge["tool_calls"][0]["observation"])) < 3072 - 400
    assert small["stop_reason"] == "answer" and small["turns"] == 2


@pytest.mark.parametrize("max_completion_length, stop, turns", [(None, "answer", 2), (1024, "context", 1)])
def test_the_completion_budget_is_kept_free_in_the_context(
    run_state, agent_model, max_completion_length, stop, turns
):
    """The training callback sets ``reserve_tokens`` from ``--max_completion_length``: a trajectory continues
    only while its next turn could be a whole completion. After the first turn this one holds ~2,600 of
    3,072 tokens: room for a turn of 400, not of 1,024."""
    template = qwen3_template(agent_model, max_length=3072)
    sched = scheduler(template)
    args = SimpleNamespace(max_completion_length=max_completion_length)  # GRPO's arguments, as read
    callback = RLFactoryCallback(args, SimpleNamespace(multi_turn_scheduler=sched))  # a trainer, as read
    callback.on_train_begin(args, None, None)
    assert sched.reserve_tokens == (max_completion_length or 0)
    outputs = run_batch(sched, template, [request("long")], {"long": [call("words", n=300)]}, max_turns=6)

    long = info(outputs["long"])
    assert (long["stop_reason"], long["turns"]) == (stop, turns)
    assert len(long["tool_calls"]) == 1


def test_a_servers_own_timeout_over_call_timeout_s_holds_for_the_turn_watchdog(run_state, template, tmp_path):
    """An MCP server's ``timeout`` (here 10 s) outranks ``limits.call_timeout_s`` (0.5 s) in the executor;
    the scheduler's watchdog (2 x 0.5 + 5 s if it counted only call_timeout_s) must allow it too."""
    server = ENV_DIR.parent.parent / "servers" / "slow_server.py"
    patient = tmp_path / "patient.yaml"
    patient.write_text(
        f"tools: {{mcp: {{mcpServers: {{slow: {{command: python, args: ['{server}'], timeout: 10}}}}}}}}\n"
        "limits: {call_timeout_s: 0.5, retries: 0}\nreward: [{name: em}]\n"
    )
    requests = [request("patient", env=str(patient))]
    scripts = {"patient": [call("sleep", seconds=6.5)]}
    outputs = run_batch(scheduler(template), template, requests, scripts, max_turns=6)

    out = info(outputs["patient"])
    assert out["stop_reason"] == "answer", out.get("error")
    assert [(c["observation"], c["error"]) for c in out["tool_calls"]] == [("slept", None)]


def test_a_fast_call_queued_behind_a_patient_servers_call_is_not_cut_by_the_watchdog(
    run_state, template, tmp_path
):
    """One slot (``max_concurrency: 1``): a 0.1 s Python call waits about 10 s behind an MCP server call
    that its server's ``timeout: 20`` allows. The watchdog of the waiting call must count the slowest tool
    that can hold the slot, not only its own (2 x 2 waves x (0.1 + 1) + 5 s = 9.4 s, before)."""
    server = ENV_DIR.parent.parent / "servers" / "slow_server.py"
    env = tmp_path / "one_slot.yaml"
    env.write_text(
        f"tools: {{python: ['{ENV_DIR / 'tools.py'}'], "
        f"mcp: {{mcpServers: {{slow: {{command: python, args: ['{server}'], timeout: 20}}}}}}}}\n"
        "limits: {call_timeout_s: 0.1, retries: 0, max_concurrency: 1}\nreward: [{name: em}]\n"
    )
    requests = [request("patient", env=str(env)), request("queued", env=str(env))]
    scripts = {"patient": [call("sleep", seconds=10)], "queued": [call("nap", seconds=0.05)]}
    outputs = run_batch(scheduler(template), template, requests, scripts, max_turns=6)

    for name, observation in [("patient", "slept"), ("queued", "rested")]:
        out = info(outputs[name])
        assert out["stop_reason"] == "answer", (name, out.get("error"))
        assert [(c["observation"], c["error"]) for c in out["tool_calls"]] == [(observation, None)]


def xml_call(name: str, **params) -> str:
    """One tool call as Qwen3.5 and Qwen3-Coder are told to write it."""
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


def test_a_qwen3_5_agent_template_has_its_xml_calls_run(run_state, agent_model):
    """``--agent_template qwen3_5``: the tools prompt asks for XML calls, and the scheduler reads them
    (``n`` typed as the integer its schema says), where hermes parsing made each one an error call."""
    template = qwen3_template(agent_model, agent_template="qwen3_5")
    sched = scheduler(template)
    assert sched.call_format == "qwen3_coder"
    TOOLS.CALLS.clear()
    requests = [request("xml")]
    scripts = {
        "xml": ["I will count.\n\n" + xml_call("words", n=3) + "\n" + xml_call("echo", text=" a\n<b> ")]
    }
    outputs = run_batch(sched, template, requests, scripts, max_turns=6)

    out = info(outputs["xml"])
    assert "<function=example_function_name>" in outputs["xml"].messages[0]["content"]  # what it was told
    assert [(c["tool"], c["arguments"], c["error"]) for c in out["tool_calls"]] == [
        ("words", {"n": 3}, None),
        ("echo", {"text": " a\n<b> "}, None),
    ]
    assert out["tool_calls"][1]["observation"] == " a\n<b> " and out["stop_reason"] == "answer"


@pytest.mark.parametrize("agent_template, runs", [(None, False), ("llama3", True), ("qwen3_5", False)])
def test_a_call_object_after_prose_runs_or_teaches_the_format_never_ends_as_an_answer(
    run_state, agent_model, agent_template, runs
):
    """Llama's habit, prose then the JSON: the llama3 agent template's own format runs it; hermes and
    Qwen3.5's XML tell the model how their calls are written (it ended the trajectory as an answer)."""
    template = qwen3_template(agent_model, agent_template=agent_template)
    TOOLS.CALLS.clear()
    prose = 'Let me echo it.\n{"name": "echo", "parameters": {"text": "hi"}}'
    outputs = run_batch(scheduler(template), template, [request("prose")], {"prose": [prose]}, max_turns=6)

    out = info(outputs["prose"])
    [record] = out["tool_calls"]
    assert out["stop_reason"] == "answer" and out["turns"] == 2  # the call's turn did not end it
    if runs:
        assert (record["tool"], record["observation"], record["error"]) == ("echo", "hi", None)
        assert TOOLS.CALLS == ["echo"]
    else:
        assert (
            record["error_kind"] == "parse" and "tool call must be written as <tool_call>" in record["error"]
        )
        assert TOOLS.CALLS == []


@pytest.mark.parametrize("agent_template", ["mistral", "deepseek_v3_1", "glm4_5"])
def test_an_agent_template_our_parsers_do_not_read_has_its_calls_read_by_its_own_get_toolcall(
    run_state, agent_model, agent_template
):
    """Refused at start-up before: now ms-swift's own ``get_toolcall`` reads the template's calls in the
    scheduler, and each is checked and typed as any call (GLM-4.5 writes ``n`` as text: 3 by its schema)."""
    template = qwen3_template(agent_model, agent_template=agent_template)
    sched = scheduler(template)
    assert sched.call_format == f"ms-swift:{agent_template}"
    TOOLS.CALLS.clear()
    written = json.dumps({"name": "words", "arguments": {"n": 3}})
    rendered = template.agent_template._format_tool_calls([{"role": "assistant", "content": written}])
    outputs = run_batch(
        sched, template, [request("swift")], {"swift": ["I will count.\n" + rendered]}, max_turns=6
    )

    out = info(outputs["swift"])
    assert [(c["tool"], c["arguments"], c["error"]) for c in out["tool_calls"]] == [("words", {"n": 3}, None)]
    assert out["stop_reason"] == "answer"


def test_a_plugin_agent_template_stops_the_scheduler_at_start_up(run_state, agent_model, monkeypatch):
    """An agent template a plugin adds to ms-swift's registry: no reader of it is trusted, the run stops."""
    from swift.agent_template import agent_template_map

    class PluginAgentTemplate(agent_template_map["hermes"]):
        pass

    monkeypatch.setitem(agent_template_map, "my_plugin", PluginAgentTemplate)
    template = qwen3_template(agent_model, agent_template="my_plugin")
    with pytest.raises(ValueError, match="agent template 'my_plugin'.*qwen3_5"):
        scheduler(template)


def test_the_watchdog_counts_this_ranks_share_of_a_run_wide_limit(run_state, template, tmp_path, monkeypatch):
    """``max_concurrency: 16`` for a run of 16 ranks is one slot here: 16 calls of 0.9 s queue about 14 s.
    The watchdog must count the one slot (16 waves), not the 16 of the file (1 wave: 2 x 1.9 + 5 s = 8.8 s)."""
    env = tmp_path / "run_wide.yaml"
    env.write_text(
        f"tools: {{python: ['{ENV_DIR / 'tools.py'}']}}\n"
        "limits: {call_timeout_s: 1.0, retries: 0, max_concurrency: 16, concurrency_scope: run}\n"
        "reward: [{name: em}]\n"
    )
    monkeypatch.setenv("WORLD_SIZE", "16")
    requests = [request(f"rank-share-{i}", env=str(env)) for i in range(16)]
    scripts = {r.uuid: [call("nap", seconds=0.9)] for r in requests}
    outputs = run_batch(scheduler(template), template, requests, scripts, max_turns=6)

    for out in outputs.values():
        assert info(out)["stop_reason"] == "answer", info(out).get("error")
        assert [(c["observation"], c["error"]) for c in info(out)["tool_calls"]] == [("rested", None)]
