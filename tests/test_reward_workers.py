"""User rewards that block, hang or ignore cancellation cost their own score, never the training step.

Every reward here is a user's function in a plugin file, named the way an environment names it
(``rewards.py:sleeps``), and scored through the real registry. A blocking reward holds its worker until the
test releases it (a file appears, an HTTP reply is sent): without the bound that is for ever, so each
``score`` that returns within seconds shows ``timeout_s`` held from outside.
"""

import asyncio
import http.server
import logging
import threading
import time
from pathlib import Path

import pytest

from swift_rlfactory.rewards.registry import RewardSpec
from swift_rlfactory.rewards.terms import RewardTerm
from swift_rlfactory.trajectory import Trajectory

PLUGIN = """
import asyncio, contextvars, os, time, urllib.request

def _hold(release):
    while not os.path.exists(release):
        time.sleep(0.02)

async def sleeps(trajectory, release):
    _hold(release)  # time.sleep inside async def: nothing else runs on this loop meanwhile
    return 1.0

async def spins(trajectory, release):
    while not os.path.exists(release):  # CPU-bound, never awaits
        pass
    return 1.0

async def fetches(trajectory, url):
    with urllib.request.urlopen(url) as reply:  # a synchronous HTTP client inside async def
        return float(reply.read())

def lazy(trajectory, release):
    return sleeps(trajectory, release)  # a sync function handing back a coroutine that blocks

def never(trajectory, release):
    return asyncio.Event().wait()  # an awaitable that never resolves

async def stubborn(trajectory):
    while True:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:  # the timeout's cancellation, swallowed
            pass

async def blocks_while(trajectory, block, release):
    if os.path.exists(block):
        _hold(release)
    return 1.0

async def quick(trajectory):
    await asyncio.sleep(0.01)
    return 0.5

def hangs(trajectory, release, calls):
    with open(calls, "a") as f:
        f.write("call\\n")
    _hold(release)
    return 1.0

async def hangs_async(trajectory, release, calls):
    with open(calls, "a") as f:
        f.write("call\\n")
    _hold(release)
    return 1.0

LIMIT = asyncio.Semaphore(2)
WHO = contextvars.ContextVar("who")

async def limited(trajectory):
    WHO.set(trajectory.final_response)
    async with LIMIT:  # contended: eight calls, two at a time, one semaphore for the whole run
        await asyncio.sleep(0.02)
    return 1.0 if WHO.get() == trajectory.final_response else 0.0  # each call its own context

class Slow:
    def __init__(self, release):
        self.release = release

    def __float__(self):  # user code too: it blocks wherever float() reads it
        _hold(self.release)
        return 1.0

def slow_value(trajectory, release):
    return Slow(release)

async def slow_value_async(trajectory, release):
    return Slow(release)

def words(trajectory):
    return "about 0.7"

async def nothing(trajectory):
    return None

def stops(trajectory):
    raise StopIteration  # which an asyncio future refuses to carry

async def agen(trajectory):
    yield 1.0

def gen(trajectory):
    yield 1.0

class Abort(BaseException):  # a library's own, as gevent's and trio's are: not an Exception
    pass

async def closes(trajectory):
    raise GeneratorExit

async def aborts(trajectory):
    raise Abort
"""


def traj(final: str = "<answer>Paris</answer>") -> Trajectory:
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": final}]
    return Trajectory(messages=messages, row={"golden_answers": ["Paris"]})


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    (tmp_path / "rewards.py").write_text(PLUGIN)
    return tmp_path


@pytest.fixture
def held_server():
    """A real HTTP server on 127.0.0.1 that answers ``1`` only once released."""
    released = threading.Event()

    class Held(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            released.wait(60)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"1")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Held)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/", released
    released.set()
    server.shutdown()
    server.server_close()


def wait_until(condition, limit_s: float = 10.0) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.timeout(30)
@pytest.mark.parametrize("blocker", ["sleeps", "spins", "fetches", "lazy", "never", "stubborn"])
def test_a_reward_that_blocks_its_loop_or_ignores_cancellation_costs_its_score(
    plugin, held_server, blocker, caplog
):
    url, answered = held_server
    release = plugin / "release"
    args = {"fetches": {"url": url}, "stubborn": {}}.get(blocker, {"release": str(release)})
    spec = RewardSpec(
        [
            RewardTerm(name="em"),
            RewardTerm(name=f"rewards.py:{blocker}", timeout_s=0.5, fallback=-1.0, args=args),
            RewardTerm(name="rewards.py:quick"),
        ],
        base_dir=plugin,
    )
    trajectories = [traj() for _ in range(4)]
    t0 = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING, logger="swift_rlfactory"):
            totals = spec.score(trajectories)
        elapsed = time.monotonic() - t0
    finally:
        release.touch()
        answered.set()
    assert elapsed < 5  # the blocker holds its worker for ever; its timeout_s is 0.5 s
    assert totals == [1.0 - 1.0 + 0.5] * 4  # em and the well-behaved async reward still score
    assert all(t.reward_errors == {f"rewards.py:{blocker}": "timeout"} for t in trajectories)
    assert caplog.text.count("took longer than its timeout_s") == 1  # once a batch, not once a trajectory
    spec.close()


@pytest.mark.timeout(30)
def test_a_blocked_loop_is_left_behind_and_the_next_step_scores(plugin, caplog):
    from swift_rlfactory.runtime.calls import GRACE_S

    block, release = plugin / "block", plugin / "release"
    block.touch()
    term = RewardTerm(
        name="rewards.py:blocks_while", timeout_s=0.5, args={"block": str(block), "release": str(release)}
    )
    spec = RewardSpec([term], base_dir=plugin)
    try:
        assert spec.score([traj() for _ in range(3)]) == [0.0] * 3  # timed out: the loop is blocked
        block.unlink()  # the reward behaves from now on, but the first call still holds the old loop
        time.sleep(GRACE_S + 0.2)
        with caplog.at_level(logging.WARNING, logger="swift_rlfactory"):
            t0 = time.monotonic()
            assert spec.score([traj() for _ in range(3)]) == [1.0] * 3  # on a fresh loop
            assert time.monotonic() - t0 < 5
    finally:
        release.touch()
    blocked = [r.getMessage() for r in caplog.records if "kept its event loop from running" in r.getMessage()]
    assert len(blocked) == 1 and "time.sleep" in blocked[0]
    workers = spec.components[0].workers
    assert wait_until(lambda: workers.stuck == 0)  # released: the old loop's thread ends
    spec.close()


@pytest.mark.timeout(30)
def test_a_loop_whose_reward_ignores_cancellation_is_retired(plugin, caplog):
    from swift_rlfactory.runtime.calls import GRACE_S

    spec = RewardSpec([RewardTerm(name="rewards.py:stubborn", timeout_s=0.3)], base_dir=plugin)
    assert spec.score([traj(), traj()]) == [0.0, 0.0]
    time.sleep(GRACE_S + 0.2)
    with caplog.at_level(logging.WARNING, logger="swift_rlfactory"):
        t0 = time.monotonic()
        assert spec.score([traj()]) == [0.0]
        assert time.monotonic() - t0 < 5
    assert "ignored the cancellation" in caplog.text
    workers = spec.components[0].workers
    assert wait_until(lambda: workers.stuck == 0)  # the retired loop was not blocked: it stopped
    spec.close()


@pytest.mark.timeout(30)
def test_stuck_sync_workers_are_bounded_then_calls_are_not_started(plugin, caplog):
    release, calls = plugin / "release", plugin / "calls"
    term = RewardTerm(
        name="rewards.py:hangs",
        timeout_s=0.3,
        fallback=-1.0,
        args={"release": str(release), "calls": str(calls)},
    )
    spec = RewardSpec([term], base_dir=plugin)
    try:
        assert spec.score([traj() for _ in range(32)]) == [-1.0] * 32  # 32 threads stuck for good
        started = calls.read_text().count("call")
        with caplog.at_level(logging.WARNING, logger="swift_rlfactory"):
            t0 = time.monotonic()
            later = [traj() for _ in range(8)]
            assert spec.score(later) == [-1.0] * 8
            assert time.monotonic() - t0 < 5
        assert calls.read_text().count("call") == started == 32  # the bound: no new thread, no new call
        assert later[0].reward_errors["rewards.py:hangs"].startswith("timeout: not started")
        assert "still stuck" in caplog.text
    finally:
        release.touch()
    workers = spec.components[0].workers
    assert wait_until(lambda: workers.stuck == 0)
    assert spec.score([traj()]) == [1.0]  # released: the reward runs again


@pytest.mark.timeout(30)
def test_stuck_async_loops_are_bounded_too(plugin):
    from swift_rlfactory.runtime.calls import GRACE_S

    release, calls = plugin / "release", plugin / "calls"
    term = RewardTerm(
        name="rewards.py:hangs_async", timeout_s=0.3, args={"release": str(release), "calls": str(calls)}
    )
    spec = RewardSpec([term], base_dir=plugin)
    workers = spec.components[0].workers
    workers.max_stuck = 2
    try:
        for _ in range(3):  # each step blocks a loop; the next one retires it and starts a fresh loop
            assert spec.score([traj()]) == [0.0]
            time.sleep(GRACE_S + 0.2)
        assert calls.read_text().count("call") == 2  # the third step found two stuck loops: not started
        assert workers.stuck == 2
    finally:
        release.touch()
    assert wait_until(lambda: workers.stuck == 0)


@pytest.mark.timeout(30)
def test_well_behaved_async_rewards_share_state_across_steps_and_keep_their_context(plugin):
    spec = RewardSpec([RewardTerm(name="rewards.py:limited")], base_dir=plugin)
    for _ in range(2):  # one loop per reward for the whole run: the semaphore works in every step
        trajectories = [traj(f"answer {i}") for i in range(8)]
        assert spec.score(trajectories) == [1.0] * 8, trajectories[0].reward_errors
    spec.close()


@pytest.mark.timeout(60)
def test_a_sync_reward_raising_stop_iteration_is_its_error_not_a_timeout(plugin):
    spec = RewardSpec([RewardTerm(name="rewards.py:stops", timeout_s=30)], base_dir=plugin)
    t0 = time.monotonic()
    trajectory = traj()
    assert spec.score([trajectory]) == [0.0]
    assert time.monotonic() - t0 < 5  # not a wait for timeout_s
    assert trajectory.reward_errors == {"rewards.py:stops": "error: RuntimeError"}


@pytest.mark.timeout(60)
def test_an_async_reward_raising_a_base_exception_costs_its_score_not_the_step(plugin):
    """GeneratorExit or a library's BaseException out of an ``async def`` reward used to pass every handler
    and end ``score`` (SystemExit and KeyboardInterrupt alone were caught)."""
    names = ["rewards.py:closes", "rewards.py:aborts", "rewards.py:quick"]
    spec = RewardSpec([RewardTerm(name=n, timeout_s=30) for n in names], base_dir=plugin)
    trajectory = traj()
    assert spec.score([trajectory]) == [0.5]
    assert trajectory.reward_errors == {n: "error: RuntimeError" for n in names[:2]}
    spec.close()


def test_generator_rewards_fail_at_load_naming_the_term(plugin):
    for name in ("agen", "gen"):
        with pytest.raises(ValueError, match=rf"reward\[0\]\.name \('rewards.py:{name}'\): .*generator"):
            RewardSpec([RewardTerm(name=f"rewards.py:{name}")], base_dir=plugin)


@pytest.mark.timeout(30)
def test_cancelling_a_blocked_scoring_returns_at_once(plugin):
    """The caller gives up (ms-swift cancels its reward batch) while the reward blocks its loop."""
    release = plugin / "release"
    spec = RewardSpec(
        [RewardTerm(name="rewards.py:sleeps", timeout_s=3600, args={"release": str(release)})],
        base_dir=plugin,
    )

    async def cancel_soon():
        task = asyncio.ensure_future(spec.ascore([traj()]))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        t0 = time.monotonic()
        asyncio.run(asyncio.wait_for(cancel_soon(), 10))
        assert time.monotonic() - t0 < 5
    finally:
        release.touch()


@pytest.mark.timeout(30)
@pytest.mark.parametrize("reward", ["slow_value", "slow_value_async"])
def test_a_value_whose_float_blocks_costs_its_score_not_the_step(plugin, reward):
    """float() of the returned value runs in the worker, under timeout_s, not on the trainer's loop."""
    release = plugin / "release"
    spec = RewardSpec(
        [
            RewardTerm(name="em"),
            RewardTerm(name=f"rewards.py:{reward}", timeout_s=0.5, args={"release": str(release)}),
        ],
        base_dir=plugin,
    )
    trajectories = [traj() for _ in range(3)]
    done = threading.Event()
    totals: list[float] = []
    scorer = threading.Thread(
        target=lambda: (totals.extend(spec.score(trajectories)), done.set()), daemon=True
    )
    try:
        scorer.start()
        assert done.wait(5), "scoring hung in the value's __float__"
    finally:
        release.touch()
    assert totals == [1.0] * 3
    assert all(t.reward_errors == {f"rewards.py:{reward}": "timeout"} for t in trajectories)
    spec.close()


def test_a_value_that_is_not_a_number_scores_zero_with_one_clear_warning(plugin, caplog):
    spec = RewardSpec(
        [RewardTerm(name="em"), RewardTerm(name="rewards.py:words"), RewardTerm(name="rewards.py:nothing")],
        base_dir=plugin,
    )
    trajectories = [traj() for _ in range(4)]
    with caplog.at_level(logging.WARNING, logger="swift_rlfactory"):
        assert spec.score(trajectories) == [1.0] * 4
        assert spec.score([traj()]) == [1.0]
    assert all(
        t.reward_errors == {"rewards.py:words": "error: ValueError", "rewards.py:nothing": "error: TypeError"}
        for t in trajectories
    )
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warned) == 2, warned  # once per reward, not once per trajectory or step
    assert any("'rewards.py:words'" in w and "returned 'about 0.7', not a number" in w for w in warned)
    assert any("'rewards.py:nothing'" in w and "returned a NoneType, not a number" in w for w in warned)
    assert spec.failures["error"] == 10
    spec.close()
