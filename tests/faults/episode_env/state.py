"""A notebook per trajectory: setup makes it from the row, tools write and read it, teardown records it."""

import threading
import time

from swift_rlfactory.tools import EpisodeState, tool

LIVE: set[int] = set()  # ids of notebooks set up and not torn down
TORN: list[dict] = []  # notebooks as teardown saw them, in order
LOCK = threading.Lock()


def setup(row: dict) -> dict:
    if row.get("fail_setup"):
        raise RuntimeError("no world for this row")
    notebook = {"notes": [], "hang": bool(row.get("hang_teardown")), "scored": False}
    with LOCK:
        LIVE.add(id(notebook))
    return notebook


def teardown(notebook: dict) -> None:
    with LOCK:
        LIVE.discard(id(notebook))
        TORN.append(notebook)
    if notebook["hang"]:
        time.sleep(3600)


@tool
def write(note: str, state: EpisodeState) -> str:
    """Write a note into this episode's notebook.

    Args:
        note: the text to keep
    """
    state["notes"].append(note)
    return "ok"


@tool
def read(state: EpisodeState) -> str:
    """Read every note of this episode's notebook."""
    return "|".join(state["notes"])


def notes_kept(trajectory) -> float:
    """1 when the final state holds notes (read before teardown); marks the notebook as scored."""
    state = trajectory.state
    if not isinstance(state, dict):
        return 0.0
    state["scored"] = id(state) in LIVE  # the state is still live while the reward reads it
    return 1.0 if state["notes"] else 0.0
