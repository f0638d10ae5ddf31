"""The Launch form's process side without a browser: a real child process (a fake ``swift``) started by a
real UI process, and what becomes of it when that process ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import ROOT
from .conftest import FakeSwift

# A UI process in miniature: start one run the way the Launch button does, say the trainer's pid, then
# end as asked: return (interpreter exit), or wait for SIGTERM with or without a handler of its own.
UI_PROCESS = """
import signal, sys, time
if sys.argv[3] == "own-handler":
    def own(signum, frame):
        print("own handler ran", flush=True)
        sys.exit(3)
    signal.signal(signal.SIGTERM, own)
from swift_rlfactory.ui.launch import GRPOForm, Job
job = Job(GRPOForm(model="m", dataset="d", env=sys.argv[1], output_dir=sys.argv[2], mode="cpu"))
print(job.process.pid, flush=True)
if sys.argv[3] != "return":
    time.sleep(120)
"""


@pytest.mark.parametrize(
    ("ending", "code"), [("return", 0), ("sigterm", -signal.SIGTERM), ("own-handler", 3)]
)
def test_no_trainer_outlives_the_ui_process(tmp_path: Path, fake_swift: FakeSwift, ending: str, code: int):
    env_file = tmp_path / "env.yaml"
    env_file.write_text("name: plain\nreward:\n  - {name: format}\n")
    ui = subprocess.Popen(
        [sys.executable, "-c", UI_PROCESS, str(env_file), str(tmp_path / "out"), ending],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        trainer = int(ui.stdout.readline())
        fake_swift.wait_for("start")
        if ending != "return":
            ui.send_signal(signal.SIGTERM)
        assert ui.wait(60) == code
        # the trainer got SIGINT (its trap wrote "exit") and the UI process waited for it to finish
        assert fake_swift.lines() == ["start", str(trainer), "exit", str(trainer)]
        if ending == "own-handler":
            assert ui.stdout.read() == "own handler ran\n"  # the handler that was there first still runs
    finally:
        if ui.poll() is None:
            ui.kill()
            ui.wait()
        ui.stdout.close()
