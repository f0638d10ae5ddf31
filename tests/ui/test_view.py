"""``swift-rlfactory view RUN``: only the metrics and trajectory viewer, for a finished run, in a real browser."""

from __future__ import annotations

import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ..conftest import ScriptedChat
from .conftest import RECORDED_RUN, Server, sevens_eval

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


REFUSAL = (
    "maximum context length is 4096 tokens; however, you requested 5210 tokens (4810 in the messages, 400 "
    "in the completion). Please reduce the length of the messages or the completion. "
)


@pytest.fixture(scope="module")
def retried_eval(tmp_path_factory) -> Path:
    """An eval output folder as two real ``swift-rlfactory eval`` runs leave it: the first answers
    question 0 and is refused (HTTP 400, a long error) on questions 1 and 2; the second, with the same
    --output, retries those two: question 1 is answered now, question 2 is refused again."""
    from starlette.responses import JSONResponse

    from swift_rlfactory.cli import main

    tmp = tmp_path_factory.mktemp("retried-eval")
    refused = {"What is 2 + 5?", "What is 1 + 6?"}

    def reply(body: dict) -> object:
        if body["messages"][-1]["content"] in refused:
            return JSONResponse({"error": REFUSAL * 3}, status_code=400)
        return "<answer>7</answer>"

    out = tmp / "out"
    with ScriptedChat(reply) as server, ThreadPoolExecutor(1) as pool:  # eval runs its own event loop
        argv = [
            *sevens_eval(tmp, [(3, 4), (2, 5), (1, 6)]),
            "--base-url",
            f"http://127.0.0.1:{server.port}/v1",
        ]
        argv += ["--served-model", "scripted", "--output", str(out)]
        assert pool.submit(main, argv).result() == 1  # two episodes failed
        refused.discard("What is 2 + 5?")
        assert pool.submit(main, argv).result() == 1  # one of them failed again
    assert len((out / "trajectories.jsonl").read_text().splitlines()) == 5
    assert json.loads((out / "metrics.json").read_text())["failed_episodes"] == 1
    return out


@pytest.fixture
def view_page(browser, retried_eval: Path, tmp_path: Path) -> Iterator:
    """``swift-rlfactory view`` of :func:`retried_eval`, its Trajectories tab open and the table shown."""
    server = Server(["view", str(retried_eval)], cwd=tmp_path)
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.set_default_timeout(30_000)
        page.goto(server.url)
        page.get_by_role("tab", name="Trajectories", exact=True).click()
        page.locator("#rlf-show").click()
        expect(page.locator("#rlf-table-note")).to_contain_text("shown of")
        yield page
    finally:
        context.close()
        server.stop()


def row_of(page, text: str):
    """The table row (a virtual row of gradio's dataframe) holding ``text``."""
    return page.locator("#rlf-table [role=row]", has=page.get_by_text(text, exact=True))


def test_a_retried_eval_episode_is_listed_once_as_its_last_attempt(view_page, screenshots: Path):
    page = view_page
    note = page.locator("#rlf-table-note")
    expect(note).to_contain_text("3 shown of 3 trajectories; 2 earlier attempts of retried eval episodes")
    answered = row_of(page, "What is 2 + 5?")
    expect(answered).to_have_count(1)  # its failed first attempt is not listed
    expect(answered.get_by_text("answer", exact=True)).to_have_count(1)
    expect(row_of(page, "What is 1 + 6?").get_by_text("failed", exact=True)).to_have_count(1)
    page.screenshot(path=screenshots / "retried-eval.png", full_page=True)

    answered.get_by_text("What is 2 + 5?").click()
    left = page.locator("#rlf-traj-left")
    expect(left).to_contain_text("attempt 2 of question 1 · sample 0; earlier attempts: #")
    expect(left).not_to_contain_text("episode failed")
    first = int(left.locator(".rlf-attempts").inner_text().split("#")[1].split(" ")[0])
    side = page.locator("#rlf-right").get_by_role("textbox")
    side.fill(str(first))  # the replaced line, opened by its number
    side.press("Enter")
    right = page.locator("#rlf-traj-right")
    expect(right).to_contain_text("an earlier attempt of question 1 · sample 0")
    expect(right).to_contain_text("episode failed on every attempt")

    page.locator("#rlf-stop input").click()
    page.get_by_role("option", name="failed", exact=True).click()
    expect(note).to_contain_text("1 shown of 3")  # the question still refused, once
    row_of(page, "What is 1 + 6?").get_by_text("What is 1 + 6?").click()
    expect(left).to_contain_text("episode failed on every attempt")
    expect(left).to_contain_text("attempt 2 of question 2 · sample 0; earlier attempts: #")
    expect(left).to_contain_text("answered 400")


def test_a_long_error_wraps_in_its_own_column_and_the_short_columns_stay_one_line(
    view_page, screenshots: Path
):
    """Left to gradio, column widths followed the longest cell: a long episode error squeezed the short
    columns until their headers broke one letter a line ("s/t/e/p"). Each short column now fits its header
    on one line, the error column keeps a quarter of the table in view, and its text wraps inside it."""
    page = view_page
    table = page.locator("#rlf-table [role=grid]")
    cells = page.locator("#rlf-table th").all()
    headers = {h.inner_text().strip(): h.bounding_box() for h in cells}
    assert list(headers) == ["#", "step", "group", "reward", "stop", "calls", "errors", "turns", "prompt",
                             "episode error"]  # fmt: skip
    texts = {h.inner_text().strip(): h.locator(".header").bounding_box() for h in cells}  # the words
    one_line = texts["prompt"]["height"]
    for name in ("#", "step", "group", "reward", "stop", "calls", "errors", "turns"):
        assert texts[name]["height"] <= one_line, f"{name!r} header wraps: {texts[name]}"
        span = page.locator("#rlf-table th .header", has_text=name).first
        assert span.evaluate("e => e.scrollWidth <= e.clientWidth"), f"{name!r} header is cut"
    grid = table.bounding_box()
    error = headers["episode error"]
    assert error["x"] + error["width"] <= grid["x"] + grid["width"] + 1  # in view, no sideways scroll
    assert error["width"] >= grid["width"] / 4
    answered = row_of(page, "What is 3 + 4?").bounding_box()
    refused = row_of(page, "What is 1 + 6?")
    assert answered["height"] < 3 * one_line  # a row without an error stays one line high
    assert refused.bounding_box()["height"] < 6 * one_line  # the cut error wraps in a few lines
    cell = refused.locator("[data-col='9']")
    expect(cell).to_contain_text("answered 400")
    assert cell.inner_text().strip().endswith("…")  # cut for the table, said so
    page.screenshot(path=screenshots / "eval-table-long-error.png", full_page=True)

    cell.click()  # the whole error is in the trajectory the row opens
    assert "Please reduce" not in cell.inner_text()
    expect(page.locator("#rlf-traj-left")).to_contain_text(f'answered 400: {{"error":"{REFUSAL}')


@pytest.mark.parametrize("command", ["view", "web-ui"])
def test_a_taken_port_fails_at_once_naming_our_port_flag(command: str, tmp_path: Path):
    """`web-ui` and `view` both default to 7860: the second one started says so, naming --port, in a
    second rather than gradio's GRADIO_SERVER_PORT message after 20 s."""
    import socket
    import subprocess
    import sys
    import time

    from ..conftest import ROOT

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        argv = [command, *([str(RECORDED_RUN)] if command == "view" else []), "--port", str(port)]
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "swift_rlfactory.cli", *argv], cwd=ROOT, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert f"--port {port}: cannot serve on 127.0.0.1:{port}" in done.stderr
    assert "GRADIO_SERVER_PORT" not in done.stderr and time.monotonic() - start < 60
