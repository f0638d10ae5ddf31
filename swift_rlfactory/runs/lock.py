"""A run folder held by one run at a time: an ``fcntl`` lock on ``<folder>/.lock``, kept for the holder's
life, naming the holder (pid, host, start time, run id) to any other run that tries the folder.

The operating system drops the lock when its holder dies, so a lock file left by a dead run is simply
taken over. Why and where it is taken: docs/run-folder.md#one-run-per-folder.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import IO, Any

LOCK = ".lock"


class FolderBusy(RuntimeError):
    """Another live run holds the folder."""


def lock_folder(folder: str | Path, run_id: str | None = None, hint: str = "") -> IO[str]:
    """Hold ``folder``'s lock and write this process into it; the returned open file holds the lock until
    it is closed (or the process ends). Raises :class:`FolderBusy` naming the holder, followed by ``hint``
    (what to do instead)."""
    path = Path(folder) / LOCK
    path.parent.mkdir(parents=True, exist_ok=True)
    handle = path.open("a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = _holder_text(handle.read())
        handle.close()
        raise FolderBusy(f"{path.parent} is in use by another run ({holder}){hint}") from None
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    if run_id:
        holder["run_id"] = run_id
    handle.seek(0)
    handle.truncate()
    handle.write(json.dumps(holder) + "\n")
    handle.flush()
    return handle


def _holder_text(text: str) -> str:
    try:
        holder: Any = json.loads(text)
    except ValueError:
        holder = None
    if not isinstance(holder, dict):
        return "its holder did not say who it is"
    parts = [f"pid {holder.get('pid')} on {holder.get('host')}", f"started {holder.get('started')}"]
    if holder.get("run_id"):
        parts.append(f"run {holder['run_id']}")
    return ", ".join(parts)
