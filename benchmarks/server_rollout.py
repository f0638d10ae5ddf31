"""Server mode: how much tool time hides behind generation when every trajectory is its own coroutine.

``swift rollout --multi_turn_scheduler rlfactory`` serves a GRPO batch by awaiting ``scheduler.run()`` for
every trajectory at once on one event loop (ms-swift's ``MultiTurnScheduler.async_infer``). A trajectory
that waits for a tool yields the loop, so the engine keeps generating for the others: tool time overlaps
generation instead of adding to it. This script drives exactly that ``run()`` with a real engine, on the same
prompts, for both schedulers of ``rollout.py`` and each tool latency, alternating:

* **a: ``sync_tools``** runs its calls inside ``step()``, a plain function: in server mode it blocks the event
  loop, so generation of every other trajectory stops while one trajectory's tools run;
* **b: ``rlfactory``** awaits its calls in ``on_turn_end``.

Generation is greedy, so both schedulers and every latency see the same trajectories (checked: same number of
calls). Reported per run: wall time of the whole batch, its ratio to the same scheduler's 0 s wall time (the
issue's target: within 1.15x at 0.5 s), and the **hidden share** of tool time,
``1 - (wall - wall at 0 s) / (sum of all call latencies)``: 1 when tools cost no wall time at all, 0 when
every call's latency was added to the batch's time.

CPU (the tiny test model, ms-swift's transformers engine batching up to ``--max-batch`` requests)::

    python benchmarks/server_rollout.py --device cpu --out /tmp/server-cpu

GPU (the vLLM async engine that ``swift rollout`` uses; /tmp/qwen05 from ../shared/gpu/README.md)::

    python benchmarks/server_rollout.py --device gpu --model /tmp/qwen05 --model-type qwen2 \\
        --template qwen2_5 --trajectories 256 --out $OUT

This measures the rollout side only; ``swift rollout`` + ``swift rlhf --vllm_mode server`` on two GPUs adds
weight sync and the HTTP hop, not tool scheduling.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
sys.path.insert(0, str(BENCH.parent))

from rollout import (  # noqa: E402
    ROOT,
    TASKS,
    Task,
    add_model_arguments,
    machine,
    report_header,
    resolve_model_arguments,
    tiny_agent_model,
    use_latency,
)


def load_engine(args: argparse.Namespace) -> Any:
    """The engine ``swift rollout`` would use on this device (vLLM async on GPU, transformers on CPU)."""
    from swift_rlfactory.adapters.swift_infer import SwiftPolicy

    policy = SwiftPolicy.load(
        str(args.model),
        engine="vllm" if args.device == "gpu" else "transformers",
        model_type=args.model_type,
        template=args.template,
        max_tokens=args.max_tokens,
        max_length=4096,
        concurrency=args.max_batch,
        seed=0,
        gpu_memory_utilization=0.5,
    )
    return policy.engine


async def run_batch(
    scheduler_cls: type, engine: Any, task: Task, n: int, max_turns: int, max_tokens: int
) -> dict:
    """``n`` trajectories through ``scheduler.run()`` at once, as ``swift rollout`` serves a batch.

    Awaited on the one event loop of the whole benchmark: vLLM's async engine binds its output handler to the
    loop of its first request, so a batch on a second loop (a second ``asyncio.run``) never gets its outputs.
    ``swift rollout`` likewise serves every batch from one uvicorn loop.
    """
    from swift.infer_engine.protocol import RequestConfig, RolloutInferRequest

    scheduler = scheduler_cls(infer_engine=engine, max_turns=max_turns)
    requests = [
        RolloutInferRequest(messages=[dict(m) for m in row["messages"]], uuid=f"srv-{i}")
        for i, row in enumerate(task.rows(n))
    ]
    config = RequestConfig(max_tokens=max_tokens, temperature=0.0, return_details=True)

    started = time.perf_counter()
    outputs = await asyncio.gather(*(scheduler.run(r, config) for r in requests))
    wall = time.perf_counter() - started
    calls = [c for o in outputs for c in o.rollout_infos["rlfactory"]["tool_calls"]]
    tokens = sum(len(ids) for o in outputs for ids in o.response_token_ids)
    return {
        "wall_s": wall,
        "calls": len(calls),
        "call_errors": sum(c["error"] is not None for c in calls),
        "tool_s": sum(c["latency_s"] for c in calls),
        "turns": sum(o.rollout_infos["num_turns"] for o in outputs),
        "tokens": tokens,
    }


def add_ratios(rows: list[dict[str, Any]]) -> None:
    """Wall time over the same scheduler's zero-latency wall time, and the hidden share of tool time."""
    zero = {r["scheduler"]: r for r in rows if r["latency_s"] == 0}
    for row in rows:
        base = zero.get(row["scheduler"])
        if base is None or row["latency_s"] == 0:
            continue
        row["x_zero_latency"] = row["wall_s"] / base["wall_s"]
        row["hidden_share"] = 1 - (row["wall_s"] - base["wall_s"]) / row["tool_s"] if row["tool_s"] else None


def markdown(doc: dict[str, Any]) -> str:
    """The table of ``server.md``."""
    lines = [
        *report_header(f"Server-mode rollout ({doc['device']})", doc),
        f"{doc['trajectories']} trajectories at once, greedy, engine batch {doc['max_batch']}, "
        f"measured {doc['started']}, {doc.get('elapsed_s', '?')} s",
        "",
        "| latency s | scheduler | wall s | x 0 s wall | tool time s (sum of calls) | hidden share | calls | turns "
        "| tokens/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    if not doc["tools_called"]:
        lines[-2:-2] = [
            "**No run called a tool: there was no tool time to hide, and the ratios say nothing about it.**",
            "",
        ]
    for r in doc["rows"]:
        x = f"{r['x_zero_latency']:.2f}" if "x_zero_latency" in r else "-"
        hidden = f"{r['hidden_share']:.2f}" if r.get("hidden_share") is not None else "-"
        lines.append(
            f"| {r['latency_s']:g} | {r['scheduler']} | {r['wall_s']:.2f} | {x} | {r['tool_s']:.1f} | {hidden} "
            f"| {r['calls']} | {r['turns']} | {r['tokens'] / r['wall_s']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Measure each latency with both schedulers, alternating their order, and write server.json/.md."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_arguments(p)
    p.add_argument("--latencies", type=float, nargs="+", default=[0.0, 0.5, 2.0])
    p.add_argument("--trajectories", type=int, default=32, help="trajectories served at once")
    p.add_argument("--max-batch", type=int, help="engine batch / vLLM max_num_seqs (cpu: 8, gpu: 256)")
    p.add_argument("--max-turns", type=int, default=3)
    p.add_argument("--max-tokens", type=int, default=96)
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    resolve_model_arguments(p, args)
    cpu = args.device == "cpu"
    args.max_batch = args.max_batch or (8 if cpu else 256)
    if 0.0 not in args.latencies:
        p.error("--latencies must include 0: the ratios are to the zero-latency run")
    if cpu and args.model is None:
        args.model = tiny_agent_model()

    from baseline_scheduler import SyncToolScheduler

    from swift_rlfactory.adapters.swift import RLFactoryScheduler

    schedulers = {"sync_tools": SyncToolScheduler, "rlfactory": RLFactoryScheduler}
    task = TASKS[args.task]
    started = time.monotonic()
    doc: dict[str, Any] = {
        "device": args.device,
        "command": shlex.join(
            ["python", "benchmarks/server_rollout.py", *(sys.argv[1:] if argv is None else argv)]
        ),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": machine(),
        "task": task.name,
        "env": str(task.env.relative_to(ROOT)),
        "trajectories": args.trajectories,
        "max_batch": args.max_batch,
        "rows": [],
    }
    use_latency(0.0, task)
    engine = load_engine(args)
    asyncio.run(measure(args, engine, task, schedulers, doc, started))
    print((args.out / "server.md").read_text())
    if not doc["tools_called"]:
        sys.exit("no tool calls in any run: use a model and prompts that call the tools (see server.md)")


async def measure(
    args: argparse.Namespace,
    engine: Any,
    task: Task,
    schedulers: dict[str, type],
    doc: dict[str, Any],
    started: float,
) -> None:
    """A warm-up batch, then each latency with both schedulers, alternating which goes first."""
    await run_batch(
        schedulers["rlfactory"], engine, task, min(8, args.trajectories), args.max_turns, args.max_tokens
    )
    for i, latency in enumerate(args.latencies):
        use_latency(latency, task)
        order = list(schedulers) if i % 2 == 0 else list(reversed(schedulers))
        for name in order:
            row = await run_batch(
                schedulers[name], engine, task, args.trajectories, args.max_turns, args.max_tokens
            )
            doc["rows"].append({"latency_s": latency, "scheduler": name, **row})
            print(
                f"[server] latency {latency:g} s, {name}: {row['wall_s']:.2f} s, {row['calls']} calls",
                flush=True,
            )
            write_report(
                doc, args.out, started
            )  # after every run: a cut-short command keeps what it measured


def write_report(doc: dict[str, Any], out: Path, started: float) -> None:
    """Ratios, the same-workload check and ``server.json``/``server.md`` from the rows so far."""
    doc["rows"].sort(key=lambda r: (r["latency_s"], r["scheduler"]))
    add_ratios(doc["rows"])
    calls = {r["calls"] for r in doc["rows"]}
    doc["tools_called"] = any(calls)
    doc["same_workload"] = (
        doc["tools_called"] and len(calls) == 1 and not any(r["call_errors"] for r in doc["rows"])
    )
    doc["elapsed_s"] = round(time.monotonic() - started, 1)
    out.mkdir(parents=True, exist_ok=True)
    (out / "server.json").write_text(json.dumps(doc, indent=1) + "\n")
    (out / "server.md").write_text(markdown(doc))


if __name__ == "__main__":
    main()
