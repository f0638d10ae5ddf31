"""benchmarks/generation/step_requests.py: the requests the generation floor replays, read from trajectories.jsonl."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
from transformers import AutoTokenizer

from .conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks" / "generation"))
from step_requests import read_steps, train_sequence, turn_batches, turn_requests  # noqa: E402


def _load(path: Path):
    """A benchmark script as a module of its own name (several benchmarks have a summarize.py)."""
    spec = importlib.util.spec_from_file_location(f"{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SYSTEM = {"role": "system", "content": "Use the lookup tool, then answer in <answer></answer>."}
CALL = '<tool_call>\n{"name": "lookup", "arguments": {"crate": "crate-0001"}}\n</tool_call>'


def trajectory(step, question: str, tool_turns: int, history: bool = False) -> dict:
    messages = [SYSTEM, {"role": "user", "content": question}]
    if history:  # a dataset row that brought an earlier exchange as chat history
        messages += [
            {"role": "assistant", "content": "Earlier answer."},
            {"role": "user", "content": "Again?"},
        ]
    for _ in range(tool_turns):
        messages += [{"role": "assistant", "content": CALL}, {"role": "tool", "content": "120"}]
    messages.append({"role": "assistant", "content": "<answer>120</answer>"})
    return {"step": step, "messages": messages, "turns": tool_turns + 1, "stop_reason": "answer"}


@pytest.fixture(scope="module")
def tokenizer(qwen3_tokenizer_dir: Path):
    return AutoTokenizer.from_pretrained(qwen3_tokenizer_dir)


def test_a_step_is_replayed_turn_by_turn_with_the_tokens_the_run_wrote(tmp_path, tokenizer):
    lines = [trajectory(1, "a?", 0), trajectory(1, "b?", 2), trajectory(1, "c?", 1), trajectory(2, "d?", 0)]
    lines.append({**trajectory(None, "eval?", 0)})  # an eval line: no step, not part of any update
    path = tmp_path / "trajectories.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))

    steps = read_steps(path)
    assert sorted(steps) == [1, 2] and len(steps[1]) == 3 and len(steps[2]) == 1
    batches = turn_batches(steps[1], tokenizer, max_tokens=256)
    # every trajectory's first turn together, then the two that called a tool, then the one that called twice
    assert [len(b) for b in batches] == [3, 2, 1]
    answer = len(tokenizer("<answer>120</answer>", add_special_tokens=False)["input_ids"]) + 1
    call = len(tokenizer(CALL, add_special_tokens=False)["input_ids"]) + 1
    assert [r.new_tokens for r in batches[0]] == [answer, call, call]
    assert [r.new_tokens for r in batches[2]] == [answer]
    # a later turn's prompt is the earlier one's, plus that turn and its tool result
    first, second = batches[0][1].prompt_ids, batches[1][0].prompt_ids
    assert second[: len(first)] == first and len(second) > len(first) + call
    assert "120" in tokenizer.decode(second[len(first) :])


def test_tokens_are_capped_and_history_is_prompt_not_turns(tokenizer):
    long = trajectory(3, "q?", 0)
    long["messages"][-1]["content"] = "word " * 400
    assert [r.new_tokens for r in turn_requests(long, tokenizer, max_tokens=64)] == [64]

    with_history = trajectory(3, "q?", 1, history=True)
    requests = turn_requests(with_history, tokenizer, max_tokens=256)
    assert len(requests) == 2  # the row's earlier assistant message is part of the prompt, not a turn
    assert "Earlier answer." in tokenizer.decode(requests[0].prompt_ids)


def test_train_sequence_is_the_whole_conversation_and_its_prompt_length(tokenizer):
    row = trajectory(1, "b?", 2)
    ids, prompt = train_sequence(row, tokenizer)
    first_turn = turn_requests(row, tokenizer, max_tokens=256)[0]
    assert prompt == len(first_turn.prompt_ids) and ids[:prompt] == first_turn.prompt_ids
    assert tokenizer.decode(ids[prompt:]).count("120") == 3  # two tool results and the answer


def test_summary_tables_ratio_to_eager_peak_memory_and_generation_over_floor(tmp_path, capsys):
    summarize = _load(ROOT / "benchmarks" / "generation" / "summarize.py")

    colo = tmp_path / "colo"
    (colo / "mem").mkdir(parents=True)
    (tmp_path / "floor").mkdir()

    def log(tag: str, step_s: float, gen_s: float) -> None:
        rows = [
            {
                "step_time": step_s * (3 if i == 1 else 1),
                "timeline/generation_s": gen_s,
                "memory(GiB)": 9.0,
                "global_step/max_steps": f"{i}/3",
                "completions/mean_length": 30,
                "tools/calls_per_trajectory": 0.5,
            }
            for i in (1, 2, 3)
        ]  # step 1 is warm-up: three times slower, left out of the medians
        (colo / f"{tag}_rlfactory-0.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    log("eager", 4.0, 3.0)
    log("graphs", 1.0, 0.5)
    (colo / "mem" / "eager_rlfactory-0.csv").write_text("100\n2000\n1500\n")
    (colo / "mem" / "graphs_rlfactory-0.csv").write_text("2200\n")
    (tmp_path / "phases.tsv").write_text("eager\t0\t0\t30\n")
    steps = {"2": {"floor_s": 0.25}, "3": {"floor_s": 0.5}}
    (tmp_path / "floor" / "gen-graphs.json").write_text(json.dumps({"steps": steps}))
    summarize.main([str(tmp_path)])
    settings, floors = capsys.readouterr().out.split("## Floors")

    def rows(text: str) -> dict[str, list[str]]:
        return {
            line.split(" | ")[0].strip("| "): line.split(" | ")
            for line in text.splitlines()
            if line.startswith("| ")
        }

    eager, graphs = rows(settings)["eager"], rows(settings)["graphs"]
    assert eager[2] == "1.00x" and graphs[2] == "4.00x"  # medians of steps 2-3: 4 s and 1 s
    assert eager[9:11] == ["2000", "9.0"] and graphs[9] == "2200"
    assert eager[11] == "10"  # start-up: 30 s of wall time less the steps (12 + 4 + 4 s)
    generation = rows(floors)["graphs"]  # 0.5 s against floors of 0.25 and 0.5 s: the median of 2x and 1x
    assert [c.strip(" |") for c in generation[2:5]] == ["0.500", "0.375", "1.50"]


def test_tools_table_compares_each_latency_with_sync_and_with_the_zero_latency_step_plus_the_chain(
    tmp_path, capsys
):
    summarize = _load(ROOT / "benchmarks" / "generation" / "summarize.py")
    (tmp_path / "tools").mkdir()

    def log(name: str, steps: list[float], calls: float = 2.0, chain: int = 1) -> None:
        rows = [
            {"step_time": s, "tools/calls_per_trajectory": calls, "tools/max_tool_turns": chain}
            for s in steps
        ]  # the first step is warm-up, left out of the medians
        (tmp_path / "tools" / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    log("lookup_rlfactory-0", [9.0, 1.5, 1.5])
    log("lookup_rlfactory-2", [9.0, 3.3, 3.9, 3.6])
    log("lookup_sync_tools-2", [200.0, 130.0])  # a single timed step
    log("lookup_sync_tools-0.5", [60.0, 34.0, 36.0], calls=1.75)
    log(
        "lookup_server-rlfactory-0", [20.0, 2.0, 2.0]
    )  # server mode: no sync of its own, colocate's is the baseline
    log("lookup_server-rlfactory-2", [20.0, 4.2, 4.6, 4.4])
    summarize.main([str(tmp_path)])
    table = capsys.readouterr().out.split("## tools")[1]
    rows = {
        tuple(c.strip() for c in line.split("|")[1:3]): [c.strip() for c in line.split("|")[1:-1]]
        for line in table.splitlines()
        if line.startswith("| lookup")
    }
    # run, latency, step, generation, tools, train, calls / traj, max tool turns, x sync_tools, step / bound
    assert rows["lookup_rlfactory", "2"][2] == "3.60" and rows["lookup_rlfactory", "2"][6] == "2.00"
    assert (
        rows["lookup_rlfactory", "2"][8] == f"{130 / 3.6:.2f}x"
    )  # sync's step over ours at the same latency
    assert (
        rows["lookup_rlfactory", "2"][9] == f"{3.6 / (1.5 + 2 * 1):.2f}"
    )  # over the 0 s step + 2 s x one turn
    assert rows["lookup_rlfactory", "0"][8:] == ["", ""]  # no sync run at 0 s, no chain at 0 s
    assert rows["lookup_sync_tools", "0.5"][2] == "35.00" and rows["lookup_sync_tools", "0.5"][6] == "1.75"
    assert rows["lookup_server-rlfactory", "2"][8:] == [f"{130 / 4.4:.2f}x", f"{4.4 / (2.0 + 2 * 1):.2f}"]
