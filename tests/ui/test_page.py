"""The Agent RL tab's handlers called as gradio calls them, without a browser: what each shows for good and
bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("gradio", reason="the ui extra is not installed: pip install -e '.[ui]'")

from swift_rlfactory.ui import page  # noqa: E402


@pytest.fixture
def format_env(tmp_path: Path) -> Path:
    """An environment with one rule reward and no tools, so scoring starts nothing."""
    path = tmp_path / "env.yaml"
    path.write_text("name: plain\nreward:\n  - {name: format}\n")
    return path


@pytest.mark.parametrize("total", ['"0.5"', "[1]", "true"])
def test_try_a_reward_shows_a_logged_total_that_is_not_a_number_as_text(format_env: Path, total: str):
    pasted = '{"messages": [], "rewards": {"total": ' + total + "}}"
    shown = page._score(str(format_env), "", None, pasted)
    assert "cannot score" not in shown
    assert "not a number" in shown


def test_try_a_reward_shows_a_logged_number_total(format_env: Path):
    shown = page._score(str(format_env), "", None, '{"messages": [], "rewards": {"total": 0.123456}}')
    assert "the log recorded total 0.1235" in shown
