"""Which run and which rank a process belongs to, for every record and log line it writes.

The run id is ``$RLFACTORY_RUN_ID`` when set (``train`` sets it to the run folder's name; set it yourself
to name a run across nodes); otherwise rank 0 makes one at start and hands it to the other ranks. The rank
is the launcher's ``RANK`` (torchrun, ms-swift). Details: docs/run-folder.md#run-id-and-rank.
"""

from __future__ import annotations

import logging
import os
import secrets
import time

RUN_ID_VAR = "RLFACTORY_RUN_ID"
_TAGGED = "swift_rlfactory"  # the loggers whose lines carry the run and the rank


def rank() -> int:
    """This process's rank among all ranks of the run (0 when started alone)."""
    written = os.environ.get("RANK", "").strip()
    return int(written) if written.isdigit() else 0


def run_id() -> str:
    """The run's id: ``$RLFACTORY_RUN_ID``, made (``<YYYYmmdd-HHMMSS>-<6 hex digits>``) and put there on
    first use, so the processes this one starts (tool servers) inherit it."""
    current = os.environ.get(RUN_ID_VAR, "").strip()
    if not current:
        current = os.environ[RUN_ID_VAR] = f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
    return current


def adopt_run_id(value: str) -> None:
    """Take ``value`` (rank 0's id) as this process's run id."""
    os.environ[RUN_ID_VAR] = value


def tag_log_lines() -> None:
    """Make every line of the package's loggers start with ``[run <id> rank <r>]``, whatever handler
    prints it (ms-swift's, the root's, pytest's); idempotent. The record factory, not a filter, because a
    logger's filters never see the records of its child loggers."""
    previous = logging.getLogRecordFactory()
    if getattr(previous, "tags_runs", False):
        return

    def factory(name: str, *args, **kwargs) -> logging.LogRecord:
        record = previous(name, *args, **kwargs)
        if name == _TAGGED or name.startswith(_TAGGED + "."):
            record.run_id, record.rank = run_id(), rank()
            record.msg = f"[run {record.run_id} rank {record.rank}] {record.msg}"
        return record

    factory.tags_runs = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(factory)
