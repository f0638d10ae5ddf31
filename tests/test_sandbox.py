"""The run_python sandbox, attacked for real: network, writes, fork bomb, infinite loop, 10 GB, output flood.

Every test runs real bubblewrap sandboxes (skipped, saying so, only where bwrap is not installed; CI installs
it). After each attack a normal call must come back promptly: the host stays usable.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from swift_rlfactory.env.config import EnvConfigError, load_env_config
from swift_rlfactory.env.environment import Environment
from swift_rlfactory.tools import ToolCall, ToolError, ToolExecutor
from swift_rlfactory.tools.sandbox import RunPythonConfig, SandboxProvider, SandboxUnavailable

ROOT = Path(__file__).resolve().parents[1]
needs_bwrap = pytest.mark.skipif(
    shutil.which("bwrap") is None,
    reason="bubblewrap (bwrap) is not installed: apt-get install bubblewrap (CI installs it)",
)
LIMITS = {"timeout_s": 3, "cpu_s": 2, "memory_mb": 512, "max_processes": 32, "max_output_bytes": 8192}


def start_tool(**settings):
    [tool] = asyncio.run(SandboxProvider(RunPythonConfig(**{**LIMITS, **settings})).start())
    return tool


def run(tool, code: str) -> tuple[bool, str, float]:
    """(ok, observation or error text, seconds) of one call."""
    start = time.perf_counter()
    try:
        text, ok = asyncio.run(tool.call({"code": code})), True
    except ToolError as exc:
        text, ok = str(exc), False
    return ok, text, time.perf_counter() - start


def sandboxed_pids() -> list[int]:
    """Host PIDs of programs started by run_python (their command line holds the bootstrap)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"/tmp/main.py" in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def assert_host_usable(tool) -> None:
    """A normal call right after an attack works and is prompt; nothing of the attack is left running."""
    ok, text, seconds = run(tool, "print(6 * 7)")
    assert ok and text == "42" and seconds < 5, (text, seconds)
    deadline = time.monotonic() + 5
    while sandboxed_pids() and time.monotonic() < deadline:
        time.sleep(0.1)
    left = {pid: Path(f"/proc/{pid}/cmdline").read_bytes()[:80] for pid in sandboxed_pids()}
    assert left == {}, left


@pytest.fixture(scope="module")
def tool():
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap (bwrap) is not installed: apt-get install bubblewrap (CI installs it)")
    return start_tool()


@needs_bwrap
@pytest.mark.timeout(30)
def test_prints_and_shows_tracebacks_with_source_lines(tool):
    assert run(tool, "print('hello')\nprint(sum(range(10)))")[:2] == (True, "hello\n45")
    assert run(tool, "pass")[:2] == (True, "(no output)")
    ok, text, _ = run(tool, "x = 1\nraise ValueError('boom')")
    assert not ok and "exited with code 1" in text
    assert 'File "/tmp/main.py", line 2' in text and "raise ValueError('boom')" in text
    assert "ValueError: boom" in text and "<string>" not in text  # the bootstrap's frame is hidden
    assert "[stderr]" in run(tool, "import sys; print('warn', file=sys.stderr)")[1]


@needs_bwrap
@pytest.mark.timeout(30)
def test_network_is_unreachable_even_the_hosts_loopback(tool):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    accepted = []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    code = f"""
import socket
for host, port in [("127.0.0.1", {port}), ("1.1.1.1", 53), ("8.8.8.8", 443)]:
    try:
        socket.create_connection((host, port), timeout=2)
        print("connected", host)
    except OSError as exc:
        print("blocked", host, type(exc).__name__)
try:
    socket.getaddrinfo("pypi.org", 443)
    print("resolved")
except OSError:
    print("no dns")
"""
    ok, text, _ = run(tool, code)
    assert ok, text
    assert "connected" not in text and "resolved" not in text, text
    assert text.count("blocked") == 3 and "no dns" in text
    assert accepted == []
    socket.create_connection(("127.0.0.1", port), timeout=2).close()  # the server was reachable from here
    deadline = time.monotonic() + 5
    while not accepted and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(accepted) == 1
    server.close()


@needs_bwrap
@pytest.mark.timeout(30)
def test_home_folders_and_the_working_directory_are_hidden(tool, tmp_path):
    """A token file readable by anyone on the host (a project's .env, ~/.cache/huggingface/token) must not
    reach the trajectory: the working directory and the home folders are empty in the sandbox."""
    secret = f"hf_{os.getpid()}SECRETTOKEN"
    project = ROOT / f".sandbox-env-{os.getpid()}"
    project.write_text(f"HF_TOKEN={secret}\n")
    project.chmod(0o644)
    code = f"""
import os
for path in [{str(project)!r}, "/root", "/home", "/dev/null"]:
    try:
        print(path, open(path).read() if os.path.isfile(path) else sorted(os.listdir(path)))
    except OSError as exc:
        print(path, "unreadable:", exc.strerror)
open("/dev/null", "w").write("device nodes still work")
"""
    try:
        ok, text, _ = run(tool, code)
    finally:
        project.unlink()
    assert ok, text
    assert secret not in text and "No such file" in text.splitlines()[0], text
    assert "/root []" in text and "/home []" in text, text


def test_an_interpreter_under_a_hidden_folder_is_bound_back_alone(tool):
    """A venv inside the project (hidden as the working directory) still runs; the rest stays hidden."""
    prefix = ROOT / f".sandbox-prefix-{os.getpid()}"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").symlink_to(tool.python)
    (prefix / "pyvenv-like.txt").write_text("kept")
    code = f"import os; print(open({str(prefix / 'pyvenv-like.txt')!r}).read(), os.listdir({str(ROOT)!r}))"
    try:
        result = asyncio.run(tool.sandbox.run([str(prefix / "bin" / "python"), "-c", code]))
    finally:
        shutil.rmtree(prefix)
    assert result.ok, result.stderr
    assert result.stdout.split() == ["kept", f"['{prefix.name}']"]


def test_only_a_private_tmp_is_writable(tool):
    tag = f"sandbox-test-{os.getpid()}"
    host_dir = ROOT / f".{tag}"  # outside /tmp, which the sandbox replaces
    host_dir.mkdir()
    host_dir.chmod(0o777)  # writable by anyone on the host: still read-only in the sandbox
    targets = [
        host_dir / "x",
        ROOT / f"{tag}.txt",
        Path(f"/etc/{tag}"),
        Path(f"/root/{tag}"),
        Path(f"/var/tmp/{tag}"),
        Path(f"/dev/{tag}"),  # tmpfs the size of half the host's memory, were they writable
        Path(f"/run/{tag}"),
    ]
    code = f"""
import os
for path in {[str(t) for t in targets]!r}:
    try:
        open(path, "w").write("x")
        print("WROTE", path)
    except OSError as exc:
        print("denied", path, exc.strerror)
open("/tmp/mine.txt", "w").write("kept?")
print("tmp ok", os.listdir("/tmp"))
"""
    try:
        ok, text, _ = run(tool, code)
        written = [t for t in targets if t.exists()]
    finally:
        for target in targets:
            target.unlink(missing_ok=True)
        host_dir.rmdir()
    assert ok, text
    assert "WROTE" not in text and written == [], text
    reasons = [line.split()[2] for line in text.splitlines()[:-1]]
    # a checkout under the host's /tmp is not there at all (the sandbox's /tmp is its own): "No such file"
    assert all(reason in ("Read-only", "No") for reason in reasons[:2]), text
    assert reasons[2:] == ["Read-only"] * 5, text  # /root is hidden behind an empty read-only tmpfs
    assert "tmp ok" in text and "mine.txt" in text
    assert not Path("/tmp/mine.txt").exists()  # the sandbox's /tmp is not the host's
    ok, text, _ = run(tool, "import os; print(os.listdir('/tmp'))")
    assert ok and "mine.txt" not in text  # nor kept for the next call


@needs_bwrap
@pytest.mark.timeout(60)
def test_fork_bomb_is_contained(tool):
    code = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""
    most, stop = [0], threading.Event()

    def count():  # the most sandboxed processes seen at once on the host
        while not stop.is_set():
            most[0] = max(most[0], len(sandboxed_pids()))
            time.sleep(0.02)

    counter = threading.Thread(target=count)
    counter.start()
    try:
        ok, text, seconds = run(tool, code)
    finally:
        stop.set()
        counter.join()
    assert not ok and "wall-clock limit" in text, text
    assert seconds < 15
    # it did fork, and stopped at the limit (counted: bwrap outside the namespace, and everything inside)
    assert 4 <= most[0] <= LIMITS["max_processes"] + 1, most
    assert_host_usable(tool)


@needs_bwrap
@pytest.mark.timeout(60)
def test_infinite_loops_stop_at_the_wall_clock_and_cpu_limits(tool):
    ok, text, seconds = run(tool, "while True: pass")  # busy: whichever limit comes first stops it
    assert not ok and ("wall-clock limit" in text or "CPU time" in text) and seconds < 10, (text, seconds)
    ok, text, seconds = run(tool, "import time\nwhile True: time.sleep(1)")  # idle: only the wall clock
    assert not ok and "wall-clock limit" in text and seconds < 10
    cpu_bound = start_tool(timeout_s=30, cpu_s=1)
    ok, text, seconds = run(cpu_bound, "while True: pass")
    assert not ok and "CPU time" in text and seconds < 15, (text, seconds)
    assert_host_usable(tool)


@needs_bwrap
@pytest.mark.timeout(60)
def test_ten_gigabytes_are_refused(tool):
    ok, text, _ = run(tool, "x = bytearray(10 * 1024**3)\nprint('allocated')")
    assert not ok and "MemoryError" in text and "allocated" not in text
    # Zero-filling 512 MB page by page costs CPU time a loaded 2-core machine may not give inside the 2 s the
    # other attacks get: this one is about memory, so only the memory limit may stop it.
    roomy = start_tool(timeout_s=30, cpu_s=30)
    ok, text, _ = run(roomy, "chunks = []\nwhile True: chunks.append(bytearray(64 * 1024**2))")
    assert not ok and "MemoryError" in text  # touched page by page: stops at memory_mb, not at 10 GB
    assert_host_usable(tool)


@needs_bwrap
@pytest.mark.timeout(30)
def test_output_is_capped_while_reading(tool):
    ok, text, seconds = run(tool, "while True: print('x' * 1000)")
    assert not ok and "printed more than 8192 bytes" in text
    assert len(text) < 8192 + 500 and seconds < 10
    assert_host_usable(tool)


@needs_bwrap
@pytest.mark.timeout(30)
def test_open_files_stop_at_max_open_files(tool):
    """``max_open_files`` is the sandbox's RLIMIT_NOFILE: past it ``open`` fails with EMFILE (stdin, stdout
    and stderr hold three of the descriptors)."""
    few = start_tool(max_open_files=16)
    code = """
import errno
files = []
try:
    for i in range(100):
        files.append(open(f"/tmp/f{i}", "w"))
except OSError as exc:
    print(errno.errorcode[exc.errno], len(files))
"""
    ok, text, _ = run(few, code)
    assert ok and text == "EMFILE 13", text
    ok, text, _ = run(tool, code)  # the default, 256: all 100 open
    assert ok and text == "(no output)", text
    assert_host_usable(tool)


@needs_bwrap
@pytest.mark.timeout(30)
def test_no_user_namespace_can_be_made_inside_the_sandbox(tool):
    """A program cannot unshare a user namespace of its own (where it would hold every capability, the
    first step of most escapes through kernel bugs): bwrap's ``--disable-userns``."""
    code = """
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
rc = libc.unshare(0x10000000)  # CLONE_NEWUSER
print(rc, errno.errorcode.get(ctypes.get_errno()))
"""
    ok, text, _ = run(tool, code)
    assert ok and text in ("-1 ENOSPC", "-1 EPERM"), text
    assert_host_usable(tool)


@needs_bwrap
@pytest.mark.timeout(30)
def test_no_process_outlives_its_call(tool):
    code = """
import subprocess
subprocess.Popen(["python3", "-c", "import time; time.sleep(600)  # /tmp/main.py"], start_new_session=True)
print("spawned")
"""
    ok, text, _ = run(tool, code)
    assert ok and text == "spawned"
    assert_host_usable(tool)  # the daemon died with the sandbox's PID namespace


@needs_bwrap
@pytest.mark.timeout(30)
def test_cancelled_call_kills_the_sandbox(tool):
    async def cancel_early():
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(tool.call({"code": "import time; time.sleep(600)"}), 0.5)

    asyncio.run(cancel_early())
    assert_host_usable(tool)


@needs_bwrap
@pytest.mark.timeout(120)
def test_64_concurrent_calls_through_the_executor():
    provider = SandboxProvider(RunPythonConfig(**{**LIMITS, "timeout_s": 60}))
    with ToolExecutor([provider]) as executor:
        calls = [ToolCall("run_python", {"code": f"print({i} * {i})"}) for i in range(64)]
        start = time.perf_counter()
        records = executor.execute(calls)
        seconds = time.perf_counter() - start
        bad = [ToolCall("run_python", {}), ToolCall("run_python", {"code": "1/0"})]
        missing, crash = executor.execute(bad)
    assert [r.error for r in records] == [None] * 64
    assert [r.observation for r in records] == [str(i * i) for i in range(64)]
    assert seconds < 60
    assert "needs a 'code' argument" in missing.error and "ZeroDivisionError" in crash.observation


@needs_bwrap
@pytest.mark.timeout(30)
def test_environment_with_builtin_run_python(tmp_path):
    env_file = tmp_path / "env.yaml"
    env_file.write_text("tools:\n  builtin:\n    - run_python: {timeout_s: 4, memory_mb: 256}\n")
    with Environment.load(env_file) as env:
        [schema] = env.tool_schemas()
        assert (
            schema["function"]["name"] == "run_python" and "4 s, 256 MB" in schema["function"]["description"]
        )
        [record] = env.executor.execute([ToolCall("run_python", {"code": "print(2 ** 10)"})])
    assert record.ok and record.observation == "1024"


def test_builtin_config_errors_name_the_field(tmp_path):
    cases = {
        "builtin: [nope]": "unknown built-in tool 'nope'; available: run_python",
        "builtin: [{run_python: {memory_mb: 0}}]": "memory_mb: Input should be greater than 0",
        "builtin: [{run_python: {memory: 5}}]": "memory: Extra inputs are not permitted",
        "builtin: [run_python, run_python]": "listed twice",
    }
    for body, message in cases.items():
        env_file = tmp_path / "env.yaml"
        env_file.write_text(f"tools:\n  {body}\n")
        with pytest.raises(EnvConfigError) as info:
            load_env_config(env_file)
        assert "tools.builtin" in str(info.value) and message in str(info.value), str(info.value)


@pytest.mark.timeout(30)
def test_missing_bwrap_stops_the_environment_at_start(tmp_path, monkeypatch):
    env_file = tmp_path / "env.yaml"
    env_file.write_text("tools: {builtin: [run_python]}\n")
    env = Environment.load(env_file)  # loading is fine; starting probes the sandbox
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxUnavailable) as info:
        env.start()
    assert "bwrap (bubblewrap) is not on PATH" in str(info.value)
    assert "apt-get install bubblewrap" in str(info.value)
    env.close()


@pytest.mark.timeout(30)
def test_namespace_failure_says_what_failed(monkeypatch):
    # A bwrap that fails the way it does where user namespaces are off (message copied from bubblewrap),
    # in a folder the sandbox user can enter (a root run starts bwrap as nobody).
    fake_dir = ROOT / f".sandbox-fake-{os.getpid()}"
    fake_dir.mkdir()
    fake = fake_dir / "bwrap"
    fake.write_text(
        "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the kernel "
        "does not allow non-privileged user namespaces.' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake_dir}{os.pathsep}{os.environ['PATH']}")
    try:
        with pytest.raises(SandboxUnavailable) as info:
            asyncio.run(SandboxProvider(RunPythonConfig(python="/usr/bin/python3")).start())
    finally:
        shutil.rmtree(fake_dir)
    message = str(info.value)
    assert "No permissions to creating new namespace" in message
    assert "user.max_user_namespaces" in message and "unprivileged_userns_clone" in message
