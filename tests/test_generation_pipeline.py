"""The issue-31 GPU pipeline's lookup phases (benchmarks/generation/pipeline.sh) with stub scripts: the warm
start feeds the tool runs, which fall back to the base model (and say so) when it failed. The phases
themselves need a GPU; benchmarks/generation/RESULTS.md records their CPU check with a tiny model."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import ROOT

RECORD = r"""import json, os, sys
with open(os.environ["CALLS"], "a") as f:
    f.write(json.dumps({"script": sys.argv[1], "args": sys.argv[2:], **{k: os.environ.get(k) for k in
        ("MODEL", "OUTPUT", "EPOCHS", "TAG", "VLLM_ARGS", "SCHEDULERS", "WORKLOAD", "LEARNING_RATE",
         "SERVER_GPUS", "ROLLOUT_EAGER")}}) + "\n")
"""
STUBS = {  # each records its call; FAIL=<script> makes that one fail
    "benchmarks/colocate_h200.sh": 'python3 "$STUB" colocate "$@"; [ "${FAIL:-}" != "colocate-$TAG" ]',
    "examples/sft.sh": 'python3 "$STUB" sft "$@"; [ "${FAIL:-}" != sft ] && mkdir -p "$OUTPUT/merged/x" '
    '&& echo {} > "$OUTPUT/merged/config.json"',
}
DEMOS = 'import runpy, sys\nsys.argv.insert(1, "demos")\nrunpy.run_path(sys.argv[0].replace("demos.py", "record.py"))\n'


def run_pipeline(tmp_path: Path, phases: str, **env: str) -> tuple[list[dict], str]:
    repo = tmp_path / "repo"
    (repo / "benchmarks" / "generation").mkdir(parents=True)
    shutil.copy(ROOT / "benchmarks" / "generation" / "pipeline.sh", repo / "benchmarks" / "generation")
    for path, body in STUBS.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(f"#!/usr/bin/env bash\n{body}\n")
    lookup = repo / "benchmarks" / "environments" / "lookup"
    lookup.mkdir(parents=True)
    (lookup / "record.py").write_text(RECORD)
    (lookup / "demos.py").write_text(DEMOS)
    calls = tmp_path / "calls.jsonl"
    environ = {
        **os.environ, "PHASES": phases, "CALLS": str(calls), "STUB": str(lookup / "record.py"),
        "BASE_MODEL": "/base", "LOOKUP_MODEL": str(tmp_path / "lookup-model"), "DEVICE_ENV": "/nonexistent", **env,
    }  # fmt: skip
    results = tmp_path / "results"
    done = subprocess.run(
        ["bash", "benchmarks/generation/pipeline.sh", str(results)], cwd=repo, env=environ, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return [json.loads(line) for line in calls.read_text().splitlines()], (
        results / "pipeline.log"
    ).read_text()


@pytest.mark.timeout(60)
def test_the_tool_runs_start_from_the_warm_start_model_and_sync_runs_2s_for_fewer_steps(tmp_path):
    calls, log = run_pipeline(tmp_path, "tools_sft tools_rl tools_sync")
    demos, sft, *runs = calls
    assert demos["script"] == "demos" and demos["args"][:2] == ["--n", "500"]
    assert sft["script"] == "sft" and sft["MODEL"] == "/base" and sft["EPOCHS"] == "2"
    model = str(tmp_path / "lookup-model")
    assert [(r["SCHEDULERS"], r["args"][:2]) for r in runs] == [
        ("rlfactory", ["0", "5"]), ("rlfactory", ["0.5", "5"]), ("rlfactory", ["2", "5"]),
        ("sync_tools", ["0", "5"]), ("sync_tools", ["0.5", "5"]), ("sync_tools", ["2", "2"]),
    ]  # fmt: skip
    for run in runs:
        assert (run["MODEL"], run["WORKLOAD"], run["LEARNING_RATE"]) == (model, "lookup", "0")
        assert run["VLLM_ARGS"] == "--vllm_enforce_eager false --sleep_level 1"
    assert f"the warm-start model {model}" in log and "NO warm-start" not in log


@pytest.mark.timeout(60)
def test_a_failed_warm_start_leaves_no_stale_model_and_the_tool_runs_say_they_use_the_base_model(tmp_path):
    stale = tmp_path / "lookup-model"
    stale.mkdir()
    (stale / "config.json").write_text("{}")  # an earlier session's model must not pass for this one's
    calls, log = run_pipeline(tmp_path, "graphs tools_sft tools_rl", FAIL="sft", RL_LATENCIES="2")
    [run] = [c for c in calls if c.get("TAG") == "lookup"]
    assert run["MODEL"] == "/base" and not stale.exists()
    assert "NO warm-start model" in log and "the base model /base" in log
    assert "tools_sft\t" in (tmp_path / "results" / "phases.tsv").read_text()


@pytest.mark.timeout(60)
def test_the_tool_runs_fall_back_to_eager_when_the_graphs_run_failed(tmp_path):
    calls, _ = run_pipeline(tmp_path, "graphs tools_rl", FAIL="colocate-graphs", RL_LATENCIES="0")
    [graphs, run] = calls
    assert graphs["TAG"] == "graphs" and run["TAG"] == "lookup" and run["VLLM_ARGS"] == ""
    assert run["ROLLOUT_EAGER"] == "true"  # a server-mode run's engine too


@pytest.mark.timeout(60)
def test_server_mode_runs_the_same_lookup_workload_on_this_one_gpu_from_the_warm_start_model(tmp_path):
    calls, _ = run_pipeline(tmp_path, "tools_sft tools_server", RL_LATENCIES="0 2")
    runs = [c for c in calls if c["script"] == "colocate"]
    assert [(r["args"][0], r["args"][3], r["SCHEDULERS"]) for r in runs] == [
        ("0", "server", "rlfactory"), ("2", "server", "rlfactory"),
    ]  # fmt: skip
    for (
        run
    ) in runs:  # the rollout server and the trainer share GPU 0; its engine uses CUDA graphs as colocate does
        assert (run["MODEL"], run["WORKLOAD"], run["SERVER_GPUS"], run["ROLLOUT_EAGER"]) == (
            str(tmp_path / "lookup-model"), "lookup", "0 0", "false",
        )  # fmt: skip
