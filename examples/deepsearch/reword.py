"""Reword a share of DeepSearch questions for GRPO, in wordings the robustness check never uses.

A policy trained on one wording per family learns the wording (issue 30: a GRPO model that gained on our
splits lost on questions written elsewhere). This gives GRPO's data the same questions said otherwise,
family by family ("Which D is mentioned in the encyclopedia summary of the thing that C?" -> "The
encyclopedia summary of the thing that C mentions a D. Which one?"), and keeps every other column, the
answers among them. The wordings are none of `swift-rlfactory eval --shifts`' (no question word moved to
the end, no "Tell me", no polite opener, no lowercasing or typos, none of its frames), so the check still
measures phrasings the policy never trained on. Deterministic: which rows are reworded and how depends only
on ``--seed`` and the question::

    python examples/deepsearch/reword.py examples/deepsearch/data/pool.jsonl /tmp/pool-reworded.jsonl --share 0.5
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

# (name, the question it applies to, its rewordings): the first rule that matches is used, one of its
# rewordings chosen by the seed. Groups are the regex's named groups; {x} in a rewording is group x.
_RULES: list[tuple[str, re.Pattern[str], tuple[str, ...]]] = [
    (
        "cloze",
        re.compile(r'^What name fills the blank in "(?P<s>.+)"\?$', re.S),
        (
            'In "{s}", which name goes where the ___ is?',
            'The sentence "{s}" lacks a name at the ___. Which name is it?',
            'Supply the name missing at the ___ in "{s}"',
        ),
    ),
    (
        "bridge_mention",
        re.compile(
            r"^Which (?P<d>.+?) is mentioned in the encyclopedia summary of the (?P<t>\w+) (?P<w>that|who) "
            r"(?P<c>.+)\?$",
            re.S,
        ),
        (
            "The encyclopedia summary of the {t} {w} {c} mentions a {d}. Which one?",
            "Find the {d} that the encyclopedia summary of the {t} {w} {c} mentions.",
        ),
    ),
    (
        "bridge_names",
        re.compile(
            r"^The encyclopedia summary of the (?P<t>\w+) (?P<w>that|who) (?P<c>.+) names an? (?P<d>.+)\. "
            r"(?:What|Who) is it\?$",
            re.S,
        ),
        (
            "Which {d} does the encyclopedia summary of the {t} {w} {c} name?",
            "Find the {d} named in the encyclopedia summary of the {t} {w} {c}.",
        ),
    ),
    (
        "which",  # entity_type, attribute: "Which D is/was ...?"
        re.compile(r"^Which (?P<d>.+?) (?P<v>is|was|are|were) (?P<c>.+)\?$", re.S),
        (
            "Find the {d} that {v} {c}.",
            "There is a {d} that {v} {c}. Which one?",
        ),
    ),
    (
        "which",  # attribute with another verb: "Which person won ...?"
        re.compile(r"^Which (?P<d>person|thing|place) (?P<c>.+)\?$", re.S),
        ("Find the {d} that {c}.", "There is a {d} that {c}. Which one?"),
    ),
    (
        "definition",  # "What is ...?", "Who was ...?"
        re.compile(r"^(?P<q>What|Who) (?P<v>is|was|are|were) (?P<c>.+)\?$", re.S),
        (
            "Find the {kind} that {v} {c}.",
            "Something {v} {c}. Search for it: what is its title?",
        ),
    ),
]


def reword(question: str, rng: random.Random) -> tuple[str, str] | None:
    """``(rule name, reworded question)`` by the first rule that matches, or ``None``."""
    for name, pattern, wordings in _RULES:
        found = pattern.match(question.strip())
        if found:
            groups = found.groupdict()
            kind = "person" if groups.get("q") == "Who" else "thing"
            return name, rng.choice(wordings).format(kind=kind, **groups)
    return None


def reword_row(row: dict[str, Any], seed: int, share: float) -> dict[str, Any]:
    """The row with its last user message reworded (and ``rewording``: the rule's name), or as it was
    when the seed leaves it alone or no rule matches. The choice depends on ``seed`` and the question."""
    messages = [dict(m) for m in row["messages"]]
    last = next(m for m in reversed(messages) if m["role"] == "user")
    rng = random.Random(f"{seed}:{last['content']}")
    if rng.random() >= share:
        return row
    done = reword(last["content"], rng)
    if done is None:
        return row
    last["content"] = done[1]
    return {**row, "messages": messages, "rewording": done[0]}


def main(argv: list[str] | None = None) -> None:
    """Write the dataset with ``--share`` of its rows reworded."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dataset", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--share", type=float, default=0.5, help="share of the rows to reword (default 0.5)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rows = [
        json.loads(line) for line in args.dataset.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    out = [reword_row(row, args.seed, args.share) for row in rows]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out), encoding="utf-8")
    counts = Counter(r.get("rewording") for r in out if "rewording" in r)
    print(f"{sum(counts.values())} of {len(rows)} questions reworded ({dict(counts)}) -> {args.out}")


if __name__ == "__main__":
    main()
