"""A per-turn (process) reward for DeepSearch: which turn's search first brought back the answer's article?

The outcome reward (``em``) credits every turn of an episode alike. This one scores each assistant turn on
its own, from what the tool returned, so turn-level credit (``credit: {mode: turn}``) can tell the search
that found the evidence from one that did not::

    reward:
      - {name: search_hit.py:search_hit, weight: 0.1, per_turn: true}

The first search turn whose passages include an article titled with a golden answer scores 1.0; every
other turn scores 0.0, including a later search that finds the same article again, and a turn without a
call (the answer turn) scores ``no_call``. (The answer of every DeepSearch row is an article title;
``Doc i(Title: "...")`` is the retrieval server's format; titles and answers are compared after the same
normalisation as ``em``.) On a two-hop question the first search finds the bridge article, not the
answer, and scores 0: with ``credit: {mode: turn}`` it still gets credit through the discounted return
of the second search, which is the point of turn-level credit.

Why only the first hit (measured, ``benchmarks/gpu_pipeline/RESULTS.md``, run 2026-12-01): when every hit
scored 1, turn credit paid a second search that found the answer's article again as much as the first,
while the answer turn it replaced scores 0 - so the turn advantage pushed towards searching again. After
40 steps the policy searched 1.99 times per OOD question (1.00 before) and then often answered with
another title: OOD EM 0.93 -> 0.63, the two-hop habit of issue 15. Repeating a search finds nothing new,
so it earns nothing here.
"""

from __future__ import annotations

from typing import Any

from swift_rlfactory.retrieval.format import parse_hits
from swift_rlfactory.rewards.process import calls_by_turn
from swift_rlfactory.rewards.rules import normalize_answer
from swift_rlfactory.trajectory import Trajectory


def _found(call: dict[str, Any], golds: set[str]) -> bool:
    """The call succeeded and one of its passages is titled with a golden answer."""
    return not call.get("error") and _titled(call.get("observation") or "", golds)


def _titled(observation: str, golds: set[str]) -> bool:
    return bool({normalize_answer(t) for t in parse_hits(observation)} & golds)


def answer_titled(observation: str, answers: list[str]) -> bool:
    """The verifier of the needless-call reward for DeepSearch: a passage of ``observation`` is the answer's
    article (titled with a golden answer), not one that only mentions it::

        - {name: turn_needless_calls, weight: 0.1, args: {verifier: search_hit.py:answer_titled}}
    """
    return _titled(observation, {normalize_answer(a) for a in answers} - {""})


def search_hit(trajectory: Trajectory, no_call: float = 0.0) -> list[float]:
    """Per assistant turn: 1.0 for the first turn whose observations hold an article titled with a golden
    answer, 0.0 for the other turns that made calls, ``no_call`` for turns without a call."""
    golds = {normalize_answer(g) for g in trajectory.golden_answers} - {""}
    by_turn = calls_by_turn(trajectory)
    first = min((t for t, calls in by_turn.items() if any(_found(c, golds) for c in calls)), default=None)
    return [
        1.0 if i == first else 0.0 if i in by_turn else no_call
        for i in range(len(trajectory.assistant_turns))
    ]
