"""The Launch tab: a form generated from :class:`~swift_rlfactory.run_config.RunConfig`'s fields, the command it
runs, Start and Stop, the run's status and log (``docs/ui.md``)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import gradio as gr

from ..run_config import CPU, GPU, MODES, RunConfig, default_mode, field_default
from .launch import FORM_FIELDS, Job, form_config, shell_line

JOBS: dict[str, Job] = {}  # the job started from this server, by output folder
# Where each field's box sits (rows of the form) and its element id; the env box is the tab's own.
ROWS = (
    ("model", "dataset", "output_dir"),
    ("steps", "lora_rank", "mode", "gpu_memory_utilization", "max_turns"),
    ("num_generations", "batch_size", "max_completion_length", "learning_rate"),
    ("swift_args",),
)
ELEM_IDS = {
    "model": "rlf-model", "dataset": "rlf-dataset", "output_dir": "rlf-output", "steps": "rlf-steps",
    "lora_rank": "rlf-lora", "mode": "rlf-mode", "gpu_memory_utilization": "rlf-memory",
    "max_turns": "rlf-turns", "num_generations": "rlf-gens", "batch_size": "rlf-batch",
    "max_completion_length": "rlf-len", "learning_rate": "rlf-lr", "swift_args": "rlf-extra",
}  # fmt: skip
PLACEHOLDERS = {
    "dataset": "empty: 256 generated arithmetic problems (the calculator environment only)",
    "swift_args": "e.g. --warmup_ratio 0.05 (later flags win)",
}


def _field_box(name: str, mode: str) -> Any:
    """The box of one :class:`RunConfig` field, labelled and explained by its declaration, holding the
    value a run in ``mode`` takes."""
    f = next(f for f in fields(RunConfig) if f.name == name)
    label, info, elem_id = f.metadata["label"], f.metadata["help"], ELEM_IDS[name]
    if name == "mode":
        return gr.Dropdown(choices=list(MODES), value=mode, label=label, info=info, elem_id=elem_id)
    kind = f.metadata.get("kind")
    if kind:
        profile = CPU if mode == "cpu" else GPU
        value = getattr(profile, name)
        if value is None and name == "gpu_memory_utilization":
            value = GPU.gpu_memory_utilization
        return gr.Number(
            value, label=label, info=info, precision=0 if kind == "count" else None, elem_id=elem_id
        )
    default = field_default(name)
    value = "" if default is None or name == "swift_args" else str(default)
    return gr.Textbox(
        value=value,
        label=label,
        info=info,
        placeholder=PLACEHOLDERS.get(name),
        elem_id=elem_id,
        interactive=True,
    )


def _command(*values) -> str:
    try:
        return shell_line(form_config(values))
    except ValueError as exc:
        return f"# invalid: {exc}"


def _start(*values):
    """Start the form's run; a run this page started in the same output folder is stopped first and
    waited for, so two trainers never run from one form's folder at once."""
    try:
        config = form_config(values)
        key = str(Path(config.output_dir).expanduser())
        old = JOBS.get(key)
        if old is not None:
            old.stop()
        job = Job(config)
    except (ValueError, OSError) as exc:
        return f"invalid: {exc}", gr.update()
    JOBS[key] = job
    return f"started: {job.status()} · {job.run_dir}", key


def _stop(output_dir: str) -> str:
    job = JOBS.get(str(Path(output_dir).expanduser()))
    return job.stop() if job else "nothing started from this page"


def _poll(output_dir: str, current_run: str):
    job = JOBS.get(str(Path(output_dir).expanduser()))
    if job is None:
        return gr.update(), gr.update(), gr.update()
    return f"{job.status()} · {job.run_dir}", job.log_tail(), str(job.run_folder()) or current_run


def build_launch_tab(env_path: gr.Textbox, run_folder: gr.Textbox) -> None:
    """The Launch tab's form, buttons, status and log; a started run's folder fills ``run_folder``."""
    mode = default_mode()
    boxes: dict[str, Any] = {"env": env_path}
    for row in ROWS:
        with gr.Row():
            for name in row:
                boxes[name] = _field_box(name, mode)
    form = [boxes[name] for name in FORM_FIELDS]
    with gr.Row(equal_height=True):
        show = gr.Button(value="Show command", elem_id="rlf-show-command", scale=1)
        start = gr.Button(value="Start", variant="primary", elem_id="rlf-start", scale=1)
        stop = gr.Button(value="Stop", variant="stop", elem_id="rlf-stop-run", scale=1)
        # right beside the buttons: a refused form or a run's end is seen without scrolling
        job_status = gr.Textbox(label="status", interactive=False, elem_id="rlf-job-status", scale=4)
    command = gr.Code(language="shell", label="the command", elem_id="rlf-command", wrap_lines=True)
    log = gr.Textbox(label="log", lines=14, max_lines=14, interactive=False, elem_id="rlf-log")
    output_dir = boxes["output_dir"]
    show.click(_command, form, [command])
    start.click(_command, form, [command]).then(_start, form, [job_status, output_dir])
    stop.click(_stop, [output_dir], [job_status])
    gr.Timer(2.0).tick(_poll, [output_dir, run_folder], [job_status, log, run_folder])
