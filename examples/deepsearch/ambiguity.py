"""Two-hop EM by how many names of the answer's kind the bridge passage prints.

A two-hop question asks for "the <description of B> mentioned in the summary of A". The generator
(``examples/deepsearch/build_data.py``) refuses a pair when another article the summary names has B's exact
description, but not when it has the same kind of thing under another description: the summary of the
Musée d'Orsay names Manet ("French painter (1832–1883)"), Monet, Degas and Renoir, all painters, and only
dates that no passage of the first search prints tell them apart. Such a question needs a search per
candidate, or a guess. This script splits the two-hop test and holdout questions of each evaluation by that
count, so a two-hop score can be read as "questions one reading of the bridge passage answers" and
"questions that need checking candidates"::

    python examples/deepsearch/ambiguity.py sft=ds/trajectories-sft.jsonl.gz grpo=ds/trajectories-trained.jsonl.gz

The kind of a description is its head noun, the last word before its first preposition, comma or
parenthesis ("country in Eastern Europe" -> country, "French painter (1832–1883)" -> painter). Only the
names the generator itself can match (corpus titles, ``TitleMatcher``) are counted, so "one of its kind" is
an upper bound on how clear a question is.
"""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from pathlib import Path

import build_data

from swift_rlfactory.eval.failures import named_runs, two_hop_scored
from swift_rlfactory.runs.log import read_trajectories

_HEAD_END = re.compile(
    r"\s+(?:in|of|from|for|on|at|by|with|based|who|that|and|which)\s+|\s*[(,;]\s*", re.IGNORECASE
)
GROUPS = ("one of its kind", "two or more of its kind")


def kind(description: str) -> str:
    """The head noun of a short description: its last word before the first preposition or parenthesis."""
    words = _HEAD_END.split(description.lower(), maxsplit=1)[0].split()
    return words[-1] if words else ""


class BridgeReader:
    """Names of each bridge summary's mentioned articles, from the corpus the questions were built from."""

    def __init__(self, articles: list[build_data.Article]):
        self.by_title = {a.title: a for a in articles}
        self.mentionable = {a.title: a for a in articles if build_data._mentionable(a)}
        self.matcher = build_data.TitleMatcher(self.mentionable)

    def same_kind(self, bridge: str, answer: str) -> int:
        """How many articles the bridge summary names (after its first sentence) of the answer's kind,
        the answer included."""
        article = self.by_title[bridge]
        names = self.matcher.find(article.passage.text[len(article.first_sentence) :])
        wanted = kind(self.by_title[answer].description)
        return sum(1 for t in names if t != bridge and kind(self.mentionable[t].description) == wanted)


def table(runs: list[tuple[str, Path]], reader: BridgeReader) -> str:
    """A markdown table: per run and group, the questions and their EM."""
    lines = [
        "| model | " + " | ".join(f"{g}: questions | {g}: EM" for g in GROUPS) + " |",
        "| --- " * (1 + 2 * len(GROUPS)) + "|",
    ]
    for name, path in runs:
        scores: dict[str, list[float]] = defaultdict(list)
        for episode in read_trajectories(path):
            row = episode["row"]
            if not two_hop_scored(row):
                continue
            group = GROUPS[0] if reader.same_kind(*row["support"]) <= 1 else GROUPS[1]
            scores[group].append(float(episode["rewards"].get("em") or 0))
        cells = []
        for g in GROUPS:
            s = scores[g]
            cells += [str(len(s)), f"{sum(s) / len(s):.3f}" if s else "-"]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("runs", nargs="+", help="NAME=trajectories.jsonl[.gz]")
    args = parser.parse_args(argv)
    print(table(named_runs(args.runs), BridgeReader(build_data.load_articles())))


if __name__ == "__main__":
    main()
