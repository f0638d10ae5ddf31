"""The web UI in a real browser: ``swift-rlfactory web-ui`` served for real, clicked through with chromium.

Everything asserted is what the page shows: ms-swift's tabs next to ours, an environment validated (and a
broken one rejected with its field), a tool's observation, a recorded run's plots and one trajectory's tool
call and reward, and a 2-step CPU GRPO run launched from the tab whose first metrics appear on the page.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ..conftest import AGENT_ENV, AGENT_PAIRS, ScriptedChat
from .conftest import RECORDED_RUN, sevens_eval

expect = pytest.importorskip("playwright.sync_api", reason="the ui extra is not installed").expect
expect.set_options(timeout=60_000)  # a loaded 2-core CI machine answers a click in seconds, not ms

pytestmark = pytest.mark.timeout(300)


def textbox(page, elem_id: str):
    return page.locator(f"#{elem_id}").get_by_role("textbox")


def choose(page, elem_id: str, option: str) -> None:
    page.locator(f"#{elem_id} input").click()
    page.get_by_role("option", name=option, exact=True).click()


def set_code(page, elem_id: str, text: str) -> None:
    page.locator(f"#{elem_id} .cm-content").fill(text)


def open_tab(page, name: str) -> None:
    page.get_by_role("tab", name=name, exact=True).click()


def drawn_pixels(page, elem_id: str) -> int:
    """Coloured pixels inside a chart's plotting frame, as the browser painted them (grid lines and axes are
    grey; a line or a dot of a series is coloured); 0 for a chart with no frame drawn."""
    from PIL import Image

    frame = page.locator(f"#{elem_id} svg.marks .role-frame.root > g > path.background")
    for _ in range(20):  # the page's refresh may be redrawing the chart, its frame gone for a moment
        if frame.count():
            break
        page.wait_for_timeout(250)
    else:
        return 0
    # The page's own refresh redraws the charts every few seconds; an element screenshot waits for the
    # element to stay put and visible, which a loaded machine's redraws can keep from happening for 30 s
    # (CI, 2026-12-02). The painted pixels inside the frame's box are what counts: take them from the page.
    for _ in range(20):
        box = frame.first.bounding_box()
        if box and box["width"] >= 1 and box["height"] >= 1:
            break
        page.wait_for_timeout(250)
    else:
        return 0
    # the box is the viewport's; a full-page screenshot is clipped in the document's coordinates
    scroll_x, scroll_y = page.evaluate("() => [window.scrollX, window.scrollY]")
    clip = {**box, "x": box["x"] + scroll_x, "y": box["y"] + scroll_y}
    pixels = Image.open(io.BytesIO(page.screenshot(clip=clip, full_page=True))).convert("RGB").tobytes()
    return sum(max(rgb) - min(rgb) > 60 for rgb in zip(pixels[::3], pixels[1::3], pixels[2::3], strict=True))


def painted(page, elem_id: str, more_than: int, timeout_s: float = 30) -> int:
    """:func:`drawn_pixels` once more than ``more_than`` are painted, or its last count after ``timeout_s``.
    The page's own refresh redraws every chart every few seconds, and a redraw caught half-way paints
    nothing yet (0 pixels right after its four dots were counted in the SVG, CI 2026-12-03): a chart counts
    as drawn when some look of it within the timeout is, as ``expect`` waits for text."""
    deadline = time.monotonic() + timeout_s
    while (count := drawn_pixels(page, elem_id)) <= more_than and time.monotonic() < deadline:
        page.wait_for_timeout(500)
    return count


def open_folder(page, folder: Path, tab: str) -> None:
    textbox(page, "rlf-run").fill(str(folder))
    open_tab(page, tab)


def test_environment_is_validated_and_a_tool_answers(page, screenshots: Path, tmp_path: Path):
    for name in ("LLM PT/SFT", "LLM RLHF", "LLM GRPO", "LLM Inference", "Agent RL"):  # one app, both UIs
        expect(page.get_by_role("tab", name=name, exact=True)).to_be_visible()
    page.locator("#rlf-validate").click()
    expect(page.locator("#rlf-env-status")).to_contain_text("valid environment 'e2e-agent': 3 tools")
    expect(page.locator("#rlf-schemas")).to_contain_text('"from_unit"')  # the MCP server's tool schema
    page.screenshot(path=screenshots / "environment.png")

    open_tab(page, "Try a tool")
    choose(page, "rlf-tool", "convert")
    expect(page.locator("#rlf-args")).to_contain_text('"from_unit": ""')  # a skeleton from the schema
    set_code(page, "rlf-args", json.dumps({"value": 3, "from_unit": "km", "to_unit": "m"}))
    page.locator("#rlf-run-tool").click()
    expect(textbox(page, "rlf-observation")).to_have_value("3000.0")  # answered by the MCP server process
    expect(textbox(page, "rlf-tool-meta")).to_have_value(re.compile(r"latency [\d.]+ ms · cache miss"))
    expect(textbox(page, "rlf-tool-error")).to_have_value("no error")
    page.locator("#rlf-run-tool").click()
    expect(textbox(page, "rlf-tool-meta")).to_have_value(re.compile("cache hit"))  # convert is cached
    page.screenshot(path=screenshots / "try-a-tool.png")

    set_code(page, "rlf-args", json.dumps({"value": 3, "from_unit": "km", "to_unit": "parsec"}))
    page.locator("#rlf-run-tool").click()  # a bad call is an observation, as the model would see it
    expect(textbox(page, "rlf-observation")).to_have_value(re.compile("parsec"))
    expect(textbox(page, "rlf-tool-error")).not_to_have_value("no error")

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nlimits:\n  max_turns: many\nreward:\n  - {name: em}\n")
    textbox(page, "rlf-env").fill(str(bad))
    page.locator("#rlf-validate").click()
    expect(page.locator("#rlf-env-status")).to_contain_text("invalid environment")
    expect(page.locator("#rlf-env-status")).to_contain_text("limits.max_turns")


def grpo_flags(shown: str) -> list[str]:
    """The ``swift rlhf`` flags of a shown command, from ``--rlhf_type`` on, its run folder named ``RUN``."""
    line = shown.replace("\\\n", " ")
    flags = shlex.split(line[line.index("--rlhf_type") :].splitlines()[0])
    return [re.sub(r"^/\S+/\d{8}-\d{6}(-\d+)?", "RUN", flag) for flag in flags]


def test_the_page_opens_on_agent_rl_and_launch_starts_from_working_defaults(
    browser, web_ui, screenshots: Path, tmp_path: Path
):
    """The first tab shown is ours; the Launch form holds the bundled model, this machine's mode (cpu: no
    GPU here) and its profile, its command runs the bundled model from its folder in float32 on the
    generated calculator dataset, and a refused form says why beside the Start button."""
    from swift_rlfactory.bundled.models import DEFAULT_MODEL, MODELS, model_dir
    from swift_rlfactory.run_config import CPU, DEFAULT_ENV

    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto(web_ui.url)
        expect(page.get_by_role("tab", name="Agent RL", exact=True)).to_have_attribute(
            "aria-selected", "true"
        )
        textbox(page, "rlf-env").fill(str(DEFAULT_ENV))
        open_tab(page, "Launch")
        expect(textbox(page, "rlf-model")).to_have_value(DEFAULT_MODEL)
        expect(page.locator("#rlf-mode input")).to_have_value("cpu")
        expect(page.locator("#rlf-steps input")).to_have_value(str(CPU.steps))
        page.locator("#rlf-show-command").click()
        command = page.locator("#rlf-command")
        expect(command).to_contain_text(f"--model {model_dir(MODELS[DEFAULT_MODEL])} --model_type qwen2")
        expect(command).to_contain_text("--torch_dtype float32")
        expect(command).to_contain_text("--use_vllm false")
        expect(command).to_contain_text(re.compile(r"--dataset \S+/\d{8}-\d{6}(-\d+)?/train\.jsonl"))
        page.screenshot(path=screenshots / "launch-defaults.png", full_page=True)
        # the same run as `swift-rlfactory train --dry-run` on this machine, the README's main job
        dry = subprocess.run(
            [sys.executable, "-m", "swift_rlfactory.cli", "train", "--dry-run", "--output-dir", str(tmp_path)],
            cwd=tmp_path, capture_output=True, text=True, env={**os.environ, "COLUMNS": "10000"}, timeout=120,
        )  # fmt: skip
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert grpo_flags(command.inner_text()) == grpo_flags(dry.stdout)

        textbox(page, "rlf-model").fill("")
        page.locator("#rlf-start").click()
        status = textbox(page, "rlf-job-status")
        expect(status).to_have_value("invalid: model: required")
        box = status.bounding_box()
        assert box is not None and box["y"] + box["height"] <= 1000, box  # seen without scrolling
        page.screenshot(path=screenshots / "launch-refused.png")
    finally:
        context.close()


def test_grpo_tab_is_prefilled_for_the_plugin(page):
    open_tab(page, "LLM GRPO")
    page.get_by_role("button", name="Extra settings ▼").click()  # ms-swift keeps these fields folded
    expect(textbox(page, "external_plugins")).to_have_value(re.compile(r"swift_rlfactory/plugin\.py$"))
    expect(textbox(page, "multi_turn_scheduler")).to_have_value("rlfactory")
    expect(textbox(page, "more_params")).to_have_value(re.compile("--callbacks rlfactory"))
    expect(page.locator("#reward_funcs")).to_contain_text("rlfactory")


def test_recorded_run_plots_and_trajectory(page, screenshots: Path):
    textbox(page, "rlf-run").fill(str(RECORDED_RUN))
    open_tab(page, "Live metrics")
    page.locator("#rlf-metrics-refresh").click()
    expect(page.locator("#rlf-metrics-status")).to_contain_text("2 logged steps, 8 trajectories")
    plot = page.locator("#rlf-plot-reward-and-components")
    expect(plot.locator("canvas, svg.marks").first).to_be_visible()  # vega drew it
    expect(
        page.locator("#rlf-plot-step-timeline canvas, #rlf-plot-step-timeline svg.marks").first
    ).to_be_visible()
    page.screenshot(path=screenshots / "live-metrics.png", full_page=True)

    open_tab(page, "Trajectories")
    page.locator("#rlf-show").click()
    expect(page.locator("#rlf-table-note")).to_contain_text("8 shown of 8 trajectories")
    page.locator("#rlf-table").get_by_text("What is").filter(visible=True).first.click()
    left = page.locator("#rlf-traj-left")
    expect(left).to_contain_text("trajectory #0")
    expect(left).to_contain_text("call add")  # the tool call, its arguments and observation
    expect(left).to_contain_text('"a": ')
    expect(left).to_contain_text("total")
    textbox(page, "rlf-right").fill("1")
    textbox(page, "rlf-right").press("Enter")
    expect(page.locator("#rlf-traj-right")).to_contain_text("trajectory #1")
    page.screenshot(path=screenshots / "trajectories.png", full_page=True)

    textbox(page, "rlf-text").fill("no such text anywhere")
    textbox(page, "rlf-text").press("Enter")
    expect(page.locator("#rlf-table-note")).to_contain_text("0 shown of 8")

    open_tab(page, "Try a reward")
    page.locator("#rlf-score").click()
    scores = page.locator("#rlf-scores")
    expect(scores).to_contain_text("tool_use")
    expect(scores).to_contain_text("the log recorded total")
    page.screenshot(path=screenshots / "try-a-reward.png")


def test_live_metrics_with_no_step_one_step_and_many_odd_steps(page, screenshots: Path, tmp_path: Path):
    """A run that has just started shows "no steps logged yet", then its first step as a dot on a numeric
    axis (gradio's line plot drew nothing for one point); a long run whose rows hold NaN, inf, None or text,
    or lack a metric, still draws every chart."""
    first = json.loads((RECORDED_RUN / "logging.jsonl").read_text().splitlines()[0])
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "logging.jsonl").write_text('{"model_info": "the trainer\'s first line is no step"}\n')
    open_folder(page, fresh, "Live metrics")
    page.locator("#rlf-metrics-refresh").click()
    status = page.locator("#rlf-metrics-status")
    expect(status).to_contain_text("0 logged steps")
    expect(status).to_contain_text("no steps logged yet")
    expect(page.locator("#rlf-plot-reward-and-components")).to_contain_text("no values logged yet")

    with open(fresh / "logging.jsonl", "a") as f:  # the first step arrives; the page refreshes itself
        f.write(json.dumps({**first, "turns": math.nan, "stop/answer": "n/a"}) + "\n")
    expect(status).to_contain_text("1 logged step,")
    reward = page.locator("#rlf-plot-reward-and-components")
    expect(reward.locator("svg.marks .role-axis[aria-label^='Y-axis']")).to_have_attribute(
        "aria-label", re.compile("linear scale")
    )
    expect(reward.locator(".mark-symbol.role-mark path")).to_have_count(4)  # reward, em, format, tool_use
    page.screenshot(path=screenshots / "live-metrics-one-step.png", full_page=True)
    assert painted(page, "rlf-plot-reward-and-components", 50) > 50
    assert painted(page, "rlf-plot-step-timeline", 50) > 50
    expect(page.locator("#rlf-plot-turns")).to_contain_text("no values logged yet")  # its one value: NaN
    assert drawn_pixels(page, "rlf-plot-turns") == 0

    many = tmp_path / "many"
    many.mkdir()
    with open(many / "logging.jsonl", "w") as f:
        for n in range(1, 1201):
            row = {**first, "global_step/max_steps": f"{n}/1200", "reward": math.sin(n / 100)}
            row["turns"] = [2.0, math.nan, None, "x", math.inf][n % 5]
            if n != 600:
                del row["stop/answer"]  # a stop reason seen once
            f.write(json.dumps(row) + "\n")
    textbox(page, "rlf-run").fill(str(many))
    textbox(page, "rlf-run").press("Enter")
    expect(status).to_contain_text("1200 logged steps")
    expect(page.locator("#rlf-plot-reward-and-components")).to_contain_text("1 step in 3 shown")
    page.screenshot(path=screenshots / "live-metrics-many-steps.png", full_page=True)
    for chart in ("reward-and-components", "turns", "stop-reasons", "step-timeline"):
        assert painted(page, f"rlf-plot-{chart}", 20) > 20, chart


def test_a_failed_eval_episode_shows_its_error_and_question(page, screenshots: Path, tmp_path: Path):
    """An eval episode the endpoint refused on every attempt is a line with its redacted error: the viewer
    lists it as stop reason "failed", finds it by its error text, and shows error and question escaped.
    Lines around it that are odd (a training error, missing fields, a huge error, a torn end) show too."""
    from starlette.responses import JSONResponse

    from swift_rlfactory.cli import main

    key = "sk-view-failed-4b3c2d1e"

    def refuse_one(body: dict) -> object:
        if "2 + 5" in body["messages"][-1]["content"]:
            error = f"<b>maximum context</b> length is 4096 tokens (Bearer {key})"
            return JSONResponse({"error": error}, status_code=400)
        return "<answer>7</answer>"

    out = tmp_path / "out"
    with ScriptedChat(refuse_one) as server:
        argv = [*sevens_eval(tmp_path, [(3, 4), (2, 5)]), "--base-url", f"http://127.0.0.1:{server.port}/v1"]
        argv += ["--served-model", "scripted", "--api-key", key, "--output", str(out)]
        # in a thread of its own: playwright's event loop runs in this one, and eval runs its own
        with ThreadPoolExecutor(1) as pool:
            assert pool.submit(main, argv).result() == 1  # one episode failed
    log = out / "trajectories.jsonl"
    training = json.loads((RECORDED_RUN / "trajectories.jsonl").read_text().splitlines()[0])
    odd = [
        {**training, "stop_reason": "error", "error": "on_turn_end: TimeoutError: <judge> gave up"},
        {"messages": "not a list", "turns": "many", "tool_calls": [1], "rewards": [0.5]},
        {"index": 9, "sample": 0, "question": "huge", "failed": True, "error": "E" * 100_000},
    ]
    with open(log, "a") as f:
        f.write("".join(json.dumps(r) + "\n" for r in odd) + '[1]\n{"index": 0, "sam')  # then a torn line

    open_folder(page, out, "Trajectories")
    page.locator("#rlf-show").click()
    note = page.locator("#rlf-table-note")
    expect(note).to_contain_text("5 shown of 5 trajectories; 1 line of the log is not a JSON object")
    choose(page, "rlf-stop", "failed")
    expect(note).to_contain_text("2 shown of 5")
    page.locator("#rlf-table").get_by_text("What is 2 + 5?").filter(visible=True).first.click()
    left = page.locator("#rlf-traj-left")
    expect(left).to_contain_text("episode failed on every attempt")
    expect(left).to_contain_text("answered 400")
    expect(left).to_contain_text("<b>maximum context</b> length is 4096 tokens (Bearer <api key>)")
    expect(left).to_contain_text("What is 2 + 5?")
    expect(left.locator("b", has_text="maximum context")).to_have_count(0)  # shown as text, never markup
    page.screenshot(path=screenshots / "failed-eval-episode.png", full_page=True)
    textbox(page, "rlf-right").fill("4")
    textbox(page, "rlf-right").press("Enter")
    right = page.locator("#rlf-traj-right")
    expect(right).to_contain_text(f"({100_000 - 20_000} more characters in the log)")
    assert (right.bounding_box() or {}).get("height", 0) < 1000  # the huge error scrolls in its box
    page.screenshot(path=screenshots / "failed-eval-huge-error.png", full_page=True)
    assert key not in page.content()

    choose(page, "rlf-stop", "all")
    textbox(page, "rlf-text").fill("maximum context")
    textbox(page, "rlf-text").press("Enter")
    expect(note).to_contain_text("1 shown of 5")
    choose(page, "rlf-stop", "error")
    expect(note).to_contain_text("0 shown of 5")  # text and stop reason together
    textbox(page, "rlf-text").fill("")
    textbox(page, "rlf-text").press("Enter")
    expect(note).to_contain_text("1 shown of 5")
    page.locator("#rlf-table").get_by_text("error", exact=True).filter(visible=True).first.click()
    expect(left).to_contain_text("on_turn_end: TimeoutError: <judge> gave up")
    expect(left).to_contain_text("call add")  # its turns are still there, under the error


@pytest.mark.timeout(420)
def test_launch_a_cpu_grpo_run_and_watch_it(page, agent_model: Path, screenshots: Path, tmp_path: Path):
    dataset = tmp_path / "train.jsonl"
    dataset.write_text(
        "".join(
            json.dumps(
                {"messages": [{"role": "user", "content": f"What is {a} + {b}?"}], "solution": str(a + b)}
            )
            + "\n"
            for a, b in AGENT_PAIRS
        )
    )
    textbox(page, "rlf-env").fill(str(AGENT_ENV))
    open_tab(page, "Launch")
    textbox(page, "rlf-model").fill(str(agent_model))
    textbox(page, "rlf-dataset").fill(str(dataset))
    textbox(page, "rlf-output").fill(str(tmp_path / "out"))
    for elem_id, value in [
        ("rlf-steps", 2),
        ("rlf-turns", 3),
        ("rlf-gens", 2),
        ("rlf-batch", 4),
        ("rlf-len", 96),
    ]:
        page.locator(f"#{elem_id} input").fill(str(value))
    page.locator("#rlf-lr input").fill("0.0001")
    choose(page, "rlf-mode", "cpu")
    textbox(page, "rlf-extra").fill(
        "--model_type qwen3 --template qwen3 --torch_dtype float32 --max_length 2048 --temperature 0.7 "
        "--dataloader_num_workers 0 --dataset_num_proc 1 --save_steps 100 --seed 0"
    )
    page.locator("#rlf-show-command").click()
    command = page.locator("#rlf-command")
    expect(command).to_contain_text("swift rlhf --rlhf_type grpo")
    expect(command).to_contain_text("--multi_turn_scheduler rlfactory")
    expect(command).to_contain_text("--use_vllm false")
    page.locator("#rlf-start").click()
    expect(textbox(page, "rlf-job-status")).to_have_value(re.compile("running|finished"))
    page.screenshot(path=screenshots / "launch.png")

    open_tab(page, "Live metrics")  # the run folder fills itself in; the page refreshes every 3 s
    status = page.locator("#rlf-metrics-status")
    expect(status).to_contain_text(re.compile(r"[1-9]\d* logged steps"), timeout=300_000)
    expect(
        page.locator(
            "#rlf-plot-reward-and-components canvas, #rlf-plot-reward-and-components svg.marks"
        ).first
    ).to_be_visible()
    page.screenshot(path=screenshots / "launch-metrics.png", full_page=True)
    open_tab(page, "Launch")
    expect(textbox(page, "rlf-log")).to_have_value(re.compile("rlfactory"))  # the streamed swift rlhf log
    page.locator("#rlf-stop-run").click()
    expect(textbox(page, "rlf-job-status")).to_have_value(
        re.compile("stopped|finished|exited"), timeout=60_000
    )


def test_live_metrics_show_the_validation_shifts_and_their_alarms(page, screenshots: Path, tmp_path: Path):
    """A run trained with --val-file: its checkpoints' set and shift scores are one drawn chart, and the
    alarm its validation raised is listed under the charts' status."""
    from .test_validation_plot import ALARM, validated_run

    open_folder(page, validated_run(tmp_path / "run"), "Live metrics")
    page.locator("#rlf-metrics-refresh").click()
    status = page.locator("#rlf-metrics-status")
    expect(status).to_contain_text("worst shift lowercase 0.25")
    expect(status).to_contain_text("1 validation alarm")
    expect(status).to_contain_text(f"step 2: {ALARM['text']}")
    chart = "rlf-plot-validation-under-phrasing-shifts"
    expect(page.locator(f"#{chart} .mark-symbol.role-mark path")).to_have_count(8)  # 4 series, 2 steps
    page.screenshot(path=screenshots / "live-metrics-validation.png", full_page=True)
    assert painted(page, chart, 50) > 50
