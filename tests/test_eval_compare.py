"""swift_rlfactory.eval.compare: the side-by-side tables say when runs did not score the same questions."""

from __future__ import annotations

import json
from pathlib import Path

from swift_rlfactory.eval import compare


def metrics(splits: dict[str, int], failed: int = 0) -> dict:
    by_split = {name: {"questions": n, "em": 0.5, "tool_calls": 1.0} for name, n in splits.items()}
    return {"em": 0.5, "tool_calls": 1.0, "failed_episodes": failed, "by_split": by_split}


def test_counts_that_differ_and_failed_episodes_are_shown(tmp_path: Path, capsys):
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    base.write_text(json.dumps(metrics({"test": 4, "fr": 5})))
    # new counted fr twice (an extra file merged again), has a split the baseline lacks, lost 3 episodes
    new.write_text(json.dumps(metrics({"test": 4, "fr": 10, "nq": 7}, failed=3)))
    compare.main([f"base={base}", f"new={new}", "--out", str(tmp_path)])
    rows = {
        line.split(" | ")[0].strip("| "): line.split(" | ")[1]
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("| ")
    }
    assert rows["test"] == "4" and rows["fr"] == "base 5, new 10" and rows["nq"] == "7"
    text = (tmp_path / "report.md").read_text()
    assert text.startswith("failed episodes (counted as wrong): new 3\n")


def shifted(em: float, shifts: dict[str, float], alarms: list[dict] | None = None) -> dict:
    out: dict = {"em": em, "tool_calls": 1.0, "questions": 300}
    for name, value in shifts.items():
        out |= {f"shift/{name}/em": value, f"shift/{name}/tool_calls": 1.5, f"shift/{name}/questions": 290}
    worst = min(shifts, key=shifts.__getitem__)
    return out | {"shift/worst/em": shifts[worst], "shift/worst/name": worst, "shift/alarms": alarms or []}


def test_shifts_are_tabled_beside_the_original_with_each_runs_alarms(tmp_path: Path, capsys):
    base, new = tmp_path / "sft.json", tmp_path / "grpo.json"
    base.write_text(json.dumps(shifted(0.8, {"typos": 0.7, "polite": 0.78})))
    alarm = {"shift": "typos", "em": 0.6, "against": "reference", "baseline": 0.7, "margin": 0.05}
    new.write_text(json.dumps(shifted(0.82, {"typos": 0.6, "polite": 0.8}, [alarm])))
    compare.main([f"sft={base}", "--shifts", f"sft={base}", f"grpo={new}", "--out", str(tmp_path)])
    text = (tmp_path / "report.md").read_text()
    assert text == capsys.readouterr().out
    rows = {
        line.split(" | ")[0].strip("| "): line.split(" | ")[1:]
        for line in text.splitlines()
        if line.startswith("| ")
    }
    assert rows["original"][:3] == ["300", "0.800", "0.820 (+0.020)"]
    assert rows["typos"][:5] == ["290", "0.700", "0.600 (-0.100)", "1.50", "1.50 |"]
    assert "worst" not in rows and "polite" in rows
    assert "grpo: worst shift typos (0.600)" in text
    assert "- ALARM typos: EM 0.600, 0.100 below the reference's 0.700 (margin 0.05)" in text
    assert "sft: worst shift typos (0.700)" in text and text.count("ALARM") == 1
