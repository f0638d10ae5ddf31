"""The ``browser`` fixture must not outlive the UI tests: tests that run after them share the process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ..conftest import ROOT

pytest.importorskip("playwright.sync_api", reason="the ui extra is not installed")


@pytest.mark.timeout(180)
def test_asyncio_run_works_in_a_test_that_runs_after_the_browser_tests(tmp_path: Path):
    """Playwright's sync API marks its event loop as running in the main thread between its calls, for as
    long as its driver is up; a browser kept for the whole session made every later ``asyncio.run`` (the
    rewards CLI, the sandbox tests) fail with "cannot be called from a running event loop"."""
    ui = tmp_path / "ui"
    ui.mkdir()
    (ui / "__init__.py").write_text("")
    (ui / "conftest.py").write_text("from tests.ui.conftest import browser  # noqa: F401\n")
    (ui / "test_page.py").write_text(
        textwrap.dedent(
            """
            def test_a_page_renders(browser):
                context = browser.new_context()
                page = context.new_page()
                page.set_content("<p>seven</p>")
                assert page.inner_text("p") == "seven"
                context.close()
            """
        )
    )
    (tmp_path / "test_later.py").write_text(
        "import asyncio\n\n\ndef test_asyncio_run():\n    assert asyncio.run(asyncio.sleep(0, 7)) == 7\n"
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # this folder is the root, not the repository
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "ui/test_page.py", "test_later.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=170,
    )
    assert run.returncode == 0 and "2 passed" in run.stdout, run.stdout[-4000:] + run.stderr[-2000:]
