"""Fault injection at the executor: one poison call costs only its own record, never the batch or the run.

Poison results (unrenderable, circular, enormous), hung synchronous tools, a tokenizer that raises, a
cache that raises: each becomes one error record (or a slower call) while the other calls answer.
"""

from __future__ import annotations

import asyncio
import gc
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from swift_rlfactory.runtime.threads import SYNC_POOL
from swift_rlfactory.tools import Limits, ToolCache, ToolCall, ToolError, ToolExecutor, tool
from swift_rlfactory.tools.toolset import PythonProvider

ROOT = Path(__file__).resolve().parents[2]
RELEASE = threading.Event()  # set at the end so hung test threads finish instead of lingering


@pytest.fixture(autouse=True, scope="module")
def _release_hung_threads():
    yield
    RELEASE.set()


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no str for you")


class _BadModel:
    def model_dump(self, mode: str = "python") -> dict:
        raise ValueError("model_dump exploded")


def _python_c_children() -> list:
    """This process's descendants started with ``python -c`` (isolated calls' children). One that ends
    between the listing and the read of its command line has ended: it is not left running."""
    import psutil

    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "-c" in child.cmdline():
                found.append(child)
        except psutil.NoSuchProcess:
            pass
    return found


def _circular_dict() -> dict:
    d: dict = {"a": 1}
    d["self"] = d
    return d


def _circular_list() -> list:
    items: list = [1]
    items.append(items)
    return items


def _deep(levels: int) -> list:
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


POISON = {
    "tuple_keys": lambda: {(1, 2): "x"},
    "circular_dict": _circular_dict,
    "circular_list": _circular_list,
    "unprintable": _Unprintable,
    "bad_model_dump": _BadModel,
    "deep_list": lambda: _deep(20_000),
    "deep_dict": lambda: {"k": _deep(20_000)},
    "nested_in_list": lambda: ["fine", _Unprintable()],
}


@tool
def poison(kind: str) -> object:
    """Return a result that cannot be rendered."""
    return POISON[kind]()


@tool
def echo(text: str) -> str:
    """Return the text."""
    return text


@tool
def blob(kind: str, size: int) -> object:
    """Return a large result of some shape."""
    if kind == "str":
        return "x" * size
    if kind == "bytes":
        return b"y" * size
    if kind == "dict":
        return {f"k{i}": i for i in range(size)}
    if kind == "list":
        return [{"row": i} for i in range(size)]
    raise ValueError(kind)


@tool
def hang(seconds: float = 3600) -> str:
    """A synchronous tool that never comes back (until the test module ends)."""
    RELEASE.wait(seconds)
    return "woke"


@tool
def quick_sync(x: int) -> int:
    """A synchronous tool that answers at once."""
    return x + 1


@tool
def strict(payload: str) -> str:
    """Validate with pydantic inside the tool."""

    class Inner(BaseModel):
        n: int

    Inner.model_validate_json(payload)
    return "valid"


@tool
def chatty_error() -> str:
    """A backend error carrying pydantic's URL lines, as FastMCP servers return them."""
    raise ToolError(
        "1 validation error for addArguments\nb\n  Field required [type=missing, input_value={}, "
        "input_type=dict]\n    For further information visit https://errors.pydantic.dev/2.11/v/missing"
    )


@tool
def surrogate() -> str:
    """A result carrying a lone surrogate, as a JSON escape can produce."""
    return "smile \ud83d please"


@tool
def loud_failure(repeat: int) -> str:
    """Fail with a long multilingual message, as a backend's error page can be."""
    raise RuntimeError("数据 error 🤖 " * repeat)


TOOLS = [poison, echo, blob, hang, quick_sync, strict, chatty_error, surrogate, loud_failure]


def make(limits: Limits | None = None, **kwargs) -> ToolExecutor:
    return ToolExecutor([PythonProvider(TOOLS)], limits or Limits(), **kwargs).start()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", sorted(POISON))
def test_poison_result_costs_one_record_of_a_hundred(kind):
    calls = [ToolCall("echo", {"text": f"t{i}"}) for i in range(99)]
    calls.insert(42, ToolCall("poison", {"kind": kind}))
    with make() as ex:
        records = ex.execute_batch([calls[:50], calls[50:]])
    flat = [r for rs in records for r in rs]
    assert len(flat) == 100
    bad = flat.pop(42)
    assert bad.error and "cannot be shown as text" in bad.error and bad.observation.startswith("Error:")
    assert [r.observation for r in flat] == [f"t{i}" for i in range(99)]


@pytest.mark.timeout(60)
def test_aexecute_never_raises_for_a_poison_call():
    import asyncio

    with make() as ex:

        async def main():
            return await asyncio.gather(
                ex.aexecute([ToolCall("poison", {"kind": "circular_dict"})]),
                ex.aexecute([ToolCall("echo", {"text": "fine"})]),
            )

        [bad], [good] = asyncio.run(main())
    assert bad.error and good.observation == "fine"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["str", "bytes", "dict", "list"])
def test_huge_results_are_rendered_within_a_budget(kind):
    size = 2_000_000 if kind in ("str", "bytes") else 300_000
    with make(Limits(max_output_tokens=100)) as ex:
        t0 = time.perf_counter()
        [r] = ex.execute([ToolCall("blob", {"kind": kind, "size": size})])
        elapsed = time.perf_counter() - t0
    assert r.ok and "[truncated" in r.observation and len(r.observation) <= 400  # 100 tokens, marker included
    assert r.truncated_chars > 0 and r.result_chars >= r.truncated_chars
    if kind == "str":
        kept = r.observation.rsplit("\n... [truncated", 1)[0]
        assert r.result_chars == size and r.truncated_chars == size - len(kept)
        assert r.observation == f"{kept}\n... [truncated {size - len(kept)} characters]"
    else:  # rendering stopped at its budget: the size is a lower bound
        assert "[truncated at least" in r.observation
    assert elapsed < 5


def test_tokenizer_that_raises_falls_back_to_characters():
    def broken(text: str) -> int:
        raise ValueError("tokenizer cannot take this")

    with make(Limits(max_output_tokens=10), count_tokens=broken) as ex:
        [r] = ex.execute([ToolCall("blob", {"kind": "str", "size": 500})])
        [err] = ex.execute([ToolCall("nope", {})])
    assert r.ok and r.observation == "x" * 9 + "\n... [truncated 491 characters]"  # 40 characters in all
    assert "unknown tool" in err.error
    assert err.observation.startswith("Error: un") and len(err.observation) <= 40  # cut like any observation


@pytest.mark.parametrize("cap", [1, 8, 16, 64])
def test_error_observations_fit_the_cap_and_say_truly_what_was_cut(qwen3_tokenizer_dir, cap):
    """The error path cuts like any observation: marker included, the count of the error text left out."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(qwen3_tokenizer_dir / "tokenizer.json"))
    for count in (lambda text: len(tok.encode(text, add_special_tokens=False).ids), None):
        with make(Limits(max_output_tokens=cap), count_tokens=count) as ex:
            [r] = ex.execute([ToolCall("loud_failure", {"repeat": 300})])
        full, observation = f"Error: {r.error}", r.observation  # 3,300 characters: the whole error is kept
        assert "RuntimeError: 数据 error 🤖" in r.error and len(r.error) > 3300
        assert (count(observation) <= cap) if count else (len(observation) <= 4 * cap)
        kept, marker, dropped = observation.partition("\n... [truncated ")
        if marker:
            assert full.startswith(kept) and dropped == f"{len(full) - len(kept)} characters]"
        else:  # too small a cap for the full marker
            assert observation.endswith("...") and full.startswith(observation[:-3]) and cap < 16


def test_lone_surrogates_never_reach_the_model_or_break_the_cache():
    with make(cache=ToolCache()) as ex:
        [r] = ex.execute([ToolCall("surrogate", {})])
        [a] = ex.execute([ToolCall("echo", {"text": "bad \ud800 arg"})])
    assert r.ok and r.observation.encode("utf-8")
    assert a.ok and a.observation.encode("utf-8")


def test_a_cache_that_raises_costs_only_its_call():
    class Exploding(ToolCache):
        async def get_or_run(self, key, run):
            if key.startswith("echo:"):
                raise OSError("disk on fire")
            return await super().get_or_run(key, run)

    with make(cache=Exploding()) as ex:
        first, second = ex.execute([ToolCall("echo", {"text": "a"}), ToolCall("quick_sync", {"x": 1})])
    assert first.error and "internal error" in first.error and "disk on fire" in first.observation
    assert second.ok and second.observation == "2"


def test_pydantic_url_lines_never_reach_the_observation():
    with make() as ex:
        inside, backend, args = ex.execute(
            [
                ToolCall("strict", {"payload": '{"n": "x"}'}),
                ToolCall("chatty_error", {}),
                ToolCall("quick_sync", {"x": "not a number"}),
            ]
        )
    for r in (inside, backend, args):
        assert r.error and "errors.pydantic.dev" not in r.observation + r.error
        assert "For further information" not in r.observation
    assert "n: Input should be a valid integer" in inside.observation
    assert "Field required" in backend.observation
    assert "x: Input should be a valid integer" in args.observation


def test_per_tool_timeout_overrides_the_limit():
    class Slow:
        def __init__(self, name, timeout_s):
            self.spec, self.timeout_s = echo.spec.renamed(name), timeout_s

        async def call(self, arguments):
            import asyncio

            await asyncio.sleep(1.0)
            return "late"

    provider = PythonProvider([Slow("short", 0.1), Slow("default", None)])
    clash = PythonProvider([Slow("short", 0.1)], name="other")  # renamed to other_short: keeps its timeout
    with ToolExecutor([provider, clash], Limits(call_timeout_s=5)) as ex:
        short, default, renamed = ex.execute(
            [ToolCall("short", {}), ToolCall("default", {}), ToolCall("other_short", {})]
        )
    assert "timed out after 0.1 s" in short.error and "timed out after 0.1 s" in renamed.error
    assert default.ok and default.observation == "late"


@pytest.mark.timeout(60)
def test_hung_sync_tools_cannot_starve_the_others():
    """More hung calls than the pool has threads, then a normal sync call: it answers at once."""
    n = SYNC_POOL.max_workers + 8
    with make(Limits(call_timeout_s=0.3)) as ex:
        hung = ex.execute([ToolCall("hang", {})] * n)
        assert all(r.error and "timed out" in r.error for r in hung)
        assert SYNC_POOL.stuck >= n
        t0 = time.perf_counter()
        ok = ex.execute([ToolCall("quick_sync", {"x": i}) for i in range(20)])
        assert time.perf_counter() - t0 < 2.0
        assert [r.observation for r in ok] == [str(i + 1) for i in range(20)]


CHILD = textwrap.dedent(
    """
    import sys, time
    from swift_rlfactory.tools import Limits, ToolCall, ToolExecutor, tool
    from swift_rlfactory.tools.toolset import PythonProvider

    @tool
    def hang() -> str:
        "Never returns."
        while True:
            time.sleep(1)

    @tool
    def ping() -> str:
        "Answers."
        return "pong"

    ex = ToolExecutor([PythonProvider([hang, ping])], Limits(call_timeout_s=0.2)).start()
    records = ex.execute([ToolCall("hang", {})] * 40)
    print(sum(bool(r.error) for r in records), ex.execute([ToolCall("ping", {})])[0].observation, flush=True)
    if sys.argv[1] == "close":
        ex.close()
    """
)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("ending", ["close", "no-close"])
def test_process_with_hung_sync_tools_exits_cleanly(ending):
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, ending], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["40", "pong"]
    assert time.perf_counter() - t0 < 25


@pytest.mark.timeout(60)
def test_tokenizer_cut_of_a_4mb_result_is_exact_bounded_and_off_the_loop(qwen3_tokenizer_dir):
    """The real Qwen3 tokenizer cuts a 4 MB result exactly, encoding kilobytes (not every prefix), in a thread."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(qwen3_tokenizer_dir / "tokenizer.json"))
    encoded, threads = [], set()

    def count(text: str) -> int:
        encoded.append(len(text))
        threads.add(threading.current_thread().name)
        return len(tok.encode(text, add_special_tokens=False).ids)

    words = ["tool", "result", "µ-batch", "数据", "observation", "GRPO", "42", "\n", "  "]
    text = " ".join(words[(i * 7) % len(words)] for i in range(800_000))[:4_000_000]
    with make(Limits(max_output_tokens=256), count_tokens=count) as ex:
        [r] = ex.execute([ToolCall("echo", {"text": text})])
    kept = r.observation.rsplit("\n... [truncated", 1)[0]
    assert r.ok and text.startswith(kept) and r.result_chars == len(text)
    assert r.observation == f"{kept}\n... [truncated {len(text) - len(kept)} characters]"
    assert r.truncated_chars == len(text) - len(kept)
    # exact: the whole observation fits, and one more character is too many beside the marker's reserve
    reserve = count(f"\n... [truncated {len(text)} characters]")
    assert count(r.observation) <= 256 < count(text[: len(kept) + 1]) + reserve
    # Bounded prefixes only: a few windows near the cut. Bisection from the whole text encodes 100x more.
    assert sum(encoded) < 30 * len(kept)
    assert "rlfactory-tools" not in threads  # the executor's loop kept serving other calls


@pytest.mark.timeout(90)
def test_process_isolated_tools_are_killed_on_timeout_and_contained_when_they_crash(tmp_path):

    from tests.faults.isolated_tools import add_isolated, crash, refuse, spin

    spin.timeout_s = 1.5  # its own timeout, as an MCP server's `timeout` would set it
    tools = [spin, crash, refuse, add_isolated]
    with ToolExecutor([PythonProvider(tools)], Limits(call_timeout_s=60)) as ex:
        hung, crashed, raised, ok = ex.execute(
            [
                ToolCall("spin", {"pidfile": str(tmp_path / "pid")}),
                ToolCall("crash", {"code": 3}),
                ToolCall("refuse", {"reason": "no such row"}),
                ToolCall("add_isolated", {"a": 2, "b": 3}),
            ]
        )
    assert "timed out after 1.5 s" in hung.error
    assert "process died (exit code 3)" in crashed.error
    assert raised.error == "tool 'refuse' failed: ValueError: no such row"
    assert ok.ok and '"sum": 5' in ok.observation and str(os.getpid()) not in ok.observation
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        children = _python_c_children()
        if not children:
            break
        time.sleep(0.1)
    assert not children  # the spinning child was killed, the others ended


@pytest.mark.timeout(60)
def test_a_given_up_isolated_call_reaps_its_child_before_returning(tmp_path, monkeypatch):
    """The call that timed out must not leave its child to the event loop: an executor closes its loop at
    once, and a subprocess transport still open then fails when it is collected ("Event loop is closed",
    seen in CI as an unraisable exception during a later test)."""
    import psutil

    from swift_rlfactory.runtime.process import call_in_process
    from tests.faults.isolated_tools import spin

    pidfile = tmp_path / "pid"

    async def give_up_once_the_tool_runs() -> None:
        # A fixed timeout could fire before the child has even imported the tool (over 1.5 s on busy CPUs),
        # leaving no pid to check; so the call is given up only once the tool body has written its pid.
        call = asyncio.ensure_future(call_in_process(spin.fn, {"pidfile": str(pidfile)}))
        deadline = time.monotonic() + 40  # inside the test's own timeout, to fail with a reason
        while not pidfile.exists() and not call.done() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert pidfile.exists(), "the child never reached the tool"
        await asyncio.wait_for(call, 0.1)  # times out: the executor's own way of giving up a call

    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    loop = asyncio.new_event_loop()
    with pytest.raises(TimeoutError):
        loop.run_until_complete(give_up_once_the_tool_runs())
    loop.close()  # what LoopThread.stop does right after the executor's last call
    # asyncio's child watcher thread drops the transport once it sees the exit
    deadline = time.monotonic() + 5
    while (
        any(t.name.startswith("asyncio-waitpid") for t in threading.enumerate())
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    gc.collect()
    assert not unraisable, [u.exc_value for u in unraisable]
    assert not psutil.pid_exists(int(pidfile.read_text()))  # killed and reaped, not a zombie


def test_process_isolation_is_checked_when_the_tool_is_declared():
    def local(x: int) -> int:
        return x

    with pytest.raises(ValueError, match="module-level function"):
        tool(local, isolation="process")
    with pytest.raises(ValueError, match="isolation must be"):
        tool(echo.fn, isolation="fork")


_FORGED_REPLY = """
import os, pickle
class Payload:
    def __reduce__(self):
        return (open, ({marker!r}, "w"))
os.write(1, pickle.dumps(("ok", Payload())))
os._exit(0)
"""


@pytest.mark.timeout(60)
def test_an_isolated_child_cannot_run_code_in_the_trainer_through_its_reply(tmp_path):
    """Model-written code in the child may write any bytes to the reply pipe; the trainer reads them as plain
    data only, so a forged pickle whose ``__reduce__`` calls ``open`` is a failed call, and runs nothing."""
    from tests.faults.isolated_tools import read_sensor, run_code

    marker = tmp_path / "written-by-the-trainer"
    with ToolExecutor([PythonProvider([run_code, read_sensor])], Limits(call_timeout_s=30)) as ex:
        forged, honest, typed = ex.execute(
            [
                ToolCall("run_code", {"code": _FORGED_REPLY.format(marker=str(marker))}),
                ToolCall("run_code", {"code": "result = sum(range(10))"}),
                ToolCall("read_sensor", {"sensor": "t1"}),
            ]
        )
    assert not marker.exists()
    assert "not plain data" in forged.error
    assert honest.ok and honest.observation == "45"
    assert typed.ok and typed.observation == '{"sensor": "t1", "value": 21.5}'


@pytest.mark.timeout(60)
def test_an_isolated_tool_whose_module_is_gone_says_why(tmp_path):
    """A child that cannot load the tool's module reports that error, not a failure of its own reply."""
    from swift_rlfactory.tools.python_tool import load_python_tools

    module = tmp_path / "vanishing_tool.py"
    module.write_text(
        "from swift_rlfactory.tools import tool\n\n\n"
        '@tool(isolation="process")\ndef vanish(x: int) -> int:\n    """Gone by the time it runs."""\n'
        "    return x\n"
    )
    (vanish,) = load_python_tools(f"{module}:vanish", tmp_path)
    module.unlink()
    with ToolExecutor([PythonProvider([vanish])], Limits(call_timeout_s=30)) as ex:
        (record,) = ex.execute([ToolCall("vanish", {"x": 1})])
    assert "FileNotFoundError" in record.error and "vanishing_tool.py" in record.error


def test_an_isolated_childs_own_imports_stay_light():
    """The child reads its reply check from a module of standard-library imports: importing the tools
    package (the MCP SDK, pydantic) cost a plain function about 0.9 s a call."""
    from swift_rlfactory.runtime.process import call_in_process

    from . import bare_tool

    assert asyncio.run(call_in_process(bare_tool.tools_package_loaded, {})) is False


class _Abort(BaseException):
    """A library's own BaseException (gevent's, trio's style): not an Exception, not a cancellation."""


class _Mute(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str for this error either")


@tool
async def async_base_exception(kind: str) -> str:
    """Raise what ``except Exception`` does not catch, or an exception that cannot be printed."""
    raise {"generator_exit": GeneratorExit, "own": _Abort, "mute": _Mute}[kind]()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["generator_exit", "own", "mute"])
def test_an_async_tool_raising_a_base_exception_costs_only_its_record(kind):
    """GeneratorExit (a generator closed under the tool) or a library's BaseException used to escape the
    call and end the whole batch; an error whose ``__str__`` raises was blamed on RuntimeError."""
    with ToolExecutor([PythonProvider([async_base_exception, echo])]).start() as ex:
        bad, fine = ex.execute(
            [ToolCall("async_base_exception", {"kind": kind}), ToolCall("echo", {"text": "ok"})]
        )
    name = {"generator_exit": "GeneratorExit", "own": "_Abort", "mute": "_Mute"}[kind]
    assert bad.error and f"failed: {name}" in bad.error and bad.observation.startswith("Error:")
    assert fine.observation == "ok"
