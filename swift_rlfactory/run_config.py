"""One GRPO run described once: :class:`RunConfig`, its machine profiles, and the one ``swift rlhf`` command.

``swift-rlfactory train`` (its flags), the web UI's Launch form (its fields) and a run's ``command.sh`` are
all derived from :class:`RunConfig` and :func:`swift_rlhf`. The fields are documented in ``docs/run.md``.
"""

from __future__ import annotations

import math
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, Field, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from swift_rlfactory.bundled.models import DEFAULT_MODEL, ModelChoice
from swift_rlfactory.runs.folder import COMMAND

PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_ENV = PACKAGE_DIR / "bundled" / "calculator" / "env.yaml"
PLUGIN = PACKAGE_DIR / "plugin.py"
PLUGIN_NAME = "rlfactory"  # what the scheduler, the reward and the callback are registered as
ENV_VAR = "RLFACTORY_ENV"  # the environment YAML of rows without an ``env`` column
MODES = ("cpu", "colocate", "server")
PYTHON_LAUNCHER = (sys.executable, "-m", "swift.cli.rlhf")  # what `train` and command.sh run
# ...when NPROC_PER_NODE or NNODES ask for ranks: ms-swift's launcher, as `swift rlhf` runs it (torchrun).
RANKS_LAUNCHER = (sys.executable, "-m", "swift.cli.main", "rlhf")
# The variables that make ms-swift's launcher start ranks under torchrun (when either is set at all).
TORCHRUN_VARIABLES = ("NPROC_PER_NODE", "NNODES")
SWIFT_LAUNCHER = ("swift", "rlhf")  # what the web UI runs: ms-swift's own console script


def _knob(help: str, default: Any = None, *, kind: str = "", label: str = "") -> Any:
    """A documented field; ``kind`` (``count``, ``rate``, ``fraction``) says which numbers it accepts."""
    factory = {"default_factory": default} if callable(default) else {"default": default}
    return field(**factory, metadata={"help": help, "kind": kind, "label": label})


@dataclass
class RunConfig:
    """Every knob of one GRPO run with the rlfactory plugin; ``None`` takes the profile of the run's mode
    (:data:`CPU` or :data:`GPU`)."""

    model: str = _knob(
        "a bundled name, a local model folder, or a hub id (org/name)", DEFAULT_MODEL, label="model"
    )
    dataset: Path | str | None = _knob(
        "ms-swift JSONL dataset; none: 256 generated arithmetic problems (the calculator's)", label="dataset"
    )
    env: Path | str = _knob("environment YAML", DEFAULT_ENV, label="environment YAML")
    output_dir: Path | str = _knob(
        "parent of the run folders: each run gets OUTPUT_DIR/<timestamp>/", Path("output/rlfactory"),
        label="output_dir",
    )  # fmt: skip
    model_type: str | None = _knob("ms-swift --model_type (known for bundled models)")
    template: str | None = _knob("ms-swift --template (known for bundled models)")
    mode: str | None = _knob(
        "cpu (transformers generates), colocate (vLLM inside the trainer) or server (a `swift rollout` "
        "elsewhere); default: colocate if torch sees a GPU, else cpu",
        label="mode",
    )
    steps: int | None = _knob("optimizer steps (--max_steps)", kind="count", label="steps")
    lora_rank: int | None = _knob("LoRA rank; alpha is twice the rank", kind="count", label="LoRA rank")
    gpu_memory_utilization: float | None = _knob(
        "GPU memory fraction colocated vLLM may take", kind="fraction", label="vLLM memory fraction"
    )
    max_turns: int | None = _knob(
        "assistant turns per trajectory, at most the environment's limits.max_turns",
        kind="count",
        label="max turns",
    )
    num_generations: int | None = _knob(
        "trajectories sampled per prompt (the GRPO group)", kind="count", label="generations per prompt"
    )
    batch_size: int | None = _knob(
        "trajectories per step (--per_device_train_batch_size), whole groups only",
        kind="count",
        label="batch per device",
    )
    max_completion_length: int | None = _knob(
        "tokens per assistant turn", kind="count", label="max completion tokens"
    )
    max_length: int | None = _knob(
        "tokens of a whole trajectory, prompt and observations included", kind="count"
    )
    learning_rate: float | None = _knob("LoRA learning rate", kind="rate", label="learning rate")
    seed: int = _knob("seeds the generated dataset and ms-swift", 0)
    swift_args: list[str] = _knob(
        "more swift rlhf flags, appended last (later flags win)", list, label="more swift rlhf flags"
    )

    def validate(self) -> RunConfig:
        """Convert the number fields in place (a UI sends ``10.0``) and refuse, naming the field, a value
        that cannot start a run; ``None`` is left for the profile."""
        if self.mode not in (None, *MODES):
            raise ValueError(f"mode: one of {', '.join(MODES)}, not {self.mode!r}")
        for f in fields(self):
            kind = f.metadata.get("kind")
            value = getattr(self, f.name)
            if not kind or value is None:
                continue
            setattr(self, f.name, _checked(f.name, kind, value))
        return self

    def resolved(self, gpu: bool) -> RunConfig:
        """This config with its mode decided (``gpu``: is there one) and every ``None`` knob taken from the
        mode's profile."""
        mode = self.mode or ("colocate" if gpu else "cpu")
        profile = CPU if mode == "cpu" else GPU
        taken = {f.name: getattr(profile, f.name) for f in knobs() if getattr(self, f.name) is None}
        return replace(self, mode=mode, **taken)

    @property
    def dtype(self) -> str:
        """The model dtype the device takes: float32 on the CPU (no bfloat16 there), else bfloat16."""
        return "float32" if self.mode == "cpu" else "bfloat16"


def knobs() -> list[Field]:
    """The fields a profile sets (the numbers that depend on the machine)."""
    return [f for f in fields(RunConfig) if f.metadata.get("kind")]


def field_default(name: str) -> Any:
    """The declared default of the field ``name``."""
    f = next(f for f in fields(RunConfig) if f.name == name)
    return f.default_factory() if f.default is MISSING else f.default


def _checked(name: str, kind: str, value: Any) -> int | float:
    if value is None or value == "":
        raise ValueError(f"{name}: required")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: a number, not {value!r}") from None
    if not math.isfinite(number):
        raise ValueError(f"{name}: a finite number, not {value}")
    if kind == "count":
        if not number.is_integer() or number < 1:
            raise ValueError(f"{name}: a whole number of at least 1, not {value}")
        return int(number)
    if kind == "fraction" and not 0 < number <= 1:
        raise ValueError(f"{name}: between 0 and 1")
    if number <= 0:
        raise ValueError(f"{name}: must be above 0, not {number}")
    return number


# A step of the 0.5B model on 2 CPU cores: ~15 s per prefill and ~0.7 s per decoded token for a batch of 4
# (no bfloat16 speed-up without AVX-512), so 4 trajectories of 2 short turns and one LoRA update.
CPU = RunConfig(
    mode="cpu", steps=3, num_generations=4, batch_size=4, max_turns=2, max_completion_length=64,
    max_length=2048, learning_rate=1e-4, lora_rank=8,
)  # fmt: skip
# The settings of the committed single-GPU runs (examples/deepsearch/train.sh, benchmarks/); max_turns
# None: the environment's.
GPU = RunConfig(
    mode="colocate", steps=50, num_generations=8, batch_size=32, max_turns=None, max_completion_length=256,
    max_length=4096, learning_rate=5e-5, lora_rank=32, gpu_memory_utilization=0.35,
)  # fmt: skip


def gpu_available() -> bool:
    """Whether torch sees a CUDA GPU (imports torch: call once)."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def default_mode() -> str:
    """The mode a run on this machine takes when none is given."""
    return "colocate" if gpu_available() else "cpu"


def plugin_flags(max_turns: int) -> list[str]:
    """The flags that plug swift-rlfactory into ``swift rlhf`` (and ``swift rollout``)."""
    return [
        "--external_plugins", str(PLUGIN),
        "--multi_turn_scheduler", PLUGIN_NAME, "--max_turns", str(max_turns),
        "--reward_funcs", PLUGIN_NAME, "--callbacks", PLUGIN_NAME,
    ]  # fmt: skip


def device_flags(config: RunConfig) -> list[str]:
    """The flags the run's device decides: dtype, generation backend, workers."""
    flags = ["--torch_dtype", config.dtype, "--dataloader_num_workers", "0", "--dataset_num_proc", "1"]
    if config.mode == "cpu":
        # Transformers generates; recomputing activations would only cost time where memory is plentiful.
        return flags + ["--use_vllm", "false", "--gradient_checkpointing", "false"]
    if config.mode == "server":
        return flags + ["--use_vllm", "true", "--vllm_mode", "server"]
    return flags + [
        "--use_vllm", "true", "--vllm_mode", "colocate",
        "--vllm_gpu_memory_utilization", str(config.gpu_memory_utilization),
        "--vllm_max_model_len", str(config.max_length),
        # CUDA graphs, with vLLM's memory released while the trainer steps: 3.3x faster 0 s steps at 0.45x
        # the peak GPU memory of eager mode (benchmarks/generation/RESULTS.md).
        "--vllm_enforce_eager", "false", "--sleep_level", "1",
    ]  # fmt: skip


@dataclass(frozen=True)
class SwiftCommand:
    """A ``swift rlhf`` command: its argv and the environment variables it needs."""

    argv: list[str]
    env_vars: dict[str, str]

    def shell(self, argv: Sequence[str] | None = None) -> str:
        """One shell line: the variables, then the command (``argv`` shown instead when given)."""
        words = shlex.join(self.argv if argv is None else argv)
        return " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env_vars.items()) + " \\\n  " + words


def swift_rlhf(
    config: RunConfig,
    model: ModelChoice,
    dataset: str,
    run_dir: Path,
    env_max_turns: int | None = None,
    launcher: Sequence[str] = PYTHON_LAUNCHER,
) -> SwiftCommand:
    """The one ``swift rlhf --rlhf_type grpo`` command of a resolved ``config`` (see :meth:`RunConfig.resolved`)
    writing into ``run_dir``; ``config.swift_args`` come last, so they win."""
    c = config
    ranks = ranks_per_node(os.environ)
    if ranks is not None and tuple(launcher) == PYTHON_LAUNCHER:
        launcher = RANKS_LAUNCHER  # `python -m swift.cli.rlhf` would run one process whatever they say
    max_turns = c.max_turns or env_max_turns or 1
    if env_max_turns:
        max_turns = min(max_turns, env_max_turns)
    batch_size = max(c.batch_size, c.num_generations)
    batch_size -= batch_size % c.num_generations  # GRPO groups must not straddle batches
    model_type = c.model_type or model.model_type
    template = c.template or model.template
    model_path = str(model.path) if model.local and model.path else str(model.hub_id or model.given)
    argv = [*launcher, "--rlhf_type", "grpo", "--model", model_path]
    if model_type:
        argv += ["--model_type", model_type]
    if template:
        argv += ["--template", template]
    argv += ["--dataset", dataset, *plugin_flags(max_turns)]
    argv += [
        "--tuner_type", "lora", "--lora_rank", str(c.lora_rank), "--lora_alpha", str(2 * c.lora_rank),
        "--target_modules", "all-linear",
        "--beta", "0",  # no reference model: half the memory and time, usual for agentic GRPO
        "--temperature", "1.0",
        "--stop_words", "</answer>",  # the episode's last word: small models ramble on after it
        "--num_generations", str(c.num_generations),
        "--per_device_train_batch_size", str(batch_size),
        "--max_completion_length", str(c.max_completion_length),
        "--max_length", str(c.max_length),
        "--learning_rate", str(c.learning_rate),
        "--max_steps", str(c.steps),
        "--logging_steps", "1", "--save_steps", str(c.steps),
        "--output_dir", str(run_dir), "--add_version", "false",
        "--seed", str(c.seed),
        "--report_to", "none",
        "--check_model", "false",  # skip the hub's "is there a newer model" check: works offline
        *device_flags(c),
        # CPU ranks talk over gloo; --ddp_backend gloo alone stops at an ms-swift 4.6 assertion in the GRPO
        # step (docs/scaling.md, "CPU ranks"), --use_cpu true with it runs
        *(("--use_cpu", "true", "--ddp_backend", "gloo") if ranks is not None and c.mode == "cpu" else ()),
        *c.swift_args,
    ]  # fmt: skip
    env_vars = {
        ENV_VAR: str(Path(c.env).expanduser().resolve()),
        "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    if model.local:  # no library may try a hub
        env_vars |= {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    if c.mode == "cpu" and "OMP_NUM_THREADS" not in os.environ:  # the cores shared among the node's ranks
        env_vars["OMP_NUM_THREADS"] = str(max(1, len(os.sched_getaffinity(0)) // (ranks or 1)))
    env_vars |= {name: os.environ[name] for name in TORCHRUN_VARIABLES if name in os.environ}
    return SwiftCommand(argv, env_vars)


def ranks_per_node(environ: Mapping[str, str]) -> int | None:
    """The ranks ms-swift's launcher starts on this node under torchrun for ``environ`` (``NPROC_PER_NODE``,
    1 if only ``NNODES`` is set), or ``None`` when neither is set and it runs one plain process."""
    if not any(name in environ for name in TORCHRUN_VARIABLES):
        return None
    value = environ.get("NPROC_PER_NODE", "1").strip()
    return int(value) if value.isdigit() and int(value) > 0 else 1


def flag_value(args: Sequence[str], flag: str) -> str | None:
    """The last value ``args`` give ``flag`` (``--flag V`` or ``--flag=V``), if any."""
    value = None
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value


def write_command_sh(run_dir: Path, command: SwiftCommand) -> Path:
    """``run_dir/command.sh``: the run's command, executable from any directory; run again, it writes a
    new run folder beside ``run_dir`` (arguments given to it are appended, e.g. ``--resume_from_checkpoint``)."""
    argv = list(command.argv)
    at = len(argv) - 1 - argv[::-1].index("--output_dir")
    argv[at + 1] = "@OUT@"
    words = shlex.join(argv).replace("@OUT@", '"$out"')
    variables = " ".join(f"{k}={shlex.quote(v)}" for k, v in command.env_vars.items())
    parent = shlex.quote(str(run_dir.parent.resolve()))
    script = (
        "#!/usr/bin/env bash\n"
        f"# The command of run {run_dir.name}; run again, it writes a new folder beside it.\n"
        "set -e\n"
        f'out={parent}/"$(date +%Y%m%d-%H%M%S)-rerun"\n'
        'n=1; while ! mkdir "$out$( [ $n -gt 1 ] && echo -$n)" 2>/dev/null; do n=$((n + 1)); done\n'
        '[ $n -gt 1 ] && out="$out-$n"\n'
        'echo "run folder: $out" >&2\n'
        f'{variables} \\\n  {words} "$@"\n'
    )
    path = run_dir / COMMAND
    path.write_text(script)
    path.chmod(0o755)
    return path


def fields_table() -> str:
    """The fields of :class:`RunConfig` as the Markdown table of ``docs/run.md`` (a test keeps them equal)."""
    rows = ["| field | `train` flag | CPU | GPU | what it is |", "| --- | --- | --- | --- | --- |"]
    for f in fields(RunConfig):
        flag = "after `--`" if f.name == "swift_args" else f"`--{f.name.replace('_', '-')}`"
        if f.metadata.get("kind"):
            cpu, gpu = (_shown(getattr(profile, f.name)) for profile in (CPU, GPU))
        else:
            cpu = gpu = _shown(field_default(f.name))
        rows.append(f"| `{f.name}` | {flag} | {cpu} | {gpu} | {f.metadata['help']} |")
    return "\n".join(rows) + "\n"


def _shown(value: Any) -> str:
    if value == DEFAULT_ENV:
        return "the bundled calculator"
    return "" if value in (None, []) else f"`{value:g}`" if isinstance(value, float) else f"`{value}`"
