"""A trajectory log that cannot be written never ends a training run.

ms-swift's own reward call (``compute_rewards_per_func``) runs our reward, which appends the batch to
``trajectories.jsonl``. An ``OSError`` out of that write used to come straight out of ms-swift's reward
call and kill the run. Here the log's path is taken by a folder, sits under a file, or is ``/dev/full``
(every write fails with ENOSPC, as on a full disk); file modes cannot make a folder read-only for root, who
runs these tests. Every batch must still be scored, the failure warned about once (naming the file and
why), counted in ``log/write_errors``, and the log must pick up again once the path is usable.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from swift.rl_core.data import OnPolicySample
from swift.rl_core.grpo_algorithm import compute_rewards_per_func

from swift_rlfactory.adapters import swift as adapter
from swift_rlfactory.adapters import swift_reward, swift_run
from swift_rlfactory.adapters.swift import RLFactoryReward
from swift_rlfactory.adapters.swift_run import TRAJECTORIES_VAR
from swift_rlfactory.run_config import ENV_VAR
from swift_rlfactory.runs.log import TrajectoryLog, read_trajectories
from swift_rlfactory.trajectory import Trajectory

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def env(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "env.yaml"
    path.write_text("name: logged\nreward:\n  - {name: em}\n")
    monkeypatch.setenv(ENV_VAR, str(path))
    monkeypatch.delenv(TRAJECTORIES_VAR, raising=False)
    run = swift_run._Run()  # environments of this test only
    monkeypatch.setattr(adapter, "RUN", run)
    monkeypatch.setattr(swift_reward, "RUN", run)
    yield path
    for loaded in adapter.RUN.envs.values():
        loaded.close()


def score_step(reward: RLFactoryReward, step: int) -> list[float]:
    """One batch through ms-swift's reward call: a right answer and a wrong one, at ``step``."""
    samples = [
        OnPolicySample(
            messages=[
                {"role": "user", "content": "What is 2 + 2?"},
                {"role": "assistant", "content": f"<answer>{answer}</answer>"},
            ],
            extra={"solution": "4"},
        )
        for answer in ("4", "5")
    ]
    trainer_state = SimpleNamespace(global_step=step - 1)
    return compute_rewards_per_func(
        samples, [reward], None, torch.device("cpu"), trainer_state=trainer_state
    )[:, 0].tolist()


def unusable(tmp_path: Path, how: str) -> Path:
    if how == "a folder":
        (tmp_path / "out" / "trajectories.jsonl").mkdir(parents=True)
        return tmp_path / "out" / "trajectories.jsonl"
    if how == "under a file":
        (tmp_path / "out").write_text("not a folder")
        return tmp_path / "out" / "trajectories.jsonl"
    return Path("/dev/full")


@pytest.mark.parametrize("how", ["a folder", "under a file", "a full disk"])
def test_training_goes_on_when_the_trajectory_log_cannot_be_written(env, tmp_path, caplog, how):
    if how == "a full disk" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full here")
    path = unusable(tmp_path, how)
    reward = RLFactoryReward(args=SimpleNamespace(output_dir=str(tmp_path)))
    reward.log.path = path  # where $RLFACTORY_TRAJECTORIES or --output_dir would have put it
    with caplog.at_level(logging.INFO, logger="swift_rlfactory"):
        scores = [score_step(reward, step) for step in (1, 2, 3)]
    assert scores == [[1.0, 0.0]] * 3  # every step was scored
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "cannot write" in r.getMessage()
    ]
    assert len(warnings) == 1, warnings  # once, not once per step
    assert str(path) in warnings[0] and "training goes on" in warnings[0]
    why = {
        "a folder": "IsADirectoryError",
        "under a file": "FileExistsError",
        "a full disk": "No space left",
    }[how]
    assert why in warnings[0]
    metrics = [r.getMessage() for r in caplog.records if r.getMessage().startswith("rlfactory metrics")]
    assert len(metrics) == 3 and all("'log/write_errors': 1" in m for m in metrics)  # each batch's failure


def test_the_log_picks_up_again_once_its_path_is_usable(env, tmp_path, caplog):
    path = unusable(tmp_path, "a folder")
    reward = RLFactoryReward(args=SimpleNamespace(output_dir=str(tmp_path / "out")))
    with caplog.at_level(logging.INFO, logger="swift_rlfactory"):
        assert score_step(reward, 1) == [1.0, 0.0]
        path.rmdir()  # the user frees the path mid-run
        assert score_step(reward, 2) == [1.0, 0.0]
    assert [(t["step"], t["rewards"]["total"]) for t in read_trajectories(path)] == [(2, 1.0), (2, 0.0)]
    metrics = [r.getMessage() for r in caplog.records if r.getMessage().startswith("rlfactory metrics")]
    assert ["'log/write_errors': 1" in m for m in metrics] == [True, False]
    assert "'log/write_errors': 0" in metrics[1]


SHORT_WRITE = """
import logging, resource, signal, sys
from swift_rlfactory.runs.log import TrajectoryLog
from swift_rlfactory.trajectory import Trajectory

logging.basicConfig(level=logging.WARNING, stream=sys.stdout)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit is then short, not fatal
resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))  # the disk fills 200 bytes in
log = TrajectoryLog(sys.argv[1])
batch = [Trajectory(messages=[{"role": "user", "content": "x" * 300}])]
print(log.write(batch, step=1), log.write(batch, step=2), log.drain_errors())
"""


def test_a_write_the_disk_could_take_only_part_of_is_counted(tmp_path):
    """A disk that fills in the middle of a batch takes part of the write without an error (the next
    write gets it): that batch's lines are lost as well, so it is counted and warned about too."""
    path = tmp_path / "trajectories.jsonl"
    done = subprocess.run(
        [sys.executable, "-c", SHORT_WRITE, str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "False False 2"
    warnings = [line for line in done.stdout.splitlines() if "cannot write" in line]
    assert len(warnings) == 2  # two kinds of failure: each said once
    assert "wrote 200 of" in warnings[0] and "File too large" in warnings[1]
    assert path.stat().st_size == 200


def _cycle() -> dict:
    looped: dict = {"a": 1}
    looped["self"] = looped
    return looped


@pytest.mark.parametrize(
    "value", [{(1, 2): "tuple key"}, threading.Lock(), _cycle()], ids=["tuple key", "lock", "cycle"]
)
def test_a_row_value_json_cannot_hold_keeps_its_line_as_text(tmp_path, value):
    """A row column with a tuple key, an object that cannot be copied, a cycle: ``write`` raised (out of
    ms-swift's reward call, ending the run) although it never raises; the batch's lines are written, the
    odd column as text."""
    log = TrajectoryLog(tmp_path / "trajectories.jsonl")
    odd = Trajectory(messages=[{"role": "user", "content": "q"}], row={"odd": value, "solution": "4"})
    fine = Trajectory(messages=[{"role": "user", "content": "p"}], row={"solution": "5"})
    assert log.write([odd, fine], step=3) is True
    first, second = read_trajectories(tmp_path / "trajectories.jsonl")
    assert first["row"]["solution"] == "4" and isinstance(first["row"]["odd"], str)
    assert first["messages"] == odd.messages and first["step"] == 3
    assert second["row"] == {"solution": "5"}
