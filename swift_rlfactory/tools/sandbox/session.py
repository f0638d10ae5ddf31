"""Persistent ``run_python``: one long-lived sandboxed interpreter per trajectory, in a bounded pool.

The driver protocol, the limits per call and what a timeout or a crash does: docs/tools.md
("Persistent interpreter").
"""

from __future__ import annotations

import asyncio
import json
import secrets
import signal
import uuid
from dataclasses import dataclass, field

from ..base import ToolError
from .runner import SANDBOX_ENV, Sandbox, SandboxLimits, SandboxResult, kill_group

RESTARTED = "the interpreter was restarted: its variables, imports and files are lost"

# Runs inside the sandbox as `python -c DRIVER cpu_s repr_max`. Requests are JSON lines on a private copy of
# stdin ({"id", "code"}); stdin itself is /dev/null. Each call's stdout and stderr go to the real fds 1 and
# 2, each closed by a frame "\n<<ID" STATUS "ID>>\n" that the tool reads up to (ID is fresh per call).
DRIVER = """\
import ast, json, linecache, math, os, resource, sys, traceback, types
CPU_S, REPR_MAX = int(sys.argv[1]), int(sys.argv[2])
requests = os.fdopen(os.dup(0), "rb")
fd = os.open(os.devnull, os.O_RDONLY); os.dup2(fd, 0); os.close(fd)
sys.argv = [""]
main = sys.modules["__main__"] = types.ModuleType("__main__")  # the user's, apart from the driver's globals
ns = main.__dict__

def run(code, name):
    tree = ast.parse(code, name)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    exec(compile(tree, name, "exec"), ns)
    if last is not None:
        value = eval(compile(ast.Expression(last.value), name, "eval"), ns)
        if value is not None:
            text = repr(value)
            print(text if len(text) <= REPR_MAX else text[:REPR_MAX] + " ...")

def frame(fd, tag, status):
    data = ("\\n<<" + tag + status + tag + ">>\\n").encode()
    while data:
        data = data[os.write(fd, data):]

for n, line in enumerate(requests, 1):
    request = json.loads(line)
    name = "<call %d>" % n
    linecache.cache[name] = (len(request["code"]), None, request["code"].splitlines(True), name)
    used = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    soft = math.ceil(used) + CPU_S if hard == resource.RLIM_INFINITY else min(math.ceil(used) + CPU_S, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))
    try:
        run(request["code"], name)
        status = "ok"
    except SystemExit as e:
        status = "ok" if e.code in (None, 0) else "exit %r" % (e.code,)
    except BaseException as e:
        tb = e.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != name:
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb)
        status = "error"
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass
    frame(1, request["id"], json.dumps(status))
    frame(2, request["id"], "")
"""


class _Dead(Exception):
    """The interpreter is gone (or was stopped); ``why`` is the first line of the call's observation."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


@dataclass
class _Streams:
    """What one call read from the interpreter's stdout and stderr, under one byte budget."""

    cap: int
    data: dict[str, bytearray] = field(default_factory=lambda: {"stdout": bytearray(), "stderr": bytearray()})

    def text(self, name: str, end: int | None = None) -> str:
        return bytes(self.data[name][:end]).decode("utf-8", errors="replace")


class Interpreter:
    """One sandboxed interpreter process running :data:`DRIVER`; :meth:`run` sends it one call at a time."""

    def __init__(self, proc: asyncio.subprocess.Process, limits: SandboxLimits):
        self.proc = proc
        self.limits = limits
        self.leftover = {"stdout": b"", "stderr": b""}  # what a background thread printed after a frame

    @classmethod
    async def start(
        cls, sandbox: Sandbox, python: str, limits: SandboxLimits, session_cpu_s: int
    ) -> Interpreter:
        """Spawn the interpreter; a start cancelled half-way still kills what it spawned."""
        argv = [python, "-c", DRIVER, str(limits.cpu_s), str(limits.max_output_bytes)]
        spawn = asyncio.ensure_future(
            asyncio.create_subprocess_exec(
                *sandbox.command(argv, cpu_hard_s=max(session_cpu_s, limits.cpu_s)),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=dict(SANDBOX_ENV),
                start_new_session=True,
            )
        )
        try:
            return cls(await asyncio.shield(spawn), limits)
        except asyncio.CancelledError:
            spawn.add_done_callback(lambda f: f.cancelled() or f.exception() or kill_group(f.result()))
            raise

    @property
    def alive(self) -> bool:
        """The process has not exited."""
        return self.proc.returncode is None

    async def stop(self) -> None:
        """Kill the whole sandbox (its PID namespace goes, and its private /tmp with it) and reap it."""
        if self.proc.returncode is None:
            kill_group(self.proc)
        await asyncio.shield(self.proc.wait())

    async def run(self, code: str) -> tuple[str, SandboxResult]:
        """Run ``code``; returns the driver's status (``ok``, ``error``, ``exit N``) and the output.

        Raises :class:`_Dead` (the process is stopped by then) on a timeout, an output flood or a death."""
        tag = secrets.token_hex(8)
        streams = _Streams(self.limits.max_output_bytes)
        try:
            async with asyncio.timeout(self.limits.timeout_s):
                self.proc.stdin.write(json.dumps({"id": tag, "code": code}).encode() + b"\n")
                await self.proc.stdin.drain()
                status, ends = await self._frames(tag, streams)
        except TimeoutError:
            await self.stop()
            raise _Dead(
                f"the call was stopped after {self.limits.timeout_s:g} s (wall-clock limit)"
            ) from None
        except (BrokenPipeError, ConnectionResetError, EOFError):
            await self.stop()
            raise _Dead(self._death()) from None
        except _Dead:
            await self.stop()
            raise
        except BaseException:  # cancelled mid-call: the reply would desynchronise the next call
            await self.stop()
            raise
        result = SandboxResult(streams.text("stdout", ends[0]), streams.text("stderr", ends[1]), 0, 0.0)
        return status, result

    async def _frames(self, tag: str, streams: _Streams) -> tuple[str, tuple[int, int]]:
        readers = [
            asyncio.ensure_future(self._read_frame(self.proc.stdout, "stdout", tag, streams)),
            asyncio.ensure_future(self._read_frame(self.proc.stderr, "stderr", tag, streams)),
        ]
        try:
            done, _ = await asyncio.wait(readers, return_when=asyncio.FIRST_EXCEPTION)
            for reader in done:
                reader.result()  # the first failure, if any
            out, err = readers[0].result(), readers[1].result()
        finally:
            for reader in readers:
                reader.cancel()
        try:
            return json.loads(out[1]), (out[0], err[0])
        except ValueError:
            raise _Dead("the interpreter answered garbage (did the code write to its protocol?)") from None

    async def _read_frame(
        self, stream: asyncio.StreamReader | None, name: str, tag: str, streams: _Streams
    ) -> tuple[int, str]:
        """Read ``name`` up to this call's closing frame; (where the output ends, the frame's status)."""
        assert stream is not None
        opening, closing = f"\n<<{tag}".encode(), f"{tag}>>\n".encode()
        buf = streams.data[name]
        buf += self.leftover[name]
        while (end := buf.find(closing)) < 0:
            chunk = await stream.read(65536)
            if not chunk:
                raise EOFError
            buf += chunk
            if sum(map(len, streams.data.values())) > streams.cap + 4096:
                raise _Dead(f"the call was stopped: it printed more than {streams.cap} bytes")
        start = buf.rfind(opening, 0, end)
        self.leftover[name] = bytes(buf[end + len(closing) :])
        return start, buf[start + len(opening) : end].decode("utf-8", errors="replace")

    def _death(self) -> str:
        code = self.proc.returncode
        code = 0 if code is None else code if code >= 0 else 128 - code
        name = (
            signal.Signals(code - 128).name if code > 128 and code - 128 in signal.valid_signals() else None
        )
        if name == "SIGXCPU":
            return f"the interpreter used more than {self.limits.cpu_s} s of CPU time in one call"
        if name:
            return f"the interpreter died: killed by {name}"
        return f"the interpreter died: it exited with code {code}"


@dataclass
class _Session:
    """One trajectory's interpreter (started at its first call); ``released`` once its episode ended."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    interpreter: Interpreter | None = None
    released: bool = False


class InterpreterPool:
    """The live interpreters of one ``run_python``, one per trajectory id, at most ``max_live`` at once.

    A trajectory's calls run one at a time in its own interpreter; a new trajectory waits up to
    ``max_live_wait_s`` for a free place. :meth:`release` (the episode's teardown) kills one.
    """

    def __init__(self, sandbox: Sandbox, python: str, limits: SandboxLimits, max_live: int, wait_s: float,
                 session_cpu_s: int):  # fmt: skip
        self.sandbox = sandbox
        self.python = python
        self.limits = limits
        self.max_live = max_live
        self.wait_s = wait_s
        self.session_cpu_s = session_cpu_s
        self._places = asyncio.Semaphore(max_live)
        self._sessions: dict[str, _Session] = {}

    @property
    def live(self) -> int:
        """Interpreters started and not yet stopped."""
        return sum(1 for s in self._sessions.values() if s.interpreter is not None)

    async def run(self, key: str | None, code: str) -> tuple[str, SandboxResult]:
        """Run ``code`` in trajectory ``key``'s interpreter (``None``: a scratch one, stopped after the call).

        Raises :class:`ToolError` saying why when no interpreter could run it or the one that ran it is gone.
        """
        if key is None:
            key = f"scratch-{uuid.uuid4().hex}"
            try:
                return await self.run(key, code)
            finally:
                await self.release(key)
        session = self._sessions.setdefault(key, _Session())
        async with session.lock:
            interpreter = session.interpreter or await self._start(session)
            try:
                return await interpreter.run(code)
            except _Dead as dead:
                raise ToolError(f"{dead.why}; {RESTARTED}") from None
            finally:
                if not interpreter.alive:
                    self._forget(session, interpreter)

    async def release(self, key: str) -> None:
        """Stop trajectory ``key``'s interpreter, if it has one (its episode ended); safe to call twice."""
        session = self._sessions.pop(key, None)
        if session is None:
            return
        session.released = True
        interpreter = session.interpreter
        if interpreter is not None:
            self._forget(session, interpreter)
            await interpreter.stop()

    async def close(self) -> None:
        """Stop every interpreter."""
        await asyncio.gather(*(self.release(key) for key in list(self._sessions)))

    async def _start(self, session: _Session) -> Interpreter:
        try:
            async with asyncio.timeout(self.wait_s):
                await self._places.acquire()
        except TimeoutError:
            raise ToolError(
                f"run_python: {self.max_live} interpreters are live (max_live) and none ended within "
                f"{self.wait_s:g} s (max_live_wait_s); try again later"
            ) from None
        try:
            interpreter = await Interpreter.start(self.sandbox, self.python, self.limits, self.session_cpu_s)
        except BaseException:
            self._places.release()
            raise
        session.interpreter = interpreter
        if session.released:  # the episode ended while this one started: never left behind
            self._forget(session, interpreter)
            await interpreter.stop()
            raise ToolError("run_python: this trajectory's episode has ended")
        return interpreter

    def _forget(self, session: _Session, interpreter: Interpreter) -> None:
        """Give ``interpreter``'s place back, once (the caller stops the process)."""
        if session.interpreter is interpreter:
            session.interpreter = None
            self._places.release()
