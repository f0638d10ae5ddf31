"""The GPU pipeline's orchestration (benchmarks/gpu_pipeline/pipeline.sh), run with stub phases.

The phases themselves need an H200; what runs here is everything around them: the order of the phases,
which of them share the GPU, the knobs each one gets, the retry after a failure and the choice of the
checkpoints the credit comparison scores. Both bugs of the first GPU run live here: the arithmetic
``ENV_FILE`` reached the DeepSearch phases, and the trainers shared one MASTER_PORT. At the end,
``benchmarks/deepsearch/h200.sh``'s own choice of the model to score (validate, eval-trained) runs around a
stub of the evaluation.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "benchmarks" / "gpu_pipeline" / "pipeline.sh"

STUB = r"""#!/usr/bin/env bash
# stub of benchmarks/*/h200.sh: PHASE OUT [MODE]; records each call as one JSON line
track=$(basename "$2")
python3 - "$CALLS" "$track" "$@" <<'PY'
import json, os, sys, time
calls, track, phase, *rest = sys.argv[1:]
keys = ("MASTER_PORT", "ENV_FILE", "STEPS", "CHECKPOINT", "VLLM_UTIL", "GPU_UTIL", "EVAL_UTIL", "RUN_NAME", "LR", "TRAIN_DATA", "EVAL_BUDGET", "RECHECK", "DYNAMIC_SAMPLE", "STRIDE", "SFT_ROWS", "SINGLE_HOP", "BETA", "STRATIFY", "PER_STRATUM", "CREDIT", "MAX_TOKENS")
with open(calls, "a") as out:
    out.write(json.dumps({"track": track, "phase": phase, "args": rest[1:], "t": time.time(), **{k: os.environ.get(k) for k in keys}}) + "\n")
PY
case "$track:$1" in
  probe-*:probe)  # PROBE_SCORES: "NAME=EM:CALLS ..." per environment; a name left out writes no metrics
    for score in ${PROBE_SCORES:-}; do
      [ "${score%%=*}" = "${track#probe-}" ] || continue
      s=${score#*=}; mkdir -p "$2"; printf '{"em": %s, "tool_calls": %s}' "${s%%:*}" "${s##*:}" > "$2/eval-probe.json"
    done ;;
  ds:train) mkdir -p "$RUNS/${RUN_NAME:-ds}"/v0/checkpoint-{20,40}; sleep "${STUB_TRAIN_S:-1}" ;;
  ds:credit-train) mkdir -p "$RUNS"/ds-credit-turn/v0/checkpoint-20; sleep 1 ;;  # cut short by its time limit
  ar:train) sleep 1 ;;
esac
[ "$track:$1" = "${FAIL:-}" ] && exit 3
exit 0
"""


def run_pipeline(tmp_path: Path, **env: str) -> list[dict]:
    stub = tmp_path / "stub.sh"
    stub.write_text(STUB)
    calls = tmp_path / "calls.jsonl"
    environ = {
        **os.environ,
        "DS": f"bash {stub}",
        "AR": f"bash {stub}",
        "CALLS": str(calls),
        "RUNS": str(tmp_path / "runs"),
        "STAGGER": "0",
        "RETRY_PAUSE": "0",
        "POLL": "0.2",
        **env,
    }
    environ.pop("ENV_FILE", None)
    done = subprocess.run(
        ["bash", str(PIPELINE), str(tmp_path / "results")],
        cwd=ROOT, env=environ, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "pipeline\tend" in (tmp_path / "results" / "phases.tsv").read_text()
    return [json.loads(line) for line in calls.read_text().splitlines()]


def names(calls: list[dict]) -> list[str]:
    return [f"{c['track']}:{c['phase']}" for c in calls]


@pytest.mark.timeout(120)
def test_pipeline_runs_each_track_in_order_with_its_own_knobs(tmp_path):
    calls = run_pipeline(tmp_path)
    order = names(calls)
    for earlier, later in [
        ("ds:prepare", "ds:sft"),
        ("ds:sft", "ds:select"),
        ("ds:select", "ds:train"),
        ("ds:train", "ds:eval-trained"),
        ("ds:credit-train", "ds:credit-eval"),
        ("ar:eval-base", "ar:train"),
        ("ar:train", "ar:curve"),
    ]:
        assert order.index(earlier) < order.index(later), (earlier, later, order)
    trainers = [c for c in calls if c["phase"] in ("train", "credit-train", "sft")]
    ports = [c["MASTER_PORT"] for c in trainers]
    assert None not in ports and len(set(ports)) == len(ports)  # one torch.distributed store each
    assert all(c["ENV_FILE"] is None for c in calls if c["track"] == "ds")  # arithmetic's env stays there
    # every arithmetic phase trains on / looks for the same data, the mix; none of DeepSearch's sees it
    assert {c["TRAIN_DATA"] for c in calls if c["track"] == "ar"} == {
        "examples/arithmetic/data/train_mix.jsonl"
    }
    assert all(c["TRAIN_DATA"] is None for c in calls if c["track"] == "ds")
    assert [c["SFT_ROWS"] for c in calls if c["phase"] == "prepare"] == ["1000"]  # the recipe as run
    assert not [c for c in calls if c["SINGLE_HOP"]]  # every single-hop question demonstrated
    assert not [c for c in calls if c["BETA"]]  # h200.sh's own KL coefficient
    arms = [c for c in calls if c["phase"] in ("train", "credit-train") and c["track"] == "ds"]
    assert {c["STEPS"] for c in arms} == {"80"} and all(c["VLLM_UTIL"] for c in arms)
    # three arms: ds, ds-lr (a higher learning rate, validated and scored on its own) and the turn arm
    assert sorted((c["phase"], c["RUN_NAME"] or "", c["LR"] or "") for c in arms) == [
        ("credit-train", "", ""), ("train", "", ""), ("train", "ds-lr", "5e-5"),
    ]  # fmt: skip
    for phase in ("validate", "eval-trained"):
        assert {c["RUN_NAME"] for c in calls if c["phase"] == phase} == {None, "ds-lr"}
    # validation after training stops in time for the evaluations (2026-12-01b ran 142 s past DEADLINE)
    trained = max(i for i, n in enumerate(order) if n in ("ds:train", "ds:credit-train"))
    after = [c for c in calls[trained + 1 :] if c["phase"] == "validate"]
    assert {c["RUN_NAME"] for c in after} == {None, "ds-lr"}
    assert all(int(c["EVAL_BUDGET"]) < 1440 - 150 for c in after)
    assert order.index("ds:eval-trained") > max(i for i, n in enumerate(order) if n == "ds:train")
    # the turn arm stopped at step 20: the trajectory arm is scored at step 20 too, not at its last (40)
    trajectory = next(c for c in calls if c["phase"] == "credit-eval" and c["args"] == ["trajectory"])
    assert trajectory["CHECKPOINT"] == str(tmp_path / "runs" / "ds" / "v0" / "checkpoint-20")
    assert all(c["GPU_UTIL"] for c in calls if c["track"] == "ds" and "eval" in c["phase"])


@pytest.mark.timeout(120)
def test_validation_beside_training_leaves_the_scoring_its_reserve(tmp_path):
    """2026-12-01d: validation beside training had no budget, ran 300 s past the end of training, and the
    test evaluation started 26 s before DEADLINE. Each call beside training now ends SCORE_RESERVE early."""
    calls = run_pipeline(tmp_path, STUB_TRAIN_S="3", VALIDATE_EVERY="0", TRACKS="deepsearch")
    trained = next(c["t"] for c in calls if c["phase"] == "train" and c["RUN_NAME"] is None) + 3
    beside = [c for c in calls if c["phase"] == "validate" and c["t"] < trained]
    assert len(beside) >= 4 and {c["RUN_NAME"] for c in beside} == {None, "ds-lr"}
    assert all(0 < int(c["EVAL_BUDGET"]) <= 1440 - 330 for c in beside)
    # no reserve left: nothing is validated beside training, and the arms are still validated and scored
    (tmp_path / "late").mkdir()
    calls = run_pipeline(tmp_path / "late", STUB_TRAIN_S="3", VALIDATE_EVERY="0", SCORE_RESERVE="1500")
    validations = [c for c in calls if c["phase"] == "validate"]
    assert sorted(c["RUN_NAME"] or "" for c in validations) == ["", "ds-lr"]
    assert sorted(c["RUN_NAME"] or "" for c in calls if c["phase"] == "eval-trained") == ["", "ds-lr"]


@pytest.mark.timeout(120)
def test_tracks_and_arms_can_be_left_out_to_give_the_rest_the_gpu(tmp_path):
    calls = run_pipeline(
        tmp_path,
        TRACKS="deepsearch",
        DS_CREDIT="",
        DS_STEPS="160",
        DS_LR="5e-5",
        DS_LR2="1e-4",
        DS_RECHECK="0.3",
        DS_SFT_ROWS="200",
        DS_SFT_SINGLE="150",
    )
    assert {c["track"] for c in calls} == {"ds"}  # no arithmetic phase at all
    assert {c["phase"]: c["RECHECK"] for c in calls if c["RECHECK"]} == {"sft": "0.3"}  # the SFT data only
    assert {c["phase"]: c["SINGLE_HOP"] for c in calls if c["SINGLE_HOP"]} == {"sft": "150"}
    assert {c["phase"]: c["SFT_ROWS"] for c in calls if c["SFT_ROWS"]} == {
        "prepare": "200"
    }  # where it is cut
    assert not [c for c in calls if c["phase"] in ("credit-train", "credit-eval")]
    arms = sorted((c["RUN_NAME"] or "ds", c["LR"], c["STEPS"]) for c in calls if c["phase"] == "train")
    assert arms == [("ds", "5e-5", "160"), ("ds-lr", "1e-4", "160")]
    for phase in ("validate", "eval-trained"):  # both arms still validated and scored
        assert {c["RUN_NAME"] for c in calls if c["phase"] == phase} == {None, "ds-lr"}


@pytest.mark.timeout(120)
def test_grpo_knobs_reach_the_runs_of_their_own_track_only(tmp_path):
    calls = run_pipeline(
        tmp_path, DS_DYNAMIC="1", AR_STRIDE="25", DS_BETA="0.2", DS_STRATIFY="hops", DS_PER_STRATUM="180"
    )
    # GRPO's question mix is chosen by select alone
    assert [(c["STRATIFY"], c["PER_STRATUM"]) for c in calls if c["phase"] == "select"] == [("hops", "180")]
    assert {c["STRATIFY"] for c in calls if c["phase"] != "select"} == {None}
    # the KL coefficient: every DeepSearch GRPO arm, never arithmetic (its train.sh reads the same BETA)
    assert {c["BETA"] for c in calls if c["phase"] in ("train", "credit-train") and c["track"] == "ds"} == {
        "0.2"
    }
    assert {c["BETA"] for c in calls if c["track"] == "ar"} == {None}
    dynamic = {(c["track"], c["phase"], c["DYNAMIC_SAMPLE"]) for c in calls}
    assert {d for t, p, d in dynamic if t == "ds" and p in ("train", "credit-train")} == {"1"}
    assert {d for t, p, d in dynamic if t == "ds" and p in ("prepare", "sft")} == {None}  # SFT never samples
    # arithmetic keeps its default, in every phase: the value names its run folder (h200.sh's tag)
    assert {d for t, p, d in dynamic if t == "ar"} == {"0"}
    assert {c["STRIDE"] for c in calls if c["track"] == "ar"} == {"25"}
    (tmp_path / "ar").mkdir()
    calls = run_pipeline(tmp_path / "ar", AR_DYNAMIC="1", TRACKS="arithmetic")
    assert {c["DYNAMIC_SAMPLE"] for c in calls} == {"1"} and {c["STRIDE"] for c in calls} == {"50"}


@pytest.mark.timeout(120)
def test_a_second_arithmetic_arm_runs_beside_the_first_in_its_own_environment(tmp_path):
    """AR_ENV2 compares two environments (the calculator, env_python.yaml's programs) in one run: each arm
    is the whole track (base, training, checkpoints, curve) in its own folder, on the same data, with its own
    torch.distributed port."""
    python = "examples/arithmetic/env_python.yaml"
    calls = run_pipeline(tmp_path, TRACKS="arithmetic", AR_ENV2=python, AR_MAX_TOKENS2="256")
    by_arm: dict[str, list[dict]] = {}
    for c in calls:
        by_arm.setdefault(c["track"], []).append(c)
    assert set(by_arm) == {"ar", "ar-env_python"}
    arms = (("ar", "examples/arithmetic/env_hint.yaml", "192"), ("ar-env_python", python, "256"))
    for arm, env, tokens in arms:
        order = [c["phase"] for c in by_arm[arm]]
        assert order[0] == "eval-base" and order[-1] == "curve" and "train" in order, (arm, order)
        assert {c["ENV_FILE"] for c in by_arm[arm]} == {env}
        assert {c["MAX_TOKENS"] for c in by_arm[arm]} == {tokens}
        assert {c["TRAIN_DATA"] for c in by_arm[arm]} == {"examples/arithmetic/data/train_mix.jsonl"}
    ports = {c["MASTER_PORT"] for c in calls if c["phase"] == "train"}
    assert len(ports) == 2 and None not in ports
    phases = (tmp_path / "results" / "phases.tsv").read_text()
    assert "ar-env_python-train\tend" in phases and "ar-train\tend" in phases
    # by default one arm, in the calculator environment, writing what it always wrote
    (tmp_path / "one").mkdir()
    calls = run_pipeline(tmp_path / "one", TRACKS="arithmetic")
    assert {c["track"] for c in calls} == {"ar"}
    assert {(c["ENV_FILE"], c["MAX_TOKENS"]) for c in calls} == {("examples/arithmetic/env_hint.yaml", "192")}


@pytest.mark.timeout(120)
def test_probed_environments_pick_the_arms_by_what_the_base_model_does_on_training_problems(tmp_path):
    """AR_PROBE scores the base model in each environment on training problems, side by side, before any
    arm starts; the arms then train in the best. An environment whose base model answers without the tool
    ranks below every one that calls it, whatever its EM, and one whose probe left no metrics ranks last."""
    probes = [
        f"benchmarks/rl_from_base/probes/{n}.yaml"
        for n in ("python_oneline", "python_print", "python_callonly")
    ]
    memory = "examples/arithmetic/env_python.yaml"
    scores = "python_oneline=0.20:0.9 python_print=0.35:1.0 env_python=0.60:0.0"  # python_callonly: none
    calls = run_pipeline(
        tmp_path, TRACKS="arithmetic", AR_PROBE=",".join([*probes, memory]), AR_PROBE_ARMS="2",
        AR_MAX_TOKENS2="256", PROBE_SCORES=scores,
    )  # fmt: skip
    probed = [c for c in calls if c["phase"] == "probe"]
    assert sorted(c["ENV_FILE"] for c in probed) == sorted([*probes, memory])
    assert {(c["MAX_TOKENS"], c["TRAIN_DATA"]) for c in probed} == {
        ("256", "examples/arithmetic/data/train_mix.jsonl")
    }
    last_probe = max(c["t"] for c in probed)
    arms = {c["track"]: c for c in calls if c["phase"] == "eval-base"}
    assert set(arms) == {"ar-python_print", "ar-python_oneline"}  # the two best that call the tool
    assert all(c["t"] > last_probe for c in arms.values())
    assert {c["ENV_FILE"] for c in arms.values()} == set(probes[:2])
    assert {c["MAX_TOKENS"] for c in calls if c["track"].startswith("ar")} == {"256"}
    ranking = (tmp_path / "results" / "probe.out").read_text()
    assert ranking.index("python_print") < ranking.index("python_oneline") < ranking.index("env_python")
    assert "python_callonly.yaml: no metrics" in ranking
    # one probed arm: the best goes beside the calculator, which writes what it always wrote
    (tmp_path / "one").mkdir()
    calls = run_pipeline(
        tmp_path / "one", TRACKS="arithmetic", AR_PROBE=",".join(probes), PROBE_SCORES=scores
    )
    arms = {c["track"]: (c["ENV_FILE"], c["MAX_TOKENS"]) for c in calls if c["phase"] == "train"}
    assert arms == {"ar": ("examples/arithmetic/env_hint.yaml", "192"), "ar-python_print": (probes[1], "192")}


@pytest.mark.timeout(120)
def test_the_validated_arms_can_train_with_turn_credit(tmp_path):
    """2026-12-02b: turn credit gave the run's best model, but as the credit-comparison arm only its last
    checkpoint was scored. DS_ARM_CREDIT gives both validated arms that credit mode, and nothing else."""
    calls = run_pipeline(tmp_path, TRACKS="deepsearch", DS_ARM_CREDIT="turn", DS_CREDIT="")
    assert sorted((c["RUN_NAME"] or "ds", c["CREDIT"]) for c in calls if c["phase"] == "train") == [
        ("ds", "turn"), ("ds-lr", "turn"),
    ]  # fmt: skip
    assert {c["CREDIT"] for c in calls if c["phase"] != "train"} == {None}
    for phase in ("validate", "eval-trained"):
        assert {c["RUN_NAME"] for c in calls if c["phase"] == phase} == {None, "ds-lr"}
    assert not [c for c in calls if c["phase"].startswith("credit")]
    # by default the arms keep env_grpo.yaml's own credit (the stub sees CREDIT set but empty)
    (tmp_path / "default").mkdir()
    calls = run_pipeline(tmp_path / "default", TRACKS="deepsearch")
    assert {c["CREDIT"] for c in calls if c["phase"] == "train"} == {""}
    # with the comparison arm too, turn would be compared with turn: refused before anything runs
    done = subprocess.run(
        ["bash", str(PIPELINE), str(tmp_path / "both")],
        env={**os.environ, "DS_ARM_CREDIT": "turn", "DS": "false", "AR": "false"},
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 2 and "DS_CREDIT=" in done.stderr
    assert not (tmp_path / "both").exists()


@pytest.mark.timeout(120)
def test_a_failed_phase_is_retried_once_and_stops_only_its_own_track(tmp_path):
    order = names(run_pipeline(tmp_path, FAIL="ds:select"))
    assert order.count("ds:select") == 2
    assert "ds:train" not in order and "ds:credit-train" not in order
    assert "ar:curve" in order  # the arithmetic track ran to its end
    phases = (tmp_path / "results" / "phases.tsv").read_text()
    assert "ds-select\tretry" in phases and "ds-select\tend" in phases and "rc=3" in phases


VLLM_RACE = "AssertionError: Error in memory profiling. Initial free memory 124.4 GiB, current free memory 137.75 GiB."
VLLM_NO_CACHE = "ValueError: No available memory for the cache blocks. Try increasing gpu_memory_utilization"


def vllm_start(tmp_path: Path, script: str) -> tuple[int, int, str]:
    """Run ``vllm_start LOG CMD`` with CMD = ``script``; return (exit status, attempts, log)."""
    log, attempts = tmp_path / "eval.log", tmp_path / "attempts"
    log.write_text("an earlier run's line: Error in memory profiling\n")  # an old failure is not this one's
    command = (
        f"source {ROOT / 'benchmarks' / 'vllm_start.sh'}; "
        f"attempt() ( echo x >> {attempts}; {script} ); vllm_start {log} attempt"
    )
    done = subprocess.run(["bash", "-c", command], env={**os.environ, "VLLM_RETRY_PAUSE": "0"}, timeout=30)
    return done.returncode, len(attempts.read_text().split()), log.read_text()


@pytest.mark.parametrize(
    ("script", "rc", "attempts"),
    [
        # lost the start-up race once, then started: the run goes on
        (f"[ -e RACED ] || {{ touch RACED; echo '{VLLM_RACE}'; exit 1; }}; echo ok", 0, 2),
        (f"echo '{VLLM_RACE}'; exit 7", 7, 2),  # lost it twice: the failure is reported, not hidden
        # the race's other face: another process's memory counted as the engine's own (2026-12-02b)
        (f"[ -e RACED ] || {{ touch RACED; echo '{VLLM_NO_CACHE}'; exit 1; }}; echo ok", 0, 2),
        ("echo 'CUDA out of memory'; exit 1", 1, 1),  # any other failure: no second try
        ("echo ok", 0, 1),
    ],
    ids=["race-then-ok", "race-twice", "no-cache-then-ok", "other-error", "ok"],
)
def test_vllm_start_tries_again_only_after_the_memory_profiling_race(tmp_path, script, rc, attempts):
    script = script.replace("RACED", str(tmp_path / "raced"))
    status, tries, log = vllm_start(tmp_path, script)
    assert (status, tries) == (rc, attempts), log
    assert log.startswith("an earlier run's line")  # appended to, never overwritten
    assert ("trying once more" in log) == (attempts == 2)


def test_vllm_start_begins_a_log_quietly_and_still_retries_the_race(tmp_path):
    # The first evaluation of a run has no log yet: on 2026-12-01c every such start printed
    # "vllm_start.sh: line 15: .../eval.log: No such file or directory" into the phase's output.
    log, raced = tmp_path / "new.log", tmp_path / "raced"
    script = f"[ -e {raced} ] || {{ touch {raced}; echo '{VLLM_RACE}'; exit 1; }}; echo ok"
    command = (
        f"source {ROOT / 'benchmarks' / 'vllm_start.sh'}; attempt() ( {script} ); vllm_start {log} attempt"
    )
    done = subprocess.run(
        ["bash", "-c", command],
        env={**os.environ, "VLLM_RETRY_PAUSE": "0"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert "trying once more" in log.read_text() and log.read_text().endswith("ok\n")


# benchmarks/deepsearch/h200.sh's validate and eval-trained phases, for real, around a stub eval.sh: the
# script keeps its runs in /tmp (it is the GPU machine's layout), so it runs in bubblewrap with a /tmp of its
# own. The stub scores each model by the EM its name is given in STUB_EM and logs every call.
STUB_EVAL = r"""#!/usr/bin/env bash
set -euo pipefail
python3 - "$1" <<'PY'
import json, os, sys
from pathlib import Path
out = Path(sys.argv[1])
adapters = os.environ.get("ADAPTERS", "").split()
with open(os.environ["EVAL_CALLS"], "a") as calls:
    calls.write(json.dumps({"adapters": os.environ.get("ADAPTERS", ""), "dataset": os.environ["DATASET"], "extra": os.environ.get("EXTRA_EVAL", "")}) + "\n")
fail = os.environ.get("STUB_FAIL_MANY") if len(adapters) > 1 else ""
if fail == "1":
    sys.exit("the engine would not take several adapters")
scores = dict(p.split("=") for p in os.environ["STUB_EM"].split(","))
for i, adapter in enumerate(adapters if len(adapters) > 1 else [adapters[0] if adapters else ""]):
    folder = out / Path(adapter).name if len(adapters) > 1 else out  # eval --adapters A B: OUT/<name>/
    folder.mkdir(parents=True, exist_ok=True)
    # after-first: as vLLM on the H200 (2026-12-02), the engine dies after the first checkpoint; eval still
    # writes the others' metrics.json, every episode failed and counted 0
    failed = fail == "after-first" and i > 0
    em = 0.0 if failed else float(scores[Path(adapter).name if adapter else "sft"])
    cell = {"questions": 1, "em": em, "tool_calls": 1.0}
    (folder / "metrics.json").write_text(json.dumps({"em": em, "tool_calls": 1.0, "failed_episodes": int(failed), "by_hops": {"1": cell}, "by_family": {"f": cell}}))
    (folder / "trajectories.jsonl").write_text("")
if fail:
    sys.exit("EngineDeadError")
PY
"""


def run_h200(root: Path, phase: str, **env: str) -> subprocess.CompletedProcess:
    """``bash benchmarks/deepsearch/h200.sh PHASE /work/out`` in the fake repository ``root``, /tmp private."""
    script = (
        "mkdir -p /tmp/ds/v0/checkpoint-20 /tmp/ds/v0/checkpoint-40 /tmp/ds-lr/v0/checkpoint-20 && "
        "touch /tmp/device_env.sh /tmp/ds/v0/checkpoint-{20,40}/trainer_state.json "
        "/tmp/ds-lr/v0/checkpoint-20/trainer_state.json && "
        f"for p in {' '.join(phase.split(';'))}; do RUN_NAME=${{p%%:*}} bash benchmarks/deepsearch/h200.sh ${{p#*:}} /work/out "
        "|| exit $?; done"
    )  # fmt: skip
    return subprocess.run(
        ["bwrap", "--dev-bind", "/", "/", "--tmpfs", "/tmp", "--bind", str(root), "/work", "--chdir", "/work",
         "bash", "-c", script],
        env={"PYTHONPATH": "", **os.environ, "EVAL_CALLS": "/work/calls.jsonl", **env}, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip


@pytest.fixture
def fake_repo(tmp_path: Path) -> Path:
    for path in ("benchmarks/deepsearch/h200.sh", "benchmarks/vllm_start.sh"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text((ROOT / path).read_text())
    (tmp_path / "examples" / "deepsearch" / "data").mkdir(parents=True)
    (tmp_path / "examples" / "deepsearch" / "eval.sh").write_text(STUB_EVAL)
    (tmp_path / "examples" / "deepsearch" / "data" / "val.jsonl").write_text("")
    return tmp_path


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (apt-get install bubblewrap)")
@pytest.mark.parametrize(
    ("scores", "chosen", "fail_many"),
    [
        ("sft=0.70,checkpoint-20=0.72,checkpoint-40=0.69", "/tmp/ds/v0/checkpoint-20", ""),
        ("sft=0.70,checkpoint-20=0.70,checkpoint-40=0.65", "sft", ""),  # no checkpoint beats the SFT model
        ("sft=0.70,checkpoint-20=0.72,checkpoint-40=0.69", "/tmp/ds/v0/checkpoint-20", "1"),  # one by one
        # the one engine scored the first checkpoint only: the second is scored again, not taken as 0
        ("sft=0.70,checkpoint-20=0.69,checkpoint-40=0.72", "/tmp/ds/v0/checkpoint-40", "after-first"),
    ],
)
def test_validation_starts_at_the_sft_model_and_may_keep_it(fake_repo, scores, chosen, fail_many):
    done = run_h200(
        fake_repo, "ds:validate;ds-lr:validate;ds:eval-trained", STUB_EM=scores, STUB_FAIL_MANY=fail_many
    )
    assert done.returncode == 0, done.stdout + done.stderr
    calls = [json.loads(line) for line in (fake_repo / "calls.jsonl").read_text().splitlines()]
    validation = json.loads((fake_repo / "out" / "validation.json").read_text())
    assert [s["step"] for s in validation["scores"]] == [0, 20, 40]
    assert validation["scores"][0]["em"] == 0.70 and validation["best"]["checkpoint"] == chosen
    # the SFT model is scored on validation once, for both runs, and a run's new checkpoints through one
    # engine (one by one when that fails); then the chosen model on the eval set
    val_calls = [c for c in calls if c["dataset"].endswith("val.jsonl")]
    alone = {
        "": [],
        "1": ["/tmp/ds/v0/checkpoint-20", "/tmp/ds/v0/checkpoint-40"],
        "after-first": ["/tmp/ds/v0/checkpoint-40"],
    }[fail_many]
    assert sorted(c["adapters"] for c in val_calls) == sorted([
        "", "/tmp/ds-lr/v0/checkpoint-20", "/tmp/ds/v0/checkpoint-20 /tmp/ds/v0/checkpoint-40", *alone,
    ])  # fmt: skip
    assert ("scoring them one by one" in done.stdout) == bool(fail_many)
    [final] = [c for c in calls if c["dataset"] == "/tmp/eval-sets.jsonl"]
    assert final["adapters"] == ("" if chosen == "sft" else chosen)
    assert (fake_repo / "out" / "checkpoint.txt").read_text().strip() == chosen


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (apt-get install bubblewrap)")
@pytest.mark.timeout(90)
def test_extra_eval_left_in_the_environment_reaches_no_phase_after_prepare(fake_repo):
    # prepare merged EXTRA_EVAL into /tmp/eval-sets.jsonl; an eval.sh that read it again counted every extra
    # question twice, and validate scored the held-out files as validation questions
    done = run_h200(
        fake_repo, "ds:validate;ds:eval-base;ds:eval-trained", STUB_EM="sft=0.7,checkpoint-20=0.7,checkpoint-40=0.7",
        EXTRA_EVAL="/work/fr.jsonl",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    calls = [json.loads(line) for line in (fake_repo / "calls.jsonl").read_text().splitlines()]
    assert {c["dataset"] for c in calls} == {
        "examples/deepsearch/data/val.jsonl",
        "/tmp/eval-sets.jsonl",
    }
    assert [c["extra"] for c in calls] == [""] * len(calls)


STUB_TRAIN = r"""#!/usr/bin/env bash
# stub of examples/deepsearch/train.sh: keeps the environment file the run was given
cp "$RLFACTORY_ENV" "/work/env-$(basename "$OUTPUT").yaml"
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (apt-get install bubblewrap)")
@pytest.mark.timeout(90)
def test_a_named_run_trains_with_the_credit_mode_it_is_given(fake_repo):
    """h200.sh train with CREDIT: env_grpo.yaml with that credit mode and its reward files by absolute path,
    for a run of any name (2026-12-02b's pipeline could train turn credit only as the comparison arm)."""
    import yaml

    (fake_repo / "examples" / "deepsearch" / "env_grpo.yaml").write_text(
        (ROOT / "examples" / "deepsearch" / "env_grpo.yaml").read_text()
    )
    (fake_repo / "examples" / "deepsearch" / "train.sh").write_text(STUB_TRAIN)
    done = run_h200(fake_repo, "ds-lr:train", CREDIT="turn")
    assert done.returncode == 0, done.stdout + done.stderr
    config = yaml.safe_load((fake_repo / "env-ds-lr.yaml").read_text())
    assert config["credit"]["mode"] == "turn"
    files = [t["name"].partition(".py:")[0] for t in config["reward"] if ".py:" in t["name"]]
    assert files and all(f.startswith("/work/examples/deepsearch/") for f in files)
    # the default is the file as committed; a typo in the mode, or CREDIT beside ENV_FILE, stops the phase
    assert run_h200(fake_repo, "ds:train").returncode == 0
    assert (fake_repo / "env-ds.yaml").read_text() == (ROOT / "examples/deepsearch/env_grpo.yaml").read_text()
    bad = run_h200(fake_repo, "ds:train", CREDIT="turns")
    assert bad.returncode == 2 and "trajectory or turn" in bad.stderr
    both = run_h200(fake_repo, "ds:train", CREDIT="turn", ENV_FILE="examples/deepsearch/env_grpo.yaml")
    assert both.returncode == 2 and "not both" in both.stderr
