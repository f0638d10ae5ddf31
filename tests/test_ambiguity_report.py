"""examples/deepsearch/ambiguity.py: two-hop questions split by how many names of the answer's kind the
bridge summary prints, read off the corpus the questions were built from."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "deepsearch" / "ambiguity.py"
sys.path.insert(0, str(SCRIPT.parent))

import ambiguity  # noqa: E402


@pytest.mark.parametrize(
    ("description", "head"),
    [
        ("country in Eastern Europe", "country"),
        ("French painter (1832–1883)", "painter"),
        ("capital city of Punjab, Pakistan", "city"),
        ("left-wing political party", "party"),
        ("American businessman and politician", "businessman"),
        ("", ""),
    ],
)
def test_a_descriptions_kind_is_its_head_noun(description, head):
    assert ambiguity.kind(description) == head


def episode(support: list[str], em: float, split: str = "test", hops: int = 2) -> dict:
    return {"row": {"hops": hops, "split": split, "support": support}, "rewards": {"em": em}}


def test_questions_are_grouped_by_the_names_of_their_kind_in_the_bridge_summary(tmp_path):
    # Musée d'Orsay's summary names Manet and Monet, both painters; Punjab's names one capital, Lahore.
    path = tmp_path / "trajectories.jsonl.gz"
    episodes = [
        episode(["Musée d'Orsay", "Édouard Manet"], 0.0),
        episode(["Punjab", "Lahore"], 1.0),
        episode(["Stonehenge", "Bronze Age"], 0.0, split="holdout"),
        episode(["Punjab", "Lahore"], 1.0, split="val"),  # not test or holdout: left out
        episode(["Nebula"], 1.0, hops=1),  # single-hop: left out
    ]
    with gzip.open(path, "wt") as f:
        f.writelines(json.dumps(e) + "\n" for e in episodes)
    out = subprocess.run(
        [sys.executable, str(SCRIPT), f"m={path}"], capture_output=True, text=True, check=True
    )
    header, _, row = out.stdout.strip().splitlines()
    cells = dict(zip(header.strip("|").split("|"), row.strip("|").split("|"), strict=True))
    cells = {k.strip(): v.strip() for k, v in cells.items()}
    assert cells["one of its kind: questions"] == "2"
    assert cells["one of its kind: EM"] == "0.500"
    assert cells["two or more of its kind: questions"] == "1"
    assert cells["two or more of its kind: EM"] == "0.000"
