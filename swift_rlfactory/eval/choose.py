"""Choose one checkpoint from the evals of several: by EM, or by EM under its worst phrasing shift.

``swift-rlfactory eval --adapters A B ... --choose-by worst-shift`` writes the choice to
``OUTPUT/chosen.json``; why the worst shift and not the mean: docs/eval.md#choosing-a-checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from swift_rlfactory.runs.folder import METRICS

CHOOSE_BY = {"em": "em", "worst-shift": "shift/worst/em"}  # --choose-by -> the metrics.json key it ranks
CHOSEN_FILE = "chosen.json"


def choose(folders: Mapping[str, str | Path], by: str = "em") -> dict[str, Any]:
    """The best of several checkpoints (name -> its eval folder, which holds a ``metrics.json``) by
    ``CHOOSE_BY[by]``, ties to the higher EM, then to the earlier checkpoint: ``{"by", "checkpoint",
    "score", "scores"}``, ``scores`` by checkpoint in the order given (``None`` for one that has no such
    score).

    Raises ``ValueError`` for an unknown ``by``, or when no folder has the score (``worst-shift`` of
    evals run without ``--shifts``, or whose shifts applied to no question).
    """
    if by not in CHOOSE_BY:
        raise ValueError(f"--choose-by {by!r}: use one of {', '.join(CHOOSE_BY)}")
    metrics = {name: _metrics(Path(folder)) for name, folder in folders.items()}
    scores = {name: m.get(CHOOSE_BY[by]) for name, m in metrics.items()}
    ranked = [
        (score, metrics[name].get("em") or 0.0, -i, name)
        for i, (name, score) in enumerate(scores.items())
        if score is not None
    ]
    if not ranked:
        raise ValueError(f"--choose-by {by}: no eval holds {CHOOSE_BY[by]!r} (run them with --shifts)")
    score, _, _, best = max(ranked)
    return {"by": by, "checkpoint": best, "score": score, "scores": scores}


def _metrics(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / METRICS).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{folder}: no eval's metrics.json to choose by ({exc})") from None
