"""The Launch form's process side: a :class:`~swift_rlfactory.run_config.RunConfig` from the form, the one
``swift rlhf`` command built from it, run as a child process that no UI outlives (``docs/ui.md``)."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import BinaryIO

from swift_rlfactory import redaction
from swift_rlfactory.bundled.arithmetic import build_dataset
from swift_rlfactory.bundled.models import ModelChoice, UnknownModelError, choose_model
from swift_rlfactory.run_config import (
    DEFAULT_ENV,
    SWIFT_LAUNCHER,
    RunConfig,
    SwiftCommand,
    knobs,
    swift_rlhf,
    write_command_sh,
)
from swift_rlfactory.runs.folder import TRAINING_DATA, new_run_dir

from ..env.config import EnvConfigError, load_env_config

logger = logging.getLogger(__name__)
LOG_PIECE = 64 * 1024  # bytes of output without a line break that the log writer holds back at most
# The form's fields, in the order the page lays them out and gradio passes their values.
FORM_FIELDS = (
    "model", "dataset", "env", "output_dir", "steps", "lora_rank", "mode", "gpu_memory_utilization",
    "max_turns", "num_generations", "batch_size", "max_completion_length", "learning_rate", "swift_args",
)  # fmt: skip


NUMBERS = {f.name for f in knobs()}


def form_config(values: Sequence) -> RunConfig:
    """The :class:`RunConfig` of the form's values (as gradio passes them); ``ValueError`` names the field
    that cannot start a run."""
    given = dict(zip(FORM_FIELDS, values, strict=True))
    try:
        swift_args = shlex.split(given.pop("swift_args") or "")
    except ValueError as exc:
        raise ValueError(f"swift_args: {exc}") from None
    for name in ("model", "env", "output_dir", "mode"):
        if not str(given[name] or "").strip():
            raise ValueError(f"{name}: required")
        given[name] = str(given[name]).strip()
    for name in FORM_FIELDS:  # an emptied number box; max_turns empty is the environment's limit
        if name in NUMBERS and name != "max_turns" and given[name] in (None, ""):
            raise ValueError(f"{name}: required")
    given["dataset"] = str(given["dataset"] or "").strip() or None
    return RunConfig(**given, swift_args=swift_args).validate()


@dataclass(frozen=True)
class Launch:
    """A form's run, planned: its folder, its model and the command."""

    run_dir: Path
    model: ModelChoice
    command: SwiftCommand
    generated_dataset: Path | None


def _model(value: str) -> ModelChoice:
    """A bundled name or a local folder resolved as ``train`` resolves it; anything else is left to ms-swift
    (a hub id, a model it registers)."""
    try:
        return choose_model(value)
    except UnknownModelError:
        return ModelChoice(value, hub_id=value)


def plan_launch(config: RunConfig, create: bool = False) -> Launch:
    """The run of a validated ``config``: a run folder of its own under ``output_dir`` (made when
    ``create``), the dataset (generated for the calculator when none is given) and the command."""
    env = Path(config.env).expanduser()
    if not env.is_file():
        raise ValueError(f"env: no such file {config.env}")
    try:
        env_max_turns = load_env_config(env).limits.max_turns
    except EnvConfigError as exc:
        raise ValueError(f"env: {exc}") from None
    if config.dataset is None and env.resolve() != DEFAULT_ENV:
        raise ValueError(
            f"dataset: required for {config.env} (problems are generated for the calculator only)"
        )
    resolved = config.resolved(gpu=config.mode != "cpu")
    run_dir = new_run_dir(Path(config.output_dir).expanduser().resolve(), create=create)
    generated = None
    if config.dataset is None:
        generated = dataset = run_dir / TRAINING_DATA
    else:
        dataset = Path(config.dataset).expanduser()
        dataset = dataset.resolve() if dataset.exists() else Path(str(config.dataset))
    launcher = (shutil.which(SWIFT_LAUNCHER[0]) or SWIFT_LAUNCHER[0], *SWIFT_LAUNCHER[1:])
    model = _model(config.model)
    command = swift_rlhf(resolved, model, str(dataset), run_dir, env_max_turns, launcher=launcher)
    return Launch(run_dir, model, command, generated)


def grpo_command(config: RunConfig) -> list[str]:
    """The ``swift rlhf`` argv the form's ``config`` runs (the folder named as it would be now)."""
    return plan_launch(config.validate()).command.argv


def hide_credentials(argv: list[str]) -> tuple[list[str], list[str]]:
    """``argv`` with the value of every credential flag (``--hub_token X``, ``--api_key=X``) shown as
    ``***``, and those values, for :func:`redaction.remember`."""
    shown, values = list(argv), []
    for i, arg in enumerate(argv):
        if not redaction.credential_arg(argv, i):
            continue
        flag, _, value = arg.partition("=")
        if arg.startswith("-"):  # --api_key=X
            shown[i] = f"{flag}=***"
            values.append(value)
        else:  # X after --api_key
            shown[i] = "***"
            values.append(arg)
    return shown, values


def shell_line(config: RunConfig) -> str:
    """The command as one shell line, environment variables included, credentials shown as ``***``: the
    page shows it to whoever looks at the screen, so it is copyable once a masked value is typed back."""
    command = plan_launch(config.validate()).command
    shown, _ = hide_credentials(command.argv)
    return command.shell(shown)


def _copy_redacted(source: BinaryIO, log: BinaryIO) -> None:
    """Copy a child's output to ``log`` as it comes, through :func:`redaction.redact` (ms-swift prints its
    argv, credential flags included), then close both.

    Output is passed on up to its last line break, ``\\n`` or the ``\\r`` a progress bar redraws with, so a
    secret is never split between two pieces and missed; a piece without a break is passed on whole once
    it reaches :data:`LOG_PIECE` bytes. Bytes that are not UTF-8 are kept as they are.
    """

    def clean(data: bytes) -> bytes:
        return redaction.redact(data.decode(errors="surrogateescape")).encode(errors="surrogateescape")

    pending = b""
    try:
        with source:
            try:
                while chunk := source.read1(LOG_PIECE):
                    pending += chunk
                    cut = max(pending.rfind(b"\n"), pending.rfind(b"\r")) + 1
                    if cut == 0 and len(pending) < LOG_PIECE:
                        continue
                    cut = cut or len(pending)
                    log.write(clean(pending[:cut]))
                    log.flush()
                    pending = pending[cut:]
                log.write(clean(pending))
                log.flush()
            except OSError as exc:  # the log's disk is full: the run must not die of a closed pipe
                logger.warning(
                    "%s cannot be written (%s); the run's further output is dropped", log.name, exc
                )
                while source.read1(LOG_PIECE):
                    pass
    finally:
        with contextlib.suppress(OSError):  # what a full disk left in its buffer is lost with it
            log.close()


class Job:
    """One launched run: its folder (``command.sh`` and ``swift.log`` in it) and its process (own group)."""

    def __init__(self, config: RunConfig):
        self.config = config.validate()
        launch = plan_launch(self.config, create=True)
        self.run_dir = launch.run_dir
        self.output_dir = self.run_dir.parent
        self.argv = launch.command.argv
        self.log_path = self.run_dir / "swift.log"
        self.started = time.time()
        if launch.generated_dataset is not None:
            build_dataset(launch.generated_dataset, seed=self.config.seed)
        if launch.model.bundled is not None:  # downloaded and converted once, before ms-swift looks for it
            launch.model.fetch(say=logger.info)
        write_command_sh(self.run_dir, launch.command)
        env = {**os.environ, **launch.command.env_vars}
        for value in hide_credentials(self.argv)[1]:
            redaction.remember(value)
        log = open(self.log_path, "wb")  # noqa: SIM115 - the writer thread closes it
        try:
            self.process = subprocess.Popen(
                [*_WITH_DEFAULT_SIGINT, *self.argv],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        except OSError:
            log.close()
            raise
        self._writer = threading.Thread(target=self._follow, args=(log,), daemon=True)
        self._writer.start()
        for job in [job for job in _LIVE if not job.running]:
            _LIVE.discard(job)
        _LIVE.add(self)

    def _follow(self, log: BinaryIO) -> None:
        """Copy the output into the log until the run ends, then reap it (no zombie while the UI lives)."""
        _copy_redacted(self.process.stdout, log)
        self.process.wait()

    @property
    def running(self) -> bool:
        """True until the process exits."""
        return self.process.poll() is None

    def status(self) -> str:
        """``running (pid N)``, or how it ended."""
        code = self.process.poll()
        if code is None:
            return f"running (pid {self.process.pid}, {time.time() - self.started:.0f} s)"
        return "finished" if code == 0 else f"exited with code {code}"

    def log_tail(self, max_bytes: int = 20_000) -> str:
        """The end of the run's output."""
        if not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as f:
            f.seek(max(0, self.log_path.stat().st_size - max_bytes))
            return f.read().decode(errors="replace")

    def run_folder(self) -> Path:
        """The run's folder (``<output_dir>/<timestamp>``), where ms-swift writes its logs."""
        return self.run_dir

    def stop(self, grace_s: float = 10.0) -> str:
        """Interrupt the run's process group, then kill it if it has not exited after ``grace_s``."""
        _LIVE.discard(self)
        if not self.running:
            self._writer.join(grace_s)  # its last output may still be on its way into the log
            return self.status()
        os.killpg(self.process.pid, signal.SIGINT)
        try:
            self.process.wait(grace_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self._writer.join(grace_s)  # the log is whole before a new run in this folder truncates it
        return "stopped"


# The trainer must answer stop()'s SIGINT. A UI started where SIGINT is ignored (in the background of a
# non-interactive shell: `swift-rlfactory ui &` in a script, under nohup) hands that on to its children,
# Python then never installs its KeyboardInterrupt handler, and a Stop would wait out the grace and kill
# the run mid-save. So the child first restores the default, then execs the trainer (same pid); a
# preexec_fn would do it too, but is unsafe in a process with threads, as the UI is.
_WITH_DEFAULT_SIGINT = [
    sys.executable,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execvp(sys.argv[1], sys.argv[1:])",
]

_LIVE: set[Job] = set()  # jobs of this process that may still run; no lock, a signal handler reads it


def stop_all() -> None:
    """Stop every job this process started that still runs, one after the other."""
    for job in list(_LIVE):
        job.stop()


def _stop_all_then(previous: object) -> Callable[[int, FrameType | None], None]:
    """A SIGTERM handler that stops the jobs, then does what ``previous`` (the handler it replaces) did:
    calls it, or, for the default, ends the process by SIGTERM as it would have ended anyway."""

    def handler(signum: int, frame: FrameType | None) -> None:
        stop_all()
        if callable(previous):
            previous(signum, frame)
            return
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    return handler


def _stop_all_when_the_process_ends() -> None:
    """Install :func:`stop_all` at interpreter exit and on SIGTERM, which ends a process without running
    ``atexit`` (``kill``, ``systemctl stop``, ``docker stop``). Done at import: gradio runs the Launch
    button in a worker thread, and only the main thread may set a signal handler. A process that ignores
    SIGTERM keeps ignoring it."""
    atexit.register(stop_all)
    if threading.current_thread() is not threading.main_thread():
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is not signal.SIG_IGN:
        signal.signal(signal.SIGTERM, _stop_all_then(previous))


_stop_all_when_the_process_ends()
