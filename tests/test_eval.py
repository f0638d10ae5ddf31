"""The evaluation CLI: the training agent loop, tools and rewards on a test set, resumably.

The end-to-end runs use the tiny Qwen3 of ``conftest.agent_model`` in ms-swift's ``TransformersEngine``
(as subprocesses, like a user's shell), with real tool calls: ``add`` in-process and ``convert`` in a
unit-converter MCP server. The served-model path talks HTTP to a FastAPI app on 127.0.0.1 that stands in
for a remote GPU server with scripted replies. Every metric is recomputed here from the trajectories.
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from swift_rlfactory.eval.metrics import summarize, summarize_groups
from swift_rlfactory.eval.runner import context_check, load_rows, pending_tasks
from swift_rlfactory.rewards.rules import extract_answer, token_f1
from swift_rlfactory.rollout.episode import Generation
from swift_rlfactory.runs.eval_log import EvalLog
from swift_rlfactory.runs.log import read_trajectories

from .conftest import AGENT_ENV, AGENT_PAIRS, ROOT, ScriptedChat


def write_dataset(path: Path, pairs: list[tuple[int, int]]) -> Path:
    rows = [
        {"messages": [{"role": "user", "content": f"What is {a} + {b}?"}], "solution": str(a + b)}
        for a, b in pairs
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def eval_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "COLUMNS": "120"}
    cmd = [sys.executable, "-m", "swift_rlfactory.cli", "eval", *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def local_runs(agent_model: Path, tmp_path_factory) -> dict[str, Any]:
    """Two runs into one folder: the first two questions, then all four (which resumes)."""
    work = tmp_path_factory.mktemp("eval")
    dataset = write_dataset(work / "test.jsonl", AGENT_PAIRS)
    out = work / "out"
    common = [
        "--env", str(AGENT_ENV), "--model", str(agent_model), "--model-type", "qwen3", "--template", "qwen3",
        "--engine", "transformers", "--dataset", str(dataset), "--output", str(out),
        "--samples", "2", "--temperature", "1.0", "--max-tokens", "96", "--concurrency", "8",
    ]  # fmt: skip
    started = time.perf_counter()
    first = eval_cli(*common, "--limit", "2")
    assert first.returncode == 0, (first.stdout + first.stderr)[-4000:]
    after_first = (out / "trajectories.jsonl").read_text().splitlines()
    second = eval_cli(*common)
    assert second.returncode == 0, (second.stdout + second.stderr)[-4000:]
    return {
        "out": out,
        "first": first,
        "second": second,
        "after_first": after_first,
        "seconds": time.perf_counter() - started,
    }


def test_eval_runs_the_agent_loop_with_real_tools(local_runs: dict[str, Any], agent_model: Path):
    out = local_runs["out"]
    records = read_trajectories(out / "trajectories.jsonl")
    assert sorted((r["index"], r["sample"]) for r in records) == [(i, s) for i in range(4) for s in range(2)]
    executed = [c for r in records for c in r["tool_calls"] if c["error"] is None]
    assert {"add", "convert"} <= {c["tool"] for c in executed}
    for record in records:
        (a, b) = AGENT_PAIRS[record["index"]]
        assert record["question"] == f"What is {a} + {b}?"
        observations = [m["content"] for m in record["messages"] if m["role"] == "tool"]
        assert [c["observation"] for c in record["tool_calls"]] == observations
        for call in record["tool_calls"]:
            args = call["arguments"]
            if call["tool"] == "add" and call["error"] is None:
                assert call["observation"] == str(int(args["a"]) + int(args["b"]))
            if (
                call["tool"] == "convert"
                and call["error"] is None
                and (args["from_unit"], args["to_unit"]) == ("km", "m")
            ):
                assert float(call["observation"]) == float(args["value"]) * 1000  # the MCP server answered

    # The system prompt is the one training renders: the HF chat template given the same tools agrees.
    from transformers import AutoTokenizer

    from swift_rlfactory.env.environment import Environment

    with Environment.load(AGENT_ENV) as env:
        tools, system = env.tool_schemas(), env.system_prompt
    tokenizer = AutoTokenizer.from_pretrained(agent_model)
    user = {"role": "user", "content": records[0]["question"]}
    ours = tokenizer.apply_chat_template([records[0]["messages"][0], user], tokenize=False)
    reference = tokenizer.apply_chat_template(
        [{"role": "system", "content": system}, user], tools=tools, tokenize=False
    )
    assert ours == reference


def test_eval_metrics_are_the_means_of_the_trajectories(local_runs: dict[str, Any]):
    out = local_runs["out"]
    records = read_trajectories(out / "trajectories.jsonl")
    metrics = json.loads((out / "metrics.json").read_text())
    em, f1, total, calls, errors = [], [], [], 0, 0
    by_question: dict[int, list[float]] = {}
    for r in records:
        solution = r["row"]["solution"]
        answer = (
            extract_answer(r["messages"][-1]["content"]) if r["messages"][-1]["role"] == "assistant" else None
        )
        em.append(float(answer is not None and answer.strip() == solution))
        f1.append(0.0 if answer is None else token_f1(answer, [solution]))
        assert r["metrics"]["em"] == em[-1]
        assert r["rewards"]["total"] == pytest.approx(
            r["rewards"]["em"] + 0.2 * r["rewards"]["format"] + 0.1 * r["rewards"]["tool_use"]
        )
        total.append(r["rewards"]["total"])
        calls += len(r["tool_calls"])
        errors += sum(1 for c in r["tool_calls"] if c["error"])
        by_question.setdefault(r["index"], []).append(em[-1])
    assert metrics["questions"] == 4 and metrics["episodes"] == 8 and metrics["samples"] == 2
    assert metrics["em"] == pytest.approx(sum(em) / 8)
    assert metrics["f1"] == pytest.approx(sum(f1) / 8)
    assert metrics["reward"] == pytest.approx(sum(total) / 8)
    assert metrics["tool_calls"] == pytest.approx(calls / 8)
    assert metrics["tool_error_rate"] == pytest.approx(errors / calls)
    assert metrics["pass@2"] == pytest.approx(sum(max(v) for v in by_question.values()) / 4)
    assert metrics["pass@1"] == pytest.approx(sum(sum(v) / 2 for v in by_question.values()) / 4)
    assert metrics["failed_episodes"] == 0
    assert "EM" in local_runs["second"].stdout and "pass@2" in local_runs["second"].stdout


def test_eval_resumes_without_rerunning_finished_episodes(local_runs: dict[str, Any]):
    first, second = local_runs["first"], local_runs["second"]
    after_first = local_runs["after_first"]
    assert len(after_first) == 4
    assert sorted((json.loads(x)["index"], json.loads(x)["sample"]) for x in after_first) == [
        (0, 0),
        (0, 1),
        (1, 0),
        (1, 1),
    ]
    assert "skipped" not in first.stdout
    assert "skipped 4 of 8 episodes" in second.stdout
    assert "ran 4 episodes" in second.stdout
    lines = (local_runs["out"] / "trajectories.jsonl").read_text().splitlines()
    assert len(lines) == 8 and lines[:4] == after_first  # the first two questions were not run again
    print(f"two local eval runs: {local_runs['seconds']:.1f} s")


@pytest.fixture(scope="module")
def two_checkpoints(agent_model: Path, tmp_path_factory) -> list[Path]:
    """Two LoRA checkpoints of the agent model: one that changes nothing (B = 0), one of random weights."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    work = tmp_path_factory.mktemp("checkpoints")
    folders = []
    for name, init in (("checkpoint-10", True), ("checkpoint-20", False)):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(agent_model)
        config = LoraConfig(r=8, lora_alpha=64, target_modules=["q_proj", "v_proj"], init_lora_weights=init)
        get_peft_model(model, config).save_pretrained(work / name)
        folders.append(work / name)
    return folders


@pytest.mark.timeout(300)
def test_several_checkpoints_share_one_engine_and_score_as_each_alone(
    agent_model: Path, two_checkpoints: list[Path], tmp_path: Path
):
    """``--adapters A B``: one engine, each checkpoint's episodes exactly those of a run of its own."""
    dataset = write_dataset(tmp_path / "q.jsonl", AGENT_PAIRS[:2])
    common = [
        "--env", str(AGENT_ENV), "--model", str(agent_model), "--model-type", "qwen3", "--template", "qwen3",
        "--engine", "transformers", "--dataset", str(dataset), "--max-tokens", "48", "--concurrency", "4",
    ]  # fmt: skip
    both = eval_cli(*common, "--output", str(tmp_path / "both"), "--adapters", *map(str, two_checkpoints))
    assert both.returncode == 0, (both.stdout + both.stderr)[-4000:]
    assert both.stderr.count("Loading model from") == 1  # one engine for both checkpoints
    alone = eval_cli(*common, "--output", str(tmp_path / "alone"), "--adapters", str(two_checkpoints[1]))
    base = eval_cli(*common, "--output", str(tmp_path / "base"))
    assert alone.returncode == base.returncode == 0, (alone.stderr + base.stderr)[-4000:]

    def episodes(folder: Path) -> list[list[dict]]:
        return [
            r["messages"]
            for r in sorted(read_trajectories(folder / "trajectories.jsonl"), key=lambda r: r["index"])
        ]

    assert episodes(tmp_path / "both" / "checkpoint-20") == episodes(tmp_path / "alone")
    assert episodes(tmp_path / "both" / "checkpoint-10") == episodes(tmp_path / "base")  # B = 0: the base
    assert episodes(tmp_path / "both" / "checkpoint-20") != episodes(tmp_path / "base")  # the switch is real
    for checkpoint in two_checkpoints:
        metrics = json.loads((tmp_path / "both" / checkpoint.name / "metrics.json").read_text())
        assert metrics["config"]["adapters"] == str(checkpoint.resolve()) and metrics["questions"] == 2


class LoopBoundEngine:
    """vLLM's async engine in miniature: it answers on the event loop of its first request only.

    vLLM's ``AsyncLLM`` runs its output handler as a task on that loop; once the loop is closed, every
    request fails (``EngineDeadError`` for each episode of the second checkpoint on the H200, 2026-12-02).
    The one part of ``eval --adapters A B`` the CPU's transformers engine cannot show; the rest is real.
    """

    max_length = None
    max_tokens = 16

    def __init__(self) -> None:
        self.loop: Any = None
        self.adapters: list[str] = []

    def for_adapter(self, folder: str) -> LoopBoundEngine:
        self.adapters.append(folder)
        return self

    def render_prompt(self, messages: list, system_prompt: str | None, tools: list | None) -> list:
        return [{"role": "system", "content": system_prompt or ""}, *messages]

    def new_episode(self) -> LoopBoundEngine:
        return self

    tokens_used = None

    async def generate(self, messages: list) -> Generation:
        import asyncio

        self.loop = self.loop or asyncio.get_running_loop()
        if asyncio.get_running_loop() is not self.loop:
            raise RuntimeError("EngineDeadError: the engine's output handler died with its event loop")
        return Generation(text="<answer>7</answer>", finish_reason="stop")


def test_several_checkpoints_are_scored_on_the_event_loop_their_engine_serves(tmp_path: Path, monkeypatch):
    from rich.console import Console

    from swift_rlfactory.eval import command

    engine = LoopBoundEngine()
    monkeypatch.setattr(command, "load_policy", lambda *args, **kwargs: engine)
    checkpoints = [tmp_path / "run" / name for name in ("checkpoint-10", "checkpoint-20", "checkpoint-30")]
    for folder in checkpoints:
        folder.mkdir(parents=True)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")  # a local model folder; the engine is the fake
    options = command.EvalOptions(
        env=AGENT_ENV,
        dataset=write_dataset(tmp_path / "q.jsonl", AGENT_PAIRS[:2]),
        output=tmp_path / "out",
        model=str(tmp_path / "model"),
    )
    assert command.run_evals(options, [str(c) for c in checkpoints], Console(file=io.StringIO())) == 0
    assert engine.adapters == [str(c) for c in checkpoints]
    for folder in checkpoints:
        metrics = json.loads((tmp_path / "out" / folder.name / "metrics.json").read_text())
        assert (metrics["questions"], metrics["failed_episodes"]) == (2, 0)


def test_several_checkpoints_need_distinct_folder_names(tmp_path: Path):
    for run in ("a", "b"):
        (tmp_path / run / "checkpoint-10").mkdir(parents=True)
    done = eval_cli(
        "--env", str(AGENT_ENV), "--model", "x", "--dataset", str(write_dataset(tmp_path / "q.jsonl", [(1, 2)])),
        "--output", str(tmp_path / "out"), "--adapters", str(tmp_path / "a" / "checkpoint-10"),
        str(tmp_path / "b" / "checkpoint-10"),
    )  # fmt: skip
    assert done.returncode == 2 and "two folders share a name" in done.stderr + done.stdout


def test_local_prompts_match_training_token_for_token(agent_model: Path):
    """Every turn's prompt is the training rollout's: history assistant turns go back as sampled ids.

    ``render_prompt`` reproduces ms-swift's rollout prompt token for token (tests/fixtures/README.md); text
    history would differ, because the template strips the think block from re-encoded assistant turns.
    """
    import asyncio

    from swift.infer_engine import InferRequest

    from swift_rlfactory.adapters.swift_infer import SwiftPolicy
    from swift_rlfactory.env.environment import Environment
    from swift_rlfactory.rollout.episode import run_episode
    from tests.fixtures.tiny_qwen3 import EMPTY_THINK, render_prompt

    policy = SwiftPolicy.load(str(agent_model), model_type="qwen3", template="qwen3", max_tokens=96)
    requests = []

    async def episode(env: Environment):
        model = policy.new_episode()

        async def generate(messages):
            requests.append([model._as_ids(m) for m in messages])
            return await model.generate(messages)

        prompt = policy.render_prompt(
            [{"role": "user", "content": "What is 2 + 5?"}], env.system_prompt, tools
        )
        return await run_episode(prompt, generate, env.executor, env.max_turns)

    with Environment.load(AGENT_ENV) as env:
        tools = env.tool_schemas()
        trajectory = asyncio.run(episode(env))
        system = env.system_prompt
    assert trajectory.turns >= 2 and trajectory.tool_calls  # a tool turn, then more
    tokenizer, template = policy.tokenizer, policy.template
    template.set_mode("transformers")
    for request in requests:
        ours = template.encode(InferRequest(messages=request), True)["input_ids"]
        history = [
            {**m, "content": m["content"].removeprefix(EMPTY_THINK)} if m["role"] == "assistant" else m
            for m in trajectory.messages[1 : len(request)]
        ]
        reference = render_prompt(tokenizer, [{"role": "system", "content": system}, *history], tools)
        assert ours == tokenizer.encode(reference, add_special_tokens=False)


# -- a served model ------------------------------------------------------------------------------------
def test_a_question_too_long_for_the_model_fails_its_own_episode_only_in_the_transformers_engine(
    agent_model: Path, tmp_path: Path
):
    """The transformers engine answers the episodes in flight as one batch, sized by its longest prompt.
    A prompt past the model's length fails its episode with the template's error, one of the whole length
    fails its own with no room to answer, and one a few tokens short is answered in those few tokens; the
    neighbours of all three are answered as if they had been alone (they used to fail with them, or be cut
    to the few tokens)."""
    import asyncio

    from swift.infer_engine import InferRequest

    from swift_rlfactory.adapters.swift_infer import SwiftPolicy
    from swift_rlfactory.env.environment import Environment
    from swift_rlfactory.eval.runner import EvalTask, evaluate
    from tests.fixtures.tiny_qwen3 import EMPTY_THINK

    policy = SwiftPolicy.load(
        str(agent_model), model_type="qwen3", template="qwen3", max_tokens=16, concurrency=8
    )
    limit = policy.engine.max_model_len
    with Environment.load(AGENT_ENV) as env:

        def prompt_tokens(question: str) -> int:
            messages = [{"role": "user", "content": question}]
            rendered = policy.render_prompt(messages, env.system_prompt, env.tool_schemas())
            return len(policy.template.encode(InferRequest(messages=rendered))["input_ids"])

        def of_length(tokens: int) -> str:  # "very " is one token, so the prompt grows one per word
            return "What is " + "very " * (tokens - prompt_tokens("What is big?")) + "big?"

        def run(questions: list[str], name: str) -> dict[str, dict[str, Any]]:
            rows = [{"messages": [{"role": "user", "content": q}], "solution": "7"} for q in questions]
            log = EvalLog(tmp_path / name)
            tasks = [EvalTask(i, 0, row) for i, row in enumerate(rows)]
            asyncio.run(evaluate(tasks, policy, env, log, max_turns=1, concurrency=8))
            return {questions[i]: record for (i, _), record in log.load().items()}

        neighbours = ["What is 3 + 4?", "What is 2 + 5?", "What is 6 + 1?"]
        over, whole, short = of_length(limit + 500), of_length(limit), of_length(limit - 6)
        assert prompt_tokens(whole) == limit and prompt_tokens(short) == limit - 6
        together = run([neighbours[0], over, neighbours[1], whole, short, neighbours[2]], "together.jsonl")
        alone = run(neighbours, "alone.jsonl")
    assert "MaxLengthError" in together[over]["error"] and f"max_length({limit})" in together[over]["error"]
    assert (
        together[whole]["error"]
        == f"ValueError: the prompt is {limit} tokens, all of the {limit} the context holds: no room to answer"
    )
    assert not together[short].get("failed") and together[short]["stop_reason"] == "length"
    answer = together[short]["messages"][-1]["content"].removeprefix(EMPTY_THINK)  # the prompt's, not sampled
    assert len(policy.tokenizer.encode(answer, add_special_tokens=False)) <= 6
    for question in neighbours:
        assert not together[question].get("failed")
        assert together[question]["messages"] == alone[question]["messages"]  # not cut to 6 tokens

    # A --max-length shorter than the model's is the context, as vLLM is given it: for the first prompt too.
    half = SwiftPolicy(policy.engine, policy.request_config, max_length=limit // 2)
    with Environment.load(AGENT_ENV) as env:
        rows = [
            {"messages": [{"role": "user", "content": q}], "solution": "7"} for q in (neighbours[0], short)
        ]
        log = EvalLog(tmp_path / "max_length.jsonl")
        tasks = [EvalTask(i, 0, row) for i, row in enumerate(rows)]
        [failure] = asyncio.run(evaluate(tasks, half, env, log, max_turns=1, concurrency=8)).failures
    assert failure["index"] == 1 and f"tokens, all of the {limit // 2} the context holds" in failure["error"]


def add_then_answer(body: dict[str, Any]) -> str:
    """A served model's reply: a tool call with the two numbers of the question, then the observation as
    the answer."""
    last = body["messages"][-1]
    if last["role"] == "user":
        a, b = map(int, re.findall(r"\d+", last["content"]))
        call = json.dumps({"name": "add", "arguments": {"a": a, "b": b}})
        return f"<tool_call>\n{call}\n</tool_call>"
    return f"<answer>{last['content']}</answer>"  # 7 only if the tool really ran


def scripted_server() -> ScriptedChat:
    """A served model that answers as :func:`add_then_answer`."""
    return ScriptedChat(add_then_answer)


def test_eval_against_an_openai_compatible_server(tmp_path: Path, capsys):
    from swift_rlfactory.cli import main

    dataset = write_dataset(tmp_path / "test.jsonl", [(3, 4)])
    out = tmp_path / "out"
    with scripted_server() as server:
        code = main([
            "eval", "--env", str(AGENT_ENV), "--base-url", f"http://127.0.0.1:{server.port}/v1",
            "--served-model", "scripted", "--api-key", "k", "--dataset", str(dataset), "--output", str(out),
            "--samples", "2", "--group-by", "solution",
        ])  # fmt: skip
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "by solution" in printed
    [record, _] = read_trajectories(out / "trajectories.jsonl")
    assert [c["tool"] for c in record["tool_calls"]] == ["add"]
    assert record["tool_calls"][0]["observation"] == "7" and record["tool_calls"][0]["error"] is None
    assert record["messages"][-1]["content"] == "<answer>7</answer>"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["em"] == 1.0 and metrics["pass@2"] == 1.0 and metrics["pass@1"] == 1.0
    assert metrics["tool_calls"] == 1.0 and metrics["tool_error_rate"] == 0.0
    assert metrics["by_solution"] == {"7": {k: metrics[k] for k in metrics["by_solution"]["7"]}}

    assert len(server.requests) == 4  # 2 samples x 2 turns, the samples concurrently
    first = next(r for r in server.requests if r["messages"][-1]["role"] == "user")
    second = next(r for r in server.requests if r["messages"][-1]["role"] == "tool")
    assert "tools" not in first and "stop" not in first and first["model"] == "scripted"
    assert first["temperature"] == 1.0  # several samples: sampled, not greedy
    system = first["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("Use the tools, then answer")
    assert "# Tools" in system["content"] and '"name": "add"' in system["content"]
    assert second["messages"][-1] == {"role": "tool", "content": "7"}
    assert "EM" in printed


def served_eval(base: str, dataset: Path, out: Path, *extra: str) -> list[str]:
    """``swift-rlfactory eval`` of the agent env against a served model at ``base``."""
    return [
        "eval",
        "--env",
        str(AGENT_ENV),
        "--base-url",
        base,
        "--served-model",
        "scripted",
        "--dataset",
        str(dataset),
        "--output",
        str(out),
        *extra,
    ]


def odd_server() -> ScriptedChat:
    """A served model that answers each question in another shape a real server may use."""
    from starlette.responses import Response

    def reply(body: dict[str, Any]) -> Any:
        last = body["messages"][-1]
        if last["role"] == "tool":
            return f"<answer>{last['content']}</answer>"
        a, b = map(int, re.findall(r"\d+", last["content"]))
        if (a, b) == (3, 4):  # the server parsed the call itself: structured tool_calls, no content
            call = {
                "id": "c1",
                "type": "function",
                "function": {"name": "add", "arguments": json.dumps({"a": a, "b": b})},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            return {
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                "usage": {"prompt_tokens": None},
            }
        if (a, b) == (2, 5):  # half an emoji, as a JSON escape: no UTF-8 encoder can write it back
            text = '{"choices": [{"message": {"role": "assistant", "content": "<answer>7\\ud83d</answer>"}, "finish_reason": "stop"}]}'
            return Response(text, media_type="application/json")
        if (a, b) == (6, 1):  # content as parts
            return {
                "choices": [
                    {
                        "message": {
                            "role": "assistant",
                            "content": [{"type": "text", "text": "<answer>7</answer>"}],
                        }
                    }
                ]
            }
        return {"choices": []}  # (8, 9): no answer at all

    return ScriptedChat(reply)


def test_eval_reads_every_shape_a_server_answers_in_and_fails_only_the_broken_episode(tmp_path: Path, capsys):
    from swift_rlfactory.cli import main

    dataset = write_dataset(tmp_path / "test.jsonl", AGENT_PAIRS)
    out = tmp_path / "out"
    with odd_server() as server:
        base = f"http://127.0.0.1:{server.port}/v1"
        argv = served_eval(base, dataset, out)
        assert main(argv) == 1  # one episode failed; the rest are kept
    printed = capsys.readouterr()
    assert "not a chat completion" in printed.out + printed.err
    records = {r["index"]: r for r in read_trajectories(out / "trajectories.jsonl")}
    assert sorted(records) == [0, 1, 2, 3]
    assert records[3]["failed"] and "not a chat completion" in records[3]["error"]  # logged, to be retried
    assert [c["tool"] for c in records[0]["tool_calls"]] == ["add"]  # structured, and it ran
    assert records[0]["tool_calls"][0]["observation"] == "7"
    assert records[0]["messages"][-1]["content"] == "<answer>7</answer>"
    assert records[1]["messages"][-1]["content"] == "<answer>7\ufffd</answer>"  # stored, not fatal
    assert records[2]["messages"][-1]["content"] == "<answer>7</answer>"


def test_the_api_key_and_url_credentials_reach_no_error_or_file(tmp_path: Path, capsys):
    from starlette.responses import JSONResponse

    from swift_rlfactory.cli import main

    key, password = "sk-eval-7a6b5c4d3e", "pw-eval-9f8e7d6c"
    seen = lambda body: JSONResponse({"error": f"bad key Bearer {key}"}, status_code=401)  # noqa: E731
    dataset = write_dataset(tmp_path / "test.jsonl", [(3, 4)])
    out = tmp_path / "out"
    with ScriptedChat(seen) as server:
        base = f"http://user:{password}@127.0.0.1:{server.port}/v1?token=QS-123456"
        argv = served_eval(base, dataset, out, "--api-key", key)
        assert main(argv) == 1
    printed = capsys.readouterr()
    written = "".join(p.read_text() for p in out.iterdir() if p.is_file())
    for secret in (key, password, "QS-123456"):
        assert secret not in printed.out + printed.err and secret not in written
    assert "401" in printed.out + printed.err


def test_select_refuses_to_overwrite_its_inputs(local_runs: dict[str, Any]):
    from swift_rlfactory.eval.select import select

    out = local_runs["out"]
    dataset = out.parent / "test.jsonl"
    before = Path(dataset).read_text()
    for target in (dataset, Path(out) / "trajectories.jsonl"):
        with pytest.raises(ValueError, match="which selecting would overwrite"):
            select(out, dataset, target)
    assert Path(dataset).read_text() == before


def test_select_keeps_the_questions_an_eval_run_sometimes_solved(local_runs: dict[str, Any], capsys):
    from swift_rlfactory.cli import main

    out, dataset = local_runs["out"], local_runs["out"].parent / "test.jsonl"
    rates: dict[str, list[float]] = {}
    for line in read_trajectories(out / "trajectories.jsonl"):
        rates.setdefault(line["question"], []).append(line["metrics"]["em"])
    mixed = [q for q, ems in rates.items() if 0 < sum(ems) / len(ems) < 1]
    code = main(["select", "--eval", str(out), "--dataset", str(dataset), "--out", str(out / "grpo.jsonl")])
    assert code == (0 if mixed else 1), capsys.readouterr().out
    kept = [row["messages"][0]["content"] for row in load_rows(out / "grpo.jsonl")]
    assert sorted(kept) == sorted(mixed)


def select_pool(tmp_path: Path, n: int) -> tuple[list[dict[str, Any]], Path, EvalLog]:
    """A pool of ``n`` questions ``q0..`` (answer ``a``) and the empty eval log ``select`` reads beside it."""
    rows = [{"messages": [{"role": "user", "content": f"q{i}"}], "solution": "a"} for i in range(n)]
    dataset = tmp_path / "pool.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    log = EvalLog(tmp_path / "run" / "trajectories.jsonl")
    log.path.parent.mkdir()
    return rows, dataset, log


def test_select_filters_by_solve_rate_and_refuses_another_dataset(tmp_path: Path):
    from swift_rlfactory.eval.select import select

    rows, dataset, log = select_pool(tmp_path, 4)
    for index, ems in enumerate([(1.0, 1.0), (1.0, 0.0), (0.0, 0.0)]):  # q3 was never scored
        for sample, em in enumerate(ems):
            log.append(logged(rows, index, sample, em))
    assert select(tmp_path / "run", dataset, tmp_path / "grpo.jsonl") == (1, 3)
    assert load_rows(tmp_path / "grpo.jsonl") == [rows[1]]
    assert select(tmp_path / "run", dataset, tmp_path / "all.jsonl", low=-1, high=2) == (3, 3)

    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({**rows[0], "messages": [{"role": "user", "content": "x"}]}) + "\n")
    with pytest.raises(ValueError) as refused:
        select(tmp_path / "run", other, tmp_path / "x.jsonl")
    # the log holds the eval's question, the dataset another: the fix is --dataset, not another --output
    assert str(refused.value) == (
        f"{log.path} holds question 0 as 'q0', but the dataset has 'x': "
        f"pass the dataset that run evaluated as --dataset, not {other}"
    )
    with pytest.raises(ValueError, match="no metric 'reward'"):
        select(tmp_path / "run", dataset, tmp_path / "x.jsonl", metric="reward")


def test_eval_refuses_a_group_by_column_no_row_has(tmp_path: Path, capsys):
    from swift_rlfactory.cli import main

    dataset = write_dataset(tmp_path / "test.jsonl", [(3, 4)])
    with scripted_server() as server:  # it answers the start-up check; the dataset is refused after it
        code = main(
            served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, tmp_path / "out", "--group-by", "hops")
        )
    assert code == 2 and "--group-by hops: no row of" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # refused before anything ran


# -- rows that cannot be scored -------------------------------------------------------------------------
QUESTION = {"role": "user", "content": "What is 3 + 4?"}


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"messages": [{"role": "system", "content": "s"}], "solution": "7"}, "no question: 'messages' has no user"),
        ({"messages": [{"role": "user", "content": " \n"}], "solution": "7"}, "no question: the last user message"),
        ({"messages": [{"role": "user"}], "solution": "7"}, "no question: the last user message's content is None"),
        ({"question": "   ", "golden_answers": ["7"]}, "no question: 'question' is missing, empty or not text"),
        ({"question": ["q"], "golden_answers": ["7"]}, "no question: 'question' is missing, empty or not text"),
        ({"question": "q"}, "no answer: none of 'golden_answers'"),  # a QA record is a question and its answers
    ],
)  # fmt: skip
def test_a_row_without_a_question_is_skipped_naming_file_and_line(tmp_path: Path, caplog, record, message):
    path = tmp_path / "data.jsonl"
    path.write_text(
        json.dumps({"messages": [QUESTION], "solution": "7"}) + "\n\n" + json.dumps(record) + "\n"
    )
    assert [row["solution"] for row in load_rows(path)] == ["7"]
    assert re.search(rf"data\.jsonl: skipped 1 of 2 rows.*line 3: {re.escape(message)}", caplog.text)


@pytest.mark.parametrize(
    "columns", [{}, {"solution": ""}, {"golden_answers": []}, {"golden_answers": [None], "solution": None}]
)
def test_a_row_without_the_reference_a_reward_needs_is_skipped_naming_file_line_and_field(
    tmp_path, caplog, columns
):
    path = tmp_path / "data.json"
    path.write_text(json.dumps([{"messages": [QUESTION], "answer": 7}, {"messages": [QUESTION], **columns}]))
    assert len(load_rows(path)) == 2  # nothing required: both load
    assert [row["answer"] for row in load_rows(path, requires={"golden_answers": ["em", "f1"]})] == [7]
    assert re.search(
        r"data\.json: skipped 1 of 2 rows, which are not in any score: record 2: no reference answer \(none of "
        r"'golden_answers', 'answers', 'answer', 'solution', 'Answer' holds one\), which reward 'em', 'f1' of "
        r"the environment scores against", caplog.text
    )  # fmt: skip
    with pytest.raises(
        ValueError, match=r"data\.json: no row can be scored: no 'tests' field, which reward 'hidden_tests' of "
        r"the environment scores against \(2 rows: record 1, record 2\)"
    ):  # fmt: skip
        load_rows(path, requires={"tests": ["hidden_tests"]})


def test_eval_skips_a_row_without_a_reference_answer_and_stops_on_a_file_of_none(
    tmp_path: Path, capsys, caplog
):
    """The agent env scores ``em``: a row with nothing to match is left out at load, file and line named,
    never asked and scored 0 as a wrong answer (it used to be); a file of only such rows stops the run
    before the server is asked anything."""
    from swift_rlfactory.cli import main

    dataset = tmp_path / "test.jsonl"
    unanswered = json.dumps({"messages": [{"role": "user", "content": "What is 2 + 5?"}]}) + "\r\n"
    dataset.write_text(json.dumps({"messages": [QUESTION], "solution": "7"}) + "\r\n" + unanswered)
    with scripted_server() as server:
        code = main(served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, tmp_path / "out"))
    assert (
        f"{dataset}: skipped 1 of 2 rows, which are not in any score: line 2: no reference answer"
        in caplog.text
    )
    assert code == 0 and len(read_trajectories(tmp_path / "out" / "trajectories.jsonl")) == 1  # it alone ran
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["questions"] == 1 and metrics["skipped_rows"] == 1  # said in the results, not only the log
    assert re.search(r"dataset rows skipped at load.*\b1\b", capsys.readouterr().out)
    dataset.write_text(unanswered)
    with scripted_server() as server:
        code = main(served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, tmp_path / "out2"))
    err = capsys.readouterr().err
    assert code == 2 and f"{dataset}: no row can be scored: line 1: no reference answer" in err, err
    assert "reward 'em'" in err and server.requests == [] and not (tmp_path / "out2").exists()


def test_rows_without_a_reference_are_counted_and_left_out_of_em_when_no_reward_needs_one(tmp_path, capsys):
    """An environment that scores without a reference (as examples/code does, by hidden tests) takes such
    rows: they run and get their rewards, and EM, F1 and pass@k are over the rows that have an answer."""
    from swift_rlfactory.cli import main

    env = tmp_path / "env.yaml"
    env.write_text(
        f"name: no-reference\nsystem_prompt: Use the tools, then answer in <answer></answer>.\n"
        f"tools: {{python: [{ROOT / 'tests/environments/agent/tools.py'}]}}\nlimits: {{max_turns: 3}}\n"
        "reward: [{name: format, weight: 1.0}]\n"
    )
    rows = [
        {"messages": [{"role": "user", "content": "What is 3 + 4?"}], "solution": "7"},
        {"messages": [{"role": "user", "content": "What is 2 + 5?"}]},
        {"messages": [{"role": "user", "content": "What is 6 + 1?"}], "tests": "[[[6, 1], 7]]"},
    ]
    dataset = tmp_path / "test.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with scripted_server() as server:
        argv = served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, tmp_path / "out", "--samples", "2")
        code = main(["eval", "--env", str(env), *argv[3:]])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert len(read_trajectories(tmp_path / "out" / "trajectories.jsonl")) == 6  # every row ran
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["questions"] == 3 and metrics["questions_without_reference"] == 2
    assert metrics["em"] == metrics["pass@2"] == metrics["pass@1"] == 1.0  # the one row with an answer
    assert metrics["reward"] == metrics["reward/format"] == 1.0  # the rewards scored every row
    assert re.search(r"questions without a reference answer.*\b2\b", printed)


def test_the_progress_line_shows_no_em_when_no_row_has_a_reference(tmp_path, capsys):
    """examples/code scores by hidden tests: no row has an answer, so the table's EM is "-", and the progress
    line must not say "EM 0.000" beside it."""
    from swift_rlfactory.cli import main

    env = tmp_path / "env.yaml"
    env.write_text(
        f"name: no-reference\nsystem_prompt: Use the tools, then answer in <answer></answer>.\n"
        f"tools: {{python: [{ROOT / 'tests/environments/agent/tools.py'}]}}\nlimits: {{max_turns: 3}}\n"
        "reward: [{name: format, weight: 1.0}]\n"
    )
    dataset = tmp_path / "test.jsonl"
    dataset.write_text(json.dumps({"messages": [{"role": "user", "content": "What is 2 + 5?"}]}) + "\n")
    with scripted_server() as server:
        argv = served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, tmp_path / "out")
        code = main(["eval", "--env", str(env), *argv[3:]])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert re.search(r"1/1 EM - ", printed) and "EM 0.000" not in printed, printed


def test_summarize_leaves_rows_without_a_reference_out_of_em():
    unreferenced = {**record(1, 0, 0.0), "row": {"tests": "..."}}
    metrics = summarize([record(0, 0, 1.0), unreferenced, {**failed(2, 0), "row": {}}], samples=1)
    assert metrics["questions"] == 3 and metrics["questions_without_reference"] == 2
    assert metrics["em"] == metrics["f1"] == metrics["pass@1"] == 1.0 and metrics["failed_episodes"] == 1
    alone = summarize([unreferenced], samples=1)
    assert alone["em"] is None and alone["f1"] is None and alone["pass@1"] is None
    assert summarize([record(0, 0, 0.0)], samples=1)["questions_without_reference"] == 0


def test_summarize_decides_once_per_episode_whether_its_row_has_a_reference(monkeypatch):
    """Whether a row has a reference answer is read from its answer columns once per episode, not once per
    score (EM, F1, pass@k and the count each asked again: four walks of every row's answers)."""
    from swift_rlfactory.eval import metrics as module

    walks = []
    real = module.reference_answers
    monkeypatch.setattr(module, "reference_answers", lambda row: walks.append(row) or real(row))
    records = [record(0, 0, 1.0), record(0, 1, 0.0), {**record(1, 0, 0.0), "row": {"tests": "..."}}]
    metrics = summarize(records, samples=2)
    assert metrics["em"] == 0.5 and metrics["questions_without_reference"] == 1
    assert len(walks) == len(records)


# -- pure parts ---------------------------------------------------------------------------------------
def record(index: int, sample: int, em: float, calls: int = 1, errors: int = 0) -> dict[str, Any]:
    return {
        "index": index,
        "sample": sample,
        "messages": [],
        "tool_calls": [{"error": "x" if i < errors else None, "latency_s": 0.1} for i in range(calls)],
        "turns": 2,
        "stop_reason": "answer",
        "row": {"solution": "x"},
        "rewards": {"em": em, "total": em + 0.5},
        "metrics": {"em": em, "f1": em, "tool_calls": calls, "tool_errors": errors},
    }


def as_logged(row: dict[str, Any]) -> dict[str, Any]:
    """What a log line holds of its dataset row: the question and the other columns."""
    columns = {k: v for k, v in row.items() if k != "messages"}
    return {"question": row["messages"][-1]["content"], "row": columns}


def logged(rows: list[dict[str, Any]], index: int, sample: int, em: float) -> dict[str, Any]:
    """The log line of a finished episode of ``rows[index]``."""
    return {**record(index, sample, em), **as_logged(rows[index])}


def failed(index: int, sample: int, row: dict[str, Any] | None = None) -> dict[str, Any]:
    """The log line of an episode (of ``row``, when given) that failed on every attempt."""
    line = {"index": index, "sample": sample, "question": "q", "row": {"solution": "x"}, "failed": True}
    line["error"] = "HTTP 401"
    return {**line, **as_logged(row)} if row is not None else line


def test_summarize_pass_at_k():
    records = [record(0, 0, 1.0), record(0, 1, 0.0), record(1, 0, 0.0, calls=2, errors=1), record(1, 1, 0.0)]
    metrics = summarize(records, samples=2)
    assert metrics["pass@2"] == 0.5 and metrics["pass@1"] == 0.25 and metrics["em"] == 0.25
    assert metrics["reward"] == 0.75 and metrics["reward/em"] == 0.25
    assert metrics["tool_calls"] == 1.25 and metrics["tool_error_rate"] == 0.2
    single = summarize([record(0, 0, 1.0, calls=0), record(1, 0, 0.0, calls=0)], samples=1)
    assert single["pass@1"] == 0.5 and "pass@2" not in single and single["tool_error_rate"] is None


def test_summarize_groups_splits_by_a_dataset_column():
    rows = [{"hops": 1}, {"hops": 2}, {"hops": 1}, {}]
    records = [record(0, 0, 1.0), record(0, 1, 1.0), record(1, 0, 0.0, calls=2), record(1, 1, 1.0, calls=2)]
    records += [record(2, 0, 0.0), record(2, 1, 0.0), record(3, 0, 1.0, calls=0), record(3, 1, 1.0, calls=0)]
    groups = summarize_groups(records, dict(enumerate(rows)), "hops", samples=2)
    assert list(groups) == ["1", "2", "None"]
    assert groups["1"]["questions"] == 2 and groups["1"]["em"] == 0.5 and groups["1"]["pass@2"] == 0.5
    assert groups["2"]["em"] == 0.5 and groups["2"]["tool_calls"] == 2.0 and groups["2"]["pass@2"] == 1.0
    assert groups["None"]["em"] == 1.0 and groups["None"]["tool_calls"] == 0.0


def test_eval_log_drops_a_torn_last_line(tmp_path: Path):
    log = EvalLog(tmp_path / "trajectories.jsonl")
    log.append(record(0, 0, 1.0))
    with open(log.path, "a") as f:
        f.write('{"index": 0, "sample": 1, "mess')  # killed mid-write
    assert list(log.load()) == [(0, 0)]
    log.append(record(0, 1, 0.0))
    assert list(log.load()) == [(0, 0), (0, 1)]
    rows = [{"messages": [{"role": "user", "content": "q"}]}] * 2
    assert [(t.index, t.sample) for t in pending_tasks(dict(enumerate(rows)), 2, log.load())] == [
        (1, 0),
        (1, 1),
    ]


def test_a_line_torn_further_up_the_log_is_skipped_and_its_episode_run_again(tmp_path: Path, caplog):
    """A writer killed mid-line, then another run appending after it, leaves a torn line inside the log:
    a resume skips it (with a warning naming it) and runs that episode again; the episodes after it stand,
    and the trajectory reader skips it too."""
    from swift_rlfactory.cli import main

    dataset = write_dataset(tmp_path / "test.jsonl", [(3, 4), (2, 5)])
    out = tmp_path / "out"
    log = out / "trajectories.jsonl"
    with scripted_server() as server:
        argv = served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, out)
        assert main(argv) == 0
        # episodes finish in any order: question 0's line, wherever it is, torn; question 1's after it
        lines = sorted(log.read_text().splitlines(keepends=True), key=lambda line: json.loads(line)["index"])
        log.write_text(lines[0][: len(lines[0]) // 2] + "\n" + lines[1])
        server.requests[:] = []
        assert main(argv) == 0
    assert {r["messages"][-1]["content"] for r in server.requests} == {"What is 3 + 4?", "7"}  # 0 alone
    assert (
        f"{log}: skipped 1 lines that are not evaluation records" in caplog.text and "line 1:" in caplog.text
    )
    assert json.loads((out / "metrics.json").read_text())["episodes"] == 2
    assert sorted(r["index"] for r in read_trajectories(log)) == [0, 1]  # the torn line skipped
    assert f"{log}: skipped 1 lines that are not JSON" in caplog.text


def test_a_torn_eval_config_is_named_not_a_bare_json_error(tmp_path: Path, capsys):
    """``eval_config.json`` is now written beside itself and moved into place; one torn before that (or
    edited by hand) stops the resume naming the file, not with json's bare "Expecting value"."""
    from swift_rlfactory.cli import main

    dataset = write_dataset(tmp_path / "test.jsonl", [(3, 4)])
    out = tmp_path / "out"
    with scripted_server() as server:
        argv = served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, out)
        assert main(argv) == 0
        assert sorted(p.name for p in out.iterdir()) == [
            ".lock",
            "eval_config.json",
            "metrics.json",
            "trajectories.jsonl",
        ]
        config = out / "eval_config.json"
        config.write_text(config.read_text()[:40])
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{config}: not the settings this folder's results were scored with" in err, err


def test_load_rows_reads_both_dataset_shapes(tmp_path: Path):
    path = tmp_path / "mixed.jsonl"
    path.write_text(
        json.dumps({"question": "who wrote hamlet", "golden_answers": ["Shakespeare", "William Shakespeare"]})
        + "\n"
        + json.dumps({"messages": [{"role": "user", "content": "2+2?"}], "solution": "4"})
        + "\n"
    )
    rows = load_rows(path)
    assert rows[0]["messages"] == [{"role": "user", "content": "who wrote hamlet?"}]
    assert rows[0]["golden_answers"] == ["Shakespeare", "William Shakespeare"]
    assert rows[1]["solution"] == "4" and load_rows(path, limit=1) == rows[:1]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "torn.jsonl",
            '{"question": "b", golden',
            r"no row can be scored: line 1: not valid JSON",
        ),
        (
            "list.jsonl",
            "[1, 2]\n",
            r"no row can be scored: a record is a JSON object, got int \(2 rows: record 1",
        ),
        (
            "messages.jsonl",
            '{"messages": "hi"}\n',
            r"no row can be scored: line 1: 'messages' must be a list",
        ),
        (
            "dict.json",
            '{"question": "a"}',
            r"a \.json dataset is a list of records or SQuAD's \{\"data\": \[\.\.\.\]\}, got dict with keys \['question'\]",
        ),
        ("number.jsonl", '{"question": "a", "golden_answers": 7}\n', None),  # a number is an answer
        ("folder.jsonl", None, r"cannot read the dataset: Is a directory"),
    ],
)
def test_load_rows_names_the_file_and_record_of_a_bad_row(tmp_path: Path, name, text, message):
    path = tmp_path / name
    path.mkdir() if text is None else path.write_text(text)
    if message is None:
        assert load_rows(path)[0]["golden_answers"] == ["7"]
        return
    with pytest.raises(ValueError, match=rf"{name}: {message}"):
        load_rows(path)


def test_context_check_stops_before_the_budget():
    class Policy:
        max_length, max_tokens = 100, 20

        @staticmethod
        def count_tokens(text: str) -> int:
            return len(text.split())

    class Episode:
        tokens_used = 60

        async def generate(self, messages):
            return Generation("")

    fits = context_check(Policy(), Episode())
    history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "call"}]
    assert fits(history + [{"role": "tool", "content": "a b c"}])  # 60 + 3 + 12 + 20 = 95
    assert not fits(history + [{"role": "tool", "content": "a b c d e f g h i"}])  # 60 + 9 + 12 + 20 = 101


def test_select_stratifies_the_mixed_rows_over_columns(tmp_path: Path, capsys):
    from swift_rlfactory.cli import main

    # 30 two-hop and 6 single-hop mixed questions, 4 always solved: a plain select is mostly two-hop.
    rows = [
        {"messages": [{"role": "user", "content": f"q{i}"}], "solution": "a", "hops": 2 if i < 30 else 1,
         "family": "cloze" if i % 2 else "definition"}
        for i in range(40)
    ]  # fmt: skip
    dataset = tmp_path / "pool.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    log = EvalLog(tmp_path / "run" / "trajectories.jsonl")
    log.path.parent.mkdir()
    for index in range(40):
        for sample, em in enumerate((1.0, 0.0 if index < 36 else 1.0)):
            log.append(logged(rows, index, sample, em))
    out = tmp_path / "grpo.jsonl"
    args = ["select", "--eval", str(tmp_path / "run"), "--dataset", str(dataset), "--out", str(out)]
    assert main([*args, "--stratify", "hops,family", "--per-stratum", "3"]) == 0
    kept = load_rows(out)
    strata = [(r["hops"], r["family"]) for r in kept]
    assert sorted(set(strata)) == [(1, "cloze"), (1, "definition"), (2, "cloze"), (2, "definition")]
    assert all(strata.count(s) == 3 for s in set(strata)) and len(kept) == 12
    assert all(int(r["messages"][0]["content"][1:]) < 36 for r in kept)  # still only mixed rows
    assert [r for r in rows if r in kept] == kept  # dataset order kept
    assert main([*args, "--stratify", "hops,topic", "--per-stratum", "3"]) == 2
    assert main([*args, "--stratify", "hops"]) == 2
    assert "--stratify and --per-stratum go together" in capsys.readouterr().err


def test_a_second_eval_of_one_folder_is_refused_and_select_leaves_a_live_log_alone(local_runs, capsys):
    from swift_rlfactory.cli import main
    from swift_rlfactory.eval.command import _lock_output
    from swift_rlfactory.eval.select import select

    out = local_runs["out"]
    dataset = out.parent / "test.jsonl"
    held = _lock_output(out)  # a run writing this folder now
    try:
        with scripted_server() as server:  # it answers the start-up check; the folder is refused after it
            assert main(served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, out)) != 0
        assert "another swift-rlfactory eval is writing there" in capsys.readouterr().err
        log = out / "trajectories.jsonl"
        whole = log.read_bytes()
        log.write_bytes(whole + b'{"index": 0, "sample": 9, "half')  # the other run's line, half written
        select(out, dataset, out.parent / "kept.jsonl")
        assert log.read_bytes().endswith(b'"half')  # not cut: only the lock holder repairs
        log.write_bytes(whole)
    finally:
        held.close()


def tool_children() -> list[str]:
    """The command lines of this process's living children (the MCP servers an environment spawned)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == os.getpid() and fields[0] != "Z":
                found.append((stat.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except (OSError, IndexError, ValueError):
            continue  # gone while we looked
    return found


def test_every_way_out_of_an_eval_closes_its_environment(tmp_path: Path, capsys):
    """An environment holds a thread, the tool cache and, once started, its MCP servers (the agent env's
    is a real subprocess): a run that ends, one with nothing left to run and one refused after the
    environment loaded (other settings, a folder another eval holds) each close it. Only a dataset error
    used to, so every resumed or refused eval of a long sweep left a thread and a cache open."""
    import threading

    from swift_rlfactory.cli import main
    from swift_rlfactory.eval.command import _lock_output

    def tool_threads() -> int:
        return sum(1 for t in threading.enumerate() if t.name == "rlfactory-tools")

    before = tool_threads()
    dataset = write_dataset(tmp_path / "test.jsonl", [(3, 4)])
    out = tmp_path / "out"
    with scripted_server() as server:
        argv = served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, out)
        assert main(argv) == 0  # ran: the MCP server was started for it
        assert read_trajectories(out / "trajectories.jsonl")[0]["tool_calls"]
        assert main(argv) == 0 and "skipped 1 of 1 episodes" in capsys.readouterr().out  # nothing to run
        assert main([*argv, "--temperature", "0.5"]) == 2  # other settings: refused
        with _lock_output(out):
            assert main(argv) == 2  # another eval is writing there
    assert "another swift-rlfactory eval is writing there" in capsys.readouterr().err
    assert tool_threads() == before
    assert not [c for c in tool_children() if "unit_converter" in c]


# -- failed episodes -----------------------------------------------------------------------------------
def test_a_failed_episode_is_logged_counts_as_zero_and_is_retried_on_resume(tmp_path: Path, capsys):
    """Every question counts: an episode the endpoint refuses (a 400 for context length) is a line of the
    log with its error, scores 0 in the averages, and is the one episode the next run asks again."""
    from starlette.responses import JSONResponse

    from swift_rlfactory.cli import main

    key = "sk-eval-failed-1f2e3d"
    refusing = [True]  # the first run's server refuses one question; the second's answers it

    def too_long(body: dict[str, Any]) -> Any:
        if refusing[0] and "2 + 5" in body["messages"][-1]["content"]:
            error = f"maximum context length is 4096 tokens (request of Bearer {key})"
            return JSONResponse({"error": error}, status_code=400)
        return add_then_answer(body)

    dataset = write_dataset(tmp_path / "test.jsonl", [(3, 4), (2, 5)])
    out = tmp_path / "out"
    with ScriptedChat(too_long) as server:
        argv = served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, out, "--api-key", key)
        assert main(argv) == 1
        lines = read_trajectories(out / "trajectories.jsonl")
        [done] = [r for r in lines if r["index"] == 0]
        [broken] = [r for r in lines if r["index"] == 1]
        assert broken["failed"] is True and broken["sample"] == 0 and broken["question"] == "What is 2 + 5?"
        assert "400" in broken["error"] and "maximum context length" in broken["error"]
        assert key not in (out / "trajectories.jsonl").read_text()
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["episodes"] == 2 and metrics["failed_episodes"] == 1
        assert metrics["em"] == 0.5 and metrics["pass@1"] == 0.5
        assert metrics["reward"] == pytest.approx(done["rewards"]["total"] / 2)
        assert metrics["tool_calls"] == 1.0  # tool use is the finished trajectories' (a failed one has none)
        capsys.readouterr()

        refusing[0], server.requests[:] = False, []
        assert main(argv) == 0
    assert "skipped 1 of 2 episodes" in capsys.readouterr().out
    assert [r["messages"][-1]["content"] for r in server.requests] == [
        "What is 2 + 5?",
        "7",
    ]  # only the failed
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["episodes"] == 2 and metrics["failed_episodes"] == 0 and metrics["em"] == 1.0


def test_summarize_counts_a_failed_episode_as_a_wrong_answer():
    records = [record(0, 0, 1.0, calls=2), failed(0, 1), failed(1, 0), record(1, 1, 0.0, calls=0)]
    metrics = summarize(records, samples=2)
    assert metrics["episodes"] == 4 and metrics["failed_episodes"] == 2 and metrics["questions"] == 2
    assert metrics["em"] == metrics["f1"] == 0.25 and metrics["reward"] == (1.5 + 0.5) / 4
    assert metrics["reward/em"] == 0.25 and metrics["pass@2"] == 0.5 and metrics["pass@1"] == 0.25
    assert metrics["tool_calls"] == 1.0 and metrics["turns"] == 2.0  # over the two finished trajectories
    alone = summarize([failed(0, 0)], samples=1)
    assert alone["em"] == 0.0 and alone["pass@1"] == 0.0 and alone["tool_calls"] == 0.0
    assert alone["failed_episodes"] == 1 and alone["tool_error_rate"] is None


def test_select_scores_questions_by_their_finished_samples_only(tmp_path: Path):
    rows, dataset, log = select_pool(tmp_path, 3)
    log.append(logged(rows, 0, 0, 1.0))
    log.append(failed(0, 1, rows[0]))  # not a wrong answer: q0 is always solved when it is answered
    log.append(logged(rows, 1, 0, 1.0))
    log.append(logged(rows, 1, 1, 0.0))
    log.append(failed(2, 0, rows[2]))
    log.append(failed(2, 1, rows[2]))  # never answered: not scored
    from swift_rlfactory.eval.select import select

    assert select(tmp_path / "run", dataset, tmp_path / "grpo.jsonl") == (1, 2)
    assert load_rows(tmp_path / "grpo.jsonl") == [rows[1]]


# -- changed rows --------------------------------------------------------------------------------------
def test_a_row_whose_golden_answers_changed_is_run_again(tmp_path: Path, capsys):
    """Resume knows a row by its question and its golden answers (every column a reward reads): a fixed
    answer under the same question re-runs that question, and its old score no longer counts."""
    from swift_rlfactory.cli import main

    dataset = write_dataset(tmp_path / "test.jsonl", [(3, 4), (2, 5)])
    out = tmp_path / "out"
    with scripted_server() as server:
        argv = served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, out)
        assert main(argv) == 0
        assert json.loads((out / "metrics.json").read_text())["em"] == 1.0
        rows = load_rows(dataset)
        rows[1]["solution"] = "8"  # the reference of 2 + 5, now wrong: the model's 7 no longer matches
        dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
        capsys.readouterr()
        server.requests[:] = []
        assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "skipped 1 of 2 episodes" in printed and "running 1 episodes again" in printed
    assert [r["messages"][-1]["content"] for r in server.requests] == ["What is 2 + 5?", "7"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["episodes"] == 2 and metrics["em"] == 0.5  # the old 1.0 of question 1 is not counted
    latest = EvalLog(out / "trajectories.jsonl").load()[(1, 0)]
    assert latest["row"]["solution"] == "8" and latest["metrics"]["em"] == 0.0


def test_a_row_keeps_its_position_in_the_file_when_rows_before_it_are_skipped_or_fixed(tmp_path, capsys):
    """An episode's ``index`` is its row's position in the file, skipped rows counted: fix a bad line and
    resume, and that row runs while the rows after it keep their results (and the per-split report)."""
    from swift_rlfactory.cli import main

    good = [
        json.loads(line)
        for line in write_dataset(tmp_path / "rows.jsonl", [(3, 4), (2, 5), (1, 1)]).read_text().splitlines()
    ]
    for row, split in zip(good, ["mine", "mine", "nq"], strict=True):
        row["split"] = split
    lines = [json.dumps(row) for row in good]
    dataset = tmp_path / "test.jsonl"
    dataset.write_text("\n".join([lines[0], "", lines[1][:-9], lines[2]]) + "\n")  # a blank and a torn line
    out = tmp_path / "out"
    with scripted_server() as server:
        argv = served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, out, "--group-by", "split")
        assert main(argv) == 0
        first = read_trajectories(out / "trajectories.jsonl")
        assert sorted((r["index"], r["question"]) for r in first) == [
            (0, "What is 3 + 4?"),
            (2, "What is 1 + 1?"),
        ]
        assert json.loads((out / "metrics.json").read_text())["skipped_rows"] == 1
        dataset.write_text("\n".join([lines[0], "", lines[1], lines[2]]) + "\n")  # the torn line fixed
        capsys.readouterr()
        server.requests[:] = []
        assert main(argv) == 0, capsys.readouterr().out
    printed = capsys.readouterr().out
    assert "skipped 2 of 3 episodes" in printed
    assert [r["messages"][-1]["content"] for r in server.requests] == ["What is 2 + 5?", "7"]
    done = EvalLog(out / "trajectories.jsonl").load()
    assert {i: r["question"] for (i, _), r in done.items()} == {
        0: "What is 3 + 4?",
        1: "What is 2 + 5?",
        2: "What is 1 + 1?",
    }
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["episodes"] == 3 and metrics["em"] == 1.0 and metrics["skipped_rows"] == 0
    assert {k: v["questions"] for k, v in metrics["by_split"].items()} == {"mine": 2, "nq": 1}


def test_select_leaves_out_a_row_changed_since_its_eval(tmp_path: Path):
    """Scores of a row whose golden answers changed after the eval are of another question: unscored."""
    from swift_rlfactory.eval.select import select

    rows = [{"messages": [{"role": "user", "content": f"q{i}"}], "solution": "a"} for i in range(2)]
    log = EvalLog(tmp_path / "run" / "trajectories.jsonl")
    log.path.parent.mkdir()
    for index in range(2):
        log.append(logged(rows, index, 0, 1.0))
        log.append(logged(rows, index, 1, 0.0))
    rows[1]["solution"] = "b"
    dataset = tmp_path / "pool.jsonl"
    dataset.write_text("".join(json.dumps(row) + "\n" for row in rows))
    assert select(tmp_path / "run", dataset, tmp_path / "grpo.jsonl") == (1, 1)
    assert load_rows(tmp_path / "grpo.jsonl") == [rows[0]]


# -- the served model's requests -----------------------------------------------------------------------
@pytest.mark.parametrize("status", [429, 503])
def test_a_busy_server_is_asked_again_after_its_retry_after(status: int):
    """The server says when to come back (2 s); the back-off alone would have asked again after 1 s."""
    import asyncio

    from starlette.responses import JSONResponse

    from swift_rlfactory.eval.openai_client import OpenAIChatPolicy

    seen: list[float] = []

    def busy_once(body: dict[str, Any]) -> Any:
        seen.append(time.monotonic())
        if len(seen) == 1:
            return JSONResponse({"error": "busy"}, status_code=status, headers={"Retry-After": "2"})
        return "<answer>7</answer>"

    with ScriptedChat(busy_once) as server:
        policy = OpenAIChatPolicy(f"http://127.0.0.1:{server.port}/v1", "m")

        async def ask() -> dict[str, Any]:
            try:
                return await policy.complete([{"role": "user", "content": "What is 3 + 4?"}])
            finally:
                await policy.aclose()

        reply = asyncio.run(ask())
    assert reply["choices"][0]["message"]["content"] == "<answer>7</answer>"
    assert len(seen) == 2 and seen[1] - seen[0] >= 1.9


def test_timeout_bounds_each_request_attempt(tmp_path: Path):
    """``--timeout 0.5``: a first answer that takes 1.2 s is given up on and asked again, and the run ends."""
    from swift_rlfactory.cli import main

    def slow_first(body: dict[str, Any]) -> str:
        if len(server.requests) == 1:
            time.sleep(1.2)  # holds the server's loop, over by the time the retry comes (after 0.5 + 1 s)
        return add_then_answer(body)

    dataset = write_dataset(tmp_path / "test.jsonl", [(3, 4)])
    with ScriptedChat(slow_first) as server:
        argv = served_eval(
            f"http://127.0.0.1:{server.port}/v1", dataset, tmp_path / "out", "--timeout", "0.5"
        )
        assert main(argv) == 0
    first, retry, second_turn = server.requests  # at the default 600 s the first answer is waited for
    assert first == retry and second_turn["messages"][-1] == {"role": "tool", "content": "7"}


def test_eval_log_replaces_recorded_secrets_in_trajectories_not_in_the_dataset_text(tmp_path: Path):
    """A tool that echoes the key it was given: the eval log keeps it out, as training's log does, while
    ``question`` and ``row`` stay as the dataset has them, so resume still recognises the line."""
    from swift_rlfactory import redaction

    key = "sk-eval-7f3c2a9be41d"
    redaction.remember(key, "${SEARCH_KEY}")
    log = EvalLog(tmp_path / "trajectories.jsonl")
    row = {"solution": "a"}
    log.append(
        {
            **record(0, 0, 1.0),
            "question": "q",
            "row": row,
            "messages": [{"role": "tool", "content": f"401 for key {key}"}],
            "tool_calls": [{"observation": f"401 for key {key}", "latency_s": 0.1}],
        }
    )
    assert key not in log.path.read_text()
    (line,) = log.load().values()
    assert line["messages"][0]["content"] == "401 for key ${SEARCH_KEY}"
    assert line["question"] == "q" and line["row"] == row


def add_then_answer_in_xml(body: dict[str, Any]) -> str:
    """:func:`add_then_answer` as Qwen3.5 writes its calls."""
    last = body["messages"][-1]
    if last["role"] == "user":
        a, b = map(int, re.findall(r"\d+", last["content"]))
        params = f"<parameter=a>\n{a}\n</parameter>\n<parameter=b>\n{b}\n</parameter>\n"
        return f"<tool_call>\n<function=add>\n{params}</function>\n</tool_call>"
    return f"<answer>{last['content']}</answer>"


def test_eval_with_a_template_parses_the_calls_its_prompt_asks_for(tmp_path: Path, capsys):
    """``--template qwen3_5`` tells the served model to write XML calls, and they run (typed by the
    tool's schema); a template whose calls would be read as answers stops the run before any request."""
    from swift_rlfactory.cli import main

    dataset = write_dataset(tmp_path / "test.jsonl", [(3, 4)])
    with ScriptedChat(add_then_answer_in_xml) as server:
        base = f"http://127.0.0.1:{server.port}/v1"
        code = main(served_eval(base, dataset, tmp_path / "out", "--template", "qwen3_5"))
        printed = capsys.readouterr().out
        assert code == 0, printed
        [record] = read_trajectories(tmp_path / "out" / "trajectories.jsonl")
        assert [(c["tool"], c["arguments"], c["observation"]) for c in record["tool_calls"]] == [
            ("add", {"a": 3, "b": 4}, "7")
        ]
        assert "<function=example_function_name>" in server.requests[0]["messages"][0]["content"]
        assert record["messages"][-1]["content"] == "<answer>7</answer>"

        asked = len(server.requests)
        code = main(served_eval(base, dataset, tmp_path / "refused", "--template", "mistral_2512"))
        printed = capsys.readouterr().err
        assert code == 2 and "template 'mistral_2512': agent template 'mistral'" in printed, printed
        assert len(server.requests) == asked  # refused before asking the model anything


@pytest.mark.parametrize(
    "arguments, expected",
    [
        ('{"a": 3, "b": "x\\n<y>"}', {"a": 3, "b": "x\n<y>"}),
        ({"a": [1, 2]}, {"a": [1, 2]}),
        ("{broken", None),
    ],
)
def test_calls_a_server_parsed_are_written_back_in_the_format_of_the_template(arguments, expected):
    from swift_rlfactory.eval.openai_client import _written
    from swift_rlfactory.tools.calls import call_parser

    properties = {"a": {"type": ["array", "integer"]}, "b": {"type": "string"}}
    tools = [{"name": "add", "parameters": {"properties": properties}}]
    text = _written({"function": {"name": "add", "arguments": arguments}}, "qwen3_coder")
    [call] = call_parser("qwen3_coder", tools)(text)
    if expected is None:  # unreadable arguments are an error call, never an answer
        assert call.error is not None
    else:
        assert (call.name, call.arguments, call.error) == ("add", expected, None)


def test_held_back_files_in_public_formats_are_scored_as_their_own_splits(tmp_path: Path, capsys):
    """An outside suite's question files (TriviaQA, MuSiQue as ``.jsonl.gz``), merged beside ours by
    ``eval_sets.py`` and scored by a served model: each is its own split, and an answer that is only one
    of the file's aliases (``7`` for "seven") is right, not a silent 0."""
    import gzip

    from swift_rlfactory.cli import main

    ours = write_dataset(tmp_path / "test.jsonl", [(3, 4)])
    trivia = tmp_path / "trivia.jsonl"
    trivia.write_text(
        json.dumps({"Question": "What is 2 + 5?", "Answer": {"Value": "seven", "Aliases": ["7"]}})
    )
    musique = tmp_path / "musique_dev.jsonl.gz"
    row = {"id": "2hop__1", "question": "What is 6 + 1?", "answer": "seven", "answer_aliases": ["7"]}
    musique.write_bytes(gzip.compress(json.dumps(row).encode()))
    merged = tmp_path / "sets.jsonl"
    subprocess.run(
        [sys.executable, "examples/deepsearch/eval_sets.py", str(merged), str(ours), str(trivia), str(musique)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True, capture_output=True,
    )  # fmt: skip
    with scripted_server() as server:
        argv = served_eval(
            f"http://127.0.0.1:{server.port}/v1", merged, tmp_path / "out", "--group-by", "split"
        )
        assert main(argv) == 0, capsys.readouterr().out
    by_split = json.loads((tmp_path / "out" / "metrics.json").read_text())["by_split"]
    assert {name: (m["questions"], m["em"]) for name, m in by_split.items()} == {
        "test": (1, 1.0), "trivia": (1, 1.0), "musique_dev": (1, 1.0),
    }  # fmt: skip


def test_a_rows_own_tools_column_is_cut_to_the_description_cap_with_one_warning(tmp_path: Path, caplog):
    """A row's ``tools`` column replaces the environment's tools in the prompt the eval renders; its
    descriptions are cut to ``limits.max_description_chars`` as the environment's are, and a warning
    names the tool once, however many rows hold it."""
    from swift_rlfactory.cli import main

    (tmp_path / "env.yaml").write_text(
        f"system_prompt: Use the tools, then answer in <answer></answer>.\n"
        f"tools: {{python: [{ROOT / 'tests' / 'environments' / 'agent' / 'tools.py'}]}}\n"
        "limits: {max_turns: 3, max_description_chars: 300}\nreward: [{name: em}]\n"
    )
    long, term = "A" * 10_000, "B" * 5_000
    parameters = {
        "type": "object",
        "properties": {"a": {"type": "integer", "description": term}, "b": {"type": "integer"}},
    }
    tools = [{"type": "function", "function": {"name": "add", "description": long, "parameters": parameters}}]
    dataset = write_dataset(tmp_path / "test.jsonl", [(3, 4), (2, 5)])
    rows = [json.loads(line) for line in dataset.read_text().splitlines()]
    dataset.write_text("".join(json.dumps({**row, "tools": json.dumps(tools)}) + "\n" for row in rows))
    with scripted_server() as server, caplog.at_level("WARNING"):
        argv = served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, tmp_path / "out")
        argv[argv.index("--env") + 1] = str(tmp_path / "env.yaml")
        assert main(argv) == 0
    systems = [r["messages"][0]["content"] for r in server.requests if r["messages"][-1]["role"] == "user"]
    assert len(systems) == 2
    for system in systems:
        assert long not in system and term not in system
        assert f"{'A' * 300} [description cut: 10000 characters, the first 300 shown]" in system
        assert f"{'B' * 300} [description cut: 5000 characters, the first 300 shown]" in system
    warned = [r.getMessage() for r in caplog.records if "max_description_chars" in r.getMessage()]
    assert len(warned) == 1 and "'add'" in warned[0] and "tools column" in warned[0], warned
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["em"] == 1.0  # the tool still runs: only the prose was cut


def test_eval_into_a_file_prints_its_progress_as_lines(tmp_path: Path, capsys):
    """Output to a file or a pipe shows no live bar until the end: one plain line per finished episode
    here (every twentieth of a longer run), as ``train`` prints its phases."""
    from swift_rlfactory.cli import main

    dataset = write_dataset(tmp_path / "q.jsonl", AGENT_PAIRS[:3])
    with scripted_server() as server:
        code = main(served_eval(f"http://127.0.0.1:{server.port}/v1", dataset, tmp_path / "out"))
    printed = capsys.readouterr().out
    assert code == 0, printed
    lines = re.findall(r"^ +episodes (\d+)/3 · EM (\S+) · \d+ s$", printed, re.MULTILINE)
    assert [done for done, _ in lines] == ["1", "2", "3"], printed
    assert lines[-1][1] == "1.000"


def test_the_results_table_names_the_adapter_scored(tmp_path: Path):
    from swift_rlfactory.eval.command import EvalOptions, results_title

    checkpoint = tmp_path / "v0-20261206-101500" / "checkpoint-100"
    options = EvalOptions(env=AGENT_ENV, dataset=Path("test.jsonl"), output=tmp_path, model="Qwen/Qwen3-4B")
    assert results_title(options) == "test.jsonl · Qwen3-4B"
    options.adapters = str(checkpoint)
    assert results_title(options) == "test.jsonl · Qwen3-4B + v0-20261206-101500/checkpoint-100"


@pytest.mark.timeout(300)
def test_a_local_model_runs_in_float32_on_the_cpu(agent_model: Path, tmp_path: Path):
    """A checkpoint saved in bfloat16 (as most are) is evaluated in float32 on a CPU, as training there
    runs: bfloat16 on a CPU is several times slower (issue 33: ~64 s an episode)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from swift_rlfactory.adapters.swift_infer import SwiftPolicy

    assert not torch.cuda.is_available()
    model = AutoModelForCausalLM.from_pretrained(agent_model, dtype=torch.bfloat16)
    model.save_pretrained(tmp_path / "bf16")
    AutoTokenizer.from_pretrained(agent_model).save_pretrained(tmp_path / "bf16")
    assert json.loads((tmp_path / "bf16" / "config.json").read_text())["dtype"] == "bfloat16"
    policy = SwiftPolicy.load(str(tmp_path / "bf16"), model_type="qwen3", template="qwen3", max_tokens=8)
    assert policy.engine.model.dtype == torch.float32
