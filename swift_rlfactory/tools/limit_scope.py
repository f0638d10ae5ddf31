"""Concurrency limits meant for the whole run, split across the ranks that each enforce their own share.

Every rank (process) runs its own executor and judge client, so a limit of 64 against a shared server is
64 per rank. A limit whose scope is ``node`` or ``run`` is divided by the ranks that share it, read from
the launcher's variables (torchrun, ms-swift: ``LOCAL_WORLD_SIZE``, ``WORLD_SIZE``). Which limits are per
rank: docs/cache.md#limits-across-ranks.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal

LimitScope = Literal["rank", "node", "run"]
"""Who shares a limit: each rank alone, the ranks of one machine, or every rank of the run."""

_RANKS_VARIABLE = {"node": "LOCAL_WORLD_SIZE", "run": "WORLD_SIZE"}


def ranks_sharing(scope: LimitScope, environ: Mapping[str, str] | None = None) -> int:
    """How many ranks share a limit of ``scope``: 1 for ``rank``, else the launcher's count (1 when the
    variable is unset or not a positive number: a process started alone)."""
    if scope == "rank":
        return 1
    written = (os.environ if environ is None else environ).get(_RANKS_VARIABLE[scope], "")
    return int(written) if written.strip().isdigit() and int(written) > 0 else 1


def rank_share(limit: int, scope: LimitScope, environ: Mapping[str, str] | None = None) -> int:
    """This rank's share of ``limit``: the limit divided by the ranks sharing it, rounded down, at least 1
    (so with more ranks than the limit, the ranks together may exceed it: one call each)."""
    return max(1, limit // ranks_sharing(scope, environ))
