"""The booking GPU pipeline's orchestration (benchmarks/booking/pipeline.sh) with stub phases, and the
summary it ends with (benchmarks/booking/summarize.py) on hand-made reports. The phases themselves need a GPU;
benchmarks/booking/RESULTS.md records their CPU check with a tiny model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "benchmarks" / "booking" / "pipeline.sh"
sys.path.insert(0, str(ROOT / "benchmarks" / "booking"))

import summarize  # noqa: E402

STUB = r"""#!/usr/bin/env bash
# stub of benchmarks/booking/h200.sh: PHASE OUT; records each call as one JSON line
python3 - "$CALLS" "$@" <<'PY'
import json, os, sys, time
calls, phase, out = sys.argv[1:]
keys = ("SEED", "MASTER_PORT", "GPU_UTIL", "VLLM_UTIL", "MICRO_BATCH", "GRAD_ACC", "STEPS", "TRAIN_TIMEOUT",
        "SLEEP_LEVEL", "TRAIN_FLAGS")
with open(calls, "a") as f:
    f.write(json.dumps({"phase": phase, "t": time.time(), **{k: os.environ.get(k) for k in keys}}) + "\n")
PY
[ "$1" = train ] && sleep 1
[ "$1" = "${FAIL:-}" ] && exit 3
exit 0
"""


def run_pipeline(tmp_path: Path, **env: str) -> list[dict]:
    stub = tmp_path / "stub.sh"
    stub.write_text(STUB)
    calls = tmp_path / "calls.jsonl"
    environ = {
        **os.environ,
        "BK": f"bash {stub}",
        "CALLS": str(calls),
        "STAGGER": "0",
        "RETRY_PAUSE": "0",
        **env,
    }
    done = subprocess.run(
        ["bash", str(PIPELINE), str(tmp_path / "results")], cwd=ROOT, env=environ, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pipeline\tend" in (tmp_path / "results" / "phases.tsv").read_text()
    return [json.loads(line) for line in calls.read_text().splitlines()]


def named(calls: list[dict]) -> list[str]:
    return [
        c["phase"] + (f"-s{c['SEED']}" if c["phase"] in ("train", "select", "eval-trained") else "")
        for c in calls
    ]


@pytest.mark.timeout(120)
def test_the_pipeline_runs_both_seeds_after_sft_each_with_its_own_port(tmp_path):
    calls = run_pipeline(tmp_path, DEADLINE="1080")
    order = named(calls)
    assert order[0] == "prepare" and sorted(order) == sorted(
        [
            "prepare",
            "eval-base",
            "sft",
            "eval-sft",
            *(f"{p}-s{s}" for s in (1, 2) for p in ("train", "select", "eval-trained")),
        ]
    )
    for seed in (1, 2):
        assert order.index("sft") < order.index(f"train-s{seed}") < order.index(f"select-s{seed}")
        assert order.index(f"select-s{seed}") < order.index(f"eval-trained-s{seed}")
    trains = [c for c in calls if c["phase"] == "train"]
    assert len({c["MASTER_PORT"] for c in trains}) == 2 and all(c["MASTER_PORT"] != "29521" for c in trains)
    for c in trains:  # 32 completions a step, and the evaluations after training keep their reserve
        assert int(c["MICRO_BATCH"]) * int(c["GRAD_ACC"]) == 32 and c["STEPS"] == "60"
        assert 0 < int(c["TRAIN_TIMEOUT"]) <= 1080 - 270
        # no vLLM start-up check left to race the other trainer: never asleep, a KV cache of fixed size
        assert c["SLEEP_LEVEL"] == "0"
        flag, kwargs = c["TRAIN_FLAGS"].split()[:2]
        assert flag == "--vllm_engine_kwargs" and json.loads(kwargs) == {"kv_cache_memory_bytes": 3 * 2**30}
    assert {c["GPU_UTIL"] for c in calls if c["phase"].startswith("eval")} <= {"0.25", "0.15"}
    assert "summary\tend" in (tmp_path / "results" / "phases.tsv").read_text()
    assert (tmp_path / "results" / "summary.md").exists()


@pytest.mark.timeout(120)
def test_a_failed_sft_trains_nothing_and_still_summarizes(tmp_path):
    calls = run_pipeline(tmp_path, FAIL="sft", DEADLINE="100")  # < 4 min left: no retry
    assert named(calls) in (["prepare", "eval-base", "sft"], ["prepare", "sft", "eval-base"])
    assert "summary\tend" in (tmp_path / "results" / "phases.tsv").read_text()


def report(success: float, ood: float) -> dict:
    line = {"episodes": 10, "success": success, "constraints": success, "tool_calls": 4.0, "turns": 3.0}
    return {"test/all": line, "test/flight": line, "ood/all": {**line, "success": ood}}


def test_the_summary_checks_the_target_on_every_seed(tmp_path):
    for name, test, ood in (
        ("base", 0.0, 0.0),
        ("sft", 0.4, 0.3),
        ("trained-s1", 0.6, 0.35),
        ("trained-s2", 0.5, 0.3),
    ):
        (tmp_path / f"report-{name}.json").write_text(json.dumps({f"booking-eval-{name}": report(test, ood)}))
    summarize.main(tmp_path)
    text = (tmp_path / "summary.md").read_text()
    assert (
        "- test: trained success 0.600, 0.500 vs best baseline 0.400 (needs >= +0.15 on every seed): NOT met"
        in text
    )
    assert (
        "- ood: trained success 0.350, 0.300 vs best baseline 0.300 (needs >= +0.00 on every seed): met"
        in text
    )
    assert "| test/flight | 0.00 | 0.40 | 0.60 | 0.50 | 0.55 |" in text
