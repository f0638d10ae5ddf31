"""ms-swift plugin of the rollout benchmarks: ``rlfactory`` plus the baseline and a timing probe.

    --external_plugins benchmarks/baseline_plugin.py \
    --multi_turn_scheduler sync_tools|rlfactory --callbacks rlfactory rollout_probe

* ``--multi_turn_scheduler sync_tools``: :class:`baseline_scheduler.SyncToolScheduler`, tools run one by
  one inside ``step()`` (ms-swift's example pattern); ``rlfactory`` stays registered as our plugin does it.
* ``--callbacks rollout_probe``: :class:`rollout_probe.ProbeCallback`, per-step generation and tool-phase
  times in ``<output_dir>/rollout_timeline.jsonl``, the same clocks for either scheduler.

ms-swift imports this file with its folder first on ``sys.path``, which is how the two modules next to it
are found.
"""

from __future__ import annotations

from baseline_scheduler import SyncToolScheduler
from rollout_probe import ProbeCallback
from swift.callbacks import callbacks_map
from swift.rollout import multi_turns

from swift_rlfactory.adapters.swift import register

register()
multi_turns["sync_tools"] = SyncToolScheduler
callbacks_map["rollout_probe"] = ProbeCallback
