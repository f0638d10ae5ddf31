"""A counter per episode; setup and teardown each append a JSON line to $SCRATCH_EPISODE_LOG."""

import json
import os

from swift_rlfactory.tools import EpisodeState, tool


def _log(event: str, **fields) -> None:
    with open(os.environ["SCRATCH_EPISODE_LOG"], "a") as out:
        out.write(json.dumps({"event": event, **fields}) + "\n")


def setup(row: dict) -> dict:
    _log("setup", row=row)
    return {"count": 0}


def teardown(state: dict) -> None:
    _log("teardown", count=state["count"])


@tool
def bump(state: EpisodeState) -> str:
    """Add one to this episode's counter and say its value."""
    state["count"] += 1
    return str(state["count"])
