"""Choose one checkpoint from the evals of several: by EM, or by EM under its worst phrasing shift.

``swift-rlfactory eval --adapters A B ... --choose-by worst-shift`` writes the choice to
``OUTPUT/chosen.json``; the validation beside training chooses the same way with the starting model as the
incumbent, which a checkpoint must beat by more than the noise of the set. Why the worst shift, and the
noise rule: docs/eval.md#choosing-a-checkpoint.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from swift_rlfactory.runs.eval_log import EvalLog
from swift_rlfactory.runs.folder import METRICS

from .metrics import episode_score, scored_fields
from .robustness import shift_folder

CHOOSE_BY = {"em": "em", "worst-shift": "shift/worst/em"}  # --choose-by -> the metrics.json key it ranks
CHOSEN_FILE = "chosen.json"
CHOOSE_ALPHA = 0.05  # the sign test's level a checkpoint's gain must reach to replace the incumbent


def choose(
    folders: Mapping[str, str | Path],
    by: str = "em",
    incumbent: str | None = None,
    alpha: float = CHOOSE_ALPHA,
) -> dict[str, Any]:
    """The best of several checkpoints (name -> its eval folder, which holds a ``metrics.json``) by
    ``CHOOSE_BY[by]``, ties to the higher EM, then to the incumbent, then to the earlier checkpoint:
    ``{"by", "checkpoint", "score", "scores"}``, ``scores`` by checkpoint in the order given (``None`` for
    one that has no such score).

    ``incumbent`` (one of ``folders``: the starting model, or the model in use) is kept unless the best
    checkpoint also beats it on the questions of the set its score comes from (its worst shift's, or the
    set itself) on more questions than chance allows at level ``alpha``; the test is then under ``"gain"``
    (:func:`paired_gain`) and a kept incumbent is the ``checkpoint``.

    Raises ``ValueError`` for an unknown ``by``, an ``incumbent`` not among ``folders``, or when no folder
    has the score (``worst-shift`` of evals run without ``--shifts``, or whose shifts applied to no question).
    """
    if by not in CHOOSE_BY:
        raise ValueError(f"--choose-by {by!r}: use one of {', '.join(CHOOSE_BY)}")
    if incumbent is not None and incumbent not in folders:
        raise ValueError(f"incumbent {incumbent!r} is none of the evals to choose from")
    metrics = {name: _metrics(Path(folder)) for name, folder in folders.items()}
    scores = {name: m.get(CHOOSE_BY[by]) for name, m in metrics.items()}
    ranked = [
        (score, metrics[name].get("em") or 0.0, name == incumbent, -i, name)
        for i, (name, score) in enumerate(scores.items())
        if score is not None
    ]
    if not ranked:
        raise ValueError(f"--choose-by {by}: no eval holds {CHOOSE_BY[by]!r} (run them with --shifts)")
    score, _, _, _, best = max(ranked)
    chosen: dict[str, Any] = {"by": by, "checkpoint": best, "score": score, "scores": scores}
    if incumbent is None or best == incumbent or scores[incumbent] is None:
        return chosen
    gain = paired_gain(folders[incumbent], folders[best], _scored_set(metrics[best], by), alpha)
    chosen |= {"incumbent": incumbent, "gain": gain}
    if not gain["beats"]:
        chosen |= {"checkpoint": incumbent, "score": scores[incumbent]}
    return chosen


def paired_gain(
    incumbent: str | Path, challenger: str | Path, subset: str, alpha: float = CHOOSE_ALPHA
) -> dict[str, Any]:
    """The challenger's EM minus the incumbent's over the questions both scored in ``subset`` of their eval
    folders (``""``: the set itself; ``shifts/<name>-seed<seed>``: a shift's set), and a one-sided sign test
    of it over the questions where they differ: ``{"set", "questions", "gain", "wins", "losses", "p",
    "beats"}``; ``beats`` when ``p`` (the chance of as many wins by a coin) is below ``alpha``."""
    mine, theirs = _question_em(Path(challenger) / subset), _question_em(Path(incumbent) / subset)
    diffs = [mine[i] - theirs[i] for i in sorted(mine.keys() & theirs.keys())]
    wins, losses = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
    p = sum(math.comb(wins + losses, k) for k in range(wins, wins + losses + 1)) / 2 ** (wins + losses)
    return {
        "set": subset or "original",
        "questions": len(diffs),
        "gain": statistics.fmean(diffs) if diffs else 0.0,
        "wins": wins,
        "losses": losses,
        "p": p,
        "beats": wins > losses and p < alpha,
    }


def gain_text(gain: Mapping[str, Any]) -> str:
    """:func:`paired_gain`'s test in a few words, for a console line."""
    return (
        f"on {gain['set']}: {gain['gain']:+.4f} EM, {gain['wins']} questions better and {gain['losses']} "
        f"worse, sign test p {gain['p']:.3f}"
    )


def _scored_set(metrics: Mapping[str, Any], by: str) -> str:
    """The folder, under an eval's own, of the set ``by`` scored it on."""
    if by == "em":
        return ""
    return shift_folder(metrics["shift/worst/name"], (metrics.get("shift_check") or {}).get("seed", 0))


def _question_em(folder: Path) -> dict[int, float]:
    """Each scored question's EM in ``folder``'s eval, its samples' mean (a failed episode counts 0)."""
    ems: dict[int, list[float]] = defaultdict(list)
    for record in EvalLog.in_folder(folder).load(repair=False, keep=scored_fields).values():
        em = episode_score(record, "em")
        if em is not None:
            ems[record["index"]].append(em)
    return {index: statistics.fmean(values) for index, values in ems.items()}


def _metrics(folder: Path) -> dict[str, Any]:
    try:
        return json.loads((folder / METRICS).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{folder}: no eval's metrics.json to choose by ({exc})") from None
