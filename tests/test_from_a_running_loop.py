"""The synchronous APIs called where an event loop already runs in the calling thread.

A Jupyter cell runs inside IPython's loop, and an async application may call a synchronous API from a
coroutine: ``asyncio.run`` refuses both ("cannot be called from a running event loop"). Each test body
here is such a cell: an ``async def`` run by ``asyncio.run`` that calls the synchronous function as a
notebook user would, with no ``await``.
"""

from __future__ import annotations

import asyncio
import contextvars
import io
import json
import os
import signal
import threading
import time
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from swift_rlfactory.rewards.registry import RewardSpec
from swift_rlfactory.rewards.rescore import Recorded, rescore
from swift_rlfactory.rewards.terms import RewardTerm
from swift_rlfactory.trajectory import Trajectory

from .conftest import AGENT_ENV, AGENT_PAIRS
from .test_eval import LoopBoundEngine, scripted_server, write_dataset


def cell(body: Any) -> Any:
    """Run ``body()`` (synchronous code) the way a notebook cell runs: inside a running event loop."""

    async def in_the_loop() -> Any:
        asyncio.get_running_loop()  # the point of the test: a loop runs in this thread
        return body()

    return asyncio.run(in_the_loop())


def answered(final: str) -> Trajectory:
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": final}]
    return Trajectory(messages=messages, row={"golden_answers": ["Paris"]})


def test_reward_spec_score_from_a_notebook_cell():
    spec = RewardSpec([RewardTerm(name="em"), RewardTerm(name="format")])
    with closing(spec):
        totals = cell(
            lambda: spec.score([answered("<answer>Paris</answer>"), answered("<answer>Rome</answer>")])
        )
        assert totals[0] > totals[1]
        assert cell(lambda: spec.score([answered("<answer>Paris</answer>")])) == totals[:1]  # a second cell


def test_rescore_from_a_notebook_cell():
    spec = RewardSpec([RewardTerm(name="em")])
    recorded = [Recorded(1, answered("<answer>Paris</answer>"), 0.0), Recorded(2, answered("no"), 1.0)]
    with closing(spec):
        report = cell(lambda: rescore(recorded, spec, file="run.jsonl"))
    assert [row.rewards["em"] for row in report.rows] == [1.0, 0.0]
    assert report.summary["em"] == 0.5 and report.file == "run.jsonl"


def test_run_eval_from_a_notebook_cell(tmp_path: Path):
    from rich.console import Console

    from swift_rlfactory.eval.command import EvalOptions, run_eval

    out = tmp_path / "out"
    with scripted_server() as server:
        options = EvalOptions(
            env=AGENT_ENV,
            dataset=write_dataset(tmp_path / "q.jsonl", AGENT_PAIRS[:2]),
            output=out,
            base_url=f"http://127.0.0.1:{server.port}/v1",
            served_model="scripted",
        )
        assert cell(lambda: run_eval(options, Console(file=io.StringIO()))) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["questions"], metrics["failed_episodes"], metrics["em"]) == (2, 0, 1.0)


def test_run_evals_from_a_notebook_cell_keeps_one_loop_for_its_engine(tmp_path: Path, monkeypatch):
    from rich.console import Console

    from swift_rlfactory.eval import command

    engine = LoopBoundEngine()  # fails an episode served on any loop but its first request's
    monkeypatch.setattr(command, "load_policy", lambda *args, **kwargs: engine)
    checkpoints = [tmp_path / "run" / name for name in ("checkpoint-10", "checkpoint-20")]
    for folder in checkpoints:
        folder.mkdir(parents=True)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    options = command.EvalOptions(
        env=AGENT_ENV,
        dataset=write_dataset(tmp_path / "q.jsonl", AGENT_PAIRS[:2]),
        output=tmp_path / "out",
        model=str(tmp_path / "model"),
    )
    console = Console(file=io.StringIO())
    assert cell(lambda: command.run_evals(options, [str(c) for c in checkpoints], console)) == 0
    for folder in checkpoints:
        metrics = json.loads((tmp_path / "out" / folder.name / "metrics.json").read_text())
        assert (metrics["questions"], metrics["failed_episodes"]) == (2, 0)


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("REQUEST_ID", default="none")


async def read_request_id() -> str:
    return REQUEST_ID.get()


class Refused(Exception):
    """An exception of the caller's own type, which must come back as it is."""


async def refuse() -> None:
    raise Refused("no")


@pytest.mark.parametrize("in_a_loop", [False, True], ids=["plain", "in-a-running-loop"])
def test_blocking_run_keeps_context_variables_and_exceptions(in_a_loop: bool):
    from swift_rlfactory.runtime import blocking

    def body() -> str:
        REQUEST_ID.set("cell-7")
        with pytest.raises(Refused, match="no"):
            blocking.run(refuse())
        return blocking.run(read_request_id())

    assert (cell(body) if in_a_loop else contextvars.copy_context().run(body)) == "cell-7"


def test_a_runner_in_a_running_loop_serves_every_call_on_one_loop_and_closes_it():
    from swift_rlfactory.runtime import blocking

    async def where() -> tuple[asyncio.AbstractEventLoop, threading.Thread]:
        return asyncio.get_running_loop(), threading.current_thread()

    def body() -> list[tuple[asyncio.AbstractEventLoop, threading.Thread]]:
        outer = asyncio.get_running_loop()
        with blocking.Runner() as runner:
            seen = [runner.run(where()) for _ in range(3)]
        assert all(loop is not outer for loop, _ in seen)
        return seen

    seen = cell(body)
    assert len({id(loop) for loop, _ in seen}) == 1 and len({t.ident for _, t in seen}) == 1
    loop, thread = seen[0]
    assert loop.is_closed() and not thread.is_alive()


def test_ctrl_c_in_a_notebook_cell_cancels_the_coroutine_on_the_worker_loop():
    """IPython's kernel turns ^C into ``KeyboardInterrupt`` in the cell's thread; the coroutine runs on
    another, so it must be cancelled there rather than left running behind the user's back."""
    from swift_rlfactory.runtime import blocking

    unwound = threading.Event()

    async def long_step() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            unwound.set()

    def body() -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as in the kernel, not asyncio.run's own
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        began = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            blocking.run(long_step())
        assert time.monotonic() - began < 10  # not the 60 s of the sleep
        assert unwound.is_set()  # cancelled and cleaned up before the cell got its KeyboardInterrupt

    previous = signal.getsignal(signal.SIGINT)
    try:
        cell(body)
    finally:
        signal.signal(signal.SIGINT, previous)
