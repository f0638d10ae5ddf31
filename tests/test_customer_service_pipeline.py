"""The customer-service GPU pipeline's orchestration (benchmarks/customer_service/pipeline.sh) with stub phases and
a tiny fake customer server, the real prepare and select glue of h200.sh, and the summary and checkpoint choice
(summarize.py) on hand-made trajectories. The phases themselves need a GPU; RESULTS.md records their
CPU check with a tiny model."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import free_port

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks" / "customer_service"
PIPELINE = BENCH / "pipeline.sh"
# by its path under its own name: tests/test_booking_pipeline.py imports the booking world's summarize.py
_spec = importlib.util.spec_from_file_location("customer_service_summarize", BENCH / "summarize.py")
summarize = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(summarize)

# stub of h200.sh (PHASE OUT [SEED]): records each call as one JSON line (FAIL, FAIL_ONCE: a phase fails; FAIL_NAME:
# PHASE-SEED fails); `user` serves /v1/models (the first FAKE_USER_DIES starts exit at once instead), `user-wait`
# is the real one
STUB = r"""
import time; T0 = time.time()  # first: the start as the pipeline made it
import http.server, json, os, sys, urllib.request
phase, out, *rest = sys.argv[1:]
if phase == "user-wait":
    os.execvp("bash", ["bash", "benchmarks/customer_service/h200.sh", *sys.argv[1:]])
keys = ("MASTER_PORT", "GPU_UTIL", "VLLM_UTIL", "MICRO_BATCH", "GRAD_ACC", "STEPS", "SAVE_STEPS", "TRAIN_UNTIL",
        "SLEEP_LEVEL", "TRAIN_FLAGS", "EVAL_USERS", "USER_SHARED", "SELECT_USERS")
def record(**more):
    with open(os.environ["CALLS"], "a") as f:
        f.write(json.dumps({"phase": phase, "seed": rest[0] if rest else None, "pid": os.getpid(),
                            **{k: os.environ.get(k) for k in keys}, **more}) + "\n")
def tally(name):  # how many times NAME was called before
    path = os.path.join(os.environ["COUNTS"], name)
    n = int(open(path).read()) if os.path.exists(path) else 0
    open(path, "w").write(str(n + 1))
    return n
if phase == "user":
    record(t0=time.time())
    if tally("user") < int(os.environ.get("FAKE_USER_DIES", "0")):
        time.sleep(0.2); sys.exit(1)
    class Models(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200); self.end_headers(); self.wfile.write(b'{"data": []}')
        def log_message(self, *args): pass
    http.server.HTTPServer(("127.0.0.1", int(os.environ["USER_PORT"])), Models).serve_forever()
t0 = T0
up = None
if phase == "train":
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{os.environ['USER_PORT']}/v1/models", timeout=2)
        up = True
    except OSError:
        up = False
# phases started STAGGER apart overlap by 1.5 s more than their start-up jitter on a loaded machine
pause = {"train": 2.0, "sft": 1.0}.get(phase, 1.5 if phase.startswith("eval") else 0.3)
time.sleep(pause + (1.5 * float(os.environ["STAGGER"]) if phase != "select" else 0))
name = phase + (f"-{rest[0]}" if rest else "")
failed = (phase == os.environ.get("FAIL") and os.environ.get("FAIL_USERS", os.environ.get("EVAL_USERS"))
          == os.environ.get("EVAL_USERS")) or (phase == os.environ.get("FAIL_ONCE") and tally(name) == 0) \
         or name == os.environ.get("FAIL_NAME")
record(t0=t0, t1=time.time(), user_up=up, rc=3 if failed else 0)
sys.exit(3 if failed else 0)
"""


def run_pipeline(tmp_path: Path, **env: str) -> tuple[list[dict], Path, float]:
    stub = tmp_path / "stub.py"
    stub.write_text(STUB)
    calls, counts = tmp_path / "calls.jsonl", tmp_path / "counts"
    counts.mkdir()
    port = free_port()
    environ = {
        **os.environ,
        "CS": f"{sys.executable} {stub}",
        "CALLS": str(calls),
        "COUNTS": str(counts),
        "USER_PORT": str(port),
        "RUNS": str(tmp_path / "runs"),
        "DEVICE_ENV": "/nonexistent",
        "STAGGER": "0",
        "RETRY_PAUSE": "0",
        "POLL": "0.2",
        **env,
    }
    results = tmp_path / "results"
    start = time.time()
    done = subprocess.run(
        ["bash", str(PIPELINE), str(results)],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    phases = (results / "phases.tsv").read_text()
    assert "pipeline\tend" in phases and "summary\tend" in phases, phases
    assert (results / "summary.md").exists()
    # the customer is gone: its process group ended, its port closed, its supervisor said so
    assert "user\tend" in phases
    pid = int((results / "user.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0
    return [json.loads(line) for line in calls.read_text().splitlines()], results, start


def named(calls: list[dict]) -> list[str]:
    return [c["phase"] + (f"-s{c['seed']}" if c["seed"] else "") for c in calls]


def overlap(a: dict, b: dict) -> bool:
    return a["t0"] < b["t1"] and b["t0"] < a["t1"]


@pytest.mark.timeout(120)
def test_the_pipeline_runs_both_seeds_beside_one_customer_within_the_deadline(tmp_path):
    calls, results, start = run_pipeline(tmp_path, DEADLINE="1140", STAGGER="1", FAIL_ONCE="select")
    order = named(calls)
    by = {n: c for n, c in zip(order, calls, strict=True) if not n.startswith("select")}
    assert (
        order[0] == "prepare" and order.count("user") == 1 and order.index("user") < order.index("train-s42")
    )
    assert sorted(set(order)) == sorted(
        ["prepare", "user", "eval-base", "sft", "eval-sft", "sft-s43", "eval-sft-s43"]
        + [f"{p}-s{s}" for s in (42, 43) for p in ("train", "select", "eval-trained")]
    )
    assert order.count("eval-sft") == 2 and order.count("eval-trained-s42") == 2  # each with both customers
    # the second SFT draw trains once eval-base has left the GPU, on its own port, and the trainers do not wait
    # for it; each customer's score of it follows the first SFT model's with that customer
    draw = by["sft-s43"]
    assert draw["t0"] >= by["eval-base"]["t1"] and draw["MASTER_PORT"] not in {"29521", "29531", "29532"}
    assert by["train-s42"]["t0"] < draw["t1"]
    sft_evals = {c["EVAL_USERS"]: c for c in calls if named([c]) == ["eval-sft"]}
    draw_evals = {c["EVAL_USERS"]: c for c in calls if named([c]) == ["eval-sft-s43"]}
    assert set(draw_evals) == {"scripted", "model"} and not overlap(*draw_evals.values())
    for user, c in draw_evals.items():
        assert c["t0"] >= max(sft_evals[user]["t1"], draw["t1"]) and c["GPU_UTIL"] == "0.15"
    phases = (results / "phases.tsv").read_text()
    assert "user-wait\tend" in phases and "rc=0" in phases.split("user-wait\tend")[1].splitlines()[0]
    for seed in (42, 43):  # select failed once, was retried, and the seed went on
        assert f"select-s{seed}\tretry" in phases and f"select-s{seed}\tend" in phases
        assert order.index("sft") < order.index(f"train-s{seed}") < order.index(f"select-s{seed}")
        assert order.index(f"select-s{seed}") < order.index(f"eval-trained-s{seed}")
        # select waits for both of eval-sft's ends (its val rows with each customer are step 0) and chooses
        # with both customers
        selects = [c for c in calls if named([c]) == [f"select-s{seed}"]]
        assert min(c["t0"] for c in selects) >= max(c["t1"] for c in sft_evals.values())
        assert {c["SELECT_USERS"] for c in selects} == {"scripted model"}
        scripted, model = (c for c in calls if named([c]) == [f"eval-trained-s{seed}"])
        assert {scripted["EVAL_USERS"], model["EVAL_USERS"]} == {"scripted", "model"} and overlap(
            scripted, model
        )
    assert {c["EVAL_USERS"] for c in calls if c["phase"] == "eval-sft"} == {"scripted", "model"}
    assert by["eval-base"]["EVAL_USERS"] == "scripted" and overlap(by["eval-base"], by["sft"])
    trains = [by["train-s42"], by["train-s43"]]
    assert overlap(*trains) and trains[1]["t0"] - trains[0]["t0"] >= 0.7  # side by side, STAGGER apart
    assert len({c["MASTER_PORT"] for c in trains}) == 2 and "29521" not in {c["MASTER_PORT"] for c in trains}
    assert by["sft"]["MASTER_PORT"] == "29521"
    for (
        c
    ) in trains:  # the shared customer answered; 32 completions a step; no vLLM start-up check left to race
        assert c["user_up"] and c["USER_SHARED"] == "1"
        assert (
            int(c["MICRO_BATCH"]) * int(c["GRAD_ACC"]) == 32
            and c["STEPS"] == "40"
            and c["SAVE_STEPS"] == "10"
        )
        assert c["SLEEP_LEVEL"] == "0"
        flag, kwargs = c["TRAIN_FLAGS"].split()[:2]
        assert flag == "--vllm_engine_kwargs" and json.loads(kwargs) == {"kv_cache_memory_bytes": 3 * 2**30}
    # training ends SCORE_RESERVE before the deadline, the first seed STAGGER sooner (its engines start apart)
    until = [int(c["TRAIN_UNTIL"]) for c in trains]
    assert (
        int(start) - 1 + 1140 - 420 - 1 <= until[0] <= time.time() + 1140 - 420 and until[1] - until[0] == 1
    )
    assert {c["GPU_UTIL"] for c in calls if c["phase"].startswith(("eval", "select"))} <= {"0.25", "0.15"}


@pytest.mark.timeout(120)
def test_without_the_model_customer_select_chooses_with_the_scripted_one_alone(tmp_path):
    calls, _, _ = run_pipeline(tmp_path, EVAL_MODEL_USER="0")
    assert {c["EVAL_USERS"] for c in calls if c["phase"].startswith("eval")} == {"scripted"}
    assert named(calls).count("eval-sft-s43") == 1
    assert {c["SELECT_USERS"] for c in calls if c["phase"] == "select"} == {"scripted"}
    assert sorted(c["seed"] for c in calls if c["phase"] == "eval-trained") == ["42", "43"]


@pytest.mark.timeout(120)
def test_when_the_sft_models_eval_with_the_model_customer_fails_select_still_chooses_with_the_scripted_one(
    tmp_path,
):
    calls, results, _ = run_pipeline(tmp_path, FAIL="eval-sft", FAIL_USERS="model")
    assert "eval-sft-user\tretry" in (results / "phases.tsv").read_text()
    selects = [c for c in calls if c["phase"] == "select"]
    assert sorted(c["seed"] for c in selects) == ["42", "43"]
    assert {c["SELECT_USERS"] for c in selects} == {"scripted"}


@pytest.mark.timeout(120)
def test_a_customer_that_dies_is_started_once_more_and_the_trainers_find_it(tmp_path):
    calls, results, _ = run_pipeline(tmp_path, DEADLINE="1140", FAKE_USER_DIES="1")
    order = named(calls)
    assert order.count("user") == 2 and "user\tretry" in (results / "phases.tsv").read_text()
    assert all(c["user_up"] for c in calls if c["phase"] == "train") and order.count("train-s42") == 1


@pytest.mark.timeout(120)
def test_a_customer_that_never_answers_fails_its_phases_clearly_and_trains_nothing(tmp_path):
    calls, results, _ = run_pipeline(tmp_path, DEADLINE="1140", FAKE_USER_DIES="2")
    order = named(calls)
    assert order.count("user") == 2 and "train-s42" not in order and "eval-base" in order
    phases = (results / "phases.tsv").read_text()
    assert "user-wait\tretry" in phases and "user-wait\tend" in phases
    assert "swift deploy (pid" in (results / "user-wait.out").read_text()


@pytest.mark.timeout(120)
def test_a_failed_sft_trains_nothing_stops_the_customer_and_still_summarizes(tmp_path):
    calls, _, _ = run_pipeline(tmp_path, FAIL="sft", DEADLINE="100")  # < 4 min left: no retry
    assert sorted(named(calls)) == ["eval-base", "prepare", "sft", "sft-s43", "user"]


@pytest.mark.timeout(120)
def test_a_failed_sft_draw_is_not_scored_and_without_draws_none_is_trained(tmp_path):
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    calls, _, _ = run_pipeline(tmp_path / "a", FAIL_NAME="sft-43", DEADLINE="1140")
    order = named(calls)  # the draw failed, was retried, failed again; the rest of the run went on
    assert order.count("sft-s43") == 2 and "eval-sft-s43" not in order and "eval-trained-s43" in order
    calls, _, _ = run_pipeline(tmp_path / "b", SFT_DRAWS="")
    assert not {"sft-s43", "eval-sft-s43"} & set(named(calls)) and "train-s43" in named(calls)


@pytest.mark.timeout(120)
def test_without_seeds_the_pipeline_scores_the_baselines_alone_and_ends(tmp_path):
    # run_pipeline fails on a hang (90 s) or a customer left up
    calls, _, _ = run_pipeline(tmp_path, SEEDS="")
    assert sorted(named(calls)) == sorted(
        ["prepare", "user", "eval-base", "sft", "sft-s43"] + ["eval-sft", "eval-sft-s43"] * 2
    )


def test_prepare_holds_val_apart_from_the_demonstrations_and_the_grpo_rows(tmp_path):
    env = {**os.environ, "RUNS": str(tmp_path), "DEVICE_ENV": "/nonexistent"}
    subprocess.run(
        ["bash", str(BENCH / "h200.sh"), "prepare", str(tmp_path / "out")], cwd=ROOT, env=env, check=True
    )

    def rows(path: Path) -> list[dict]:
        return [json.loads(line) for line in path.read_text().splitlines()]

    train = rows(ROOT / "examples" / "customer_service" / "data" / "train.jsonl")
    val, grpo = rows(tmp_path / "cs" / "val.jsonl"), rows(tmp_path / "cs" / "grpo.jsonl")
    assert len(val) == 100 and {r["split"] for r in val} == {"val"}
    assert len({r["task_type"] for r in val}) == 5
    goals = {json.dumps(r["user_goal"], sort_keys=True) for r in val}
    assert not goals & {json.dumps(r["user_goal"], sort_keys=True) for r in grpo + train[:1000]}
    assert grpo == train[1000:1900]
    splits = [r["split"] for r in rows(tmp_path / "cs" / "eval.jsonl")]  # one set for both customers
    assert splits.count("val") == 100 and splits.count("test") == 198 and splits.count("ood") == 100


def trajectories(path: Path, episodes: list[tuple[str, str, float, float]]) -> None:
    """Eval records, one per (split, task type, goal, violations)."""
    lines = [
        json.dumps(
            {
                "row": {"split": s, "task_type": t},
                "rewards": {summarize.GOAL: g, summarize.VIOLATIONS: v},
                "turns": 4,
                "stop_reason": "user_stop",
            }
        )  # fmt: skip
        for s, t, g, v in episodes
    ]
    opener = gzip.open if path.suffix == ".gz" else open
    path.parent.mkdir(parents=True, exist_ok=True)
    with opener(path, "wt") as f:
        f.write("\n".join(lines) + "\n")


def test_the_summary_checks_success_and_violations_on_every_seed(tmp_path):
    def episodes(test: list[tuple[float, float]], ood: float) -> list[tuple[str, str, float, float]]:
        return [("test", "cancel", g, v) for g, v in test] + [("ood", "decline", ood, 0.0)]

    made = {
        "base": episodes([(0.0, 0.0), (0.0, 0.0)], 0.0),
        "sft": episodes([(1.0, 1.0), (0.0, 0.0)], 0.0),  # test success 0.5, half with a violation
        "trained-42": episodes([(1.0, 0.0), (1.0, 0.0)], 1.0),
        "trained-43": episodes([(1.0, 2.0), (1.0, 0.0)], 0.0),
        "sft-model-user": episodes([(0.0, 0.0), (0.0, 0.0)], 0.0),
        "trained-42-model-user": episodes([(1.0, 0.0), (0.0, 0.0)], 0.0),
    }
    for name, rows in made.items():
        trajectories(tmp_path / f"trajectories-{name}.jsonl.gz", rows)
    summarize.main(tmp_path)
    text = (tmp_path / "summary.md").read_text()
    assert (
        "- test: trained success 1.000, 1.000 vs the strongest baseline (sft) 0.500 (needs >= +0.15 on every seed): "
        "met; with a violation 0.000, 0.500 vs 0.500 (needs no rise): met" in text
    )
    assert (
        "- ood (reported; not part of the target): trained success 1.000, 0.000 vs the strongest baseline"
        in text
    )
    head = "| group | base | sft | trained-42 | trained-43 | trained mean | sft, model customer | trained-42, model customer |"
    assert head in text
    assert "| test/cancel | 0.00 | 0.50 | 1.00 | 1.00 | 1.00 | 0.00 | 0.50 |" in text  # goal success


def test_the_target_is_read_against_the_strongest_sft_draw_with_each_customer(tmp_path):
    cancel = [("test", "cancel", 1.0, 0.0), ("test", "cancel", 0.0, 0.0)]  # success 0.5, no violation
    made = {
        "sft": [("test", "cancel", 0.0, 0.0)] * 2,
        "sft-43": [("test", "cancel", 1.0, 1.0)] + cancel,  # 0.667, one of three with a violation
        "trained-42": [("test", "cancel", 1.0, 0.0)] * 2 + cancel,  # 0.75: +0.25 on sft, +0.083 on sft-43
        "sft-model-user": cancel,
        "sft-43-model-user": [("test", "cancel", 0.0, 0.0)] * 2,
        "trained-42-model-user": [("test", "cancel", 1.0, 0.0)] * 2,
    }
    for name, rows in made.items():
        trajectories(tmp_path / f"trajectories-{name}.jsonl.gz", rows)
    models = summarize.load(tmp_path)
    assert list(models)[:2] == ["sft", "sft-43"]  # the baselines before the trained seeds
    scripted, model = summarize.target(models), summarize.target(models, summarize.MODEL_USER)
    assert (
        "vs the strongest baseline (sft-43) 0.667" in scripted and ": NOT met; with a violation" in scripted
    )
    assert "0.000 vs 0.333 (needs no rise): met; baselines: sft 0.000, sft-43 0.667" in scripted
    assert "vs the strongest baseline (sft) 0.500 (needs >= +0.15 on every seed): met" in model
    assert "baselines: sft 0.500, sft-43 0.000" in model


def test_the_summary_counts_failed_lookups_and_recoveries_only_where_there_were_any(tmp_path):
    def lookup(error: bool) -> dict:
        return {"tool": "find_customer", "error": "no customer matches" if error else None}

    def conversation(calls: list[dict], stop: str = "max_user_turns") -> str:
        record = {"row": {"split": "test", "task_type": "cancel"}, "rewards": {}, "stop_reason": stop}
        return json.dumps({**record, "tool_calls": [{"tool": "get_order", "error": "bad id"}, *calls]})

    made = {
        "sft-model-user": [
            conversation([lookup(True), lookup(False)], stop="user_stop"),  # failed first, then found
            conversation([lookup(True), lookup(True)]),  # failed twice
            conversation([lookup(False), lookup(True)]),  # found at once: a later failure is no failed first
            conversation([]),  # no lookup at all
        ],
        "sft": [conversation([lookup(False)], stop="user_stop")],
    }
    for name, lines in made.items():
        with gzip.open(tmp_path / f"trajectories-{name}.jsonl.gz", "wt") as f:
            f.write("\n".join(lines) + "\n")
    summarize.main(tmp_path)
    text = (tmp_path / "summary.md").read_text()

    def row(title: str) -> str:
        return text.split(f"## {title}")[1].split("| test/all |")[1].split("\n")[0]

    assert row(summarize.METRICS["lookup_failed"]) == " 0.00 | 0.50 |"
    assert row(summarize.METRICS["recovered"]) == "  | 0.50 |"  # sft failed no first lookup: nothing to count
    assert row(summarize.METRICS["customer_ended"]) == " 1.00 | 0.25 |"


def test_the_summary_counts_the_customers_echoes_only_where_replies_recorded_them(tmp_path):
    def conversation(*echoes: int | None) -> str:
        calls = [{"turn": i} if n is None else {"turn": i, "echoes": n} for i, n in enumerate(echoes)]
        record = {"row": {"split": "test", "task_type": "cancel"}, "rewards": {}, "user_calls": calls}
        return json.dumps(record)

    made = {
        "sft": [conversation(None, None)],  # a run from before echoes were counted: no figure, not 0
        "sft-model-user": [conversation(0, 2, 0), conversation(0, 0), conversation(1), conversation()],
    }
    for name, lines in made.items():
        with gzip.open(tmp_path / f"trajectories-{name}.jsonl.gz", "wt") as f:
            f.write("\n".join(lines) + "\n")
    summarize.main(tmp_path)
    text = (tmp_path / "summary.md").read_text()
    echoed = text.split(f"## {summarize.METRICS['echoed']}")[1].split("| test/all |")[1].split("\n")[0]
    assert echoed == "  | 0.67 |"  # 2 of the 3 conversations whose replies were counted


def test_select_takes_the_best_val_success_then_fewer_violations_then_the_earliest(tmp_path):
    def val(path: Path, goals_and_violations: list[tuple[float, float]]) -> None:
        trajectories(path / "trajectories.jsonl", [("val", "cancel", g, v) for g, v in goals_and_violations])

    val(tmp_path / "sft", [(1.0, 0.0), (0.0, 0.0)])
    val(tmp_path / "val" / "checkpoint-5", [(1.0, 1.0), (0.0, 0.0)])  # as good, a violation more: loses
    val(
        tmp_path / "val" / "checkpoint-10", [(1.0, 0.0), (0.0, 0.0)]
    )  # a tie with sft: the earlier (sft) wins
    ckpts = [str(tmp_path / "run" / "v0" / f"checkpoint-{n}") for n in (5, 10)]
    args = [
        str(tmp_path / "sft"),
        str(tmp_path / "val"),
        str(tmp_path / "best.txt"),
        str(tmp_path / "v.json"),
    ]
    summarize.select(*args, *ckpts)
    assert (tmp_path / "best.txt").read_text().strip() == "sft"
    val(tmp_path / "val" / "checkpoint-10", [(1.0, 0.0), (1.0, 0.0)])
    summarize.select(*args, *ckpts)
    assert (tmp_path / "best.txt").read_text().strip() == ckpts[1]
    assert json.loads((tmp_path / "v.json").read_text())["best"]["step"] == 10


def test_select_passes_over_a_checkpoint_with_more_violations_than_the_sft_model(tmp_path, monkeypatch):
    """2026-12-07's seed 43: checkpoint 10 had the best val success with nearly twice the SFT model's share of
    conversations with a violation; the target forbids that rise, so select must not ship it."""

    def val(path: Path, goals: int, violating: int) -> None:  # of 50 conversations
        episodes = [(1.0 if i < goals else 0.0, 1.0 if i >= 50 - violating else 0.0) for i in range(50)]
        trajectories(path / "trajectories.jsonl", [("val", "cancel", g, v) for g, v in episodes])

    val(tmp_path / "sft", 22, 5)  # 0.44, 0.10
    val(tmp_path / "val" / "checkpoint-10", 36, 10)  # 0.72, 0.20: the best success, too many violations
    val(tmp_path / "val" / "checkpoint-20", 35, 6)  # 0.70, 0.12: within the margin
    ckpts = [str(tmp_path / "run" / "v0" / f"checkpoint-{n}") for n in (10, 20)]
    args = [str(tmp_path / n) for n in ("sft", "val", "best.txt", "v.json")]
    summarize.select(*args, *ckpts)
    assert (tmp_path / "best.txt").read_text().strip() == ckpts[1]
    monkeypatch.setenv("SELECT_VIOLATION_MARGIN", "0")  # no rise at all: the SFT model stays
    summarize.select(*args, *ckpts)
    assert (tmp_path / "best.txt").read_text().strip() == "sft"
    monkeypatch.setenv("SELECT_VIOLATION_MARGIN", "1")  # no constraint: the best success
    summarize.select(*args, *ckpts)
    assert (tmp_path / "best.txt").read_text().strip() == ckpts[0]


def test_select_counts_a_candidate_by_its_worst_customer(tmp_path):
    def val(path: Path, goals: list[float]) -> None:
        trajectories(path / "trajectories.jsonl", [("val", "cancel", g, 0.0) for g in goals])

    # the scripted customer: every model 1.00, as on 2026-12-06; the model customer tells them apart
    for customer, sft, ckpt5, ckpt10 in (("scripted", 1, 1, 0.5), ("model", 0.5, 0.75, 1)):
        val(tmp_path / f"sft-{customer}", [1.0] * int(4 * sft) + [0.0] * (4 - int(4 * sft)))
        val(
            tmp_path / f"val-{customer}" / "checkpoint-5",
            [1.0] * int(4 * ckpt5) + [0.0] * (4 - int(4 * ckpt5)),
        )
        val(
            tmp_path / f"val-{customer}" / "checkpoint-10",
            [1.0] * int(4 * ckpt10) + [0.0] * (4 - int(4 * ckpt10)),
        )
    ckpts = [str(tmp_path / "run" / "v0" / f"checkpoint-{n}") for n in (5, 10)]
    both = [",".join(str(tmp_path / f"{k}-{c}") for c in ("scripted", "model")) for k in ("sft", "val")]
    summarize.select(*both, str(tmp_path / "best.txt"), str(tmp_path / "v.json"), *ckpts)
    # checkpoint 10 is best with the model customer and breaks with the scripted one: checkpoint 5 (worst 0.75)
    assert (tmp_path / "best.txt").read_text().strip() == ckpts[0]
    report = json.loads((tmp_path / "v.json").read_text())
    assert [s["success"] for s in report["scores"]] == [0.5, 0.75, 0.5]
    assert [c["success"] for c in report["best"]["customers"]] == [1.0, 0.75]
    # with the scripted customer alone no checkpoint beats the SFT model: the earliest, "sft", stays
    summarize.select(
        str(tmp_path / "sft-scripted"), str(tmp_path / "val-scripted"), str(tmp_path / "best.txt"),
        str(tmp_path / "v.json"), *ckpts,
    )  # fmt: skip
    assert (tmp_path / "best.txt").read_text().strip() == "sft"


def test_the_select_phase_without_checkpoints_keeps_the_sft_model(tmp_path):
    env = {**os.environ, "RUNS": str(tmp_path), "DEVICE_ENV": "/nonexistent"}
    out = tmp_path / "out"
    cmd = ["bash", str(BENCH / "h200.sh"), "select", str(out), "42"]
    missing = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert missing.returncode == 2 and "needs eval-sft with the scripted customer first" in missing.stderr
    trajectories(tmp_path / "cs-eval-sft" / "trajectories.jsonl", [("val", "cancel", 1.0, 0.0)])
    missing = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert missing.returncode == 2 and "needs eval-sft with the model customer first" in missing.stderr
    trajectories(tmp_path / "cs-eval-sft-model-user" / "trajectories.jsonl", [("val", "cancel", 0.0, 0.0)])
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, capture_output=True)
    assert (tmp_path / "cs-grpo-42-best.txt").read_text().strip() == "sft"
    best = json.loads((out / "validation-42.json").read_text())["best"]
    assert best["success"] == 0.0 and [c["success"] for c in best["customers"]] == [1.0, 0.0]  # the worst
    subprocess.run(cmd, cwd=ROOT, env={**env, "SELECT_USERS": "scripted"}, check=True, capture_output=True)
    assert json.loads((out / "validation-42.json").read_text())["best"]["success"] == 1.0
