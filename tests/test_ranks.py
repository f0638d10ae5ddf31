"""Several ranks, one run: metrics reduced over ranks, the run id and rank on every record and line, one run
per folder, and `train` refusing launcher variables it cannot honour."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from swift_rlfactory.adapters import swift_ranks
from swift_rlfactory.rewards.metrics import JudgeStats, reward_metrics
from swift_rlfactory.rollout.metrics import tool_metrics
from swift_rlfactory.rollout.ranks import RankBatch, batch_metrics, slim, timeline_metrics
from swift_rlfactory.runs import identity
from swift_rlfactory.runs.lock import FolderBusy, lock_folder
from swift_rlfactory.runs.log import TrajectoryLog, read_trajectories
from swift_rlfactory.train import check_launcher
from swift_rlfactory.trajectory import Trajectory

ROOT = Path(__file__).resolve().parents[1]


def _call(turn: int, latency: float, error: str | None = None, hit: bool = False) -> dict:
    return {
        "tool": "add",
        "turn": turn,
        "latency_s": latency,
        "error": error,
        "cache_hit": hit,
        "observation": "x",
    }


def _trajectory(calls: list[dict], stop: str, em: float, errors: dict | None = None) -> Trajectory:
    return Trajectory(
        messages=[{"role": "user", "content": "long " * 100}],
        tool_calls=calls,
        turns=1 + len({c["turn"] for c in calls}),
        stop_reason=stop,
        rewards={"em": em, "total": em},
        turn_rewards={"step": [em, 1.0]},
        reward_errors=errors or {},
    )


# rank 0: 4 trajectories with 7 calls; rank 1: 1 trajectory with 0 calls - unequal on purpose, so a mean
# of the two ranks' means differs from the batch's mean
RANK0 = [
    _trajectory([_call(0, 0.1), _call(0, 0.2)], "answer", 1.0),
    _trajectory([_call(0, 0.3), _call(1, 0.4, "timeout: 5 s")], "max_turns", 0.0, {"em": "timeout: 5 s"}),
    _trajectory([_call(0, 0.5, hit=True), _call(1, 0.6), _call(2, 0.7)], "answer", 1.0),
    _trajectory([], "answer", 0.0),
]
RANK1 = [_trajectory([], "length", 1.0, {"em": "non_finite: nan"})]


def test_the_batch_metrics_of_two_ranks_are_those_of_their_trajectories_together():
    parts = [RankBatch([slim(t) for t in RANK0]), RankBatch([slim(t) for t in RANK1])]
    expected = {**tool_metrics(RANK0 + RANK1), **reward_metrics(RANK0 + RANK1)}
    assert batch_metrics(parts) == pytest.approx(expected)
    assert expected["tools/calls_per_trajectory"] == 7 / 5  # not (7/4 + 0/1) / 2
    assert expected["rlfactory/em"] == 3 / 5
    assert expected["stop/length"] == 1 / 5 and expected["rewards/non_finite"] == 1.0
    assert expected["tools/latency_p95_s"] == pytest.approx(0.67)  # of all seven calls


def test_counters_are_summed_and_judges_merged_weighted_by_lookups():
    a = RankBatch(
        [], counts={"log/write_errors": 1}, judge=JudgeStats(lookups=9, hits=9, calls=0, latencies=[])
    )
    b = RankBatch(
        [], counts={"log/write_errors": 2}, judge=JudgeStats(lookups=1, hits=0, calls=1, latencies=[3.0])
    )
    metrics = batch_metrics([a, b])
    assert metrics["log/write_errors"] == 3
    assert metrics["judge/cache_hit_rate"] == 0.9  # not (1.0 + 0.0) / 2
    assert metrics["judge/calls"] == 1 and metrics["judge/latency_p50_s"] == 3.0


def test_slim_keeps_what_the_metrics_read_and_drops_the_text():
    part = slim(RANK0[1])
    assert part.messages == [] and part.row == {}
    assert part.tool_calls[1] == {"turn": 1, "latency_s": 0.4, "error": True, "cache_hit": False}
    assert part.reward_errors == {"em": "timeout"}


def test_the_timeline_averages_phases_over_ranks_and_keeps_the_longest_chain():
    rank0 = {"timeline/generation_s": 2.0, "timeline/step_s": 4.0, "timeline/tool_chain_s": 1.0,
             "timeline/share/generation": 0.5}  # fmt: skip
    rank1 = {"timeline/generation_s": 4.0, "timeline/step_s": 4.0, "timeline/tool_chain_s": 3.0,
             "timeline/share/generation": 1.0}  # fmt: skip
    metrics = timeline_metrics([rank0, rank1])
    assert metrics["timeline/generation_s"] == 3.0 and metrics["timeline/tool_chain_s"] == 3.0
    assert metrics["timeline/share/generation"] == 0.75
    assert timeline_metrics([{}, {}]) == {}


def test_every_trajectory_record_carries_the_run_and_the_rank(tmp_path: Path, monkeypatch):
    monkeypatch.setenv(identity.RUN_ID_VAR, "run-a")
    monkeypatch.setenv("RANK", "3")
    TrajectoryLog(tmp_path / "t.jsonl").write(RANK1, step=1)
    [record] = read_trajectories(tmp_path / "t.jsonl")
    assert record["run"] == "run-a" and record["rank"] == 3


def test_a_run_id_is_made_once_and_inherited(monkeypatch):
    monkeypatch.delenv(identity.RUN_ID_VAR, raising=False)
    first = identity.run_id()
    assert identity.run_id() == first and os.environ[identity.RUN_ID_VAR] == first


def test_the_package_log_lines_carry_the_run_and_the_rank(tmp_path: Path):
    script = textwrap.dedent("""
        import logging
        from swift_rlfactory.runs import identity
        logging.basicConfig(format="%(message)s")
        identity.tag_log_lines()
        identity.tag_log_lines()  # idempotent: one tag
        logging.getLogger("swift_rlfactory.tools.executor").warning("a tool failed")
        logging.getLogger("other").warning("not ours")
    """)
    env = {**os.environ, "RANK": "1", identity.RUN_ID_VAR: "run-b", "PYTHONPATH": str(ROOT)}
    err = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True).stderr
    assert err.splitlines() == ["[run run-b rank 1] a tool failed", "not ours"]


def test_a_second_run_into_a_held_folder_is_refused_naming_the_first(tmp_path: Path):
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from swift_rlfactory.runs.lock import lock_folder;"
         f"h = lock_folder({str(tmp_path)!r}, 'run-1'); print('held', flush=True); time.sleep(60)"],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(FolderBusy, match=rf"pid {holder.pid} on .*started .*run run-1"):
            lock_folder(tmp_path, "run-2")
    finally:
        holder.kill()
        holder.wait()
    # the holder died: its lock file is left, and taken over
    handle = lock_folder(tmp_path, "run-2")
    assert json.loads((tmp_path / ".lock").read_text())["run_id"] == "run-2"
    handle.close()


def test_train_refuses_to_be_one_of_several_copies_but_starts_ranks_itself():
    with pytest.raises(ValueError, match=r"WORLD_SIZE=2: .*one of several copies.*NPROC_PER_NODE=<ranks>"):
        check_launcher({"WORLD_SIZE": "2"})  # torchrun ... swift-rlfactory train: each copy a run folder
    check_launcher({"WORLD_SIZE": "1"})
    check_launcher({"NPROC_PER_NODE": "2"})  # train starts them, under ms-swift's launcher
    check_launcher({"NNODES": "2", "WORLD_SIZE": "4"})


def test_train_with_nproc_per_node_runs_ms_swifts_launcher_with_gloo_on_cpu(
    tmp_path: Path, capsys, monkeypatch
):
    from swift_rlfactory.cli import main

    monkeypatch.setenv("NPROC_PER_NODE", "2")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert main(["train", "--dry-run", "--mode", "cpu", "--output-dir", str(tmp_path / "out")]) == 0
    line = capsys.readouterr().out.replace("\\\n", " ")
    assert "swift.cli.main rlhf --rlhf_type grpo" in line and "swift.cli.rlhf" not in line
    assert "--use_cpu true --ddp_backend gloo" in line and "NPROC_PER_NODE=2" in line
    assert f"OMP_NUM_THREADS={max(1, len(os.sched_getaffinity(0)) // 2)} " in line  # shared by the ranks
    assert not (tmp_path / "out").exists()
    monkeypatch.delenv("NPROC_PER_NODE")
    assert main(["train", "--dry-run", "--mode", "cpu", "--output-dir", str(tmp_path / "out")]) == 0
    line = capsys.readouterr().out
    assert "swift.cli.rlhf --rlhf_type grpo" in line and "--use_cpu" not in line and "NPROC" not in line


def test_a_second_swift_rlhf_run_into_one_output_dir_stops_at_start_naming_the_first(tmp_path: Path):
    """What the reward does at start on rank 0 (adapters/swift_ranks.start_run), in two processes."""
    from swift_rlfactory.adapters.swift_ranks import start_run

    first = subprocess.Popen(
        [sys.executable, "-c", "import time; from swift_rlfactory.adapters.swift_ranks import start_run;"
         f"start_run({str(tmp_path)!r}); start_run({str(tmp_path)!r}); print('running', flush=True); time.sleep(60)"],
        env={**os.environ, "PYTHONPATH": str(ROOT), identity.RUN_ID_VAR: "first"}, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert first.stdout.readline().strip() == "running"  # building the reward twice is one run
        with pytest.raises(FolderBusy, match=rf"pid {first.pid} .*run first.*another --output_dir"):
            start_run(str(tmp_path))
    finally:
        first.kill()
        first.wait()


def test_a_gloo_group_is_left_at_exit_after_a_clean_run_and_kept_after_an_unhandled_error(
    tmp_path, monkeypatch
):
    import torch.distributed as dist

    from swift_rlfactory.adapters.swift_ranks import leave_group

    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0, world_size=1)
    try:
        monkeypatch.setattr(sys, "last_type", RuntimeError, raising=False)  # the interpreter printed an error
        leave_group()
        assert dist.is_initialized()  # a destroy after an exception can hang: left alone
        monkeypatch.delattr(sys, "last_type")
        leave_group()
        assert not dist.is_initialized()
        leave_group()  # nothing left to leave
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _as_gloo_worker(work: Callable[[], object]) -> threading.Thread:
    """A thread that takes the OS name of gloo's worker threads (prctl PR_SET_NAME) and then runs ``work``."""

    def run() -> None:
        ctypes.CDLL(None).prctl(15, swift_ranks.GLOO_WORKER.encode(), 0, 0, 0)
        work()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _spin(until: threading.Event) -> None:
    """Run (state R), as a worker dropping a finished collective's tensors does, until ``until`` is set."""
    while not until.is_set():
        pass


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads Linux's /proc")
def test_leaving_waits_until_no_gloo_worker_runs_and_not_for_sleeping_ones():
    idle, stop, stopped_at = threading.Event(), threading.Event(), []
    asleep = _as_gloo_worker(lambda: idle.wait(30))  # an idle worker: waits on its queue
    busy = _as_gloo_worker(lambda: _spin(stop))
    timer = threading.Timer(0.5, lambda: (stopped_at.append(time.monotonic()), stop.set()))
    timer.start()
    try:
        swift_ranks.settle_gloo_workers(timeout_s=10)
        assert stopped_at and time.monotonic() >= stopped_at[0] and asleep.is_alive()  # not before it stopped
        busy.join(5)
        started = time.monotonic()
        swift_ranks.settle_gloo_workers(timeout_s=10)  # sleeping workers alone: a few calm polls
        assert time.monotonic() - started < 1
        stop.clear()
        _as_gloo_worker(lambda: _spin(stop))
        started = time.monotonic()
        swift_ranks.settle_gloo_workers(timeout_s=0.3)  # bounded: exit is never held up for long
        assert 0.3 <= time.monotonic() - started < 2
    finally:
        stop.set(), idle.set(), timer.cancel()
