"""swift_rlfactory.eval.failures: every episode lands in the kind of failure its tool calls show."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

BRIDGE = (
    'Doc 1(Title: "Stonehenge") A monument built in the Bronze Age near Amesbury, not far from Salisbury.'
)


def docs(*titles: str) -> str:
    return "\n".join(f'Doc {i}(Title: "{t}") Text about {t}.' for i, t in enumerate(titles, start=1))


def two_hop(answer: str | None, observations: list[str], em: float = 0.0, split: str = "test") -> dict:
    row = {"hops": 2, "split": split, "solution": "Bronze Age", "support": ["Stonehenge", "Bronze Age"]}
    calls = [{"tool": "search", "observation": o, "error": None} for o in observations]
    reply = [{"role": "assistant", "content": f"<answer>{answer}</answer>"}] if answer else []
    return {"row": row, "tool_calls": calls, "messages": reply, "rewards": {"em": em}}


def gsm(solution: str, results: list[str | None], em: float = 0.0) -> dict:
    calls = [{"observation": r, "error": None if r else "invalid arguments"} for r in results]
    return {
        "row": {"family": "gsm_symbolic", "solution": solution},
        "tool_calls": calls,
        "messages": [],
        "rewards": {"em": em},
    }


def run(tmp_path: Path, task: str, episodes: list[dict]) -> dict[str, int]:
    path = tmp_path / "trajectories.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.writelines(json.dumps(e) + "\n" for e in episodes)
    out = subprocess.run(
        [sys.executable, "-m", "swift_rlfactory.eval.failures", task, f"m={path}"],
        capture_output=True,
        text=True,
        check=True,
    )
    header, _, row = out.stdout.strip().splitlines()
    keys = [c.strip() for c in header.strip("|").split("|")]
    values = [c.strip() for c in row.strip("|").split("|")]
    return {k: int(v) for k, v in zip(keys[1:], values[1:], strict=True)}


def test_deepsearch_two_hop_misses_are_told_apart_by_their_searches(tmp_path):
    counts = run(tmp_path, "deepsearch", [
        two_hop("Bronze Age", [BRIDGE, docs("Bronze Age")], em=1.0),
        two_hop("Salisbury", [BRIDGE, docs("Salisbury")]),                # another name the bridge prints
        two_hop("Iron Age", [BRIDGE, docs("Iron Age", "Copper Age")]),     # the 2nd search's title, not in the passage
        two_hop("Iron Age", [BRIDGE, docs("Iron Age", "Bronze Age")]),     # found, then read wrong
        two_hop("Salisbury", [docs("Amesbury")]),                         # the bridge never came back
        two_hop("Atlantis", [BRIDGE, docs("Iron Age")]),                  # from nowhere
        two_hop(None, [BRIDGE, docs("Iron Age")]),
        two_hop("Salisbury", [BRIDGE], split="ood"),                      # not a test or holdout question
        {**two_hop("x", [BRIDGE]), "row": {"hops": 1, "split": "test", "solution": "x"}},
    ])  # fmt: skip
    assert counts == {
        "questions": 7, "right": 1, "first search short": 1, "another name of the bridge passage": 1,
        "a title of the 2nd search the passage does not name": 1, "answer's article found, another title answered": 1,
        "something else answered": 1, "no answer": 1,
    }  # fmt: skip


def test_arithmetic_misses_separate_the_protocol_from_the_expression(tmp_path):
    counts = run(tmp_path, "arithmetic", [
        gsm("74", ["74\nIf this is the final result, reply with <answer>74</answer>."], em=1.0),
        gsm("74", []),
        gsm("74", [None, None]),
        gsm("74", ["74\n...", "75\n..."]),  # saw 74, answered something else
        gsm("74", ["9.5\n..."]),
        gsm("74", ["37\n..."]),
        {**gsm("74", []), "row": {"family": "discount", "solution": "74"}},  # one of our own families
    ])  # fmt: skip
    assert counts == {
        "questions": 6, "right": 1, "no tool call": 1, "only failed calls": 1,
        "right result, not answered": 1, "non-integer result": 1, "wrong expression": 1,
    }  # fmt: skip
