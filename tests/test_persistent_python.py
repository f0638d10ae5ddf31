"""``run_python`` with ``persistent: true``, in real bubblewrap sandboxes: one interpreter per trajectory,
kept across its calls, never shared, restarted after a timeout or a crash, killed at the episode's teardown
(skipped, saying so, only where bwrap is not installed; CI installs it)."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from swift_rlfactory.env.config import EnvConfigError, load_env_config
from swift_rlfactory.env.environment import Environment
from swift_rlfactory.rollout.episode import Generation, run_episode
from swift_rlfactory.tools import ToolError
from swift_rlfactory.tools.episode_state import current_episode
from swift_rlfactory.tools.sandbox import RunPythonConfig, SandboxProvider

pytestmark = pytest.mark.skipif(
    shutil.which("bwrap") is None,
    reason="bubblewrap (bwrap) is not installed: apt-get install bubblewrap (CI installs it)",
)
LIMITS = {"timeout_s": 3, "cpu_s": 2, "memory_mb": 512, "max_processes": 32, "max_output_bytes": 8192}
RESTARTED = "the interpreter was restarted: its variables, imports and files are lost"


def interpreter_pids() -> list[int]:
    """Host PIDs of persistent interpreters (their command line holds the driver)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if b"CPU_S, REPR_MAX" in (entry / "cmdline").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def wait_no_interpreters(seconds: float = 5) -> list[int]:
    deadline = time.monotonic() + seconds
    while (left := interpreter_pids()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


class Session:
    """A started persistent ``run_python`` and calls of it as trajectory ``key``, on one event loop."""

    def __init__(self, **settings):
        self.provider = SandboxProvider(RunPythonConfig(**{**LIMITS, "persistent": True, **settings}))
        self.loop = asyncio.new_event_loop()
        [self.tool] = self.loop.run_until_complete(self.provider.start())

    async def acall(self, key: str | None, code: str) -> tuple[bool, str]:
        current_episode.set(key)
        try:
            return True, await self.tool.call({"code": code})
        except ToolError as exc:
            return False, str(exc)

    def call(self, key: str | None, code: str) -> tuple[bool, str]:
        return self.loop.run_until_complete(self.acall(key, code))

    def release(self, key: str) -> None:
        self.loop.run_until_complete(self.provider.end(key))

    def close(self) -> None:
        self.loop.run_until_complete(self.provider.close())
        self.loop.close()


@pytest.fixture
def session():
    s = Session()
    yield s
    s.close()
    assert wait_no_interpreters() == []


@pytest.mark.timeout(60)
def test_variables_imports_and_files_survive_the_calls_of_one_trajectory(session):
    assert session.call("t", "import math\nx = 41\nopen('/tmp/notes.txt', 'w').write('kept')") == (True, "4")
    assert session.call("t", "x += 1\nprint(math.floor(2.5), open('/tmp/notes.txt').read())\nx") == (
        True,
        "2 kept\n42",
    )
    assert session.call("t", "y = None\ny") == (True, "(no output)")  # a None value is not shown
    ok, text = session.call("t", "1 / 0")
    assert not ok and "raised an exception; the interpreter keeps its variables" in text
    assert 'File "<call 4>", line 1' in text and "ZeroDivisionError" in text
    assert session.call("t", "x") == (True, "42")  # an exception loses nothing
    assert session.call("t", "import sys\nsys.exit(3)")[1].startswith("the code called sys.exit(3)")
    assert session.call("t", "input()")[0] is False  # stdin is /dev/null, never the protocol
    assert session.call("t", "x") == (True, "42")
    session.call("t", "class Point:\n    pass")  # __main__ is the user's module: its classes pickle
    assert session.call("t", "import pickle\ntype(pickle.loads(pickle.dumps(Point()))).__name__") == (
        True,
        "'Point'",
    )
    assert session.provider.pool.live == 1


@pytest.mark.timeout(60)
def test_two_concurrent_trajectories_never_see_each_others_variables_or_files(session):
    async def both():
        a = session.acall("a", "secret = 'a'\nopen('/tmp/mine', 'w').write('a')")
        b = session.acall(
            "b",
            "import os\nsorted(f for f in os.listdir('/tmp') if not os.path.ismount('/tmp/' + f)), 'secret' in globals()",
        )
        await asyncio.gather(a, b)
        return await asyncio.gather(
            session.acall("a", "secret, open('/tmp/mine').read()"),
            session.acall(
                "b",
                "import os\n[f for f in os.listdir('/tmp') if not os.path.ismount('/tmp/' + f)], 'secret' in globals()",
            ),
        )

    assert session.loop.run_until_complete(both()) == [(True, "('a', 'a')"), (True, "([], False)")]
    assert session.provider.pool.live == 2


@pytest.mark.timeout(60)
def test_a_call_past_the_timeout_restarts_the_interpreter_and_says_its_variables_are_lost(session):
    session.call("t", "x = 1")
    start = time.perf_counter()
    ok, text = session.call("t", "import time\ntime.sleep(60)")
    assert time.perf_counter() - start < 3 + 2
    assert not ok and text == f"the call was stopped after 3 s (wall-clock limit); {RESTARTED}"
    assert wait_no_interpreters() == [] and session.provider.pool.live == 0
    ok, text = session.call("t", "x")  # the next call starts a fresh interpreter
    assert not ok and "NameError" in text
    assert session.call("t", "x = 2\nx") == (True, "2")


@pytest.mark.timeout(60)
def test_an_interpreter_that_dies_gives_an_error_observation_never_a_hang(session):
    for code, why in [
        ("import os\nos._exit(7)", "the interpreter died: it exited with code 7"),
        ("import ctypes\nctypes.string_at(0)", "the interpreter died: killed by SIGSEGV"),
        ("print('x' * 100000)", "the call was stopped: it printed more than 8192 bytes"),
    ]:
        session.call("t", "x = 1")
        ok, text = session.call("t", code)
        assert not ok and text.startswith(f"{why}; {RESTARTED}"), text
        assert session.call("t", "'x' in globals()") == (True, "False")
    session.call("t", "x = 1")
    ok, text = session.call("t", "b = bytearray(2 * 1024**3)")  # the memory limit: an exception, not a death
    assert not ok and "MemoryError" in text
    assert session.call("t", "'x' in globals()") == (True, "True")


@pytest.mark.timeout(60)
def test_cpu_time_is_limited_per_call_not_per_interpreter():
    session = Session(cpu_s=1, timeout_s=30)  # a loaded machine still gives a busy loop 1 s within 30
    try:
        for _ in range(3):  # 0.6 s of CPU per call, 1.8 s in all: under the limit each time
            ok, text = session.call(
                "t", "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass"
            )
            assert ok, text
        ok, text = session.call("t", "while True:\n    pass")
        assert not ok and text == f"the interpreter used more than 1 s of CPU time in one call; {RESTARTED}"
    finally:
        session.close()
    assert wait_no_interpreters() == []


@pytest.mark.timeout(60)
def test_release_kills_the_interpreter_and_its_tmp_and_a_call_outside_a_trajectory_is_a_scratch_one(session):
    session.call("t", "open('/tmp/f', 'w').write('x')")
    assert interpreter_pids()  # bwrap, its PID 1 and the interpreter
    session.release("t")
    assert interpreter_pids() == [] and session.provider.pool.live == 0
    assert session.call(
        "t", "import os\n[f for f in os.listdir('/tmp') if not os.path.ismount('/tmp/' + f)]"
    ) == (True, "[]")
    session.release("t")
    assert session.call(None, "z = 1") == (True, "(no output)")
    assert session.call(None, "'z' in globals()") == (True, "False")
    assert interpreter_pids() == []


@pytest.mark.timeout(60)
def test_past_max_live_a_new_trajectory_waits_then_gets_an_error_observation():
    session = Session(max_live=1, max_live_wait_s=0.5)
    try:
        assert session.call("a", "1") == (True, "1")
        start = time.perf_counter()
        ok, text = session.call("b", "1")
        assert 0.5 <= time.perf_counter() - start < 3
        assert not ok and "1 interpreters are live (max_live) and none ended within 0.5 s" in text

        async def waits_for_a_place():
            waiting = asyncio.ensure_future(session.acall("b", "2"))
            await asyncio.sleep(0.2)
            await session.provider.end("a")
            return await waiting

        assert session.loop.run_until_complete(waits_for_a_place()) == (True, "2")
    finally:
        session.close()
    assert wait_no_interpreters() == []


def test_the_new_fields_are_validated_at_load_naming_them(tmp_path):
    for settings, message in [
        ("{persistent: maybe}", "persistent: Input should be a valid boolean"),
        ("{persistent: true, max_live: 0}", "max_live: Input should be greater than 0"),
    ]:
        (tmp_path / "env.yaml").write_text(f"tools: {{builtin: [{{run_python: {settings}}}]}}\n")
        with pytest.raises(EnvConfigError, match="tools.builtin") as info:
            load_env_config(tmp_path / "env.yaml")
        assert message in str(info.value), str(info.value)


def scripted(me: str):
    """A policy that stores its name, writes a file, then reads both back and answers."""
    codes = iter([
        f"me = {me!r}\nopen('/tmp/who', 'w').write(me)",
        "import os\nme, open('/tmp/who').read(), sorted(f for f in os.listdir('/tmp') if not os.path.ismount('/tmp/' + f))",
    ])  # fmt: skip

    async def generate(messages):
        await asyncio.sleep(0)
        code = next(codes, None)
        if code is None:
            return Generation("<answer>done</answer>")
        call = json.dumps({"name": "run_python", "arguments": {"code": code}})
        return Generation(f"<tool_call>\n{call}\n</tool_call>")

    return generate


@pytest.mark.timeout(300)
@pytest.mark.parametrize("declared", [False, True], ids=["implicit_episode", "episode_declared"])
def test_64_concurrent_trajectories_through_the_environment_keep_apart_and_leak_nothing(tmp_path, declared):
    text = "tools:\n  builtin:\n    - run_python: {persistent: true, timeout_s: 60, cpu_s: 10}\n"
    text += "limits: {call_timeout_s: 120}\n"
    if declared:
        (tmp_path / "state.py").write_text("def setup(row):\n    return {'row': row}\n")
        text += "episode: {setup: state.py:setup}\n"
    (tmp_path / "env.yaml").write_text(text)
    temp_before = sorted(Path(tempfile.gettempdir()).iterdir())

    async def one(env: Environment, i: int):
        key = f"t{i}"
        async with env.episodes.scope(key, {"i": i}) as state:
            prompt = [{"role": "user", "content": "go"}]
            return key, await run_episode(prompt, scripted(key), env.executor, 6, state=state, episode=key)

    with Environment.load(tmp_path / "env.yaml") as env:
        [provider] = [p for p in env.executor.toolset.providers if isinstance(p, SandboxProvider)]

        async def run_all():
            return await asyncio.wait_for(asyncio.gather(*(one(env, i) for i in range(64))), 240)

        results = asyncio.run(run_all())
        for key, trajectory in results:
            observations = [c["observation"] for c in trajectory.tool_calls]
            assert observations == [str(len(key)), f"('{key}', '{key}', ['who'])"], observations
            assert trajectory.stop_reason == "answer"
        assert env.episodes.live == 0 and provider.pool.live == 0
        assert wait_no_interpreters() == []
        metrics = env.episodes.drain_metrics()
        assert metrics["episode/setups"] == metrics["episode/teardowns"] == 64.0
        assert metrics["episode/teardown_errors"] == metrics["episode/teardown_timeouts"] == 0.0
        # "Try a tool": a scratch episode, torn down right after the call
        assert env.try_tool("run_python", {"code": "k = 1\nk"}).observation == "1"
        assert "NameError" in (env.try_tool("run_python", {"code": "k"}).error or "")
        assert interpreter_pids() == [] and provider.pool.live == 0
    assert sorted(Path(tempfile.gettempdir()).iterdir()) == temp_before  # the tmp lived in the sandbox only


@pytest.mark.timeout(120)
def test_a_trajectory_cancelled_mid_call_has_its_interpreter_killed(tmp_path):
    (tmp_path / "env.yaml").write_text(
        "tools: {builtin: [{run_python: {persistent: true, timeout_s: 60}}]}\n"
    )

    async def cancelled(env: Environment):
        async def trajectory():
            async with env.episodes.scope("c", {}):
                await env.call_tool("run_python", {"code": "x = 1"}, episode="c")
                await env.call_tool("run_python", {"code": "import time\ntime.sleep(60)"}, episode="c")

        task = asyncio.ensure_future(trajectory())
        deadline = time.monotonic() + 30
        while not interpreter_pids() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    with Environment.load(tmp_path / "env.yaml") as env:
        asyncio.run(cancelled(env))
        assert env.episodes.live == 0
        assert wait_no_interpreters() == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("limit", [None, 20], ids=["plain", "descriptions_cut"])
def test_calls_are_never_cached_even_with_every_tool_cached(tmp_path, limit):
    text = "tools: {builtin: [{run_python: {persistent: true}}]}\ncache: {tools: ['*']}\n"
    if limit:  # a cut description wraps the tool (RenamedTool): still judged by the one it wraps
        text += f"limits: {{max_description_chars: {limit}}}\n"
    (tmp_path / "env.yaml").write_text(text)
    count = "n = globals().get('n', 0) + 1\nn"

    async def calls(env: Environment):
        async with env.episodes.scope("t", {}):
            return [
                (await env.call_tool("run_python", {"code": count}, episode="t")).observation for _ in "ab"
            ]

    with Environment.load(tmp_path / "env.yaml") as env:
        assert asyncio.run(calls(env)) == ["1", "2"]
