"""Multi-step arithmetic word problems for GRPO from the base model, with the calculator tool.

Why this task: RL from a base model needs questions the model already solves *sometimes*, and a tool that
decides the outcome. Qwen2.5-Coder-0.5B-Instruct turns a short word problem into an arithmetic expression
fairly often, but it cannot multiply three-digit numbers in its head: with the numbers drawn here a correct
answer nearly always needs a ``calculate`` call, and the model's own errors are in the translation
(which numbers, which operation, the order), which is exactly what reward can shape.

Each of the first eight families (``FAMILIES``) is one word-problem template with 2-4 operations over random integers; every answer is a
non-negative integer (divisions are exact by construction), written without separators, so the ``em``
reward compares digits and nothing else::

    A warehouse has 47 crates with 238 bolts in each. It ships 1356 bolts. How many bolts are left?
    -> 47 * 238 - 1356 = 9830

Rows are ms-swift rows (``messages``, ``golden_answers``, ``solution``) plus ``family``, ``steps`` (number
of operations) and ``expression`` (the reference expression; no reward reads it). The splits use disjoint
random streams and no question text is shared between them (checked here): ``data/train.jsonl`` (2000
rows) and ``data/heldout.jsonl`` (300 rows), both committed. The mix and chain splits below are not
committed: ``python examples/arithmetic/build_data.py --ood 0`` writes them byte for byte (seed 0, a few
seconds, every other file unchanged), and ``benchmarks/rl_from_base/h200.sh`` does so when they are missing.

**The mix: translation, not templates.** A GRPO run on ``data/train.jsonl`` learned its eight templates
(held-out EM 0.73 -> 1.00) but hardly the translation of a word problem (GSM-Symbolic OOD 0.13 -> 0.165):
one sentence pattern per family lets the policy map slot positions to an expression without reading. So
16 more families (``MIX_FAMILIES``, 24 in all) each come in 2-4 phrasings, and what a template would fix
varies: the question first ("How much change does Omar get from 100 dollars after buying ...?") or last,
several-sentence stories whose facts arrive in steps, small numbers written as words ("six", "twice",
"three times", "half", "a quarter", "a dozen"), and in about a third of the story rows one irrelevant
sentence with a number in it ("Aiko is 19 years old.") placed anywhere among the facts. Every family draws
fresh integers and builds the reference expression beside the text; divisions are exact by construction
(percentages of multiples of 20, fractions of multiples of the denominator, ratios of multiples of the
parts), and every answer is a non-negative integer from our own ``calculate``:

- ``discount``: a percentage off or onto a price, one or several items, or half price;
- ``percent_group``: the part of a group outside a percentage, or the difference of two percentages;
- ``fraction``: a half / third / quarter / fifth given away or read, then more added or taken; two thirds;
- ``compare``: "k times as many", "m fewer than", how many more, how many together;
- ``convert``: metres to centimetres, hours and minutes to minutes, litres to glasses, factor stated;
- ``dozens``: dozens to items (the factor 12 is not stated), sold, broken or shared out;
- ``wage``: hourly pay over days and weeks, overtime at twice the rate;
- ``ratio``: a recipe's ratio scaled up, a group split by a ratio;
- ``ages``: "k times as old", sums of ages in some years, half an age from a future age;
- ``change``: two kinds of item (one "k times as many"), change from a bill;
- ``passengers``: people (or library books) off and on over several stops, half getting off;
- ``work_rate``: a machine's rate over crates of bottles, two pumps filling a pool;
- ``area``: area less a shed, fencing a perimeter, carpet by the square metre;
- ``groups``: full vans for students and teachers, a shared bill;
- ``daily_log``: three days, each stated relative to the one before;
- ``profit``: revenue of what did not spoil less cost, a lemonade stand.

``data/train_mix.jsonl`` (2000 rows, all 24 families in turn) is the training set for that:
``TRAIN_DATA=examples/arithmetic/data/train_mix.jsonl`` in ``benchmarks/rl_from_base/h200.sh``.
``data/heldout_mix.jsonl`` (300 rows, the 16 new families only) scores it on phrasings the old set never
had. Both come from their own random streams, after the other splits (which stay byte-identical), and
share no question text with any split. GSM-Symbolic stays out of every training split; it is the one
test of translation that no generator here resembles.

**Chains: stories whose answer needs every step.** After GRPO on the mix, most GSM-Symbolic misses are one
step of a multi-step story answered at once (benchmarks/gpu_pipeline/RESULTS.md, 2026-12-01c): the mix's stories have
2-4 operations, each sentence adding one. Two more families (``CHAIN_FAMILIES``) are built as chains of
derived quantities, with random structure rather than a template:

- ``chain``: three to five people; the first has a number of things and each next one's amount is said
  through amounts already given: k times as many, m more or fewer, half / a third / a quarter as many, as
  many as two others together, or the other way round ("Omar has 5 more than Mia" with Omar known, so Mia is
  a difference; "Omar has twice as many as Mia", a quotient). The question asks the total of all, of two,
  a difference, or the last person's amount;
- ``prices``: two to four items whose prices are given the same way, then a basket of several of each:
  what it costs, or the change from a bill.

Nothing in them was taken from GSM-Symbolic's questions: the relations are the ones the mix already had
("k times as many", "m fewer than") composed to any depth, so a policy that answers with the last relation it
read is wrong. ``data/train_chain.jsonl`` (2000 rows: a third chains, the rest train_mix's first rows, in a
shuffled order) trains with them; ``data/heldout_chain.jsonl`` (100 rows, the two chain families) scores
them. ``tests/test_rl_from_base.py`` solves every chain story from its text alone, with a reader of its own,
and checks the committed answer. They turned out too deep for GRPO from base: the base model solves 1 of the
100 held-out chains, so their groups carry no reward signal, and after 100 steps it solved 3
(benchmarks/gpu_pipeline/RESULTS.md, 2026-12-01d).

``data/ood.jsonl`` (200 rows, committed) is the out-of-distribution split, never trained on: GSM8K-style
grade-school word problems from ``reasoning_gym``'s ``gsm_symbolic`` dataset (the GSM-Symbolic templates,
written independently of this file, with fixed seed 0), phrased unlike the families above and often needing
percentages, fractions or several intermediate quantities. Only problems whose answer is a non-negative
integer are kept; reasoning-gym's trailing answer-format instruction is cut (our system prompt says how to
answer) and the rest of the text is verbatim. Its rows have ``family: "gsm_symbolic"`` and ``steps: null``
(eval ``--group-by steps`` reports them as ``None``), and no ``expression``. A learning claim made on
heldout should hold here too: report the two side by side. It needs ``pip install reasoning-gym==0.1.25``
(only for ``--ood``; ``--ood 0`` skips it)::

    python examples/arithmetic/build_data.py  # train, heldout, ood, heldout_mix, train_mix, heldout_chain,
                                              # train_chain (.jsonl in data/)
"""

from __future__ import annotations

import argparse
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from swift_rlfactory.bundled.calculator.tools import calculate
from swift_rlfactory.data.qa import qa_row, write_jsonl

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


# --- The mix: 16 more families in 2-4 phrasings each (the module docstring says why and how) -----------

NAMES = ["Mia", "Omar", "Lena", "Ravi", "Sofia", "Tom", "Aiko", "Diego", "Hana", "Kwame", "Nadia", "Pavel"]
WORDS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}
TIMES = {2: "twice", 3: "three times", 4: "four times", 5: "five times"}
PARTS = {2: "half", 3: "a third", 4: "a quarter", 5: "a fifth"}


def _num(r: random.Random, n: int) -> str:
    """``n``, written as a word half the time when it is small."""
    return WORDS[n] if n in WORDS and r.random() < 0.5 else str(n)


def _times(r: random.Random, k: int) -> str:
    """'twice', 'three times' or '3 times'."""
    return TIMES[k] if r.random() < 0.6 else f"{k} times"


def _distractor(r: random.Random, name: str) -> str:
    """A sentence with a number in it that the answer does not use."""
    return r.choice(
        [
            f"{name} is {r.randint(9, 70)} years old.",
            f"The shop opened {r.randint(2, 40)} years ago.",
            f"It was {r.randint(5, 35)} degrees outside that day.",
            f"{name} lives on floor {r.randint(2, 30)} of a tall building.",
            f"{name} has {r.randint(2, 9)} cousins.",
            f"The trip there took {r.randint(10, 55)} minutes.",
        ]
    )


def _story(r: random.Random, facts: list[str], question: str, name: str = "") -> str:
    """The facts, then the question; a third of the time an irrelevant sentence goes somewhere among them."""
    facts = list(facts)
    if r.random() < 0.35:
        facts.insert(r.randint(0, len(facts)), _distractor(r, name or r.choice(NAMES)))
    return " ".join([*facts, question])


def _two_names(r: random.Random) -> tuple[str, str]:
    a, b = r.sample(NAMES, 2)
    return a, b


def _discount(r: random.Random) -> Problem:
    price, p = r.randint(3, 60) * 20, r.choice([10, 15, 20, 25, 30, 35, 40])
    item, name = r.choice(["jacket", "bicycle", "lamp", "guitar", "tent"]), r.choice(NAMES)
    k = r.randint(2, 6)
    match r.randrange(4):
        case 0:
            return _story(
                r,
                [f"A {item} costs {price} dollars.", f"During a sale the shop takes {p}% off."],
                f"How many dollars does the {item} cost in the sale?",
                name,
            ), f"{price} - {price} * {p} / 100"
        case 1:
            return (
                f"How much does {name} pay for {_num(r, k)} {item}s if each normally costs {price} dollars "
                f"and every one is {p}% off?",
                f"{k} * ({price} - {price} * {p} / 100)",
            )
        case 2:
            return _story(
                r,
                [f"Last year a {item} cost {price} dollars.", f"This year the price went up by {p} percent."],
                f"What does the {item} cost now, in dollars?",
                name,
            ), f"{price} + {price} * {p} / 100"
        case _:
            return _story(
                r,
                [f"{name} buys a {item} that costs {price} dollars at half price."],
                f"How many dollars does {name} save?",
                name,
            ), f"{price} / 2"


def _percent_group(r: random.Random) -> Problem:
    total = r.randint(5, 60) * 20
    p, q = sorted(r.sample([5, 10, 15, 20, 25, 30, 35, 40, 45], 2), reverse=True)
    match r.randrange(3):
        case 0:
            return _story(
                r,
                [f"There are {total} people at a concert.", f"{p}% of them are children."],
                "How many adults are at the concert?",
            ), f"{total} - {total} * {p} / 100"
        case 1:
            return (
                f"How many pear trees are in an orchard of {total} trees if {p} percent of them are apple "
                "trees and the rest are pear trees?",
                f"{total} * (100 - {p}) / 100",
            )
        case _:
            return _story(
                r,
                [
                    f"A town has {total} voters.",
                    f"{p}% of them vote for the red party and {q}% for the blue party.",
                ],
                "How many more people vote red than blue?",
            ), f"{total} * {p} / 100 - {total} * {q} / 100"


def _fraction(r: random.Random) -> Problem:
    d = r.choice([2, 3, 4, 5])
    n, m, name = d * r.randint(8, 60), r.randint(5, 40), r.choice(NAMES)
    match r.randrange(3):
        case 0:
            return _story(
                r,
                [
                    f"{name} had {n} stickers.",
                    f"{name} gave {PARTS[d]} of them to a friend.",
                    f"Then {name} bought {m} more.",
                ],
                f"How many stickers does {name} have now?",
                name,
            ), f"{n} - {n} / {d} + {m}"
        case 1:
            m = r.randint(1, n - n // d)
            return _story(
                r,
                [
                    f"A book has {n} pages.",
                    f"On Monday {name} reads {PARTS[d]} of the book and on Tuesday {m} more pages.",
                ],
                "How many pages are still unread?",
                name,
            ), f"{n} - {n} / {d} - {m}"
        case _:
            seats = 3 * r.randint(20, 120)
            return (
                f"How many seats on a plane with {seats} seats are empty if two thirds of them are taken?",
                f"{seats} - {seats} * 2 / 3",
            )


def _compare(r: random.Random) -> Problem:
    a, b = _two_names(r)
    x, k, m = r.randint(25, 400), r.randint(2, 5), r.randint(5, 24)
    thing = r.choice(["marbles", "stamps", "shells", "cards"])
    match r.randrange(3):
        case 0:
            return _story(
                r,
                [f"{a} has {x} {thing}.", f"{b} has {_times(r, k)} as many {thing} as {a}."],
                f"How many more {thing} does {b} have than {a}?",
                a,
            ), f"{x} * {k} - {x}"
        case 1:
            return (
                f"How many {thing} do {a} and {b} have together if {a} has {x} and {b} has {m} fewer than {a}?",
                f"{x} + ({x} - {m})",
            )
        case _:
            y = r.randint(10, x + 10)
            return _story(
                r,
                [
                    f"{a} collected {x} {thing} and {b} collected {y}.",
                    f"{a}'s sister collected {_times(r, k)} as many as {b}.",
                ],
                f"How many {thing} did the three collect altogether?",
                a,
            ), f"{x} + {y} + {y} * {k}"


def _convert(r: random.Random) -> Problem:
    name = r.choice(NAMES)
    match r.randrange(3):
        case 0:
            m, c, k = r.randint(4, 30), r.randint(15, 90), r.randint(2, 9)
            k = min(k, m * 100 // c)
            return _story(
                r,
                [
                    f"A rope is {m} metres long.",
                    "A metre has 100 centimetres.",
                    f"{name} cuts off {_num(r, k)} pieces of {c} centimetres each.",
                ],
                "How many centimetres of rope are left?",
                name,
            ), f"{m} * 100 - {k} * {c}"
        case 1:
            n, h, mins = r.randint(2, 6), r.randint(1, 3), r.randint(5, 55)
            return (
                f"How many minutes does a film festival last if it shows {_num(r, n)} films that are each "
                f"{h} hours and {mins} minutes long, with an hour being 60 minutes?",
                f"{n} * ({h} * 60 + {mins})",
            )
        case _:
            litres, glass = r.randint(2, 25), r.choice([100, 125, 200, 250, 500])
            return _story(
                r,
                [f"A jug holds {litres} litres of juice.", "One litre is 1000 millilitres."],
                f"How many glasses of {glass} millilitres can be filled from the jug?",
                name,
            ), f"{litres} * 1000 / {glass}"


def _dozens(r: random.Random) -> Problem:
    name, d = r.choice(NAMES), r.randint(4, 40)
    match r.randrange(3):
        case 0:
            s = r.randint(5, d * 12)
            return _story(
                r,
                [f"A baker makes {d} dozen rolls.", f"By noon {s} rolls are sold."],
                "How many rolls are left?",
                name,
            ), f"{d} * 12 - {s}"
        case 1:
            b = r.randint(1, 11)
            return _story(
                r,
                [
                    "Eggs come in cartons of a dozen.",
                    f"{name} buys {d} cartons and breaks {_num(r, b)} eggs on the way home.",
                ],
                f"How many whole eggs does {name} have?",
                name,
            ), f"{d} * 12 - {b}"
        case _:
            k = r.choice([2, 3, 4, 6, 8])
            d = k * r.randint(1, 8)
            return (
                f"How many pencils does each class get if a school orders {d} dozen pencils and shares them "
                f"equally among {_num(r, k)} classes?",
                f"{d} * 12 / {k}",
            )


def _wage(r: random.Random) -> Problem:
    name, w, h = r.choice(NAMES), r.randint(9, 45), r.randint(3, 10)
    match r.randrange(3):
        case 0:
            d, wk = r.randint(2, 6), r.randint(2, 8)
            return _story(
                r,
                [
                    f"{name} earns {w} dollars an hour.",
                    f"{name} works {h} hours a day, {_num(r, d)} days a week.",
                ],
                f"How many dollars does {name} earn in {wk} weeks?",
                name,
            ), f"{w} * {h} * {d} * {wk}"
        case 1:
            o = r.randint(2, 12)
            return _story(
                r,
                [
                    f"{name} is paid {w} dollars an hour for the first {h * 4} hours of a week and twice that "
                    "rate for every hour after that.",
                    f"This week {name} worked {h * 4 + o} hours.",
                ],
                f"How much did {name} earn this week?",
                name,
            ), f"{h * 4} * {w} + {o} * {w} * 2"
        case _:
            wk = r.randint(2, 12)
            return (
                f"How much does {name} earn in {wk} weeks if {name} babysits {h} hours every week for "
                f"{w} dollars an hour?",
                f"{wk} * {h} * {w}",
            )


def _ratio(r: random.Random) -> Problem:
    a, b = r.sample([2, 3, 4, 5, 7], 2)
    k = r.randint(3, 40)
    match r.randrange(2):
        case 0:
            return _story(
                r,
                [
                    f"A recipe uses {a} cups of flour for every {b} cups of sugar.",
                    f"A bakery uses {a * k} cups of flour.",
                ],
                "How many cups of sugar does it use?",
            ), f"{a * k} / {a} * {b}"
        case _:
            return _story(
                r,
                [f"A club has {(a + b) * k} members.", f"The ratio of boys to girls in it is {a} to {b}."],
                "How many girls are in the club?",
            ), f"{(a + b) * k} / ({a} + {b}) * {b}"


def _ages(r: random.Random) -> Problem:
    a, b = _two_names(r)
    x, k, y = r.randint(4, 20), r.randint(2, 4), r.randint(2, 15)
    match r.randrange(3):
        case 0:
            return _story(
                r,
                [f"{a} is {x} years old.", f"{a}'s grandfather is {_times(r, k)} as old as {a}."],
                f"How old will the grandfather be in {_num(r, y)} years?",
            ), f"{x} * {k} + {y}"
        case 1:
            d = r.randint(2, 12)
            return (
                f"What will the sum of their ages be in {y} years if {a} is {d} years older than {b} and {b} "
                f"is {x} now?",
                f"({x} + {d} + {y}) + ({x} + {y})",
            )
        case _:
            z = y + 2 * x
            return _story(
                r,
                [f"In {y} years {a} will be {z} years old.", f"{b} is half as old as {a} is now."],
                f"How old is {b}?",
            ), f"({z} - {y}) / 2"


def _change(r: random.Random) -> Problem:
    name, a, p, q = r.choice(NAMES), r.randint(2, 9), r.randint(3, 25), r.randint(2, 9)
    k = r.randint(2, 3)
    cost = a * p + a * k * q
    bill = next(v for v in (20, 50, 100, 200, 500) if v > cost)
    match r.randrange(2):
        case 0:
            return _story(
                r,
                [
                    f"{name} buys {_num(r, a)} notebooks at {p} dollars each.",
                    f"{name} also buys {_times(r, k)} as many pens, at {q} dollars each.",
                    f"{name} pays with a {bill}-dollar bill.",
                ],
                f"How many dollars of change does {name} get?",
                name,
            ), f"{bill} - ({a} * {p} + {a} * {k} * {q})"
        case _:
            b = a * k
            return (
                f"How much change does {name} get from {bill} dollars after buying {a} notebooks at {p} dollars "
                f"each and {b} pens at {q} dollars each?",
                f"{bill} - ({a} * {p} + {b} * {q})",
            )


def _passengers(r: random.Random) -> Problem:
    s = r.randint(30, 90)
    o1, n1 = r.randint(3, s - 5), r.randint(2, 30)
    after = s - o1 + n1
    match r.randrange(3):
        case 0:
            o2, n2 = r.randint(1, after), r.randint(0, 25)
            return _story(
                r,
                [
                    f"A train leaves the first station with {s} passengers.",
                    f"At the next station {o1} people get off and {n1} get on.",
                    f"At the station after that {o2} get off and {n2} get on.",
                ],
                "How many passengers are on the train now?",
            ), f"{s} - {o1} + {n1} - {o2} + {n2}"
        case 1:
            n1 += after % 2  # an even number stays aboard, so half of them is whole
            return _story(
                r,
                [
                    f"A bus starts its route with {s} passengers.",
                    f"At the first stop {o1} get off and {n1} get on.",
                    "At the second stop half of the passengers get off.",
                ],
                "How many passengers stay on the bus?",
            ), f"({s} - {o1} + {n1}) / 2"
        case _:
            o2 = r.randint(1, after)
            return (
                f"How many books are on the shelf on Wednesday if it held {s} books on Monday, {o1} were borrowed "
                f"and {n1} returned on Tuesday, and {o2} more were borrowed on Wednesday?",
                f"{s} - {o1} + {n1} - {o2}",
            )


def _work_rate(r: random.Random) -> Problem:
    match r.randrange(2):
        case 0:
            b, m = r.choice([6, 12, 24]), r.randint(2, 5)
            c = m * r.randint(3, 30)
            return _story(
                r,
                [
                    f"A machine fills {b * m} bottles a minute.",
                    f"An order is {c} crates with {b} bottles in each crate.",
                ],
                "How many minutes does the machine need for the order?",
            ), f"{c} * {b} / {b * m}"
        case _:
            p1, p2, t = r.randint(5, 40), r.randint(5, 40), r.randint(6, 60)
            return (
                f"How many minutes do two pumps need to fill a {(p1 + p2) * t}-litre pool if one pumps {p1} "
                f"litres a minute and the other {p2} litres a minute?",
                f"{(p1 + p2) * t} / ({p1} + {p2})",
            )


def _area(r: random.Random) -> Problem:
    length, width = r.randint(8, 60), r.randint(5, 40)
    match r.randrange(3):
        case 0:
            a, b = r.randint(2, 6), r.randint(2, 5)
            return _story(
                r,
                [
                    f"A garden is {length} metres long and {width} metres wide.",
                    f"A shed of {a} metres by {b} metres stands in it.",
                ],
                "How many square metres of the garden are not covered by the shed?",
            ), f"{length} * {width} - {a} * {b}"
        case 1:
            c = r.randint(3, 15)
            return (
                f"How many dollars does it cost to fence a rectangular field {length} metres long and {width} "
                f"metres wide if fencing costs {c} dollars a metre?",
                f"2 * ({length} + {width}) * {c}",
            )
        case _:
            c = r.randint(2, 9)
            return _story(
                r,
                [
                    f"A floor is {length} metres by {width} metres.",
                    f"Carpet costs {c} dollars per square metre.",
                ],
                "How many dollars does carpet for the whole floor cost?",
            ), f"{length} * {width} * {c}"


def _groups(r: random.Random) -> Problem:
    v = r.choice([6, 8, 10, 12, 15])
    match r.randrange(2):
        case 0:
            total = v * r.randint(3, 20)
            t = r.randint(2, min(12, total - 1))
            return _story(
                r,
                [
                    f"{total - t} students and {t} teachers go on a trip.",
                    f"Every van holds {v} people and every van is full.",
                ],
                "How many vans do they use?",
            ), f"({total - t} + {t}) / {v}"
        case _:
            n, p = r.randint(3, 8), r.randint(8, 30)
            k = n * r.randint(1, 4)
            return (
                f"How many dollars does each of {_num(r, n)} friends pay if they share the cost of {k} pizzas "
                f"at {p} dollars each equally?",
                f"{k} * {p} / {n}",
            )


def _daily_log(r: random.Random) -> Problem:
    name, x, k = r.choice(NAMES), r.randint(6, 60), r.randint(2, 3)
    d = r.randint(1, x * k - 1)
    match r.randrange(2):
        case 0:
            return _story(
                r,
                [
                    f"On Monday {name} runs {x} kilometres.",
                    f"On Tuesday {name} runs {_times(r, k)} as far as on Monday.",
                    f"On Wednesday {name} runs {d} kilometres less than on Tuesday.",
                ],
                f"How many kilometres does {name} run in the three days?",
                name,
            ), f"{x} + {x} * {k} + ({x} * {k} - {d})"
        case _:
            return (
                f"How many pages did {name} read over three days if {name} read {x} pages on Friday, "
                f"{_times(r, k)} as many on Saturday and {d} fewer on Sunday than on Saturday?",
                f"{x} + {x} * {k} + ({x} * {k} - {d})",
            )


def _profit(r: random.Random) -> Problem:
    name = r.choice(NAMES)
    match r.randrange(2):
        case 0:
            n, c = r.randint(20, 120), r.randint(2, 9)
            p, s = c + r.randint(2, 8), r.randint(1, 10)
            while (n - s) * p < n * c:
                s -= 1
            return _story(
                r,
                [
                    f"A vendor buys {n} melons for {c} dollars each.",
                    f"{_num(r, s).capitalize()} of them spoil.",
                    f"The vendor sells the rest for {p} dollars each.",
                ],
                "How many dollars of profit does the vendor make?",
                name,
            ), f"({n} - {s}) * {p} - {n} * {c}"
        case _:
            a, b, p = r.randint(5, 40), r.randint(3, 20), r.randint(2, 5)
            k = (a + b) // p + r.randint(5, 60)
            return (
                f"What is {name}'s profit in dollars if {name} spends {a} dollars on lemons and {b} dollars on "
                f"cups and then sells {k} cups of lemonade at {p} dollars each?",
                f"{k} * {p} - ({a} + {b})",
            )


MIX_FAMILIES: dict[str, Callable[[random.Random], Problem]] = {
    "discount": _discount,
    "percent_group": _percent_group,
    "fraction": _fraction,
    "compare": _compare,
    "convert": _convert,
    "dozens": _dozens,
    "wage": _wage,
    "ratio": _ratio,
    "ages": _ages,
    "change": _change,
    "passengers": _passengers,
    "work_rate": _work_rate,
    "area": _area,
    "groups": _groups,
    "daily_log": _daily_log,
    "profit": _profit,
}


# --- Chains: every sentence derives a quantity from earlier ones, the question combines several ----------

THINGS = ["stickers", "marbles", "coins", "books", "stamps", "shells", "cards", "beads"]
ITEMS = {"notebook": "notebooks", "pen": "pens", "backpack": "backpacks", "ruler": "rulers", "lamp": "lamps",
         "mug": "mugs", "scarf": "scarves", "kite": "kites", "puzzle": "puzzles", "torch": "torches"}  # fmt: skip
Known = dict[str, tuple[str, int]]  # name -> (expression, value) of each amount the story has given so far


def _group(expression: str) -> str:
    """``expression`` as one operand: a bare number stays bare, anything else gets parentheses."""
    return expression if expression.isdigit() else f"({expression})"


def _relation(
    r: random.Random, subject: str, known: Known, say: Callable[[str], str], verb: str, unit: str
) -> tuple[str, str, int]:
    """One sentence that gives ``subject``'s amount through amounts already known: (sentence, expression, value).

    The relations: k times as many, m more, m fewer, a part (half, a third, a quarter), as many as two known
    amounts together, and the first two said the other way round ("Omar has 5 more than Mia" or "Omar has
    twice as many as Mia" with Omar known and Mia new: a difference or a quotient). ``say`` turns a name
    into its noun phrase ("Mia", "a mug"), ``verb`` is "has" or "costs", ``unit`` "stickers" or "dollars".
    """
    ref = r.choice(list(known))
    e, v = known[ref]
    new, old = say(subject), say(ref)
    k, m = r.randint(2, 4), r.randint(3, max(3, min(40, v - 1)))
    # "costs twice as much as", "has twice as many coins as"
    many = "much" if verb == "costs" else f"many {unit}"
    fewer = "less" if verb == "costs" else "fewer"
    options = [
        (f"{new} {verb} {_times(r, k)} as {many} as {old}.", f"{_group(e)} * {k}", v * k),
        (f"{new} {verb} {m} {unit} more than {old}.", f"{_group(e)} + {m}", v + m),
    ]
    if v > m:
        options.append((f"{new} {verb} {m} {unit} {fewer} than {old}.", f"{_group(e)} - {m}", v - m))
        options.append((f"{old} {verb} {m} {unit} more than {new}.", f"{_group(e)} - {m}", v - m))
    for d, part in PARTS.items():
        if d < 5 and v % d == 0 and v // d > 1:
            options.append((f"{new} {verb} {part} as {many} as {old}.", f"{_group(e)} / {d}", v // d))
            options.append((f"{old} {verb} {_times(r, d)} as {many} as {new}.", f"{_group(e)} / {d}", v // d))
    if len(known) >= 2:
        a, b = r.sample(list(known), 2)
        (ea, va), (eb, vb) = known[a], known[b]
        options.append(
            (
                f"{new} {verb} as {many} as {say(a)} and {say(b)} together.",
                f"{_group(ea)} + {_group(eb)}",
                va + vb,
            )
        )
    sentence, expression, value = r.choice(options)
    return sentence[0].upper() + sentence[1:], expression, value


def _chain(r: random.Random) -> Problem:
    """Three to five people, each amount derived from earlier ones; the question adds, compares or follows."""
    thing, people = r.choice(THINGS), r.sample(NAMES, r.randint(3, 5))
    x = r.randint(12, 150)
    known: Known = {people[0]: (str(x), x)}
    facts = [f"{people[0]} has {x} {thing}."]
    for person in people[1:]:
        sentence, e, v = _relation(r, person, known, str, "has", thing)
        known[person] = (e, v)
        facts.append(sentence)
    a, b = sorted(r.sample(people, 2), key=lambda p: known[p][1], reverse=True)
    match r.randrange(4):
        case 0:
            question = r.choice([
                f"How many {thing} do they have altogether?",
                f"How many {thing} do the {_num(r, len(people))} friends have in all?",
                f"What is the total number of {thing} the friends have?",
            ])  # fmt: skip
            expression = " + ".join(_group(e) for e, _ in known.values())
        case 1:
            question = f"How many {thing} do {a} and {b} have together?"
            expression = f"{_group(known[a][0])} + {_group(known[b][0])}"
        case 2 if known[a][1] > known[b][1]:
            question = f"How many more {thing} does {a} have than {b}?"
            expression = f"{_group(known[a][0])} - {_group(known[b][0])}"
        case _:
            question = f"How many {thing} does {people[-1]} have?"
            expression = known[people[-1]][0]
    return _story(r, facts, question, people[0]), expression


def _prices(r: random.Random) -> Problem:
    """Prices given through one another, then a basket of several of each: its cost or the change."""
    items = r.sample(list(ITEMS), r.randint(2, 4))
    x = r.randint(3, 60)
    known: Known = {items[0]: (str(x), x)}
    facts = [f"A {items[0]} costs {x} dollars."]
    for item in items[1:]:
        sentence, e, v = _relation(r, item, known, lambda i: f"a {i}", "costs", "dollars")
        known[item] = (e, v)
        facts.append(sentence)
    name = r.choice(NAMES)
    counts = {item: r.randint(1, 6) for item in r.sample(items, r.randint(2, len(items)))}
    basket = " and ".join(f"{_num(r, n)} {ITEMS[i]}" if n > 1 else f"one {i}" for i, n in counts.items())
    cost = " + ".join(
        f"{_group(known[i][0])} * {n}" if n > 1 else _group(known[i][0]) for i, n in counts.items()
    )
    if r.random() < 0.5:
        return _story(r, facts, f"How many dollars does {name} pay for {basket}?", name), cost
    total = sum(known[i][1] * n for i, n in counts.items())
    bill = next(b for b in (20, 50, 100, 200, 500, 1000, 5000, 10000, 100000) if b >= total)
    facts.append(f"{name} buys {basket} and pays with {bill} dollars.")
    return _story(r, facts, f"How many dollars of change does {name} get?", name), f"{bill} - ({cost})"


CHAIN_FAMILIES: dict[str, Callable[[random.Random], Problem]] = {"chain": _chain, "prices": _prices}


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


def build_split(
    size: int,
    seed: str,
    exclude: set[str] = frozenset(),
    families: dict[str, Callable[[random.Random], Problem]] = FAMILIES,
) -> list[dict[str, Any]]:
    """``size`` rows, the families in turn (balanced), no question repeated or taken from ``exclude``."""
    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    seen = set(exclude)
    names = list(families)
    while len(rows) < size:
        family = names[len(rows) % len(names)]
        question, expression = families[family](rng)
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
    """Write the train, held-out, out-of-distribution and mix splits."""
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
    # The mix comes last, from its own random streams: the splits above stay byte-identical.
    taken = {r["messages"][0]["content"] for rows in splits.values() for r in rows}
    splits["heldout_mix"] = build_split(
        args.heldout, f"{args.seed}:heldout_mix", exclude=taken, families=MIX_FAMILIES
    )
    taken |= {r["messages"][0]["content"] for r in splits["heldout_mix"]}
    splits["train_mix"] = build_split(
        args.train, f"{args.seed}:train_mix", exclude=taken, families=FAMILIES | MIX_FAMILIES
    )
    # The chains, last again: a third of train_chain's rows, the rest train_mix's first rows.
    taken |= {r["messages"][0]["content"] for r in splits["train_mix"]}
    splits["heldout_chain"] = build_split(
        args.heldout // 3, f"{args.seed}:heldout_chain", exclude=taken, families=CHAIN_FAMILIES
    )
    taken |= {r["messages"][0]["content"] for r in splits["heldout_chain"]}
    chains = build_split(args.train // 3, f"{args.seed}:train_chain", exclude=taken, families=CHAIN_FAMILIES)
    train_chain = chains + splits["train_mix"][: args.train - len(chains)]
    random.Random(f"{args.seed}:train_chain:order").shuffle(train_chain)
    splits["train_chain"] = train_chain
    for name, rows in splits.items():
        write_jsonl(rows, args.out / f"{name}.jsonl")
        families = Counter(r["family"] for r in rows)
        print(f"{name}: {len(rows)} problems, {dict(sorted(families.items()))}")


if __name__ == "__main__":
    main()
