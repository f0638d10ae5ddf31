"""How much memory and time do the run folder's readers take on a large ``trajectories.jsonl``?

Writes a synthetic training run (``trajectories.jsonl`` of ``--mb`` megabytes, records shaped like the
tests' recorded deepsearch episodes: a 1.7 KB system prompt, a search call and its observation, an answer,
8 trajectories a prompt, 8 prompts a step, one resumed run that logs its last steps again; and its
``logging.jsonl``), then runs each reader in a subprocess of its own and reports its wall time and peak
resident memory (``ru_maxrss``):

* ``rewards``: ``swift-rlfactory rewards ENV --trajectories RUN --json`` (``em`` + ``format`` rewards);
* ``summary``: ``train``'s end-of-run summary (the sample trajectory and the counts);
* ``viewer``: the web UI's trajectory index opened on the run, then the first page of the table with its
  step, group and stop-reason choices (what "Show trajectories" answers).

    python3 benchmarks/readers.py --mb 200 --dir /tmp/readers-bench
    PYTHONPATH=/path/to/other/checkout python3 benchmarks/readers.py --mb 200 --dir /tmp/readers-bench --keep

``--keep`` reuses a log written before (same ``--dir``), so two checkouts are measured on one file.
Results: ``benchmarks/readers/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

SYSTEM = (
    "You answer questions by searching an encyclopedia of Wikipedia article summaries.\nTo search, write "
    'exactly:\n<tool_call>\n{"name": "search", "arguments": {"query": "<a few keywords>"}}\n</tool_call>\n'
) * 6  # ~1.7 KB, as the recorded runs' prompt with its tool schemas
GROUP, PROMPTS = 8, 8  # trajectories a prompt, prompts a step

RUNNERS = {
    "rewards": (
        "import sys; from swift_rlfactory.cli import main; "
        "sys.exit(main(['rewards', sys.argv[1], '--trajectories', sys.argv[2], '--json']))"
    ),
    "summary": (
        "import sys, time; from pathlib import Path; from rich.console import Console; "
        "from swift_rlfactory.train import _print_summary; "
        "_print_summary(Path(sys.argv[2]), 0.0, Console(file=sys.stdout, width=120))"
    ),
    "viewer": (
        "import sys, time; from swift_rlfactory.ui.runs import Run; from swift_rlfactory.ui.index import Filters; "
        "t = time.perf_counter(); run = Run(sys.argv[2]); index = run.trajectories; opened = time.perf_counter() - t; "
        "t = time.perf_counter(); rows = index.select(Filters(), limit=200); steps = index.steps(); "
        "groups = index.group_choices(None, None) if hasattr(index, 'group_choices') else list(index.groups(None)); "
        "stops = index.stop_reasons(); count = index.count(); page = time.perf_counter() - t; "
        "print(f'VIEWER index {opened:.1f} s, first page {page:.2f} s, {len(groups)} group choices, '"
        "f'{len(steps)} steps, {count} trajectories', file=sys.stderr)"
    ),
}


def trajectory(step: int, prompt: int, sample: int, rng: random.Random, run: str) -> dict:
    """One training line, as :class:`~swift_rlfactory.runs.log.TrajectoryLog` writes it."""
    question = f"q{step}-{prompt}: which article describes the thing number {step * 7919 + prompt}?"
    answer = f"<answer>Article {rng.randrange(1000)}</answer>"
    observation = " ".join(f'Doc {i}(Title: "T{rng.randrange(10**5)}") some passage text.' for i in range(5))
    call = f'<tool_call>\n{{"name": "search", "arguments": {{"query": "thing {sample}"}}}}\n</tool_call>'
    return {
        "step": step,
        "time": time.time(),
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": question},
            {"role": "assistant", "content": call},
            {"role": "tool", "content": observation},
            {"role": "assistant", "content": answer},
        ],
        "tool_calls": [
            {
                "tool": "search",
                "arguments": {"query": f"thing {sample}"},
                "observation": observation,
                "error": None,
                "latency_s": 0.01,
                "cached": False,
                "turn": 1,
            }
        ],  # fmt: skip
        "turns": 2,
        "stop_reason": "answer",
        "row": {"golden_answers": [f"Article {rng.randrange(1000)}"], "run": run},
        "rewards": {"em": 0.0, "format": 1.0, "total": 0.2},
        "turn_rewards": {},
        "reward_errors": {},
    }


def write_run(folder: Path, megabytes: float) -> None:
    """A training run of about ``megabytes`` of trajectories: steps until the size is reached, then a
    resumed run that logs the last tenth of the steps again."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    target = int(megabytes * 1e6)
    with open(folder / "trajectories.jsonl", "w") as log, open(folder / "logging.jsonl", "w") as metrics:
        step, written, plan = 0, 0, []
        while written < target * 0.9:
            step += 1
            plan.append(("stopped", step))
            for prompt in range(PROMPTS):
                for sample in range(GROUP):
                    written += log.write(json.dumps(trajectory(step, prompt, sample, rng, "stopped")) + "\n")
            metrics.write(
                json.dumps({"loss": 0.1, "reward": 0.2, "global_step/max_steps": f"{step}/0"}) + "\n"
            )
        for again in range(max(1, step - step // 10), step + 1):  # the resumed run
            for prompt in range(PROMPTS):
                for sample in range(GROUP):
                    log.write(json.dumps(trajectory(again, prompt, sample, rng, "resumed")) + "\n")
            metrics.write(
                json.dumps({"loss": 0.1, "reward": 0.3, "global_step/max_steps": f"{again}/0"}) + "\n"
            )
    (folder.parent / "env.yaml").write_text("reward:\n  - {name: em}\n  - {name: format, weight: 0.2}\n")


# the child reports its own peak (ru_maxrss of RUSAGE_SELF, KiB on Linux) as it exits
PEAK = (
    "import atexit, resource, sys; atexit.register(lambda: print('PEAK', "
    "resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)); "
)


def measure(name: str, folder: Path) -> dict:
    """Run one reader in a subprocess: its wall time, peak RSS and what it said on stderr."""
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", PEAK + RUNNERS[name], str(folder.parent / "env.yaml"), str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=folder.parent,  # not the checkout: `python -c` puts its folder first on sys.path, over PYTHONPATH
        check=False,
    )
    wall = time.perf_counter() - started
    peaks = [int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("PEAK ")]
    said = [line for line in done.stderr.splitlines() if line.startswith("VIEWER")]
    return {
        "reader": name,
        "rc": done.returncode,
        "wall_s": round(wall, 1),
        "peak_rss_mb": round(peaks[-1] / 1024, 1) if peaks else None,
        "note": said[0] if said else done.stderr.strip().splitlines()[-3:] if done.returncode else "",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=200.0, help="size of trajectories.jsonl in MB")
    parser.add_argument("--dir", type=Path, default=Path("/tmp/readers-bench"), help="where to write it")
    parser.add_argument("--keep", action="store_true", help="reuse the log already in --dir")
    parser.add_argument(
        "--readers", default="summary,viewer,rewards", help="comma-separated: " + ",".join(RUNNERS)
    )
    args = parser.parse_args()
    folder = args.dir / "run"
    if not (args.keep and (folder / "trajectories.jsonl").is_file()):
        started = time.perf_counter()
        write_run(folder, args.mb)
        print(f"wrote {folder / 'trajectories.jsonl'} in {time.perf_counter() - started:.0f} s", flush=True)
    size = (folder / "trajectories.jsonl").stat().st_size / 1e6
    print(f"{size:.0f} MB, PYTHONPATH={os.environ.get('PYTHONPATH', '')}", flush=True)
    for name in args.readers.split(","):
        print(json.dumps(measure(name, folder)), flush=True)


if __name__ == "__main__":
    main()
