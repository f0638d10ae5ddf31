"""benchmarks/deepsearch/issue30.sh, the orchestration of issue 30's GPU run, with stub phases.

The phases are benchmarks/deepsearch/h200.sh's and need a GPU; what runs here is what the script adds: the
order, which phases share the GPU, the knobs each gets (the SFT baseline's data, the reworded pool, the
GRPO environment, one run a seed with its own port), validation beside training, and the choice on val
before the scores.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "deepsearch" / "issue30.sh"
KEYS = ("RUN_NAME", "SEED", "MASTER_PORT", "ENV_FILE", "LR", "STEPS", "SAVE_STEPS", "CHOOSE", "POOL_FILE",
        "SFT_ROWS", "SINGLE_HOP", "RECHECK", "SHIFTS", "GPU_UTIL", "VLLM_UTIL", "STRATIFY", "PER_STRATUM",
        "TRAIN_TIMEOUT", "BETA")  # fmt: skip
STUB = r"""#!/usr/bin/env bash
python3 - "$CALLS" "$@" <<'PY'
import json, os, sys, time
calls, phase, *rest = sys.argv[1:]
keys = os.environ["KEYS"].split()
with open(calls, "a") as out:
    out.write(json.dumps({"phase": phase, "args": rest, "t": time.time(), **{k: os.environ.get(k) for k in keys}}) + "\n")
PY
[ "$1" = train ] && sleep 2
[ "$1" = "${FAIL:-}" ] && exit 3
exit 0
"""


def run(tmp_path: Path, rc: int = 0, **env: str) -> list[dict]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    stub = tmp_path / "stub.sh"
    stub.write_text(STUB)
    calls = tmp_path / "calls.jsonl"
    environ = {k: v for k, v in os.environ.items() if k not in ("ENV_FILE", "SHIFTS", "LR", "SEED", "BETA")}
    environ = {**environ, "DS": f"bash {stub}", "CALLS": str(calls), "KEYS": " ".join(KEYS),
               "POOL": str(tmp_path / "pool.jsonl"), "STAGGER": "0", "RETRY_PAUSE": "0", "POLL": "0.2",
               "VALIDATE_EVERY": "0", "PYTHONPATH": str(ROOT), **env}  # fmt: skip
    done = subprocess.run(["bash", str(SCRIPT), str(tmp_path / "r")], cwd=ROOT, env=environ,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == rc, done.stdout + done.stderr
    assert ("pipeline\tend" in (tmp_path / "r" / "phases.tsv").read_text()) == (rc == 0)
    return [json.loads(line) for line in calls.read_text().splitlines()]


@pytest.mark.timeout(120)
def test_the_sft_baseline_then_two_seeds_each_chosen_on_val_by_its_worst_shift(tmp_path: Path):
    calls = run(tmp_path)
    order = [c["phase"] + ("" if c["CHOOSE"] is None else "*") + (c["RUN_NAME"] or "") for c in calls]
    first = {name: order.index(name) for name in reversed(order)}
    for earlier, later in [("prepare", "sft"), ("sft", "select"), ("sft", "eval-sft"), ("sft", "shifts-sft"),
                           ("select", "trainds-s1"), ("select", "trainds-s2")]:  # fmt: skip
        assert first[earlier] < first[later], (earlier, later, order)
    for seed in ("1", "2"):
        run_name = f"ds-s{seed}"
        [train] = [c for c in calls if c["phase"] == "train" and c["RUN_NAME"] == run_name]
        assert (train["SEED"], train["ENV_FILE"], train["LR"], train["SAVE_STEPS"]) == (
            seed, "examples/deepsearch/env_needless.yaml", "3e-5", "20",
        )  # fmt: skip
        assert (
            train["BETA"] is None and train["VLLM_UTIL"]
        )  # h200.sh's own KL coefficient; a share of the GPU
        mine = [c for c in calls if c["RUN_NAME"] == run_name]
        beside = [c for c in mine if c["phase"] == "validate-shifts" and c["CHOOSE"] is None]
        [chosen] = [c for c in mine if c["phase"] == "validate-shifts" and c["CHOOSE"] == "1"]
        [scored] = [c for c in mine if c["phase"] == "eval-chosen"]
        assert beside and all(
            c["t"] < chosen["t"] for c in beside
        )  # validation beside training, then the choice
        assert chosen["t"] < scored["t"] and mine.index(train) < mine.index(chosen)
    ports = [c["MASTER_PORT"] for c in calls if c["phase"] in ("sft", "train")]
    assert None not in ports and len(set(ports)) == len(ports) == 3  # one torch.distributed store each
    # the SFT baseline: the first 1,000 train questions, every demonstration; select on the reworded pool
    [prepare] = [c for c in calls if c["phase"] == "prepare"]
    assert prepare["SFT_ROWS"] == "1000" and prepare["POOL_FILE"] == str(tmp_path / "pool.jsonl")
    assert not [c for c in calls if c["SINGLE_HOP"] or c["RECHECK"]]
    pool = [json.loads(line) for line in (tmp_path / "pool.jsonl").read_text().splitlines()]
    assert len(pool) == 1000 and 400 < sum("rewording" in row for row in pool) < 600
    assert {c["SHIFTS"] for c in calls} == {"all"}  # every shift in every evaluation


@pytest.mark.timeout(120)
def test_seeds_and_learning_rate_are_knobs_and_a_failed_select_stops_the_run(tmp_path: Path):
    calls = run(tmp_path / "a", SEEDS="7", LR="1e-5", BETA="0.2")
    trains = [c for c in calls if c["phase"] == "train"]
    assert [(c["RUN_NAME"], c["SEED"], c["LR"], c["BETA"]) for c in trains] == [("ds-s7", "7", "1e-5", "0.2")]
    calls = run(tmp_path / "b", rc=1, FAIL="select")
    assert [c["phase"] for c in calls if c["phase"] == "select"] == ["select", "select"]  # retried once
    assert not [c for c in calls if c["phase"] == "train"]
