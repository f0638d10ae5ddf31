"""Rollout benchmark: ``rlfactory`` against a synchronous baseline, across tool latencies.

Two sections, both written to ``--out`` as ``rollout.json`` (everything) and ``rollout.md`` (tables):

**tool phase** - ms-swift's own multi-turn driver (``swift.rollout.agent_loop.run_multi_turn``) drives a
scheduler over N trajectories whose every turn is model text calling the environment's tools, for T tool
turns, against the environment's real MCP server with a fixed latency L. Generation is replaced by
returning that text at once, so the driver's wall time is the tool phase: parsing, executing, observing,
appending. Its limit is T x L (every call of a turn in flight together); the table also gives the ratio to
the zero-latency time plus T x L, which is the same limit with the irreducible CPU cost counted.

**grpo** - the same ``swift rlhf --rlhf_type grpo`` command with ``--multi_turn_scheduler sync_tools`` (a,
the baseline: ``benchmarks/baseline_scheduler.py``) and ``rlfactory`` (b), alternated a b b a ... with the
same seed, for every (latency, batch, max turns) of the grid. Step times are ms-swift's ``step_time`` from
``logging.jsonl``; generation and tool-phase times per step come from ``rollout_probe`` (clocks around the
scheduler's hooks). The first ``--warmup-steps`` steps of every run are left out of the medians. The limit
of a step is the median step time at zero latency plus (turns with tool calls) x latency.

    python benchmarks/rollout.py --device cpu --out /tmp/rollout-cpu                 # < 10 min, 2 cores
    python benchmarks/rollout.py --device gpu --model /tmp/qwen05 --model-type qwen2 --template qwen2_5 \\
        --out /tmp/rollout-gpu --budget-s 540                                          # resumable
    python benchmarks/rollout.py ... --dry-run                                         # print the commands

Runs are cached in ``--work`` (one JSON per finished run): the same command again skips them, so a grid
longer than one sitting is finished by repeating the command.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import platform
import random
import shlex
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
PLUGIN = BENCH / "baseline_plugin.py"
LATENCY_VAR = "RLFACTORY_BENCH_LATENCY"
SCHEDULERS = ("sync_tools", "rlfactory")  # (a) the baseline, (b) ours
SEED = 42


# -- what the model is asked ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Task:
    """A prompt set, the environment that answers it, and the model text of one tool turn and an answer."""

    name: str
    env: Path
    tool_turn: str  # what the model writes in a tool turn (the tool-phase section replays it)
    answer: str
    rows: Callable[[int], list[dict[str, Any]]]  # n dataset rows


def _agent_rows(n: int) -> list[dict[str, Any]]:
    pairs = [(3, 4), (2, 5), (6, 1), (8, 9)]  # the tiny model's SFT prompts (tests/conftest.py AGENT_PAIRS)
    return [
        {"messages": [{"role": "user", "content": f"What is {a} + {b}?"}], "solution": str(a + b)}
        for a, b in (pairs[i % len(pairs)] for i in range(n))
    ]


def _calc_rows(n: int) -> list[dict[str, Any]]:
    rng = random.Random(0)
    rows = []
    for _ in range(n):
        a, b, c = rng.randint(10, 999), rng.randint(10, 999), rng.randint(2, 99)
        rows.append(
            {
                "messages": [{"role": "user", "content": f"What is ({a} + {b}) * {c}?"}],
                "solution": str((a + b) * c),
            }
        )
    return rows


TASKS = {
    # CPU: the tiny Qwen3 of tests/conftest.py, taught to call `add` and `convert` in one turn, then answer.
    # `tool_turn` is its taught turn for "What is 3 + 4?" (tests/conftest.py agent_example).
    "agent": Task(
        "agent",
        BENCH / "environments" / "slow_agent" / "env.yaml",
        '<tool_call>\n{"name": "add", "arguments": {"a": 3, "b": 4}}\n</tool_call>\n'
        '<tool_call>\n{"name": "convert", "arguments": {"value": 3, "from_unit": "km", "to_unit": "m"}}\n</tool_call>',
        "<answer>7</answer>",
        _agent_rows,
    ),
    # GPU: an instruct model and the calculator behind an MCP server (benchmarks/environments/slow_calc).
    "calc": Task(
        "calc",
        BENCH / "environments" / "slow_calc" / "env.yaml",
        '<tool_call>\n{"name": "calculate", "arguments": {"expression": "(512 + 230) * 17"}}\n</tool_call>',
        "<answer>12614</answer>",
        _calc_rows,
    ),
}


# -- the GRPO command ---------------------------------------------------------------------------------------
CPU_FLAGS = [
    "--use_vllm", "false",
    "--tuner_type", "lora", "--lora_rank", "8", "--target_modules", "all-linear",
    "--torch_dtype", "float32", "--temperature", "0.7",
    "--num_generations", "2", "--max_completion_length", "96", "--max_length", "2048",
]  # fmt: skip
GPU_FLAGS = [  # ../shared/gpu/README.md: colocated vLLM, LoRA r16
    "--use_vllm", "true", "--vllm_mode", "colocate", "--vllm_gpu_memory_utilization", "0.3",
    "--vllm_enforce_eager", "true", "--vllm_max_model_len", "4096",
    "--tuner_type", "lora", "--lora_rank", "16", "--lora_alpha", "32", "--target_modules", "all-linear",
    "--torch_dtype", "bfloat16", "--beta", "0.0", "--temperature", "1.0",
    "--num_generations", "8", "--max_completion_length", "256", "--max_length", "2048",
]  # fmt: skip


@dataclass(frozen=True)
class Cell:
    """One point of the GRPO grid."""

    latency: float
    batch: int  # completions per step (--per_device_train_batch_size)
    max_turns: int

    def name(self, scheduler: str) -> str:
        """Run name, also the file name of its cache."""
        return f"{scheduler}-L{self.latency:g}-b{self.batch}-t{self.max_turns}"


def swift_command(
    args: argparse.Namespace, cell: Cell, scheduler: str, dataset: Path, out_dir: Path
) -> list[str]:
    """The ``swift rlhf`` command line of one run."""
    return [
        sys.executable, "-m", "swift.cli.rlhf", "--rlhf_type", "grpo",
        "--model", str(args.model), "--model_type", args.model_type, "--template", args.template,
        "--dataset", str(dataset), "--external_plugins", str(PLUGIN),
        "--multi_turn_scheduler", scheduler, "--max_turns", str(cell.max_turns),
        "--reward_funcs", "rlfactory", "--callbacks", "rlfactory", "rollout_probe",
        *(CPU_FLAGS if args.device == "cpu" else GPU_FLAGS),
        "--per_device_train_batch_size", str(cell.batch),
        "--max_steps", str(args.steps), "--logging_steps", "1", "--save_strategy", "no",
        "--learning_rate", "1e-4", "--seed", str(SEED),
        "--dataloader_num_workers", "0", "--dataset_num_proc", "1",
        "--check_model", "false", "--report_to", "none",
        "--output_dir", str(out_dir), "--add_version", "false",
    ]  # fmt: skip


def run_env(args: argparse.Namespace, task: Task, cell: Cell) -> dict[str, str]:
    """Environment variables of one run (the latency reaches the MCP server through the env file)."""
    env = {
        "RLFACTORY_ENV": str(task.env),
        LATENCY_VAR: f"{cell.latency:g}",
        "PYTHONUNBUFFERED": "1",
    }
    if args.device == "cpu":
        env["OMP_NUM_THREADS"] = "1"
    return env


def shown(env: dict[str, str], cmd: list[str]) -> str:
    """A command as one would type it in the repository root."""
    text = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shlex.join(cmd)
    return text.replace(sys.executable, "python").replace(f"{ROOT}/", "")


def run_grpo(
    args: argparse.Namespace, task: Task, cell: Cell, scheduler: str, dataset: Path, timeout_s: float | None
) -> dict[str, Any]:
    """One ``swift rlhf`` run; per-step rows joined from ``logging.jsonl`` and the probe's timeline."""
    out_dir = args.work / "runs" / cell.name(scheduler)
    if out_dir.exists():
        for f in out_dir.iterdir():
            if f.is_file():
                f.unlink()
    out_dir.mkdir(parents=True, exist_ok=True)
    cmd = swift_command(args, cell, scheduler, dataset, out_dir)
    log = out_dir / "run.log"
    t0 = time.perf_counter()
    env = {**os.environ, **run_env(args, task, cell)}
    with log.open("w") as f:  # own process group, so a timeout also ends its MCP servers
        proc = subprocess.Popen(cmd, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            returncode = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            returncode = "timeout"
    wall = time.perf_counter() - t0
    result: dict[str, Any] = {"scheduler": scheduler, **cell.__dict__, "wall_s": round(wall, 1)}
    if returncode != 0:
        result["error"] = f"exit {returncode}: " + log.read_text()[-3000:]
        return result
    logs = [json.loads(line) for line in (out_dir / "logging.jsonl").read_text().splitlines() if line.strip()]
    steps = [r for r in logs if "step_time" in r]
    timeline = [json.loads(line) for line in (out_dir / "rollout_timeline.jsonl").read_text().splitlines()]
    rows = []
    for i, log_row in enumerate(steps):
        probe = timeline[i] if i < len(timeline) else {}
        step_s = float(log_row["step_time"])
        tokens = float(log_row.get("completions/mean_length", 0.0)) * cell.batch
        rows.append(
            {
                "step": i + 1,
                "step_s": round(step_s, 3),
                "step_cpu_s": round(probe.get("step_cpu_s", float("nan")), 3),
                "load_avg_1m": probe.get("load_avg_1m"),
                "rollout_s": round(probe.get("rollout_s", float("nan")), 3),
                "generation_s": round(probe.get("generation_s", float("nan")), 3),
                "tool_s": round(probe.get("tool_s", float("nan")), 3),
                "tool_turns": probe.get("tool_turns"),
                "calls": probe.get("calls"),
                "completion_tokens": tokens,
                "reward": log_row.get("reward"),
                "num_turns": log_row.get("num_turns"),
            }
        )
    result["steps"] = rows
    return result


def estimate_s(args: argparse.Namespace, cell: Cell, scheduler: str, runs: list[dict[str, Any]]) -> float:
    """A run's likely wall time, from the finished ones: start-up and steps at zero latency, plus tools."""
    done = [r for r in runs if "steps" in r]
    base = [r["wall_s"] for r in done if r["latency"] == 0] or [r["wall_s"] for r in done] or [150.0]
    steps = [s for r in done for s in r["steps"]]
    calls = max([s["calls"] / r["batch"] for r in done for s in r["steps"] if s.get("calls")], default=1.0)
    turns = max([s["tool_turns"] for s in steps if s.get("tool_turns")], default=cell.max_turns - 1)
    tools = cell.batch * calls if scheduler == "sync_tools" else turns  # serial calls vs. parallel turns
    return max(base) + args.steps * tools * cell.latency


def _median(values: Sequence[float]) -> float:
    values = [v for v in values if v == v]  # drop NaN
    return statistics.median(values) if values else float("nan")


def summarize_grpo(runs: list[dict[str, Any]], warmup: int, device: str) -> list[dict[str, Any]]:
    """Per run: medians over the measured steps, ratio b/a, and the ratios to the limits."""

    def measured(run: dict[str, Any]) -> list[dict[str, Any]]:
        return run.get("steps", [])[warmup:]

    # Zero-latency reference per (batch, max turns): both schedulers' steps pooled (the same work at L=0).
    zero: dict[tuple[int, int], dict[str, float]] = {}
    for key in {(r["batch"], r["max_turns"]) for r in runs}:
        steps = [
            s for r in runs if (r["batch"], r["max_turns"]) == key and r["latency"] == 0 for s in measured(r)
        ]
        if steps:
            zero[key] = {
                "step_s": _median([s["step_s"] for s in steps]),
                "tool_s": _median([s["tool_s"] for s in steps]),
            }
    out = []
    for run in runs:
        steps = measured(run)
        row: dict[str, Any] = {k: run[k] for k in ("scheduler", "latency", "batch", "max_turns")}
        if not steps:
            row["error"] = run.get("error", "no measured steps")[:300]
            out.append(row)
            continue
        step_s = _median([s["step_s"] for s in steps])
        tool_s = _median([s["tool_s"] for s in steps])
        turns = _median([s["tool_turns"] for s in steps if s["tool_turns"] is not None])
        row.update(
            steps=len(steps),
            step_s=round(step_s, 3),
            step_cpu_s=round(_median([s.get("step_cpu_s", float("nan")) for s in steps]), 3),
            tool_s=round(tool_s, 3),
            generation_s=round(_median([s["generation_s"] for s in steps]), 3),
            tool_turns=turns,
            calls_per_step=_median([s["calls"] for s in steps if s["calls"] is not None]),
            tokens_per_s=round(_median([s["completion_tokens"] / s["step_s"] for s in steps]), 1),
            tool_share=round(tool_s / step_s, 3),
            reward=round(_median([s["reward"] for s in steps if s["reward"] is not None]), 4),
        )
        if device == "gpu":  # rollout time in which the model is not generating: tools and scheduler glue
            idle = _median([(s["rollout_s"] - s["generation_s"]) / s["step_s"] for s in steps])
            row["gpu_idle_share"] = round(idle, 3)
        ref = zero.get((run["batch"], run["max_turns"]))
        if ref:
            limit = ref["step_s"] + turns * run["latency"]
            tool_limit = ref["tool_s"] + turns * run["latency"]
            row.update(
                limit_s=round(limit, 3),
                x_limit=round(step_s / limit, 3),
                tool_limit_s=round(tool_limit, 3),
                x_tool_limit=round(tool_s / tool_limit, 3) if tool_limit > 0 else None,
            )
        out.append(row)
    for row in out:  # b/a on the rlfactory row
        if row["scheduler"] == "rlfactory" and "step_s" in row:
            base = next(
                (
                    r
                    for r in out
                    if r["scheduler"] == "sync_tools"
                    and "step_s" in r
                    and (r["latency"], r["batch"], r["max_turns"])
                    == (row["latency"], row["batch"], row["max_turns"])
                ),
                None,
            )
            if base:
                row["b_over_a"] = round(row["step_s"] / base["step_s"], 3)
    return out


def same_trajectories(runs: list[dict[str, Any]]) -> dict[str, bool]:
    """Whether a and b of each cell saw identical rollouts (same seed: same reward and length every step)."""
    out = {}
    by_cell: dict[tuple, dict[str, dict]] = {}
    for r in runs:
        by_cell.setdefault((r["latency"], r["batch"], r["max_turns"]), {})[r["scheduler"]] = r
    for cell, pair in by_cell.items():
        if len(pair) == 2 and all("steps" in r for r in pair.values()):
            a, b = (pair[s]["steps"] for s in SCHEDULERS)
            key = lambda s: (s["reward"], s["completion_tokens"], s["num_turns"])  # noqa: E731
            out[f"L{cell[0]:g}-b{cell[1]}-t{cell[2]}"] = [key(s) for s in a] == [key(s) for s in b]
    return out


def grpo_section(args: argparse.Namespace, task: Task, report: Callable[[], None], state: dict) -> None:
    """Run (or load from ``--work``) every run of the grid, a and b alternating, reporting after each."""
    cells = [Cell(lat, b, t) for b in args.batch_sizes for t in args.max_turns for lat in args.latencies]
    dataset = args.work / f"{task.name}.jsonl"
    dataset.parent.mkdir(parents=True, exist_ok=True)
    n_rows = max(max(args.batch_sizes) * args.steps, 64)
    dataset.write_text("".join(json.dumps(r) + "\n" for r in task.rows(n_rows)))
    order = [
        (cell, s) for i, cell in enumerate(cells) for s in (SCHEDULERS if i % 2 == 0 else SCHEDULERS[::-1])
    ]
    state["commands"] = [
        shown(run_env(args, task, c), swift_command(args, c, s, dataset, args.work / "runs" / c.name(s)))
        for c, s in order
    ]
    if args.dry_run:
        print("\n".join(state["commands"]))
        return
    runs: list[dict[str, Any]] = state.setdefault("grpo_runs", [])
    for cell, scheduler in order:
        cache = args.work / "results" / f"{cell.name(scheduler)}.json"
        if cache.exists():
            runs.append(json.loads(cache.read_text()))
            continue
        left = args.budget_s - (time.monotonic() - state["started"]) if args.budget_s else None
        if left is not None and estimate_s(args, cell, scheduler, runs) > left:
            state["incomplete"] = True
            print(f"[rollout] budget: skipping {cell.name(scheduler)}; run the same command again")
            continue
        print(f"[rollout] {cell.name(scheduler)} ...", flush=True)
        result = run_grpo(args, task, cell, scheduler, dataset, timeout_s=left)
        print(
            f"[rollout]   {result['wall_s']} s"
            + (f"  ERROR {result['error'][-500:]}" if "error" in result else "")
        )
        if "error" not in result:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps(result) + "\n")
        runs.append(result)
        report()


# -- the tool-phase section ---------------------------------------------------------------------------------
class ToolPhaseHarness:
    """ms-swift's multi-turn driver over N scripted trajectories: every turn but the last calls tools.

    "Generation" returns the task's model text at once, so the driver's time is the tool phase: our
    scheduler's (or the baseline's) hooks, the executor, the MCP server, and ms-swift's own bookkeeping.
    """

    def __init__(self, task: Task, model: Path, model_type: str, template_type: str):
        from swift.model import get_processor
        from swift.rlhf_trainers.utils import get_response_prefix_ids
        from swift.template import get_template

        self.task = task
        processor = get_processor(str(model), model_type=model_type, check_model=False)
        self.template = get_template(processor, template_type=template_type, max_length=16384)
        self.tokenizer = tokenizer = self.template.tokenizer
        prefix_ids = get_response_prefix_ids(self.template)
        self.prefix = tokenizer.decode(prefix_ids) if prefix_ids else ""
        end_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.ids = {
            text: tokenizer.encode(text, add_special_tokens=False) + [end_id]
            for text in (task.tool_turn, task.answer)
        }

    def output(self, text: str):
        """What the engine would return for a turn whose sampled text is ``text``."""
        from swift.infer_engine.protocol import (
            ChatCompletionResponse,
            ChatCompletionResponseChoice,
            ChatMessage,
            RolloutOutput,
            UsageInfo,
        )

        choice = ChatCompletionResponseChoice(
            index=0, message=ChatMessage(role="assistant", content=self.prefix + text), finish_reason="stop",
            token_ids=list(self.ids[text]),
        )  # fmt: skip
        return RolloutOutput(
            response=ChatCompletionResponse(model="m", choices=[choice], usage=UsageInfo(0, 0, 0))
        )

    def run(self, scheduler_cls: type, n: int, turns: int) -> dict[str, Any]:
        """``n`` trajectories of ``turns`` tool turns and an answer; wall and tool-phase seconds."""
        from rollout_probe import RolloutClock
        from swift.infer_engine.protocol import RequestConfig, RolloutInferRequest
        from swift.rollout.agent_loop import invoke_async_hook, run_multi_turn

        scheduler = scheduler_cls(max_turns=turns + 1, tokenizer=self.tokenizer, template=self.template)
        clock = RolloutClock(scheduler)
        requests = [
            RolloutInferRequest(messages=[dict(m) for m in row["messages"]], uuid=f"bench-{i}")
            for i, row in enumerate(self.task.rows(n))
        ]
        invoke_async_hook(scheduler.on_trajectory_start(requests))

        def rollout_fn(reqs, _config):
            done = [sum(m["role"] == "assistant" for m in r.messages) for r in reqs]
            return [self.output(self.task.tool_turn if d < turns else self.task.answer) for d in done]

        first = [self.output(self.task.tool_turn) for _ in range(n)]
        t0 = time.perf_counter()
        outs = run_multi_turn(requests, first, scheduler, rollout_fn, RequestConfig(), turns + 1)
        wall = time.perf_counter() - t0
        timing = clock.take()
        calls = [c for o in outs for c in o.rollout_infos["rlfactory"]["tool_calls"]]
        errors = [c["error"] for c in calls if c["error"]]
        if errors or timing.tool_turns != turns:
            raise RuntimeError(
                f"tool-phase run went wrong: {len(errors)} errors ({errors[:1]}), {timing.to_dict()}"
            )
        return {
            "wall_s": wall,
            "tool_s": timing.tool_s,
            "calls": len(calls),
            "phases_s": [p.seconds for p in timing.phases],
        }


def use_latency(latency: float, task: Task) -> None:
    """Point ``RLFACTORY_ENV`` at the task and (re)start its MCP server with this latency."""
    from swift_rlfactory.adapters.swift import RUN

    os.environ[LATENCY_VAR] = f"{latency:g}"
    os.environ["RLFACTORY_ENV"] = str(task.env)
    for env in RUN.envs.values():
        env.close()
    RUN.envs.clear()


def tool_phase_section(args: argparse.Namespace, task: Task, report: Callable[[], None], state: dict) -> None:
    """N trajectories x T tool turns through ms-swift's driver, per scheduler and latency (see module doc)."""
    sys.path.insert(0, str(BENCH))
    from baseline_scheduler import SyncToolScheduler

    from swift_rlfactory.adapters.swift import RLFactoryScheduler

    cache = args.work / "results" / "tool_phase.json"
    if cache.exists():  # a resumed command: measured already
        state["tool_phase"] = json.loads(cache.read_text())
        return
    harness = ToolPhaseHarness(task, args.model, args.model_type, args.template)
    one = harness.run
    rows: list[dict[str, Any]] = state.setdefault("tool_phase", [])
    for latency in args.phase_latencies:
        use_latency(latency, task)
        one(RLFactoryScheduler, 8, 1)  # warm-up: servers up, first calls paid
        for n in args.trajectories:
            for turns in args.tool_turns:
                # Best of the repeats: on a shared machine the fastest run is the one least disturbed.
                times = sorted(
                    (one(RLFactoryScheduler, n, turns) for _ in range(args.repeats)),
                    key=lambda t: t["tool_s"],
                )
                rows.append(_phase_row("rlfactory", n, turns, latency, times[0], n, turns, times))
        # The baseline makes every call one after another, so its time is linear in trajectories x turns:
        # measure one turn of as many trajectories as fit in --baseline-max-s, and scale.
        big = max(args.trajectories)
        m = big if latency == 0 else max(4, min(big, int(args.baseline_max_s / latency)))
        t = one(SyncToolScheduler, m, 1)
        for n in args.trajectories:
            for turns in args.tool_turns:
                rows.append(_phase_row("sync_tools", n, turns, latency, t, m, 1, [t]))
        print(f"[rollout] tool phase, latency {latency:g} s: done", flush=True)
        _add_phase_limits(rows)
        report()
    use_latency(0.0, task)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text(json.dumps(rows) + "\n")


def _phase_row(scheduler, n, turns, latency, t, measured_n, measured_turns, runs) -> dict[str, Any]:
    scale = (n * turns) / (measured_n * measured_turns)
    return {
        "scheduler": scheduler,
        "trajectories": n,
        "tool_turns": turns,
        "latency": latency,
        "measured_on": f"{measured_n}x{measured_turns}",  # trajectories x tool turns actually run
        "calls": round(t["calls"] * scale),
        "tool_s": round(t["tool_s"] * scale, 4),
        "driver_s": round(t["wall_s"] * scale, 4),
        "median_tool_s": round(statistics.median(r["tool_s"] for r in runs) * scale, 4),
        "runs_tool_s": [round(r["tool_s"], 4) for r in runs],
        "phases_s": [round(x, 4) for x in t["phases_s"]],
    }


def _add_phase_limits(rows: list[dict[str, Any]]) -> None:
    """Ratios to T x L, and to rlfactory's zero-latency time + T x L (the CPU work counted in)."""
    zero = {
        (r["trajectories"], r["tool_turns"]): r["tool_s"]
        for r in rows
        if r["latency"] == 0 and r["scheduler"] == "rlfactory"
    }
    for r in rows:
        ideal = r["tool_turns"] * r["latency"]
        r["limit_s"] = ideal
        r["x_limit"] = round(r["tool_s"] / ideal, 3) if ideal else None
        z = zero.get((r["trajectories"], r["tool_turns"]))
        if z is not None:
            r["limit_with_cpu_s"] = round(z + ideal, 4)
            r["x_limit_with_cpu"] = round(r["tool_s"] / (z + ideal), 3)
    rows.sort(
        key=lambda r: (r["trajectories"], r["tool_turns"], r["latency"], r["scheduler"] != "sync_tools")
    )


# -- report -------------------------------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_avg": [round(x, 2) for x in os.getloadavg()],
    }
    for pkg in ("ms-swift", "torch", "transformers", "vllm", "mcp"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            info[pkg] = importlib.metadata.version(pkg)
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        )
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True)
        info["git"] = commit.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except OSError:
        pass
    if Path("/proc/cpuinfo").exists():
        models = [
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ]
        info["cpu_model"] = models[0] if models else None
    return info


def _fmt(v: Any, spec: str = ".2f") -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "-"
    return format(v, spec) if isinstance(v, float | int) and not isinstance(v, bool) else str(v)


def report_header(title: str, doc: dict[str, Any]) -> list[str]:
    """A report's first lines: its title, the command that made it and the machine it ran on."""
    return [f"# {title}", "", f"Command: `{doc['command']}`  ", f"Machine: {json.dumps(doc['machine'])}  "]


def markdown(doc: dict[str, Any]) -> str:
    """The tables of ``rollout.md``."""
    lines = [
        *report_header(f"Rollout benchmark ({doc['device']})", doc),
        f"Measured: {doc['started']} - {doc.get('finished', 'unfinished')}, {doc.get('elapsed_s', '?')} s",
        "",
    ]
    if doc.get("tool_phase"):
        lines += [
            "## Tool phase (ms-swift's driver, scheduler + executor + MCP server, generation replaced by text)",
            "",
            f"Tool phase = best of {doc['repeats']} runs (median next to it); the baseline runs once, on "
            "`measured on` = trajectories x tool turns, and its time is scaled linearly to the row. "
            "limit = tool turns x latency; with CPU = rlfactory's zero-latency time + that.",
            "",
            "| trajectories | tool turns | latency s | scheduler | tool phase s | median s | limit s | x limit "
            "| x limit with CPU | calls | measured on |",
            "| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for r in doc["tool_phase"]:
            measured = r["measured_on"]
            lines.append(
                f"| {r['trajectories']} | {r['tool_turns']} | {r['latency']:g} | {r['scheduler']} | {r['tool_s']:.3f} "
                f"| {r['median_tool_s']:.3f} "
                f"| {r['limit_s']:.2f} | {_fmt(r['x_limit'])} | {_fmt(r.get('x_limit_with_cpu'))} | {r['calls']} | {measured} |"
            )
        lines.append("")
    if doc.get("grpo"):
        gpu = doc["device"] == "gpu"
        lines += [
            "## GRPO steps (a = sync_tools, b = rlfactory; medians over measured steps)",
            "",
            "limit = zero-latency step time + tool turns x latency; tool limit likewise for the tool phase. "
            + (
                "GPU idle = rollout time not generating / step time."
                if gpu
                else "tool share = tool phase / step time."
            )
            + " step CPU s = CPU seconds of the training process in the step (all threads): wall time"
            " that grows while it stays put is other processes' load.",
            "",
            "| latency s | batch | max turns | scheduler | step s | step CPU s | b/a | limit s | x limit | tool phase s "
            "| tool limit s "
            f"| x tool limit | tool turns | calls/step | {'GPU idle' if gpu else 'tool share'} | tokens/s | reward | steps |",
            "| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
            "| ---: | ---: | ---: |",
        ]
        rows = sorted(
            doc["grpo"],
            key=lambda r: (r["batch"], r["max_turns"], r["latency"], r["scheduler"] != "sync_tools"),
        )
        for r in rows:
            if "error" in r:
                lines.append(
                    f"| {r['latency']:g} | {r['batch']} | {r['max_turns']} | {r['scheduler']} | error: {r['error'][:80]} |"
                )
                continue
            share = r.get("gpu_idle_share") if gpu else r.get("tool_share")
            lines.append(
                f"| {r['latency']:g} | {r['batch']} | {r['max_turns']} | {r['scheduler']} | {r['step_s']:.2f} "
                f"| {_fmt(r.get('step_cpu_s'))} "
                f"| {_fmt(r.get('b_over_a'))} | {_fmt(r.get('limit_s'))} | {_fmt(r.get('x_limit'))} | {r['tool_s']:.2f} "
                f"| {_fmt(r.get('tool_limit_s'))} | {_fmt(r.get('x_tool_limit'))} | {_fmt(r['tool_turns'], 'g')} "
                f"| {_fmt(r['calls_per_step'], 'g')} | {_fmt(share)} | {r['tokens_per_s']:.1f} | {r['reward']:.3f} | {r['steps']} |"
            )
        if doc.get("same_trajectories"):
            lines += [
                "",
                f"a and b produced identical rollouts (reward, length, turns each step): {json.dumps(doc['same_trajectories'])}",
            ]
        lines.append("")
    if doc.get("incomplete"):
        lines += [
            "**Incomplete**: the time budget ran out; run the same command again to finish the grid.",
            "",
        ]
    return "\n".join(lines)


# -- main ---------------------------------------------------------------------------------------------------
def tiny_agent_model(build: bool = True) -> Path:
    """The tiny Qwen3 of the test suite (tests/conftest.py ``agent_model``), built or taken from its cache."""
    from swift_rlfactory.env.environment import Environment
    from tests.conftest import AGENT_ENV, AGENT_PAIRS, CACHE, agent_example
    from tests.fixtures.tiny_qwen3 import build_tiny_qwen3

    if not build:
        return CACHE / "tiny-agent"

    tokenizer_dir = CACHE / "qwen3-tokenizer"
    subprocess.run(
        ["bash", str(ROOT / "tests" / "fixtures" / "qwen3_tokenizer.sh"), str(tokenizer_dir)], check=True
    )
    with Environment.load(AGENT_ENV) as env:
        tools, system = env.tool_schemas(), env.system_prompt
    examples = [agent_example(a, b, system, tools) for a, b in AGENT_PAIRS]
    return build_tiny_qwen3(CACHE / "tiny-agent", tokenizer_dir, sft_examples=examples, seed=0)


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    """The device, model and task options (shared with ``server_rollout.py``)."""
    p.add_argument("--device", choices=["cpu", "gpu"], required=True)
    p.add_argument("--model", type=Path, help="cpu: the tiny test model (built if needed)")
    p.add_argument("--model-type", help="ms-swift --model_type (cpu: qwen3)")
    p.add_argument("--template", help="ms-swift --template (cpu: qwen3)")
    p.add_argument("--task", choices=sorted(TASKS), help="cpu: agent, gpu: calc")


def resolve_model_arguments(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """CPU defaults to the tiny test model's type, template and task; GPU needs the model named."""
    cpu = args.device == "cpu"
    args.task = args.task or ("agent" if cpu else "calc")
    args.model_type = args.model_type or ("qwen3" if cpu else None)
    args.template = args.template or ("qwen3" if cpu else None)
    if not cpu and not (args.model and args.model_type and args.template):
        p.error("--device gpu needs --model, --model-type and --template")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command line; defaults depend on ``--device``."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(p)
    p.add_argument("--sections", nargs="+", choices=["tool-phase", "grpo"], default=["tool-phase", "grpo"])
    p.add_argument(
        "--latencies", type=float, nargs="+", help="GRPO tool latencies, s (cpu: 0 0.5 2, gpu: 0 0.1 0.5 2)"
    )
    p.add_argument(
        "--phase-latencies", type=float, nargs="+", default=[0.0, 0.1, 0.5, 2.0], help="tool phase, s"
    )
    p.add_argument("--batch-sizes", type=int, nargs="+", help="GRPO completions per step (cpu: 4, gpu: 32)")
    p.add_argument("--max-turns", type=int, nargs="+", help="GRPO --max_turns (default 3)")
    p.add_argument("--steps", type=int, help="GRPO steps per run, warm-up included (cpu: 3, gpu: 4)")
    p.add_argument("--warmup-steps", type=int, default=1, help="first steps of each run left out")
    p.add_argument("--trajectories", type=int, nargs="+", default=[64, 256], help="tool-phase batch sizes")
    p.add_argument("--tool-turns", type=int, nargs="+", default=[1, 2], help="tool-phase tool turns")
    p.add_argument("--repeats", type=int, default=3, help="tool-phase runs per cell (median)")
    p.add_argument(
        "--baseline-max-s", type=float, default=8.0, help="tool phase: rough cap on the baseline's run"
    )
    p.add_argument("--budget-s", type=float, help="start no GRPO run after this many seconds (resume later)")
    p.add_argument("--out", type=Path, required=True, help="rollout.json and rollout.md go here")
    p.add_argument(
        "--work", type=Path, help="swift outputs and finished-run cache (/tmp/rollout-bench-DEVICE)"
    )
    p.add_argument("--dry-run", action="store_true", help="print the GRPO commands and exit")
    args = p.parse_args(argv)
    resolve_model_arguments(p, args)
    cpu = args.device == "cpu"
    # On CPU a 0.1 s latency is lost in the step-to-step noise of a shared box (the tool phase shows it).
    args.latencies = args.latencies or ([0.0, 0.5, 2.0] if cpu else [0.0, 0.1, 0.5, 2.0])
    if 0.0 not in args.latencies or 0.0 not in args.phase_latencies:
        p.error("latencies must include 0: every limit is measured from the zero-latency run")
    args.batch_sizes = args.batch_sizes or ([4] if cpu else [32])
    args.max_turns = args.max_turns or [3]
    args.steps = args.steps or (3 if cpu else 4)
    args.work = args.work or Path(f"/tmp/rollout-bench-{args.device}")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Run the sections and keep ``--out`` up to date after every measurement."""
    args = parse_args(argv)
    task = TASKS[args.task]
    # The GPU host has no install of this repository: the swift runs, their MCP servers and this process
    # import it from here.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    sys.path.insert(0, str(ROOT))
    if args.device == "cpu" and args.model is None:
        args.model = tiny_agent_model(build=not args.dry_run)
    started = time.monotonic()
    doc: dict[str, Any] = {
        "device": args.device,
        "command": shlex.join(["python", "benchmarks/rollout.py", *(sys.argv[1:] if argv is None else argv)]),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": machine(),
        "task": task.name,
        "env": str(task.env.relative_to(ROOT)),
        "seed": SEED,
        "warmup_steps": args.warmup_steps,
        "repeats": args.repeats,
    }
    state: dict[str, Any] = {"started": started}

    def report() -> None:
        doc["elapsed_s"] = round(time.monotonic() - started, 1)
        if state.get("tool_phase"):
            doc["tool_phase"] = state["tool_phase"]
        if state.get("grpo_runs"):
            doc["grpo"] = summarize_grpo(state["grpo_runs"], args.warmup_steps, args.device)
            doc["same_trajectories"] = same_trajectories(state["grpo_runs"])
            doc["grpo_runs"] = state["grpo_runs"]
        doc["grpo_commands"] = state.get("commands", [])
        doc["incomplete"] = state.get("incomplete", False)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "rollout.json").write_text(json.dumps(doc, indent=1) + "\n")
        (args.out / "rollout.md").write_text(markdown(doc))

    if args.dry_run:
        grpo_section(args, task, report, state)
        return
    if "tool-phase" in args.sections:
        tool_phase_section(args, task, report, state)
        report()
    if "grpo" in args.sections:
        grpo_section(args, task, report, state)
    doc["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    doc["machine"]["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    report()
    print((args.out / "rollout.md").read_text())


if __name__ == "__main__":
    main()
