"""``swift-rlfactory train``: one command from a fresh install to a GRPO run of a tool-using agent.

It resolves a :class:`~swift_rlfactory.run_config.RunConfig` (the model, the data, the environment, the
device's profile), runs the one ``swift rlhf`` command built from it in a subprocess, prints the reward of
every step as ms-swift logs it, and shows one trajectory at the end. What a run folder holds and how to
run it again is in ``docs/run.md``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from swift_rlfactory.bundled.arithmetic import build_dataset
from swift_rlfactory.bundled.models import ModelChoice, check_hub_id, choose_model
from swift_rlfactory.data import jsonl
from swift_rlfactory.eval.choose import gain_text
from swift_rlfactory.run_config import (
    DEFAULT_ENV,
    RunConfig,
    SwiftCommand,
    flag_value,
    gpu_available,
    ranks_per_node,
    swift_rlhf,
    write_command_sh,
)
from swift_rlfactory.runs.folder import (
    COMMAND,
    LOGGING,
    SWIFT_LOG,
    TRAINING_DATA,
    TRAJECTORIES,
    last_checkpoint,
    new_run_dir,
)
from swift_rlfactory.runs.log import read_steps
from swift_rlfactory.runs.validation import STOP_FILE, STOP_FILE_VAR
from swift_rlfactory.validation import EvalModel, Validator, ValOptions

from .env.config import EnvConfigError
from .env.environment import Environment, validate_env_files


@dataclass(frozen=True)
class Plan:
    """A fully resolved run: the command, its environment variables, where its logs go, and its config."""

    command: list[str]
    env_vars: dict[str, str]
    run_dir: Path
    config: RunConfig
    use_vllm: bool


def plan_run(
    options: RunConfig,
    model: ModelChoice,
    dataset: Path,
    run_dir: Path,
    use_vllm: bool,
    env_max_turns: int,
) -> Plan:
    """The ``swift rlhf`` command for ``options``: the profile's defaults, overridden by what was asked."""
    config = options.resolved(gpu=use_vllm)
    command = swift_rlhf(config, model, str(dataset), run_dir, env_max_turns)
    logs = Path(flag_value(options.swift_args, "--output_dir") or run_dir)
    return Plan(command.argv, command.env_vars, logs, config, config.mode != "cpu")


# -- checks before anything is fetched or loaded ----------------------------------------------------------
def check_dataset(dataset: Path) -> None:
    """Fail at once, naming the row, for a missing dataset or a row whose ``env`` file cannot be used.

    Rows may name their environment in an ``env`` column (resolved from the working directory, as the
    plugin resolves it). Each distinct file is loaded once here - its fields, its tools' imports, its
    reward names - so a typo in row 9,000 stops the run now, not hours in when that row is sampled.
    Only JSON Lines and JSON files are read; other formats are left to ms-swift.
    """
    if not dataset.exists():
        raise ValueError(f"--dataset {dataset}: no such file")
    if dataset.is_dir() or dataset.suffix not in (".jsonl", ".json"):
        return
    envs: dict[str, int] = {}
    for number, row in enumerate(_rows(dataset), start=1):
        value = row.get("env") if isinstance(row, dict) else None
        if isinstance(value, str) and value not in envs:
            envs[value] = number
    for value, number in envs.items():
        problems = validate_env_files([value])
        if problems:
            raise EnvConfigError(f"{dataset} row {number}: env {value!r}: {problems[0]}")


def _rows(dataset: Path) -> list:
    text = dataset.read_text()
    if dataset.suffix == ".json":
        data = json.loads(text)
        return data if isinstance(data, list) else []
    rows = []
    for number, line in enumerate(jsonl.lines(text), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise ValueError(f"--dataset {dataset} line {number}: not JSON ({exc.msg})") from None
    return rows


# -- running -------------------------------------------------------------------------------------------
def check_launcher(environ: Mapping[str, str]) -> None:
    """Several ranks are ``train``'s to start (``NPROC_PER_NODE``, ``NNODES``: ms-swift's launcher runs
    torchrun); refuse a ``WORLD_SIZE`` above 1 without them: ``train`` itself is then one of several copies
    (started by torchrun or a scheduler), each of which would make a run folder of its own."""
    value = environ.get("WORLD_SIZE", "").strip()
    if value and value != "1" and ranks_per_node(environ) is None:
        raise ValueError(
            f"WORLD_SIZE={value}: swift-rlfactory train seems to be one of several copies started by a "
            "launcher, and each copy would write a run folder of its own. Start one train with "
            "NPROC_PER_NODE=<ranks> (and NNODES, NODE_RANK, MASTER_ADDR, MASTER_PORT across machines): it "
            "runs the ranks under ms-swift's launcher; recipes: docs/scaling.md"
        )


def check_inputs(options: RunConfig) -> ModelChoice:
    """Everything a user can get wrong stops the run here, before any model is fetched or loaded: a train
    started as one of several copies, the model name (a hub id: whether the hub knows it), the
    environment file, the dataset and its per-row environments."""
    check_launcher(os.environ)
    model = choose_model(options.model)
    use_hf = os.environ.get("USE_HF", "").lower() in ("1", "true") or (
        (flag_value(options.swift_args, "--use_hf") or "").lower() == "true"
    )
    check_hub_id(model, use_hf=use_hf)
    env = Path(options.env)
    if not env.is_file():
        raise ValueError(f"--env {env}: no such file" if not env.exists() else f"--env {env}: not a file")
    if options.dataset is None and env.resolve() != DEFAULT_ENV:
        raise ValueError(f"give --dataset for {env}: problems are generated for the calculator only")
    if options.dataset is not None:
        check_dataset(Path(options.dataset))
    return model


def train(
    options: RunConfig,
    console: Console | None = None,
    *,
    verbose: bool = False,
    dry_run: bool = False,
    validation: ValOptions | None = None,
) -> int:
    """Resolve the model and data, run ``swift rlhf``, report rewards and a trajectory; the exit code.

    A dry run prints the command and leaves nothing behind (no run folder, no download). ``validation``:
    score each checkpoint on a val set and its shifts beside training (:mod:`swift_rlfactory.validation`)."""
    console = console or Console()
    model = check_inputs(options)
    if validation is not None:
        validation.check()
    with Environment.load(options.env) as env:  # a field, a tool that won't import, a server that won't start
        env_name, env_max_turns, tool_names = env.name, env.max_turns, list(env.executor.tools)

    use_vllm = options.mode != "cpu" if options.mode else gpu_available()
    run_dir = new_run_dir(Path(options.output_dir).resolve(), create=not dry_run)
    if model.bundled is not None and not dry_run:
        console.print(f"[bold]model[/] {escape(model.bundled.description)}", soft_wrap=True)
        model.fetch(say=lambda msg: console.print(f"  [dim]{escape(msg)}", soft_wrap=True))
    if options.dataset is not None:
        dataset, data_note = Path(options.dataset).resolve(), str(options.dataset)
    else:
        dataset = run_dir / TRAINING_DATA
        data_note = f"{dataset} (256 generated arithmetic problems)"
        if not dry_run:
            build_dataset(dataset, seed=options.seed)

    plan = plan_run(options, model, dataset, run_dir, use_vllm, env_max_turns)
    if dry_run:
        console.print(plan_text(plan), markup=False, highlight=False, soft_wrap=True)
        return 0
    write_command_sh(run_dir, SwiftCommand(plan.command, plan.env_vars))
    device = (
        "GPU, colocated vLLM"
        if plan.use_vllm
        else f"CPU ({plan.env_vars.get('OMP_NUM_THREADS') or os.environ.get('OMP_NUM_THREADS', '?')} threads)"
    )
    console.print(
        f"[bold]swift-rlfactory train[/] · environment [cyan]{escape(env_name)}[/] (tools: {escape(', '.join(tool_names))})"
        f" · {plan.config.steps} GRPO steps on {device}",
        soft_wrap=True,
    )
    console.print(f"  model    {escape(plan.command[plan.command.index('--model') + 1])}", soft_wrap=True)
    console.print(f"  dataset  {escape(data_note)}", soft_wrap=True)
    console.print(
        f"  run      {escape(str(plan.run_dir))}  ({COMMAND}, {SWIFT_LOG}, {LOGGING}, {TRAJECTORIES})",
        soft_wrap=True,
    )
    validator = None
    if validation is not None:
        validator = Validator(validation, eval_model(plan, options.env), plan.run_dir, console)
        plan = replace(plan, env_vars={**plan.env_vars, STOP_FILE_VAR: str(plan.run_dir / STOP_FILE)})
        validator.start()
    try:
        returncode, elapsed = _run(plan, verbose, console)
    except KeyboardInterrupt:
        console.print(stopped_note(plan.run_dir, run_dir / COMMAND, plan.config.steps), soft_wrap=True)
        return 130
    if validator is not None:
        console.print("validating the checkpoints left to score", soft_wrap=True)
        _print_validation(validator.finish(), console)
    if returncode != 0:
        log = plan.run_dir / SWIFT_LOG
        if log.is_file():
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
            console.print(Panel(Text(tail), title=f"last lines of {log}", border_style="red"))
        console.print(
            f"[red]swift rlhf exited with {returncode}[/] after {elapsed:.0f} s; run it again (into a new "
            f"folder beside this one) with {run_dir / COMMAND}",
            soft_wrap=True,
        )
        return 1
    _print_summary(plan.run_dir, elapsed, console)
    return 0


def eval_model(plan: Plan, env: Path | str) -> EvalModel:
    """The model the plan trains, as ``swift-rlfactory eval`` loads it for the validation beside training."""
    model_type, template = flag_value(plan.command, "--model_type"), flag_value(plan.command, "--template")
    extra = {k: v for k, v in plan.env_vars.items() if k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    return EvalModel(Path(env), plan.command[plan.command.index("--model") + 1], model_type, template, extra)


def _print_validation(summary: dict, console: Console) -> None:
    best, alarms, gain = summary["best_checkpoint"], summary["alarms"], summary.get("gain")
    test = "" if gain is None else f" (against step 0 {gain_text(gain)})"
    if best is not None:
        console.print(
            f"best checkpoint by {summary['chosen_by']}: {escape(best)} ({summary['score']:.4f}){escape(test)}"
        )
    elif summary.get("chosen") is not None:
        console.print(
            f"no checkpoint beat the starting model by {summary['chosen_by']}{escape(test)}: keep it"
        )
    if alarms:
        stop = " · training stopped on it" if summary["stopped_on_alarm"] else ""
        console.print(f"[bold red]{len(alarms)} validation alarm(s)[/]{stop} (validation.json)")


def plan_text(plan: Plan) -> str:
    """The plan as the shell line a dry run prints."""
    return SwiftCommand(plan.command, plan.env_vars).shell()


def stopped_note(run_dir: Path, command_sh: Path, steps: int) -> str:
    """What an interrupted run kept and how to go on: the folder, the last adapter saved, the command."""
    logged = len(read_steps(run_dir / "logging.jsonl"))
    checkpoint = last_checkpoint(run_dir)
    lines = [f"interrupted after {logged} of {steps} logged steps; the partial run is in {run_dir}"]
    if checkpoint is None:
        lines.append(
            f"no adapter was saved (one is saved after step {steps}); start again with: {command_sh}"
        )
    else:
        lines.append(f"adapter saved: {checkpoint}")
        lines.append(
            f"resume (into a new folder beside it): {command_sh} --resume_from_checkpoint {checkpoint}"
        )
    return "[yellow]" + escape("\n".join(lines)) + "[/]"


# What ms-swift is doing, read off its log: (a line it prints when a phase starts, what the user sees).
PHASES: tuple[tuple[str, str], ...] = (
    ("Successfully imported external_plugins", "ms-swift imported the plugin; reading arguments"),
    ("Global seed set", "loading the model"),
    ("train_dataset:", "encoding the dataset"),
    ("lora_config:", "adding LoRA adapters"),
    ("The logging file will be saved", "step 1: first rollout (generation + tool calls), then the update"),
    ("Saving model checkpoint", "saving the LoRA adapter"),
)


def phase_of(log_text: str) -> str | None:
    """The latest phase whose marker appears in ``log_text`` (ms-swift's console output), if any."""
    latest: tuple[int, str] | None = None
    for marker, label in PHASES:
        at = log_text.rfind(marker)
        if at >= 0 and (latest is None or at > latest[0]):
            latest = (at, label)
    return latest[1] if latest else None


def _run(plan: Plan, verbose: bool, console: Console) -> tuple[int, float]:
    """Run the command, printing each logged step as it appears; returns (exit code, seconds).

    Between steps a status line says which phase ms-swift is in (read off ``swift.log``) and for how long,
    so the minutes before the first step are not silent; where the console is no terminal, each phase is
    printed as a line when it starts instead.
    """
    env = {**os.environ, **plan.env_vars}
    start = time.monotonic()
    printed = 0
    phase, phase_start = "starting ms-swift (imports take a while)", start
    log_path = plan.run_dir / SWIFT_LOG
    with open(log_path, "w") as log, open(log_path, errors="replace") as follow:
        proc = subprocess.Popen(
            plan.command, env=env, stdout=subprocess.PIPE if verbose else log, stderr=subprocess.STDOUT
        )
        status = console.status(phase)
        if verbose:  # show ms-swift's output and keep it in swift.log too
            threading.Thread(target=_tee, args=(proc.stdout, log), daemon=True).start()
        else:
            status.start()
        try:
            while proc.poll() is None:
                time.sleep(1.0)
                printed = _print_new_steps(plan.run_dir / LOGGING, printed, console)
                seen = phase_of(follow.read())  # only what ms-swift wrote since the last look
                if printed >= plan.config.steps:  # the last step is logged: ms-swift saves and exits
                    seen = "saving the LoRA adapter"
                elif printed:
                    seen = f"step {printed + 1}/{plan.config.steps}: rollout (generation + tool calls) and update"
                if seen and seen != phase:
                    phase, phase_start = seen, time.monotonic()
                    if not console.is_terminal:  # no live status line there (a pipe, CI): one line per phase
                        console.print(f"  {phase} (run {phase_start - start:.0f} s)", markup=False)
                now = time.monotonic()
                status.update(f"{phase} · {now - phase_start:.0f} s (run {now - start:.0f} s)")
        except KeyboardInterrupt:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
        finally:
            status.stop()
    _print_new_steps(plan.run_dir / LOGGING, printed, console)
    return proc.returncode, time.monotonic() - start


def _tee(stream, log) -> None:
    for line in iter(stream.readline, b""):
        sys.stdout.buffer.write(line)
        sys.stdout.flush()
        log.write(line.decode(errors="replace"))
        log.flush()


def format_step(record: dict) -> str:
    """One line for one logged step: reward, its components and what the tools did."""
    parts = [
        f"step {record.get('global_step/max_steps', '?'):>5}",
        f"reward {record['reward']:.3f} ± {record.get('reward_std', 0):.3f}",
    ]
    components = sorted((k.split("/", 1)[1], v) for k, v in record.items() if k.startswith("rlfactory/"))
    if components:
        parts.append(" ".join(f"{name} {value:.2f}" for name, value in components))
    if "tools/calls_per_trajectory" in record:
        parts.append(f"tool calls/traj {record['tools/calls_per_trajectory']:.2f}")
    if "turns" in record:
        parts.append(f"turns {record['turns']:.2f}")
    if "step_time" in record:
        parts.append(f"{record['step_time']:.0f} s")
    return " · ".join(parts)


def _print_new_steps(logging_jsonl: Path, printed: int, console: Console) -> int:
    steps = read_steps(logging_jsonl)
    for record in steps[printed:]:
        console.print(escape(format_step(record)), soft_wrap=True)
    return max(printed, len(steps))


# -- report --------------------------------------------------------------------------------------------
def pick_trajectory(trajectories: list[dict]) -> dict | None:
    """The trajectory to show: from the last step, the best reward, preferring one that called a tool."""
    if not trajectories:
        return None
    last_step = max((t.get("step") or 0) for t in trajectories)
    last = [t for t in trajectories if (t.get("step") or 0) == last_step]
    return max(last, key=lambda t: (bool(t.get("tool_calls")), t.get("rewards", {}).get("total", 0.0)))


def render_trajectory(trajectory: dict) -> Panel:
    """A trajectory as a rich panel: each turn, each tool call with its observation, and the rewards."""
    lines = Text()
    calls_by_turn: dict[int, list[dict]] = {}
    for call in trajectory.get("tool_calls", []):
        calls_by_turn.setdefault(call.get("turn", 0), []).append(call)
    turn = 0
    for message in trajectory.get("messages", []):
        role, content = message.get("role"), (message.get("content") or "").strip()
        if role == "system":
            lines.append(
                f"system     {len(content)} characters: the environment's prompt and tool schemas\n", "dim"
            )
        elif role == "user":
            lines.append("user       ", "bold green").append(content + "\n")
        elif role == "assistant":
            turn += 1
            lines.append("assistant  ", "bold blue").append(content + "\n")
            for call in calls_by_turn.get(turn, []):
                arguments = json.dumps(call.get("arguments"), ensure_ascii=False)
                outcome = f"error: {call['error']}" if call.get("error") else call.get("observation", "")
                latency = call.get("latency_s")
                timing = f"  ({latency * 1000:.1f} ms)" if isinstance(latency, (int, float)) else ""
                lines.append("  ↳ tool   ", "magenta").append(f"{call.get('tool')}({arguments}) → {outcome}")
                lines.append(timing + "\n", "dim")
        # tool messages are shown with the call that produced them
    row = trajectory.get("row", {})
    if "solution" in row:
        lines.append("solution   ", "bold").append(str(row["solution"]) + "\n")
    rewards = trajectory.get("rewards", {})
    detail = " · ".join(f"{k} {v:.2f}" for k, v in rewards.items() if k != "total")
    lines.append("reward     ", "bold").append(f"{rewards.get('total', 0.0):.2f}  ({detail})")
    # A trajectory's step is the update it feeds, counted from 1 as the console and logging.jsonl count.
    step = trajectory.get("step")
    title = f"sample trajectory · step {step if isinstance(step, int) else '?'} · stop: {trajectory.get('stop_reason')}"
    return Panel(lines, title=title, title_align="left")


def _print_summary(run_dir: Path, elapsed: float, console: Console) -> None:
    steps = read_steps(run_dir / LOGGING)
    if len(steps) > 1:
        rewards = [record["reward"] for record in steps]
        console.print(
            f"reward {rewards[0]:.3f} → {rewards[-1]:.3f} over {len(steps)} steps (best {max(rewards):.3f})"
        )
    trajectories_path = run_dir / TRAJECTORIES
    if trajectories_path.is_file():
        from swift_rlfactory.runs.log import last_step_trajectories

        count, trajectories = last_step_trajectories(trajectories_path)  # one step's lines, not the log's
        sample = pick_trajectory(trajectories)
        if sample is not None:
            console.print(render_trajectory(sample))
        console.print(f"{count} trajectories in {trajectories_path}")
    adapter = last_checkpoint(run_dir)
    if adapter is not None:
        console.print(f"LoRA adapter: {adapter}")
    console.print(f"[bold green]done[/] in {elapsed:.0f} s")
