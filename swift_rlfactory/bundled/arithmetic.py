"""The calculator's dataset: arithmetic problems a 0.5B model gains from a calculator on, generated seeded."""

from __future__ import annotations

import json
import random
from pathlib import Path


def arithmetic_problems(n: int, seed: int = 0) -> list[dict]:
    """``n`` ms-swift rows like ``{"messages": [{"role": "user", "content": "What is 37 * 12?"}], "solution": "444"}``.

    Operands are large enough that a 0.5B model gains from the calculator: 3-4 digit sums and
    differences, 2-digit products, and products plus a term.
    """
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        kind = rng.choice(["add", "sub", "mul", "mul_add"])
        if kind == "add":
            a, b = rng.randint(100, 9999), rng.randint(100, 9999)
            question, answer = f"{a} + {b}", a + b
        elif kind == "sub":
            a, b = rng.randint(1000, 9999), rng.randint(100, 999)
            question, answer = f"{a} - {b}", a - b
        elif kind == "mul":
            a, b = rng.randint(12, 99), rng.randint(12, 99)
            question, answer = f"{a} * {b}", a * b
        else:
            a, b, c = rng.randint(12, 99), rng.randint(12, 99), rng.randint(10, 999)
            question, answer = f"{a} * {b} + {c}", a * b + c
        rows.append(
            {"messages": [{"role": "user", "content": f"What is {question}?"}], "solution": str(answer)}
        )
    return rows


def build_dataset(path: Path, n: int = 256, seed: int = 0) -> Path:
    """Write :func:`arithmetic_problems` to ``path`` as JSONL and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in arithmetic_problems(n, seed)))
    return path
