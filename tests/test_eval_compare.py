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
