"""The Launch form's process side without a browser: a real child process (a fake ``swift``) started by a
real UI process, and what becomes of it when that process ends."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swift_rlfactory.run_config import RunConfig
from swift_rlfactory.ui.launch import Job, grpo_command, shell_line

from ..conftest import ROOT
from .conftest import FakeSwift

# A UI process in miniature: start one run the way the Launch button does, say the trainer's pid once it
# is up, then end as asked: return (interpreter exit), or wait for SIGTERM with or without a handler of its own.
UI_PROCESS = """
import signal, sys, time
if sys.argv[3] == "own-handler":
    def own(signum, frame):
        print("own handler ran", flush=True)
        sys.exit(3)
    signal.signal(signal.SIGTERM, own)
from swift_rlfactory.run_config import RunConfig
from swift_rlfactory.ui.launch import Job
job = Job(RunConfig(model="m", dataset="d", env=sys.argv[1], output_dir=sys.argv[2], mode="cpu"))
while "fake swift args" not in job.log_tail():  # the trainer is up (its SIGINT trap set)
    time.sleep(0.05)
print(job.process.pid, flush=True)
if sys.argv[3] != "return":
    time.sleep(120)
"""


@pytest.mark.parametrize(
    ("ending", "code", "sigint"),
    [
        ("return", 0, signal.SIG_DFL),
        ("sigterm", -signal.SIGTERM, signal.SIG_DFL),
        ("own-handler", 3, signal.SIG_DFL),
        # a UI started in the background of a script (`swift-rlfactory ui &`) has SIGINT ignored, and a
        # child would inherit that: the trainer must still get the stop's SIGINT
        ("return", 0, signal.SIG_IGN),
    ],
)
def test_no_trainer_outlives_the_ui_process(
    tmp_path: Path, fake_swift: FakeSwift, ending: str, code: int, sigint: signal.Handlers
):
    env_file = tmp_path / "env.yaml"
    env_file.write_text("name: plain\nreward:\n  - {name: format}\n")
    ui = subprocess.Popen(
        [sys.executable, "-c", UI_PROCESS, str(env_file), str(tmp_path / "out"), ending],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, sigint),  # noqa: PLW1509 - the test has no threads
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


SECRETS = {"hub": "hf_SECRETtoken1234567890", "api": "sk-abcdefghijkl", "password": "hunter2hunter2"}
EXTRA = (
    f"--hub_token {SECRETS['hub']} --api_key={SECRETS['api']} --db-password {SECRETS['password']} "
    "--max_new_tokens 512 --use_hf_token_cache true"
)


def secret_form(tmp_path: Path) -> RunConfig:
    env_file = tmp_path / "env.yaml"
    env_file.write_text("name: plain\nreward:\n  - {name: format}\n")
    return RunConfig(
        model="m", dataset="d", env=str(env_file), output_dir=str(tmp_path / "out"), mode="cpu",
        swift_args=shlex.split(EXTRA),
    )  # fmt: skip


def test_the_shown_command_masks_credential_flags_the_child_still_gets_them(tmp_path: Path):
    form = secret_form(tmp_path)
    shown = shell_line(form)
    assert not any(value in shown for value in SECRETS.values()), shown
    assert "--hub_token '***' '--api_key=***' --db-password '***'" in shown
    assert "--max_new_tokens 512 --use_hf_token_cache true" in shown  # counts and switches stay readable
    argv = grpo_command(form)
    assert all(value in argv or f"--api_key={value}" in argv for value in SECRETS.values())


def test_the_launch_log_never_holds_a_credential_the_trainer_prints(tmp_path: Path, fake_swift: FakeSwift):
    job = Job(secret_form(tmp_path))
    fake_swift.wait_for("start")
    deadline = time.monotonic() + 20
    while "fake swift args" not in job.log_tail() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert job.stop() == "stopped"
    log = job.log_path.read_text()
    assert "fake swift args" in log and "--max_new_tokens 512" in log  # the trainer echoed its argv
    assert not any(value in log for value in SECRETS.values()), log
    assert "--hub_token *** --api_key=*** --db-password ***" in log


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_log_that_cannot_be_written_does_not_kill_the_run(caplog):
    """The log's disk is full (``/dev/full`` fails every write with ENOSPC): the writer keeps draining the
    trainer's output, so the trainer does not die of a closed pipe, and says once why the log stops."""
    from swift_rlfactory.ui.launch import _copy_redacted

    child = subprocess.Popen(
        [sys.executable, "-c", "import sys\nfor i in range(20000): print('step', i, 'x' * 60)\nsys.exit(7)"],
        stdout=subprocess.PIPE,
    )
    _copy_redacted(child.stdout, open("/dev/full", "wb"))  # noqa: SIM115 - closed by the copier
    assert child.wait(30) == 7  # it ran to its own end: no BrokenPipeError
    assert "cannot be written" in caplog.text


def test_a_finished_run_is_reaped_while_the_ui_lives(tmp_path: Path, monkeypatch):
    """A run that ends on its own leaves no zombie process behind, though nobody polls its status."""
    from swift_rlfactory.run_config import RunConfig

    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "swift").write_text("#!/bin/bash\necho done\n")
    (folder / "swift").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    env_file = tmp_path / "env.yaml"
    env_file.write_text("name: plain\nreward:\n  - {name: format}\n")
    job = Job(
        RunConfig(model="m", dataset="d", env=str(env_file), output_dir=str(tmp_path / "out"), mode="cpu")
    )
    pid = job.process.pid
    job._writer.join(30)
    status = Path(f"/proc/{pid}/status")
    state = status.read_text() if status.exists() else "gone"
    assert "zombie" not in state, state
    assert job.run_folder().parent == tmp_path / "out" and (job.run_folder() / "command.sh").is_file()
