"""A per-turn (process) reward for DeepSearch: did this turn's search bring back the answer's article?

The outcome reward (``em``) credits every turn of an episode alike. This one scores each assistant turn on
its own, from what the tool returned, so turn-level credit (``credit: {mode: turn}``) can tell a search
that found the evidence from one that did not::

    reward:
      - {name: search_hit.py:search_hit, weight: 0.1, per_turn: true}

A search turn scores 1.0 when one of its passages is titled with a golden answer (the answer of every
DeepSearch row is an article title; ``Doc i(Title: "...")`` is the retrieval server's format), else 0.0;
a turn without a call (the answer turn) scores ``no_call``. Titles and answers are compared after the
same normalisation as ``em`` (case, punctuation, articles). On a two-hop question the first search finds
the bridge article, not the answer, and scores 0: with ``credit: {mode: turn}`` it still gets credit
through the discounted return of the second search, which is the point of turn-level credit.
"""

from __future__ import annotations

import re

from swift_rlfactory.rewards.rules import normalize_answer
from swift_rlfactory.trajectory import Trajectory

TITLE = re.compile(r'Doc \d+\(Title: "?(.*?)"?\)')


def search_hit(trajectory: Trajectory, no_call: float = 0.0) -> list[float]:
    """Per assistant turn: 1.0 when that turn's observations hold an article titled with a golden answer."""
    golds = {normalize_answer(g) for g in trajectory.golden_answers} - {""}
    hits: dict[int, float] = {}
    for call in trajectory.tool_calls:
        turn = call.get("turn")
        if not isinstance(turn, int) or turn < 1:
            continue
        titles = {normalize_answer(t) for t in TITLE.findall(call.get("observation") or "")}
        hit = float(not call.get("error") and bool(titles & golds))
        hits[turn - 1] = max(hits.get(turn - 1, 0.0), hit)
    return [hits.get(i, no_call) for i in range(len(trajectory.assistant_turns))]
