"""The sandbox runner: one untrusted program in bubblewrap, under hard limits, awaited without blocking.

The layers (setpriv, bwrap, prlimit), the limits and what each one stops: docs/tools.md ("The sandbox").
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

MB = 1024 * 1024
SANDBOX_UID = 65534  # nobody: who a root run's sandbox runs as
SANDBOX_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "HOME": "/tmp",
    "TMPDIR": "/tmp",
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONIOENCODING": "utf-8",
    # numeric libraries start one thread per core, each counted against max_processes
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap; "
    "Arch: pacman -S bubblewrap)"
)
NAMESPACE_HINT = (
    "bubblewrap needs user namespaces: check `sysctl user.max_user_namespaces` (> 0), "
    "`kernel.unprivileged_userns_clone=1` (Debian) or `kernel.apparmor_restrict_unprivileged_userns=0` "
    "(Ubuntu 24.04); in a container, allow them (docker: --security-opt seccomp=unconfined)"
)


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create its namespaces here; the message says what to do."""


class SandboxLimits(BaseModel):
    """Limits of one sandboxed run (the per-tool settings of ``tools.builtin`` in an environment)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout_s: float = Field(default=10.0, gt=0, le=3600, description="wall-clock seconds per run")
    cpu_s: int = Field(default=10, gt=0, description="CPU seconds per process (SIGXCPU past it)")
    memory_mb: int = Field(default=1024, gt=0, description="address space per process (RLIMIT_AS)")
    max_processes: int = Field(default=64, gt=0, description="processes and threads in the sandbox")
    max_output_bytes: int = Field(default=64 * 1024, gt=0, description="stdout + stderr kept; then stopped")
    tmp_mb: int = Field(default=64, gt=0, description="size of the private /tmp, and of any one file")
    max_open_files: int = Field(default=256, gt=0)


@dataclass
class SandboxResult:
    """How a sandboxed run ended.

    ``exit_code`` is the program's status; ``128 + N`` means it was killed by signal N (``signal_name``).
    ``timed_out``: stopped at the wall-clock limit; ``output_truncated``: stopped at the output cap.
    """

    stdout: str
    stderr: str
    exit_code: int
    duration_s: float
    timed_out: bool = False
    output_truncated: bool = False

    @property
    def ok(self) -> bool:
        """The program exited 0 within every limit."""
        return self.exit_code == 0 and not self.timed_out and not self.output_truncated

    @property
    def signal_name(self) -> str | None:
        """``SIGKILL``, ``SIGXCPU``, ... when the program died from a signal."""
        if self.exit_code <= 128:
            return None
        try:
            return signal.Signals(self.exit_code - 128).name
        except ValueError:
            return None


class Sandbox:
    """Runs commands in bubblewrap under :class:`SandboxLimits`.

    Args:
        limits: the limits of every run.
        bwrap: path of the ``bwrap`` binary (default: found on ``PATH``).
    """

    def __init__(self, limits: SandboxLimits | None = None, bwrap: str | None = None):
        self.limits = limits or SandboxLimits()
        self.bwrap = bwrap or shutil.which("bwrap")
        self.setpriv = shutil.which("setpriv") if os.geteuid() == 0 else None

    def command(self, argv: Sequence[str], cpu_hard_s: int | None = None) -> list[str]:
        """The full command line that runs ``argv`` in the sandbox; ``cpu_hard_s`` raises the hard CPU limit
        above ``cpu_s + 1`` (a persistent interpreter sets its soft limit per call)."""
        if not self.bwrap:
            raise SandboxUnavailable(
                f"bwrap (bubblewrap) is not on PATH, and the run_python sandbox needs it: {INSTALL_HINT}"
            )
        lim = self.limits
        prefix: list[str] = []
        if os.geteuid() == 0:
            if not self.setpriv:
                raise SandboxUnavailable("running as root needs setpriv (util-linux) to drop to nobody")
            prefix = [self.setpriv, f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups"]
        tmp = str(lim.tmp_mb * MB)
        hidden = _hidden_dirs()
        kept = [d for d in _installation(argv[0]) if any(_under(d, h) for h in hidden)] if argv else []
        return [
            *prefix,
            self.bwrap,
            "--unshare-all",
            "--unshare-user",
            "--disable-userns",
            "--die-with-parent",
            "--new-session",
            "--ro-bind", "/", "/",
            "--proc", "/proc",
            "--dev", "/dev",
            "--size", tmp, "--tmpfs", "/tmp",
            "--size", tmp, "--tmpfs", "/dev/shm",
            "--remount-ro", "/dev",  # device nodes still work; no files the size of the host's memory
            "--tmpfs", "/run", "--remount-ro", "/run",
            *(arg for d in hidden for arg in ("--tmpfs", d)),
            *(arg for d in kept for arg in ("--ro-bind", d, d)),  # mount points made before the remount
            *(arg for d in hidden for arg in ("--remount-ro", d)),
            "--hostname", "sandbox",
            "--chdir", "/tmp",
            "prlimit",
            f"--cpu={lim.cpu_s}:{cpu_hard_s or lim.cpu_s + 1}",
            f"--as={lim.memory_mb * MB}",
            f"--nproc={lim.max_processes}",
            f"--fsize={lim.tmp_mb * MB}",
            f"--nofile={lim.max_open_files}",
            "--core=0",
            "--",
            *argv,
        ]  # fmt: skip

    async def run(
        self, argv: Sequence[str], stdin: bytes = b"", env: Mapping[str, str] | None = None
    ) -> SandboxResult:
        """Run ``argv`` to completion (or to a limit) and return what it printed and how it ended.

        Never leaves a process behind: cancelling this coroutine kills the sandbox too.
        """
        lim = self.limits
        start = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            *self.command(argv),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env or SANDBOX_ENV),
            start_new_session=True,  # its own process group, killed as one
        )
        output = _CappedOutput(lim.max_output_bytes, on_overflow=lambda: kill_group(proc))
        timed_out = False
        try:
            async with asyncio.timeout(lim.timeout_s):
                await asyncio.gather(
                    _feed(proc.stdin, stdin),
                    output.read(proc.stdout, "stdout"),
                    output.read(proc.stderr, "stderr"),
                )
                await proc.wait()
        except TimeoutError:
            timed_out = True
        finally:
            if proc.returncode is None:
                kill_group(proc)
                await asyncio.shield(proc.wait())
        return SandboxResult(
            stdout=output.text("stdout"),
            stderr=output.text("stderr"),
            exit_code=proc.returncode if proc.returncode >= 0 else 128 - proc.returncode,
            duration_s=time.perf_counter() - start,
            timed_out=timed_out,
            output_truncated=output.overflowed,
        )

    async def probe(self, argv: Sequence[str], expect: str) -> None:
        """Run ``argv`` once and check it prints ``expect``; raises :class:`SandboxUnavailable` saying why not."""
        try:
            result = await self.run(argv)
        except FileNotFoundError as exc:  # bwrap or setpriv vanished between which() and exec
            raise SandboxUnavailable(f"{exc.filename} not found: {INSTALL_HINT}") from None
        if result.ok and result.stdout.strip() == expect:
            return
        said = (result.stderr or result.stdout).strip()[-600:] or f"exit code {result.exit_code}, no output"
        hint = NAMESPACE_HINT if "bwrap" in said or "namespace" in said.lower() else ""
        raise SandboxUnavailable(
            f"the sandbox did not start: {' '.join(argv)} in {self.bwrap} said: {said}"
            + (f"\n{hint}" if hint else "")
        )


class _CappedOutput:
    """stdout and stderr of one run under one byte budget; past it, ``on_overflow`` stops the program."""

    def __init__(self, cap: int, on_overflow):
        self.cap = cap
        self.on_overflow = on_overflow
        self.used = 0
        self.overflowed = False
        self.chunks: dict[str, list[bytes]] = {"stdout": [], "stderr": []}

    async def read(self, stream: asyncio.StreamReader | None, name: str) -> None:
        if stream is None:
            return
        while chunk := await stream.read(65536):
            room = self.cap - self.used
            if room > 0:
                self.chunks[name].append(chunk[:room])
                self.used += min(room, len(chunk))
            if len(chunk) > room and not self.overflowed:
                self.overflowed = True
                self.on_overflow()  # keep draining to EOF so the pipe never blocks the kill

    def text(self, name: str) -> str:
        return b"".join(self.chunks[name]).decode("utf-8", errors="replace")


async def _feed(pipe: asyncio.StreamWriter | None, data: bytes) -> None:
    if pipe is None:
        return
    try:
        if data:
            pipe.write(data)
            await pipe.drain()
        pipe.close()
        await pipe.wait_closed()
    except (BrokenPipeError, ConnectionResetError):  # the program exited without reading its stdin
        pass


def kill_group(proc: asyncio.subprocess.Process) -> None:
    """SIGKILL the sandbox's process group; its PID namespace takes every process inside with it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


_SYSTEM_DIRS = frozenset(
    {"/", "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/opt", "/proc", "/run", "/sbin",
     "/srv", "/sys", "/tmp", "/usr", "/var"}
)  # fmt: skip


def _hidden_dirs() -> list[str]:
    """The home folders and the working directory, where credentials and a project's ``.env`` live; never a
    system folder (a program run from ``/usr`` still finds its libraries)."""
    candidates = ["/home", "/root", str(Path.home()), os.getcwd()]
    found = [os.path.realpath(d) for d in candidates if os.path.isdir(d)]
    found = [d for d in dict.fromkeys(found) if d not in _SYSTEM_DIRS]
    return [d for d in found if not any(other != d and _under(d, other) for other in found)]  # outermost


def _installation(program: str) -> list[str]:
    """Where ``program`` (an interpreter) lives: its prefix, real and as called (a venv's root), plus this
    interpreter's prefixes when it is this one."""
    path = shutil.which(program) or program
    prefixes = [Path(path).absolute().parent.parent, Path(path).resolve().parent.parent]
    if os.path.realpath(path) == os.path.realpath(sys.executable):
        prefixes += [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)]
    return [str(p) for p in dict.fromkeys(prefixes) if p.is_dir() and str(p) not in _SYSTEM_DIRS]


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")
