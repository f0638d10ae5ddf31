"""The GRPO curves the booking and customer-service summaries draw (benchmarks/seed_curves.py): one line per
seed, a resumed seed's logs joined, lines without a step left out."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT / "benchmarks"))

import seed_curves  # noqa: E402


def write(path: Path, steps: range, **metrics: float) -> None:
    rows = [{"reward": 1.0, "global_step/max_steps": f"{s}/60", **metrics} for s in steps]
    rows.insert(1, {"train_runtime": 12.0})  # a closing line without a step: not a point
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_resumed_seed_is_one_line_and_lines_without_a_step_are_no_points(tmp_path):
    write(tmp_path / "logging-s1-v0-a.jsonl", range(1, 4), success=0.5)
    write(tmp_path / "logging-s1-v1-b.jsonl", range(4, 6))  # resumed; this version logged no success
    write(tmp_path / "logging-s2-v0-a.jsonl", range(1, 6), success=1.0)
    by_seed = seed_curves.step_rows(tmp_path.glob("logging-*.jsonl"), lambda log: log.stem.split("-")[1])
    assert {seed: [r["global_step/max_steps"] for r in rows] for seed, rows in by_seed.items()} == {
        "s1": ["1/60", "2/60", "3/60", "4/60", "5/60"],
        "s2": ["1/60", "2/60", "3/60", "4/60", "5/60"],
    }
    png = seed_curves.plot_seeds(tmp_path / "c.png", by_seed, [("reward", "r"), ("success", "s")])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_no_step_lines_draw_nothing(tmp_path):
    (tmp_path / "logging-s1-v0.jsonl").write_text(json.dumps({"train_runtime": 3.0}) + "\n")
    assert seed_curves.step_rows(tmp_path.glob("logging-*.jsonl"), lambda log: "s1") == {}
