"""Command-line numbers that could only do nothing or something silently wrong fail at parse time, naming
the flag (``--limit 0`` ran no question, ``--limit -1`` dropped the last, ``--repeat 0`` called nothing)."""

from __future__ import annotations

import pytest

from swift_rlfactory.cli import main

EVAL = ["eval", "--env", "e.yaml", "--dataset", "d.jsonl"]  # parsing stops before either file is read


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["tools", "call", "env.yaml", "echo", "{}", "--repeat", "0"],
            "argument --repeat: must be at least 1, got 0",
        ),
        (
            [*EVAL, "--limit", "-1"],
            "argument --limit: must be at least 1",
        ),
        (
            [*EVAL, "--max-turns", "0"],
            "argument --max-turns: must be at least 1",
        ),
        (
            [*EVAL, "--samples", "two"],
            "argument --samples: not a whole number: 'two'",
        ),
        (
            [*EVAL, "--temperature", "-0.5"],
            "argument --temperature: must be at least 0",
        ),
        (
            [*EVAL, "--top-p", "1.5"],
            "argument --top-p: must be above 0 and at most 1",
        ),
        (
            [*EVAL, "--timeout", "0"],
            "argument --timeout: must be above 0",
        ),
        (["train", "--num-generations", "0", "--dry-run"], "argument --num-generations: must be at least 1"),
        (["train", "--steps", "-1", "--dry-run"], "argument --steps: must be at least 1"),
        (["train", "--learning-rate", "nan", "--dry-run"], "argument --learning-rate: must be finite"),
        (
            ["rewards", "env.yaml", "--trajectories", "t.jsonl", "--limit", "0"],
            "argument --limit: must be at least 1",
        ),
    ],
)
def test_numbers_that_cannot_mean_anything_fail_naming_the_flag(argv, message, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert message in capsys.readouterr().err
