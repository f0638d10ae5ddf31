"""The Launch form's logic: a GRPO run's settings -> the exact ``swift rlhf`` command, run as a child process.

:func:`grpo_command` is pure (the page shows what it returns before anything runs); :class:`Job` starts it
with the environment in ``RLFACTORY_ENV``, writes its output to ``<output_dir>/ui-launch.log`` and stops the
whole process group on request. Credentials typed into the extra flags (``--hub_token``, ``--api_key``) are
shown as ``***`` on the page and in that log, where ms-swift prints its argv.

The group is its own session (a Ctrl-C in the UI's terminal does not reach the trainer half-way), so
nothing would stop it when the UI process ends: :func:`stop_all` does, at interpreter exit and on SIGTERM,
and no trainer outlives the UI that started it.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import math
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import BinaryIO

from swift_rlfactory import redaction
from swift_rlfactory.runs.folder import newest_version

logger = logging.getLogger(__name__)
PLUGIN = Path(__file__).resolve().parents[1] / "plugin.py"
MODES = ("cpu", "colocate", "server")
# A flag names a credential when the last word of its name does: --hub_token, --api_key, --db-password,
# but not --max_new_tokens or --use_hf_token_cache, whose values are no secret.
LOG_PIECE = 64 * 1024  # bytes of output without a line break that the log writer holds back at most
COUNTS = ("steps", "lora_rank", "max_turns", "num_generations", "batch_size", "max_completion_length")


@dataclass
class GRPOForm:
    """What the Launch form asks for; every field maps to one or two ``swift rlhf`` flags."""

    model: str
    dataset: str
    env: str
    output_dir: str
    steps: int = 10
    lora_rank: int = 8
    mode: str = "colocate"  # cpu: no vLLM; colocate: vLLM in the trainer; server: `swift rollout` elsewhere
    gpu_memory_utilization: float = 0.5
    max_turns: int = 4
    num_generations: int = 4
    batch_size: int = 4
    max_completion_length: int = 512
    learning_rate: float = 1e-5
    extra: str = ""  # more flags, as typed on a command line

    def validate(self) -> None:
        """Convert the number fields to their types in place; raise ``ValueError`` naming the field when a
        value cannot start a run.

        The values come from gradio's number boxes as typed: an emptied box gives ``None``, and whole
        numbers may arrive as floats (``10.0``), so each is converted here rather than trusted, and only
        finite, whole counts of at least 1 and a positive learning rate pass.
        """
        for name in ("model", "dataset", "env", "output_dir"):
            if not str(getattr(self, name)).strip():
                raise ValueError(f"{name}: required")
        if self.mode not in MODES:
            raise ValueError(f"mode: one of {', '.join(MODES)}, not {self.mode!r}")
        if not Path(self.env).expanduser().exists():
            raise ValueError(f"env: no such file {self.env}")
        for name in COUNTS:
            count = _number(self, name)
            if not count.is_integer() or count < 1:
                raise ValueError(f"{name}: a whole number of at least 1, not {getattr(self, name)}")
            setattr(self, name, int(count))
        self.gpu_memory_utilization = _number(self, "gpu_memory_utilization")
        if not 0 < self.gpu_memory_utilization <= 1:
            raise ValueError("gpu_memory_utilization: between 0 and 1")
        self.learning_rate = _number(self, "learning_rate")
        if self.learning_rate <= 0:
            raise ValueError(f"learning_rate: must be above 0, not {self.learning_rate}")
        try:
            shlex.split(self.extra)
        except ValueError as exc:
            raise ValueError(f"extra: {exc}") from None


def _number(form: GRPOForm, name: str) -> float:
    """``form.name`` as a finite float, or ``ValueError`` naming the field (``float`` alone raises
    ``TypeError`` for an empty box and passes ``inf`` and ``nan``)."""
    value = getattr(form, name)
    if value is None or value == "":
        raise ValueError(f"{name}: required")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: a number, not {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{name}: a finite number, not {value}")
    return number


def grpo_command(form: GRPOForm) -> list[str]:
    """The ``swift rlhf`` argv for ``form``; flags in ``extra`` come last, so they win."""
    form.validate()
    cmd = [
        "swift", "rlhf", "--rlhf_type", "grpo",
        "--model", form.model,
        "--dataset", form.dataset,
        "--external_plugins", str(PLUGIN),
        "--multi_turn_scheduler", "rlfactory", "--max_turns", str(form.max_turns),
        "--reward_funcs", "rlfactory", "--callbacks", "rlfactory",
        "--tuner_type", "lora", "--lora_rank", str(form.lora_rank), "--target_modules", "all-linear",
        "--num_generations", str(form.num_generations),
        "--per_device_train_batch_size", str(form.batch_size),
        "--max_completion_length", str(form.max_completion_length),
        "--max_steps", str(form.steps), "--logging_steps", "1",
        "--learning_rate", str(form.learning_rate),
        "--check_model", "false", "--report_to", "none",
        "--output_dir", form.output_dir,
    ]  # fmt: skip
    if form.mode == "cpu":
        cmd += ["--use_vllm", "false"]
    elif form.mode == "colocate":
        cmd += ["--use_vllm", "true", "--vllm_mode", "colocate"]
        cmd += ["--vllm_gpu_memory_utilization", str(form.gpu_memory_utilization), "--sleep_level", "1"]
    else:
        cmd += ["--use_vllm", "true", "--vllm_mode", "server"]
    return cmd + shlex.split(form.extra)


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


def shell_line(form: GRPOForm) -> str:
    """The command as one shell line, environment variable included, credentials shown as ``***``: the
    page shows it to whoever looks at the screen, so it is copyable once a masked value is typed back."""
    env = shlex.quote(str(Path(form.env).expanduser().resolve()))
    shown, _ = hide_credentials(grpo_command(form))
    return f"RLFACTORY_ENV={env} " + shlex.join(shown)


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
    """One launched run: its process (own group), its log file and where its logs appear."""

    def __init__(self, form: GRPOForm):
        self.form = form
        self.argv = grpo_command(form)
        self.output_dir = Path(form.output_dir).expanduser()
        self.output_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = self.output_dir / "ui-launch.log"
        self.started = time.time()
        env = {
            **os.environ,
            "RLFACTORY_ENV": str(Path(form.env).expanduser().resolve()),
            "PYTHONUNBUFFERED": "1",
        }
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
        self._writer = threading.Thread(target=_copy_redacted, args=(self.process.stdout, log), daemon=True)
        self._writer.start()
        for job in [job for job in _LIVE if not job.running]:
            _LIVE.discard(job)
        _LIVE.add(self)

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

    def run_folder(self) -> Path | None:
        """The run's version folder (``<output_dir>/v0-...``) once ms-swift has made it."""
        return newest_version(self.output_dir)

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
