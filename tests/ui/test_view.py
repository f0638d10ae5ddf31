"""``swift-rlfactory view RUN``: only the metrics and trajectory viewer, for a finished run, in a real browser."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import RECORDED_RUN, Server

expect = pytest.importorskip("playwright.sync_api", reason="the ui extra is not installed").expect
expect.set_options(timeout=60_000)

pytestmark = pytest.mark.timeout(240)


def test_view_shows_a_recorded_runs_metrics_and_trajectories_and_nothing_that_runs_code(
    browser, tmp_path: Path
):
    server = Server(["view", str(RECORDED_RUN)], cwd=tmp_path)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        foreign: list[str] = []
        page.on(
            "request",
            lambda r: foreign.append(r.url) if not r.url.startswith((server.url, "data:", "blob:")) else None,
        )
        page.goto(server.url)
        for name in ("Live metrics", "Trajectories"):
            expect(page.get_by_role("tab", name=name, exact=True)).to_be_visible()
        for name in ("Launch", "Try a tool", "LLM GRPO"):  # a viewer launches nothing
            expect(page.get_by_role("tab", name=name, exact=True)).to_have_count(0)
        page.locator("#rlf-metrics-refresh").click()
        expect(page.locator("#rlf-metrics-status")).to_contain_text("2 logged steps, 8 trajectories")
        page.get_by_role("tab", name="Trajectories", exact=True).click()
        page.locator("#rlf-show").click()
        expect(page.locator("#rlf-table-note")).to_contain_text("8 shown of 8 trajectories")
        page.locator("#rlf-table").get_by_text("What is").filter(visible=True).first.click()
        expect(page.locator("#rlf-traj-left")).to_contain_text("call add")
        side = page.locator("#rlf-right input, #rlf-right textarea")  # as the page renders it
        expect(side).to_have_value("")  # nothing picked yet: an empty field, not a "0" that opened nothing
        side.fill("0")  # trajectory #0 opens from the keyboard too
        side.press("Enter")
        expect(page.locator("#rlf-traj-right")).to_contain_text("trajectory #0")
        side.fill("zero")
        side.press("Enter")
        expect(page.locator("#rlf-traj-right")).to_contain_text("'zero' is not a trajectory number")
        assert not foreign, f"the page fetched from other hosts: {foreign[:5]}"
    finally:
        context.close()
        server.stop()
