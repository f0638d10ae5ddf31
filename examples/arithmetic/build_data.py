"""Multi-step arithmetic word problems for GRPO from the base model, with the calculator tool.

Why this task: RL from a base model needs questions the model already solves *sometimes*, and a tool that
decides the outcome. Qwen2.5-Coder-0.5B-Instruct turns a short word problem into an arithmetic expression
fairly often, but it cannot multiply three-digit numbers in its head: with the numbers drawn here a correct
answer nearly always needs a ``calculate`` call, and the model's own errors are in the translation
(which numbers, which operation, the order), which is exactly what reward can shape.

Each family is a word-problem template with 2-4 operations over random integers; every answer is a
non-negative integer (divisions are exact by construction), written without separators, so the ``em``
reward compares digits and nothing else::

    A warehouse has 47 crates with 238 bolts in each. It ships 1356 bolts. How many bolts are left?
    -> 47 * 238 - 1356 = 9830

Rows are ms-swift rows (``messages``, ``golden_answers``, ``solution``) plus ``family``, ``steps`` (number
of operations) and ``expression`` (the reference expression; no reward reads it). The splits use disjoint
random streams and no question text is shared between them (checked here): ``data/train.jsonl`` (2000
rows) and ``data/heldout.jsonl`` (300 rows), both committed.

``data/ood.jsonl`` (200 rows, committed) is the out-of-distribution split, never trained on: GSM8K-style
grade-school word problems from ``reasoning_gym``'s ``gsm_symbolic`` dataset (the GSM-Symbolic templates,
written independently of this file, with fixed seed 0), phrased unlike the families above and often needing
percentages, fractions or several intermediate quantities. Only problems whose answer is a non-negative
integer are kept; reasoning-gym's trailing answer-format instruction is cut (our system prompt says how to
answer) and the rest of the text is verbatim. Its rows have ``family: "gsm_symbolic"`` and ``steps: null``
(eval ``--group-by steps`` reports them as ``None``), and no ``expression``. A learning claim made on
heldout should hold here too: report the two side by side. It needs ``pip install reasoning-gym==0.1.25``
(only for ``--ood``; ``--ood 0`` skips it)::

    python examples/arithmetic/build_data.py     # data/train.jsonl, data/heldout.jsonl, data/ood.jsonl
"""

from __future__ import annotations

import argparse
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from swift_rlfactory.envs.calculator.tools import calculate
from swift_rlfactory.retrieval.qa_data import qa_row, write_jsonl

Problem = tuple[str, str]  # (question, expression)


def _stock(r: random.Random) -> Problem:
    a, b = r.randint(12, 99), r.randint(120, 480)
    c = r.randint(100, a * b // 2)
    item, unit = r.choice(
        [("bolts", "crates"), ("pencils", "boxes"), ("apples", "baskets"), ("cans", "cartons")]
    )
    return (
        f"A warehouse has {a} {unit} with {b} {item} in each. It ships {c} {item}. How many {item} are left?",
        f"{a} * {b} - {c}",
    )


def _savings(r: random.Random) -> Problem:
    a, b, c = r.randint(35, 240), r.randint(6, 52), r.randint(50, 900)
    name = r.choice(["Mia", "Omar", "Lena", "Ravi", "Sofia", "Tom"])
    return (
        f"{name} saves {a} dollars every week for {b} weeks and then gets a gift of {c} dollars. "
        f"How many dollars does {name} have?",
        f"{a} * {b} + {c}",
    )


def _share(r: random.Random) -> Problem:
    c = r.randint(3, 24)
    b = r.randint(4, 30)
    a = c * r.randint(15, 90)  # a * b is a multiple of c
    return (
        f"A farm picks {a} kilograms of tomatoes on each of {b} days and packs them equally into {c} trucks. "
        f"How many kilograms go into each truck?",
        f"{a} * {b} / {c}",
    )


def _seats(r: random.Random) -> Problem:
    a, b, c, d = r.randint(11, 64), r.randint(14, 48), r.randint(11, 64), r.randint(14, 48)
    return (
        f"A theatre has {a} rows of {b} seats downstairs and {c} rows of {d} seats upstairs. "
        f"How many seats does it have?",
        f"{a} * {b} + {c} * {d}",
    )


def _trip(r: random.Random) -> Problem:
    a, b, c, d = r.randint(45, 130), r.randint(3, 14), r.randint(20, 75), r.randint(2, 9)
    return (
        f"A bus drives {b} hours at {a} km per hour, then {d} hours at {c} km per hour. "
        f"How many kilometres does it drive in total?",
        f"{a} * {b} + {c} * {d}",
    )


def _budget(r: random.Random) -> Problem:
    a, b, c, d = r.randint(8, 60), r.randint(13, 95), r.randint(5, 40), r.randint(11, 70)
    total = a * b + c * d
    e = total + r.randint(100, 2000)
    return (
        f"A school has {e} dollars. It buys {a} books at {b} dollars each and {c} lamps at {d} dollars each. "
        f"How many dollars are left?",
        f"{e} - ({a} * {b} + {c} * {d})",
    )


def _expression(r: random.Random) -> Problem:
    a, b, c = r.randint(100, 999), r.randint(100, 999), r.randint(12, 99)
    d = r.randint(100, (a + b) * c)
    return f"What is ({a} + {b}) * {c} - {d}?", f"({a} + {b}) * {c} - {d}"


def _average(r: random.Random) -> Problem:
    n = r.randint(3, 5)
    values = [r.randint(100, 999) for _ in range(n - 1)]
    last = r.randint(100, 999)
    last += (-(sum(values) + last)) % n  # the mean is an integer
    values.append(last)
    listed = ", ".join(map(str, values[:-1])) + f" and {values[-1]}"
    return (
        f"A shop sells {listed} items on {n} days. How many items does it sell on average per day?",
        f"({' + '.join(map(str, values))}) / {n}",
    )


FAMILIES: dict[str, Callable[[random.Random], Problem]] = {
    "stock": _stock,
    "savings": _savings,
    "share": _share,
    "seats": _seats,
    "trip": _trip,
    "budget": _budget,
    "expression": _expression,
    "average": _average,
}


def evaluate(expression: str) -> int:
    """The value of an expression as the environment's own ``calculate`` tool returns it.

    Raises:
        ValueError: the value is not a non-negative integer (a generator bug).
    """
    value = calculate(expression)
    if not value.isdigit():
        raise ValueError(f"{expression} = {value} is not a non-negative integer")
    return int(value)


def problem_row(family: str, question: str, expression: str) -> dict[str, Any]:
    """One ms-swift row; ``steps`` counts the operators of the reference expression."""
    answer = str(evaluate(expression))
    steps = sum(expression.count(op) for op in "+-*/")
    return {**qa_row(question, [answer]), "family": family, "steps": steps, "expression": expression}


def build_split(size: int, seed: str, exclude: set[str] = frozenset()) -> list[dict[str, Any]]:
    """``size`` rows, the families in turn (balanced), no question repeated or taken from ``exclude``."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    seen = set(exclude)
    names = list(FAMILIES)
    while len(rows) < size:
        family = names[len(rows) % len(names)]
        question, expression = FAMILIES[family](rng)
        if question in seen:
            continue
        seen.add(question)
        rows.append(problem_row(family, question, expression))
    rng.shuffle(rows)
    return rows


OOD_FAMILY = "gsm_symbolic"
# reasoning-gym appends this to every gsm_symbolic question; our system prompt says how to answer instead.
OOD_INSTRUCTION = " Give the result as your final answer. Do not include units."


def build_ood(size: int, seed: int, exclude: set[str] = frozenset()) -> list[dict[str, Any]]:
    """``size`` gsm_symbolic rows with non-negative integer answers, none repeated or taken from ``exclude``.

    Raises:
        ValueError: reasoning-gym changed its answer instruction (the cut would silently stop working).
    """
    import reasoning_gym  # only this split needs it: pip install reasoning-gym==0.1.25

    rows: list[dict[str, Any]] = []
    seen = set(exclude)
    # Drawn in pages, as a few answers are not integers; a page's contents depend only on the seed.
    for page in range(100):
        for item in reasoning_gym.create_dataset(OOD_FAMILY, size=size, seed=seed * 1000 + page):
            question = item["question"].removesuffix(OOD_INSTRUCTION)
            if question == item["question"] or "final answer" in question:
                raise ValueError(f"{OOD_FAMILY}: unexpected answer instruction in {item['question']!r}")
            answer = str(item["answer"]).strip()
            if not answer.isdigit() or question in seen:
                continue
            seen.add(question)
            rows.append({**qa_row(question, [str(int(answer))]), "family": OOD_FAMILY, "steps": None})
            if len(rows) == size:
                return rows
    raise ValueError(f"{OOD_FAMILY}: fewer than {size} usable problems")


def main(argv: list[str] | None = None) -> None:
    """Write the train, held-out and out-of-distribution splits."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("data"))
    parser.add_argument("--train", type=int, default=2000)
    parser.add_argument("--heldout", type=int, default=300)
    parser.add_argument("--ood", type=int, default=200, help="gsm_symbolic rows in data/ood.jsonl (0: none)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    heldout = build_split(args.heldout, f"{args.seed}:heldout")
    train = build_split(
        args.train, f"{args.seed}:train", exclude={r["messages"][0]["content"] for r in heldout}
    )
    splits = {"train": train, "heldout": heldout}
    if args.ood:
        ours = {r["messages"][0]["content"] for r in train + heldout}
        splits["ood"] = build_ood(args.ood, args.seed, exclude=ours)
    for name, rows in splits.items():
        write_jsonl(rows, args.out / f"{name}.jsonl")
        families = Counter(r["family"] for r in rows)
        print(f"{name}: {len(rows)} problems, {dict(sorted(families.items()))}")


if __name__ == "__main__":
    main()
