"""What the ranks of one ``swift rlhf`` run tell each other: each step's metric parts (so the logged
metrics describe the whole batch), rank 0's run id, and rank 0's hold on the run folder.

``torch.distributed`` is used only when ms-swift initialised it with more than one rank; a process started
alone gathers its own part. Why and how: docs/scaling.md#metrics-over-ranks.
"""

from __future__ import annotations

import atexit
import logging
import sys
import time
from pathlib import Path
from typing import IO, Any, TypeVar

import torch.distributed as dist

from ..runs import identity
from ..runs.lock import lock_folder

logger = logging.getLogger("swift_rlfactory")

T = TypeVar("T")
_HELD: dict[str, IO[str]] = {}  # run folder -> its lock, held by this process until it exits


def world_size() -> int:
    """The ranks of the process group (1 without one)."""
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def gather(part: T) -> list[T]:
    """Every rank's ``part``, in rank order; a collective call, so every rank must make it (ms-swift
    scores and steps on every rank together). Small payloads: ``all_gather_object`` pickles them."""
    if world_size() < 2:
        return [part]
    parts: list[Any] = [None] * world_size()
    dist.all_gather_object(parts, part)
    return parts


def start_run(output_dir: str | None) -> None:
    """At the start of a run on every rank: rank 0 holds the run folder (a second run into it stops here,
    naming this one) and hands its run id to the other ranks."""
    rank = dist.get_rank() if world_size() > 1 else identity.rank()
    if rank == 0 and output_dir:
        folder = str(Path(output_dir).resolve())
        if folder not in _HELD:  # one process may build the reward more than once
            _HELD[folder] = lock_folder(
                folder,
                identity.run_id(),
                hint="; two runs in one folder interleave their logs: wait for it, or give this run another "
                "--output_dir (or leave --add_version at its default, true)",
            )
    if world_size() > 1:
        atexit.unregister(leave_group)  # once per process, however many runs it starts
        atexit.register(leave_group)
        shared = [identity.run_id() if rank == 0 else None]
        dist.broadcast_object_list(shared, src=0)
        identity.adopt_run_id(shared[0])
    logger.info("run %s, rank %d of %d", identity.run_id(), rank, world_size())


def leave_group() -> None:
    """At exit, after a run that ended cleanly on gloo (CPU ranks): destroy the process group, which ms-swift's
    ``swift rlhf`` never does, then wait with the GIL free until gloo's worker threads are asleep
    (:func:`settle_gloo_workers`). Not after an unhandled exception (``sys.last_type``: a destroy then can hang,
    as ms-swift's Megatron path notes), and not on NCCL, whose teardown this was not seen to need."""
    if hasattr(sys, "last_type") or not (dist.is_available() and dist.is_initialized()):
        return
    if dist.get_backend() == "gloo":
        dist.destroy_process_group()
        settle_gloo_workers()


GLOO_WORKER = "pt_gloo_runloop"  # the OS name torch gives ProcessGroupGloo's worker threads


def settle_gloo_workers(timeout_s: float = 2.0, poll_s: float = 0.02, calm_polls: int = 3) -> None:
    """Sleep (the GIL free) until no gloo worker thread has run for ``calm_polls`` polls in a row, at most
    ``timeout_s``. The workers outlive ``destroy_process_group`` while DDP's wrapper holds the group; one that
    drops a finished collective's tensor after the interpreter began finalizing must take the GIL, is ended
    by ``pthread_exit``, and its unwind through torch's noexcept frames aborts the rank ("terminate called
    without an active exception" after a finished run; caught with a std::terminate hook on 2026-12-07)."""
    deadline, calm = time.monotonic() + timeout_s, 0
    while calm < calm_polls and time.monotonic() < deadline:
        time.sleep(poll_s)
        calm = 0 if _gloo_worker_running() else calm + 1


def _gloo_worker_running() -> bool:
    """Whether a gloo worker thread of this process is running or runnable (Linux's /proc; elsewhere False)."""
    try:
        tasks = list(Path("/proc/self/task").iterdir())
    except OSError:
        return False
    for task in tasks:
        try:
            if (task / "comm").read_text().strip() != GLOO_WORKER:
                continue
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # the thread ended meanwhile
        if state == "R":
            return True
    return False
