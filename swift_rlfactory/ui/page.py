"""The gradio components of the Agent RL tab and of ``swift-rlfactory view``, wired to :mod:`.actions`.

:func:`build_agent_tab` adds the whole tab to the gradio app being built (ms-swift's, through
``adapters/swift_webui.py``); :func:`build_viewer` is its metrics and trajectory part alone. Components
carry stable ``elem_id`` values (``rlf-...``): the browser tests and the README refer to them.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported: no phoning home

import gradio as gr  # noqa: E402
import pandas as pd  # noqa: E402
from gradio.components.plot import AltairPlotData  # noqa: E402  (a Vega-Lite spec for gr.Plot, as JSON)

from ..eval.metrics import metrics_rows  # noqa: E402
from ..run_config import DEFAULT_ENV  # noqa: E402
from . import actions  # noqa: E402
from .charts import line_chart  # noqa: E402
from .index import Filters  # noqa: E402
from .launch_form import build_launch_tab  # noqa: E402
from .render import STYLE, attempts_html, resumed_html, rewards_table, trajectory_html  # noqa: E402
from .runs import PLOTS, TRAJECTORIES, RunCache  # noqa: E402


def serve_options(host: str, port: int, auth: tuple[str, str] | None) -> dict[str, Any]:
    """``Blocks.launch`` settings of every page we serve: our address and login, and nothing that reaches
    out (no browser opened, no share link, no server-side rendering process, no MCP endpoint)."""
    return dict(
        server_name=host, server_port=port, auth=auth, inbrowser=False, share=False, ssr_mode=False,
        mcp_server=False,
    )  # fmt: skip


RUNS = RunCache()
ENVS = actions.Environments()
# The table's columns and their widths: each short column is as wide as its header and its values
# ("max_turns", a reward like "0.3333"), so neither breaks inside a word; the two text columns share what is
# left and wrap within themselves. (Left to gradio, widths follow the longest cell, and a long episode
# error squeezed the short columns until "step" stood one letter a line.)
COLUMNS: dict[str, str] = {
    "#": "56px",
    "step": "64px",
    "group": "96px",
    "reward": "80px",
    "stop": "104px",
    "calls": "64px",
    "errors": "72px",
    "turns": "64px",
    "prompt": "22%",
    "episode error": "28%",
}
TABLE_COLUMNS = list(COLUMNS)
CELL_CHARS = 80  # of a prompt or an error in the table; the trajectory below it shows the whole text
PAGE = 200  # rows of the trajectory table at most


# -- metrics ---------------------------------------------------------------------------------------
NO_STEPS = (
    "no steps logged yet: each chart gets its first point when the trainer logs its first step "
    "(every `--logging_steps` steps)"
)


def _chart(title: str, points: list[dict[str, Any]]) -> AltairPlotData:
    return AltairPlotData(chart="line", plot=json.dumps(line_chart(title, points)))


def _plots(folder: str) -> list[Any]:
    if not folder:
        return [gr.update() for _ in PLOTS] + ["open a run or eval folder"]
    if not Path(folder).expanduser().is_dir():
        return [_chart(name, []) for name in PLOTS] + [f"no such folder: `{folder}`"]
    run = RUNS.open(folder)
    charts = [_chart(name, run.series(name)) for name in PLOTS]
    status = run.describe()
    if validation := run.validation_status():  # the alarms where the charts are read
        status += "\n\n" + validation
    if run.summary:  # an eval folder: its results, where a training run's charts would be
        status += "\n\n" + eval_results(run.summary)
    elif not run.metrics.rows:
        status += f" · {NO_STEPS}"
    return charts + [status]


def eval_results(summary: dict[str, Any]) -> str:
    """An eval's ``metrics.json`` as a markdown table, as ``swift-rlfactory eval`` prints it."""
    rows = "".join(
        f"| {'**' + label + '**' if headline else label} | {value} |\n"
        for label, value, headline in metrics_rows(summary)
        if label != "time"  # when it was written: no result
    )
    return (
        "**eval results** (`metrics.json`; the charts are for training runs)\n\n| metric | value |\n"
        f"|---|---:|\n{rows}"
    )


def _metrics_panel(folder: gr.Textbox) -> None:
    with gr.Row():
        refresh = gr.Button(value="Refresh", elem_id="rlf-metrics-refresh", scale=1)
        live = gr.Checkbox(label="refresh every 3 s while training", value=True, elem_id="rlf-live", scale=3)
    status = gr.Markdown(elem_id="rlf-metrics-status")
    plots = []
    names = list(PLOTS)
    for start in range(0, len(names), 2):
        with gr.Row():
            for name in names[start : start + 2]:
                slug = name.split(" (")[0].lower().replace(" ", "-")
                plots.append(gr.Plot(label=name, show_label=False, elem_id=f"rlf-plot-{slug}"))
    shown = gr.State(None)  # what this page shows: the timer redraws only a chart that changed
    outputs = [*plots, status]
    refresh.click(_shown_plots, [folder], [*outputs, shown])
    folder.submit(_shown_plots, [folder], [*outputs, shown])
    timer = gr.Timer(3.0)
    timer.tick(_changed_plots, [folder, live, shown], [*outputs, shown])


def _shown_plots(folder: str) -> list[Any]:
    """Every chart and the status, and what they are (the page's ``shown``)."""
    values = _plots(folder)
    return [*values, [repr(value) for value in values]]


def _changed_plots(folder: str, live: bool, shown: list[str] | None) -> list[Any]:
    """The timer's refresh: only what changed since the page last showed it. A chart sent again is drawn
    again from scratch, and a long run's charts redrawn every 3 s on a slow machine were never seen whole
    (CI 2026-12-06: 1,200 steps, nothing painted in 30 s)."""
    if not live:
        return [gr.skip()] * (len(PLOTS) + 2)
    values = _plots(folder)
    now = [repr(value) for value in values]
    if shown is None or len(shown) != len(now):
        return [*values, now]
    return [
        value if new != old else gr.skip() for value, new, old in zip(values, now, shown, strict=True)
    ] + [now]


# -- trajectories ----------------------------------------------------------------------------------
def _filters(step, group, reward_min, reward_max, stop, errors_only, text) -> Filters:
    def number(value):
        return None if value is None or not str(value).strip() else float(value)

    return Filters(
        step=None if step in (None, "", "all") else int(step),
        group=None if group in (None, "", "all") else str(group),
        reward_min=number(reward_min),
        reward_max=number(reward_max),
        stop_reason=None if stop in (None, "", "all") else str(stop),
        tool_errors_only=bool(errors_only),
        text=text or "",
    )


def cell(text: str) -> str:
    """``text`` cut to :data:`CELL_CHARS` for a table cell, ending in "…" when something was cut."""
    return text if len(text) <= CELL_CHARS else text[: CELL_CHARS - 1] + "…"


def _no_table(note: str) -> tuple[Any, ...]:
    """An empty table, the filters as they are, and why there is nothing to show."""
    return pd.DataFrame(columns=TABLE_COLUMNS), gr.update(), gr.update(), gr.update(), note


def _table(folder, step, group, reward_min, reward_max, stop, errors_only, text):
    if not folder:
        return _no_table("open a run or eval folder")
    if not Path(folder).expanduser().is_dir():  # as the metrics tab says it, not "0 shown of 0"
        return _no_table(f"no such folder: `{folder}`")
    index = RUNS.open(folder).trajectories
    if not index.path.exists():  # a run that has not finished a trajectory yet, or not a run folder
        return _no_table(
            f"no {TRAJECTORIES} in `{index.path.parent}` yet: training writes it as its first trajectories "
            "finish, eval as its first episodes end"
        )
    try:
        filters = _filters(step, group, reward_min, reward_max, stop, errors_only, text)
    except ValueError as exc:
        return gr.update(), gr.update(), gr.update(), gr.update(), f"reward range: {exc}"
    rows = [
        [
            e.number,
            e.step,
            e.group,
            None if e.reward is None else round(e.reward, 4),
            e.stop_reason,
            e.tool_calls,
            e.tool_errors,
            e.turns,
            cell(e.prompt),
            cell(e.error),
        ]
        for e in index.select(filters, limit=PAGE)
    ]
    steps = ["all", *map(str, index.steps())]
    groups = ["all", *index.group_choices(filters.step, filters.group)]
    stops = ["all", *index.stop_reasons()]
    note = f"{len(rows)} shown of {index.count()} trajectories" + (
        " (first 200)" if len(rows) >= PAGE else ""
    )
    if replaced := index.replaced():
        note += (
            f"; {replaced} earlier attempt{'' if replaced == 1 else 's'} of retried eval episodes "
            f"{'is' if replaced == 1 else 'are'} left out (each episode's last line counts, as in eval)"
        )
    if relogged := index.relogged():
        note += (
            f"; {relogged} trajector{'y' if relogged == 1 else 'ies'} of steps a resumed run logged again "
            f"{'is' if relogged == 1 else 'are'} left out (the resumed run's lines count)"
        )
    if index.skipped:
        note += (
            "; 1 line of the log is not a JSON object and is left out"
            if index.skipped == 1
            else f"; {index.skipped} lines of the log are not JSON objects and are left out"
        )
    return (
        pd.DataFrame(rows, columns=TABLE_COLUMNS),
        gr.update(choices=steps),
        gr.update(choices=groups),
        gr.update(choices=stops),
        note,
    )


def trajectory_number(value: Any) -> int | None:
    """The trajectory # typed or picked (``"3"``, ``" #3 "``); ``None`` for an empty field. Raises
    ``ValueError`` naming what was typed when it is not a number."""
    text = "" if value is None else str(value).strip().lstrip("#").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{value!r} is not a trajectory number: type the # of a table row") from None


def _show(folder: str, number) -> str:
    try:
        n = trajectory_number(number)
    except ValueError as exc:
        return f"<p>{html.escape(str(exc))}</p>"
    if not folder or n is None:
        return ""
    index = RUNS.open(folder).trajectories
    if not 0 <= n < len(index.entries):
        return f"<p>no trajectory #{n} (the log has {len(index.entries)})</p>"
    try:
        record = index.read(n)
    except (OSError, ValueError) as exc:  # the log was replaced since it was indexed
        return f"<p>cannot read trajectory #{n}: {html.escape(str(exc))}; refresh the table</p>"
    entry = index.entries[n]
    attempts = attempts_html(entry, index.latest(entry), [index.entries[k] for k in entry.earlier])
    attempts += resumed_html(index.resumed_by(entry))
    return trajectory_html(record, title=f"trajectory #{n}", attempts=attempts)


def _pick(table: pd.DataFrame, evt: gr.SelectData) -> str:
    row = evt.index[0] if isinstance(evt.index, list | tuple) else evt.index
    return str(table.iloc[row]["#"])


def _trajectory_panel(folder: gr.Textbox) -> gr.Textbox:
    with gr.Row():
        step = gr.Dropdown(
            choices=["all"], value="all", label="step", elem_id="rlf-step", allow_custom_value=True
        )
        group = gr.Dropdown(choices=["all"], value="all", label="group (one prompt)", elem_id="rlf-group")
        stop = gr.Dropdown(choices=["all"], value="all", label="stop reason", elem_id="rlf-stop")
    with gr.Row():
        reward_min = gr.Textbox(label="reward ≥", elem_id="rlf-reward-min", interactive=True)
        reward_max = gr.Textbox(label="reward ≤", elem_id="rlf-reward-max", interactive=True)
        errors_only = gr.Checkbox(label="only with tool errors", elem_id="rlf-errors-only")
        text = gr.Textbox(label="text search", elem_id="rlf-text", interactive=True)
        apply = gr.Button(value="Show trajectories", elem_id="rlf-show", variant="primary")
    note = gr.Markdown(elem_id="rlf-table-note")
    table = gr.Dataframe(
        headers=TABLE_COLUMNS,
        column_widths=list(COLUMNS.values()),
        interactive=False,
        elem_id="rlf-table",
        wrap=True,
        max_height=360,
    )
    # text fields, not gr.Number: gradio shows an empty Number as "0", which read as trajectory #0 picked,
    # and typing 0 into it changed nothing, so #0 never opened from the keyboard
    with gr.Row():
        left = gr.Textbox(
            label="trajectory # (click a row, or type one and press Enter)",
            placeholder="click a row",
            elem_id="rlf-left",
            interactive=True,
        )
        right = gr.Textbox(
            label="side by side with trajectory #",
            placeholder="type a # and press Enter",
            elem_id="rlf-right",
            interactive=True,
        )
    with gr.Row(equal_height=False):
        left_html = gr.HTML(elem_id="rlf-traj-left")
        right_html = gr.HTML(elem_id="rlf-traj-right")
    inputs = [folder, step, group, reward_min, reward_max, stop, errors_only, text]
    outputs = [table, step, group, stop, note]
    apply.click(_table, inputs, outputs)
    for control in (step, group, stop, errors_only):
        control.change(_table, inputs, outputs)
    for box in (text, reward_min, reward_max):
        box.submit(_table, inputs, outputs)
    table.select(_pick, [table], [left]).then(_show, [folder, left], [left_html])
    left.submit(_show, [folder, left], [left_html])
    right.submit(_show, [folder, right], [right_html])
    return left


def run_box(folder: str = "") -> gr.Textbox:
    """The run or eval folder both viewer tabs read."""
    return gr.Textbox(
        value=folder,
        label="run or eval folder (holds logging.jsonl / trajectories.jsonl)",
        elem_id="rlf-run",
        interactive=True,
    )


def build_viewer(run: gr.Textbox) -> gr.Textbox:
    """The Live metrics and Trajectories tabs over ``run`` (for ``view`` and the Agent RL tab); returns the
    picked trajectory's number field."""
    with gr.Tab(label="Live metrics", elem_id="rlf-tab-metrics"):
        _metrics_panel(run)
    with gr.Tab(label="Trajectories", elem_id="rlf-tab-trajectories"):
        return _trajectory_panel(run)


# -- environment, tools, rewards, launch -----------------------------------------------------------
def _validate(path: str):
    result = actions.validate(ENVS, path)
    names = [t["name"] for t in result.tools]
    mark = "OK:" if result.ok else "ERROR:"
    return (
        f"{mark} {result.message}",
        json.dumps(result.tools, indent=2, ensure_ascii=False),
        gr.update(choices=names, value=names[0] if names else None),
        result.tools,
    )


def _upload(file) -> str:
    return file if isinstance(file, str) else getattr(file, "name", "")


def _skeleton(name: str, tools: list[dict]) -> str:
    for tool in tools or []:
        if tool["name"] == name:
            return json.dumps(actions.example_arguments(tool.get("parameters") or {}))
    return "{}"


def _call(path: str, name: str, arguments: str):
    result = actions.call_tool(ENVS, path, name, arguments)
    error = result.error or "no error"
    return result.observation, error, result.details


def _score(path: str, folder: str, number, pasted: str):
    try:
        if pasted and pasted.strip():
            record = json.loads(pasted)
        elif folder and (n := trajectory_number(number)) is not None:
            record = RUNS.open(folder).trajectories.read(n)
        else:
            return "<p>pick a trajectory in the Trajectories tab, or paste one</p>"
        scored, seconds = actions.score(ENVS, path, record)
    except Exception as exc:
        return f"<p>cannot score: {type(exc).__name__}: {exc}</p>"
    logged = (record.get("rewards") or {}).get("total")
    note = f"<p>scored in {seconds * 1000:.1f} ms with {path}"
    if isinstance(logged, int | float) and not isinstance(logged, bool):
        note += f"; the log recorded total {logged:.4g}"
    elif logged is not None:  # a hand-edited or foreign log: say what it holds rather than fail formatting it
        note += f"; the log recorded total {html.escape(json.dumps(logged))} (not a number)"
    return STYLE + note + "</p>" + rewards_table(scored)


def build_agent_tab(default_env: str = "", default_run: str = "") -> gr.Tab:
    """The Agent RL tab: environment (the bundled calculator unless ``default_env``), try a tool, try a
    reward, launch, live metrics, trajectories."""
    with gr.Tab(label="Agent RL", elem_id="rlf-agent-rl", id="rlf-agent-rl") as tab:
        gr.Markdown(
            "**swift-rlfactory**: check an environment, try its tools and rewards, launch GRPO with the "
            "rlfactory plugin, and read what the agent did."
        )
        with gr.Row():
            env_path = gr.Textbox(
                value=default_env or str(DEFAULT_ENV),
                label="environment YAML",
                elem_id="rlf-env",
                scale=4,
                interactive=True,
            )
            upload = gr.File(
                label="or upload one", file_types=[".yaml", ".yml"], elem_id="rlf-upload", height=90, scale=1
            )
            validate = gr.Button(value="Validate", variant="primary", elem_id="rlf-validate", scale=1)
        env_status = gr.Markdown(elem_id="rlf-env-status")
        run_folder = run_box(default_run)
        tools_state = gr.State([])
        with gr.Tabs():
            with gr.Tab(label="Environment", elem_id="rlf-tab-env"):
                schemas = gr.Code(language="json", label="tools and their schemas", elem_id="rlf-schemas")
            with gr.Tab(label="Try a tool", elem_id="rlf-tab-tool"):
                with gr.Row():
                    tool = gr.Dropdown(choices=[], label="tool", elem_id="rlf-tool")
                    arguments = gr.Code("{}", language="json", label="arguments (JSON)", elem_id="rlf-args")
                run_tool = gr.Button(value="Run", variant="primary", elem_id="rlf-run-tool")
                observation = gr.Textbox(
                    label="observation (the tool message the model sees)",
                    lines=6,
                    interactive=False,
                    elem_id="rlf-observation",
                )
                with gr.Row():
                    tool_error = gr.Textbox(label="error", interactive=False, elem_id="rlf-tool-error")
                    tool_meta = gr.Textbox(
                        label="latency · cache · attempts", interactive=False, elem_id="rlf-tool-meta"
                    )
            with gr.Tab(label="Try a reward", elem_id="rlf-tab-reward"):
                gr.Markdown(
                    "Rescore a trajectory with the environment's reward spec, as `swift-rlfactory rewards` "
                    "does (the code the `rlfactory` reward runs in training): pick one in *Trajectories*, or "
                    "paste a line of `trajectories.jsonl`."
                )
                pasted = gr.Code(language="json", label="pasted trajectory (optional)", elem_id="rlf-pasted")
                score = gr.Button(value="Score", variant="primary", elem_id="rlf-score")
                scores = gr.HTML(elem_id="rlf-scores")
            with gr.Tab(label="Launch", elem_id="rlf-tab-launch"):
                build_launch_tab(env_path, run_folder)
            picked = build_viewer(run_folder)

        validate.click(_validate, [env_path], [env_status, schemas, tool, tools_state])
        env_path.submit(_validate, [env_path], [env_status, schemas, tool, tools_state])
        upload.upload(_upload, [upload], [env_path]).then(
            _validate, [env_path], [env_status, schemas, tool, tools_state]
        )
        tool.change(_skeleton, [tool, tools_state], [arguments])
        run_tool.click(_call, [env_path, tool, arguments], [observation, tool_error, tool_meta])
        score.click(_score, [env_path, run_folder, picked, pasted], [scores])
    return tab


def viewer_app(folder: str) -> gr.Blocks:
    """The ``swift-rlfactory view`` page: metrics and trajectories of one folder, nothing that runs code."""
    with gr.Blocks(title=f"swift-rlfactory view · {Path(folder).name}") as app:
        gr.Markdown(f"### swift-rlfactory · {folder}")
        run = run_box(folder)
        with gr.Tabs():
            build_viewer(run)
    return app
