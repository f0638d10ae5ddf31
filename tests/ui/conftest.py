"""A real ``swift-rlfactory web-ui`` (or ``view``) server on a free 127.0.0.1 port, driven by Debian's chromium.

Playwright is only the client here: its own browser download cannot work offline, so it launches
``/usr/bin/chromium`` (``$RLFACTORY_CHROMIUM``). Screenshots go to ``$RLFACTORY_UI_SCREENSHOTS`` (default: a
temporary folder); the README's images are these screenshots, taken with it set to ``docs/ui``.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from ..conftest import ROOT

CHROMIUM = Path(os.environ.get("RLFACTORY_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
RECORDED_RUN = Path(__file__).parent / "fixtures" / "run"


def sevens_eval(folder: Path, sums: Sequence[tuple[int, int]]) -> list[str]:
    """``swift-rlfactory eval`` arguments for the model alone (no tools, scored by EM) on "What is a + b?"
    for each of ``sums`` (each adds up to 7), the environment and dataset written into ``folder``; the
    endpoint's and the output's arguments are the caller's."""
    assert all(a + b == 7 for a, b in sums)
    dataset = folder / "test.jsonl"
    dataset.write_text(
        "".join(
            json.dumps({"messages": [{"role": "user", "content": f"What is {a} + {b}?"}], "solution": "7"})
            + "\n"
            for a, b in sums
        )
    )
    env = folder / "env.yaml"  # no tools to start: the model alone answers
    env.write_text("name: plain\nreward:\n  - {name: em}\n")
    return ["eval", "--env", str(env), "--dataset", str(dataset)]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A CLI server process and its URL; its output is kept for the failure message."""

    def __init__(self, args: list[str], cwd: Path, timeout_s: float = 150):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/"
        self.log = cwd / "server.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "GRADIO_ANALYTICS_ENABLED": "False"}
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "swift_rlfactory.cli", *args, "--port", str(self.port)],
                cwd=cwd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"server exited {self.process.returncode}:\n{self.output()[-4000:]}")
            try:
                urllib.request.urlopen(self.url, timeout=2)
                return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise AssertionError(f"server not up after {timeout_s} s:\n{self.output()[-4000:]}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)
                self.process.wait()


@pytest.fixture(scope="package")
def browser() -> Iterator:
    """One chromium for the UI tests, closed when they end, not at the end of the session.

    Playwright's sync API marks its event loop as running in the main thread between its calls, for as
    long as its driver is up; kept for the session, it made every ``asyncio.run`` in a later test file (the
    rewards CLI, the sandbox tests) fail with "cannot be called from a running event loop".
    """
    pytest.importorskip("gradio", reason="the ui extra is not installed: pip install -e '.[ui]'")
    playwright = pytest.importorskip("playwright.sync_api", reason="the ui extra is not installed")
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (or set RLFACTORY_CHROMIUM)")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def screenshots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("RLFACTORY_UI_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def web_ui(tmp_path_factory) -> Iterator[Server]:
    """``swift-rlfactory web-ui`` serving ms-swift's tabs and ours, with the e2e environment pre-filled."""
    work = tmp_path_factory.mktemp("webui")
    server = Server(
        ["web-ui", "--env", str(ROOT / "tests" / "environments" / "agent" / "env.yaml")], cwd=work
    )
    yield server
    server.stop()


@pytest.fixture
def page(browser, web_ui) -> Iterator:
    """A fresh page on the web UI, Agent RL tab open; fails the test if the page asked any other host."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    foreign: list[str] = []
    page.on(
        "request",
        lambda r: foreign.append(r.url) if not r.url.startswith((web_ui.url, "data:", "blob:")) else None,
    )
    page.set_default_timeout(30_000)
    page.goto(web_ui.url)
    page.get_by_role("tab", name="Agent RL").click()
    yield page
    context.close()
    assert not foreign, f"the page fetched from other hosts (it must work offline): {foreign[:5]}"


class FakeSwift:
    """A ``swift`` on ``PATH`` that stands in for a trainer: it prints its argv (as ms-swift does), runs
    until SIGINT and then takes half a second to clean up, appending ``start PID`` and ``exit PID`` to
    :attr:`events`, so a test sees which trainers ran and in what order they started and ended."""

    def __init__(self, folder: Path):
        self.events = folder / "events"
        self.events.touch()
        script = folder / "swift"
        script.write_text(
            "#!/bin/bash\n"
            f"trap 'sleep 0.5; echo \"exit $$\" >> {self.events}; exit 130' INT\n"
            f'echo "start $$" >> {self.events}\n'
            'echo "fake swift args: $*"\n'
            "while true; do sleep 0.1; done\n"
        )
        script.chmod(0o755)

    def lines(self) -> list[str]:
        return self.events.read_text().split()

    def pids(self) -> list[int]:
        """Every fake trainer started so far."""
        words = self.lines()
        return [int(pid) for word, pid in zip(words[::2], words[1::2], strict=True) if word == "start"]

    def wait_for(self, event: str, count: int = 1, timeout_s: float = 20) -> None:
        deadline = time.monotonic() + timeout_s
        while self.lines()[::2].count(event) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"no {count} x {event!r} in {self.lines()}")
            time.sleep(0.05)

    def kill_all(self) -> None:
        """Kill what a failed test left running; each fake leads its own process group."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, 9)


@pytest.fixture
def fake_swift(tmp_path: Path, monkeypatch) -> Iterator[FakeSwift]:
    """A :class:`FakeSwift` first on ``PATH`` for this test and for the processes it starts."""
    folder = tmp_path / "bin"
    folder.mkdir()
    fake = FakeSwift(folder)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    yield fake
    fake.kill_all()
