"""benchmarks/deepsearch/issue30.sh, the orchestration of issue 30's GPU run, with stub phases.

The phases are benchmarks/deepsearch/h200.sh's and need a GPU; what runs here is what the script adds: the
order, which phases share the GPU, the knobs each gets (the SFT baseline's data, the reworded pool, the
GRPO environment, one run a seed with its own port), validation beside training, and the choice on val
before the scores.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "deepsearch" / "issue30.sh"
KEYS = ("RUN_NAME", "SEED", "MASTER_PORT", "ENV_FILE", "LR", "STEPS", "SAVE_STEPS", "CHOOSE", "POOL_FILE",
        "SFT_ROWS", "SINGLE_HOP", "RECHECK", "SHIFTS", "GPU_UTIL", "VLLM_UTIL", "STRATIFY", "PER_STRATUM",
        "TRAIN_TIMEOUT", "BETA", "SLEEP_LEVEL", "TRAIN_FLAGS")  # fmt: skip
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
    # one vLLM start-up at a time: seed 2's trainer after seed 1's has ended (the stub logs no step), each
    # trainer's engine awake (no sleep: its memory does not move while another engine profiles)
    trains = [c for c in calls if c["phase"] == "train"]
    assert trains[1]["t"] - trains[0]["t"] >= 2 and {c["SLEEP_LEVEL"] for c in trains} == {"0"}
    for c in trains:  # and a KV cache of fixed size: no engine profiles the GPU's free memory at its start
        flag, kwargs = c["TRAIN_FLAGS"].split()[:2]
        assert flag == "--vllm_engine_kwargs" and json.loads(kwargs) == {"kv_cache_memory_bytes": 3 * 2**30}
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


# h200.sh's shift phases for real, around a stub eval.sh that logs its knobs and scores each checkpoint by
# STUB_WORST (its worst shift's EM); in bubblewrap, with a /tmp of its own (the GPU machine's layout)
STUB_EVAL = r"""#!/usr/bin/env bash
set -euo pipefail
python3 - "$1" <<'PY'
import json, os, sys
from pathlib import Path
from swift_rlfactory.eval.choose import CHOSEN_FILE, choose
out = Path(sys.argv[1])
adapters = os.environ.get("ADAPTERS", "").split()
keys = ("ADAPTERS", "DATASET", "SHIFTS", "REFERENCE", "CHOOSE_BY", "GROUP_BY")
with open("/work/calls.jsonl", "a") as calls:
    calls.write(json.dumps({k: os.environ.get(k, "") for k in keys} | {"out": str(out)}) + "\n")
worst = dict(p.split("=") for p in os.environ["STUB_WORST"].split(","))
folders = {a: out / Path(a).name for a in adapters} if len(adapters) > 1 else {adapters[0] if adapters else "": out}
for adapter, folder in folders.items():
    (folder / "shifts" / "typos-seed0").mkdir(parents=True, exist_ok=True)
    em = float(worst.get(Path(adapter).name, 0.5))
    shifted = {"shift/worst/em": em, "shift/worst/name": "typos", "shift_check": {"seed": 0}}
    metrics = {"em": 0.8, **shifted} if os.environ.get("SHIFTS") else {"em": 0.8}
    for f in (folder, folder / "shifts" / "typos-seed0"):  # 20 questions, the first em x 20 of them right
        (f / "metrics.json").write_text(json.dumps(metrics))
        (f / "trajectories.jsonl").write_text("".join(json.dumps({
            "index": i, "sample": 0, "question": f"q{i}", "row": {"solution": "a"}, "metrics": {"em": float(i < em * 20)},
        }) + "\n" for i in range(20)))
if os.environ.get("CHOOSE_BY"):
    (out / CHOSEN_FILE).write_text(json.dumps(choose(folders, os.environ["CHOOSE_BY"])))
PY
"""
PHASES = r"""
set -e
touch /tmp/device_env.sh /tmp/eval-sets.jsonl
mkdir -p /tmp/ds-s1/v0/checkpoint-20 /tmp/ds-s1/v0/checkpoint-40 /tmp/ds-s1/v0/checkpoint-60
touch /tmp/ds-s1/v0/checkpoint-{20,40}/trainer_state.json   # 60 is still being written
h() { echo "== $*" >> /work/calls.jsonl; START_GAP=0 bash benchmarks/deepsearch/h200.sh "$@" /work/out; }
h shifts-sft; h eval-sft
RUN_NAME=ds-s1 h validate-shifts; RUN_NAME=ds-s1 h validate-shifts   # beside training: the second finds nothing new
touch /tmp/ds-s1/v0/checkpoint-60/trainer_state.json
RUN_NAME=ds-s1 CHOOSE=1 h validate-shifts; cp /tmp/ds-s1-chosen.txt /work/chosen-first.txt
RUN_NAME=ds-s1 CHOOSE=1 h validate-shifts   # everything scored: the same choice without an engine
RUN_NAME=ds-s1 h eval-chosen
"""


def shift_phases(tmp_path: Path, worst: str) -> dict[str, list[dict]]:
    """PHASES in bubblewrap with STUB_WORST=worst: "PHASE#N" -> the eval.sh calls of the Nth call of PHASE."""
    for path in ("benchmarks/deepsearch/h200.sh", "benchmarks/vllm_start.sh"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text((ROOT / path).read_text())
    (tmp_path / "examples" / "deepsearch").mkdir(parents=True)
    (tmp_path / "examples" / "deepsearch" / "eval.sh").write_text(STUB_EVAL)
    done = subprocess.run(
        ["bwrap", "--dev-bind", "/", "/", "--tmpfs", "/tmp", "--bind", str(tmp_path), "/work",
         "--ro-bind", str(ROOT / "swift_rlfactory"), "/work/swift_rlfactory", "--chdir", "/work",
         "bash", "-c", PHASES],
        env={**os.environ, "PYTHONPATH": "", "SHIFTS": "all", "STUB_WORST": worst},
        capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    steps: dict[str, list[dict]] = {}
    for line in (tmp_path / "calls.jsonl").read_text().splitlines():
        if line.startswith("== "):
            phase = line[3:]
            key = f"{phase}#{1 + sum(k.startswith(phase + '#') for k in steps)}"
            steps[key] = []
        else:
            steps[key].append(json.loads(line))
    return steps


BWRAP = pytest.mark.skipif(
    shutil.which("bwrap") is None, reason="needs bubblewrap (apt-get install bubblewrap)"
)


@BWRAP
@pytest.mark.timeout(120)
def test_shift_phases_choose_each_seed_on_its_worst_shift_against_the_sft_model(tmp_path: Path):
    steps = shift_phases(tmp_path, "checkpoint-20=0.7,checkpoint-40=0.75,checkpoint-60=0.72")
    out = tmp_path / "out"
    ckpt = "/tmp/ds-s1/v0/checkpoint-"
    test, val = "examples/deepsearch/data/test.jsonl", "examples/deepsearch/data/val.jsonl"
    # the SFT model: test and val under every shift (the references), the eval set without shifts
    sft = steps["shifts-sft#1"]
    assert sorted((c["DATASET"], c["SHIFTS"], c["REFERENCE"]) for c in sft) == [
        (test, "all", ""),
        (val, "all", ""),
    ]
    [plain] = steps["eval-sft#1"]
    assert plain["DATASET"] == "/tmp/eval-sets.jsonl" and plain["SHIFTS"] == plain["REFERENCE"] == ""
    # beside training: the checkpoints saved so far, one engine, alarms against the SFT model's val shifts
    [first] = steps["validate-shifts#1"]
    assert first["ADAPTERS"] == f"{ckpt}20 {ckpt}40" and first["CHOOSE_BY"] == ""
    assert (first["DATASET"], first["SHIFTS"], first["REFERENCE"]) == (
        val,
        "all",
        "/work/out/val-sft-shifts.json",
    )
    assert steps["validate-shifts#2"] == []  # nothing new
    # the choice: the checkpoint not scored yet through the engine, then the worst shift over every checkpoint
    # and the SFT model (its 0.5 here: checkpoint 40 is right on 5 more of the 20 questions, sign test p 0.03)
    [choice] = steps["validate-shifts#3"]
    assert choice["ADAPTERS"] == f"{ckpt}60" and choice["CHOOSE_BY"] == ""
    assert (tmp_path / "chosen-first.txt").read_text().strip() == f"{ckpt}40"
    assert steps["validate-shifts#4"] == []  # all scored: chosen without an engine, the same one
    chosen = json.loads((out / "chosen-ds-s1.json").read_text())
    assert chosen["checkpoint"] == f"{ckpt}40" and list(chosen["scores"])[0] == "/tmp/qwen05-sft"
    # the chosen checkpoint: the eval set against the SFT model's, test's shifts against the SFT model's shifts
    scored = {c["DATASET"]: c for c in steps["eval-chosen#1"]}
    assert {c["ADAPTERS"] for c in scored.values()} == {f"{ckpt}40"}
    assert (scored[test]["SHIFTS"], scored[test]["REFERENCE"]) == ("all", "/work/out/eval-sft-shifts.json")
    assert (scored["/tmp/eval-sets.jsonl"]["SHIFTS"], scored["/tmp/eval-sets.jsonl"]["REFERENCE"]) == (
        "", "/work/out/eval-sft.json",
    )  # fmt: skip
    for name in ("eval-sft-shifts", "val-sft-shifts", "val-ds-s1-40", "eval-chosen-ds-s1-shifts"):
        assert (out / f"{name}.json").is_file() and (out / f"{name}-typos-seed0.json").is_file()


@BWRAP
@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "sft_worst",
    [
        "0.75",  # ties the best checkpoint's worst shift: a tie keeps the SFT model
        "0.65",  # two questions of 20 behind checkpoint 40 (sign test p 0.25): within val's noise
    ],
)
def test_the_sft_model_is_shipped_when_no_checkpoint_beats_its_worst_shift(tmp_path: Path, sft_worst: str):
    steps = shift_phases(tmp_path, f"={sft_worst},checkpoint-20=0.7,checkpoint-40=0.75,checkpoint-60=0.72")
    out = tmp_path / "out"
    assert (tmp_path / "chosen-first.txt").read_text().strip() == "/tmp/qwen05-sft"
    chosen = json.loads((out / "chosen-ds-s1.json").read_text())
    assert chosen["checkpoint"] == "/tmp/qwen05-sft" and chosen["scores"]["/tmp/qwen05-sft"] == float(
        sft_worst
    )
    assert steps["eval-chosen#1"] == []  # its scores are the SFT model's own: no engine
    for sft, shipped in [("eval-sft", "eval-chosen-ds-s1"), ("eval-sft-shifts", "eval-chosen-ds-s1-shifts"),
                         ("eval-sft-shifts-typos-seed0", "eval-chosen-ds-s1-shifts-typos-seed0")]:  # fmt: skip
        assert (out / f"{shipped}.json").read_text() == (out / f"{sft}.json").read_text()
    assert (out / "checkpoint-chosen-ds-s1.txt").read_text().strip() == "/tmp/qwen05-sft"
