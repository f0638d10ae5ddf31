"""Readers of a run's logs hold memory bounded by a constant, not by the log (``docs/run-folder.md``, "How
readers stream"): each runs in a process of its own on a ~60 MB log and on a tiny one, and its peak
resident memory may grow by a fraction of the log's size only (the old readers held it several times)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

from swift_rlfactory.rewards.rescore import Recorded, batches, load_recorded
from swift_rlfactory.trajectory import Trajectory

ROOT = Path(__file__).resolve().parents[1]
SYSTEM = "You answer questions by searching an encyclopedia. " * 40  # ~2 KB a line, as recorded runs


def training_line(step: int, prompt: int, sample: int) -> str:
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"question {step}-{prompt}"},
        {"role": "assistant", "content": f"<answer>{sample}</answer>"},
    ]
    record = {"step": step, "time": 0.0, "messages": messages, "tool_calls": [], "turns": 1,
              "stop_reason": "answer", "row": {"golden_answers": ["1"]}, "rewards": {"total": 0.0}}  # fmt: skip
    return json.dumps(record) + "\n"


def eval_line(index: int, sample: int = 0) -> str:
    record = {"index": index, "sample": sample, "question": f"question {index}", "row": {"golden_answers": ["a"]},
              "messages": [{"role": "system", "content": SYSTEM}], "tool_calls": [], "turns": 1,
              "stop_reason": "answer", "rewards": {"total": 1.0},
              "metrics": {"em": 1.0, "f1": 1.0, "tool_calls": 0, "tool_errors": 0}}  # fmt: skip
    return json.dumps(record) + "\n"


def write_log(path: Path, megabytes: float, line=training_line) -> float:
    """A training log of about ``megabytes``, 8 groups of 8 a step, the last 3 steps logged again by a
    resumed run; returns its size in MB."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        step, written = 0, 0
        while written < megabytes * 1e6:
            step += 1
            written += sum(f.write(line(step, p, s)) for p in range(8) for s in range(8))
        for again in range(max(1, step - 2), step + 1):
            f.writelines(line(again, p, s) for p in range(8) for s in range(8))
    return path.stat().st_size / 1e6


READERS = {
    "rewards": "from swift_rlfactory.cli import main; assert main(['rewards', ENV, '--trajectories', LOG, '--json']) == 0",
    "summary": (
        "from pathlib import Path; from swift_rlfactory.runs.log import last_step_trajectories; "
        "count, last = last_step_trajectories(Path(LOG)); assert count and len(last) == 64, (count, len(last))"
    ),
    "eval resume": (
        "from swift_rlfactory.runs.eval_log import EvalLog; from swift_rlfactory.eval.runner import resume_fields; "
        "assert EvalLog(LOG).load(keep=resume_fields)"
    ),
}


def peak_mb(reader: str, log: Path, env: Path) -> float:
    """Peak resident memory of a process that runs ``reader`` on ``log``."""
    code = (
        f"ENV, LOG = {str(env)!r}, {str(log)!r}; {READERS[reader]}; import resource; "
        "print('PEAK', resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("PEAK ")]
    return int(line.split()[1]) / 1024


@pytest.mark.parametrize("reader", list(READERS))
def test_a_reader_holds_a_bounded_part_of_a_large_log(tmp_path: Path, reader: str):
    env = tmp_path / "env.yaml"
    env.write_text("reward:\n  - {name: format}\n")
    line = eval_line if reader == "eval resume" else training_line
    small = tmp_path / "small" / "trajectories.jsonl"
    write_log(
        small, 0.2, lambda step, p, s: line(step * 64 + p * 8 + s) if line is eval_line else line(step, p, s)
    )
    big = tmp_path / "big" / "trajectories.jsonl"
    size = write_log(
        big, 60, lambda step, p, s: line(step * 64 + p * 8 + s) if line is eval_line else line(step, p, s)
    )
    grown = peak_mb(reader, big, env) - peak_mb(reader, small, env)
    assert grown < size / 4, f"{reader}: {grown:.0f} MB more for a {size:.0f} MB log"


def test_a_compressed_log_is_rescored_as_it_is_read(tmp_path: Path):
    plain = tmp_path / "trajectories.jsonl"
    write_log(plain, 0.05)
    packed = tmp_path / "trajectories.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert [r.line for r in load_recorded(packed)] == [r.line for r in load_recorded(plain)]


def test_rescoring_batches_never_split_a_step():
    def recorded(step: int | None, question: str) -> Recorded:
        messages = [{"role": "user", "content": question}]
        return Recorded(0, Trajectory(messages=messages), file="log", step=step)

    lines = [recorded(s, "q") for s in (1, 1, 1, 2, 2, 3)]
    assert [[r.step for r in b] for b in batches(lines, size=2)] == [[1, 1, 1], [2, 2], [3]]
    questions = [recorded(None, q) for q in "aaabbc"]  # an eval log: cut between questions
    assert [len(b) for b in batches(questions, size=2)] == [3, 2, 1]


def test_the_viewer_offers_a_page_of_groups_of_a_log_of_50k(tmp_path: Path):
    from swift_rlfactory.ui import page
    from swift_rlfactory.ui.index import GROUPS

    (tmp_path / "trajectories.jsonl").write_text("".join(eval_line(i) for i in range(50_000)))
    table, _, groups, _, note = page._table(str(tmp_path), "all", "all", "", "", "all", False, "")
    assert len(groups["choices"]) <= GROUPS + 1 and "of 50000 trajectories" in note
    _, _, groups, _, _ = page._table(str(tmp_path), "all", "q49999", "", "", "all", False, "")
    assert "q49999" in groups["choices"] and len(groups["choices"]) <= GROUPS + 2  # the group shown stays
