"""``swift-rlfactory eval``: options, the run, and what it prints and writes.

What it writes to ``OUTPUT`` (and to ``OUTPUT/<checkpoint>/`` for each of ``--adapters A B ...``) is in
``docs/run-folder.md``. Several LoRA checkpoints (:func:`run_evals`) share one engine: a validation split of
a few hundred questions takes vLLM seconds to answer and about a minute to start (issue 15's H200 runs: 65 s
a checkpoint, 9 s of it the episodes), so scoring a run's checkpoints in one start is most of the gain.
"""

from __future__ import annotations

import json
import time
from contextlib import ExitStack, closing
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from swift_rlfactory.bundled.models import ModelChoice, choose_model
from swift_rlfactory.data.qa import SkippedRecord
from swift_rlfactory.runs.eval_log import EvalLog
from swift_rlfactory.runs.folder import EVAL_CONFIG, METRICS, write_json
from swift_rlfactory.runs.lock import FolderBusy, lock_folder
from swift_rlfactory.runtime import blocking

from ..env.environment import Environment
from .choose import CHOSEN_FILE, choose, gain_text
from .metrics import episode_score, groups_table, metrics_table, scored_fields, summarize, summarize_groups
from .policy import PolicyOptions, load_policy
from .robustness import check_options, run_shifts
from .runner import (
    EvalRun,
    EvalTask,
    check_same_dataset,
    current_records,
    evaluate,
    load_dataset,
    pending_tasks,
    resume_fields,
    start_for,
)

# Settings that change results: a resumed run must use the same ones.
_RESULT_KEYS = (
    "env", "dataset", "model", "adapters", "model_type", "template", "base_url", "served_model",
    "temperature", "top_p", "max_tokens", "max_turns", "max_length", "stop", "extra_body", "vision",
)  # fmt: skip


@dataclass
class EvalOptions(PolicyOptions):
    """Everything ``swift-rlfactory eval`` takes; see ``swift-rlfactory eval --help``."""

    env: Path
    dataset: Path
    output: Path
    samples: int = 1
    limit: int | None = None
    group_by: list[str] = field(default_factory=list)  # dataset columns: metrics per value of each too
    shifts: str | None = None  # phrasing shifts to score the set under (eval/robustness.py)
    shift_seed: int = 0
    shift_margin: float = 0.05  # an alarm when a score falls more than this below its baseline
    reference: Path | None = None  # an earlier eval's metrics.json (or folder) to compare with
    fail_on_alarm: bool = False
    choose_by: str | None = None  # with several --adapters: em or worst-shift (eval/choose.py)
    choose_over: Path | None = None  # an earlier eval's folder on this set: kept unless a checkpoint beats it

    def validate(self) -> None:
        """Raise ``ValueError`` for contradictory or missing options."""
        if self.temperature is None:
            self.temperature = 0.0 if self.samples == 1 else 1.0
        super().validate()
        if self.samples < 1:
            raise ValueError("--samples must be at least 1")
        check_options(self.shifts, self.reference)  # a typo in a shift's name stops us before a model loads
        if self.choose_by == "worst-shift" and not self.shifts:
            raise ValueError("--choose-by worst-shift needs --shifts")
        if self.choose_over is not None:
            self._check_incumbent(Path(self.choose_over).expanduser())

    def _check_incumbent(self, folder: Path) -> None:
        """``--choose-over`` names an eval of this dataset, with this shift seed: its questions pair with ours."""
        if not self.choose_by:
            raise ValueError("--choose-over needs --choose-by")
        try:
            config = json.loads((folder / EVAL_CONFIG).read_text(encoding="utf-8"))
            metrics = json.loads((folder / METRICS).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"--choose-over {folder}: not an eval's output folder ({exc})") from None
        dataset = str(Path(self.dataset).expanduser().resolve())
        if config.get("dataset") != dataset:
            raise ValueError(f"--choose-over {folder}: scored {config.get('dataset')}, not {dataset}")
        seed = (metrics.get("shift_check") or {}).get("seed")
        if self.choose_by == "worst-shift" and seed != self.shift_seed:
            raise ValueError(
                f"--choose-over {folder}: not scored under --shifts with --shift-seed {self.shift_seed}"
            )

    def result_settings(self) -> dict[str, Any]:
        """The settings that shape results, with paths made absolute."""
        settings = {k: v for k, v in asdict(self).items() if k in _RESULT_KEYS}
        if not self.vision:  # a text-only run's settings stay as they were before --vision
            del settings["vision"]
        for key in ("env", "dataset"):
            settings[key] = str(Path(settings[key]).expanduser().resolve())
        if self.model and Path(self.model).expanduser().exists():
            settings["model"] = str(Path(self.model).expanduser().resolve())
        if self.adapters:
            settings["adapters"] = str(Path(self.adapters).expanduser().resolve())
        if self.base_url:  # written to eval_config.json and metrics.json: no user:password, no ?key=
            url = httpx.URL(self.base_url)
            settings["base_url"] = str(url.copy_with(username=None, password=None, query=None))
        return settings


def _lock_output(out: Path) -> Any:
    """An exclusive lock on ``OUTPUT/.lock`` (:func:`~swift_rlfactory.runs.lock.lock_folder`): two evals of
    one folder would run every episode twice, and one could cut the other's half-written last line as torn.
    Raises ``ValueError`` when another run holds it; the open file it returns holds the lock until it is
    closed (``with _lock_output(out): ...``)."""
    try:
        return lock_folder(
            out, hint="; another swift-rlfactory eval is writing there; wait for it or use another --output"
        )
    except FolderBusy as exc:
        raise ValueError(str(exc)) from None


def run_evals(options: EvalOptions, adapters: list[str], console: Console) -> int:
    """Score each LoRA checkpoint of ``adapters`` into ``OUTPUT/<folder name>/``, one engine for all.

    Returns 0 when every episode of every checkpoint finished, else 1 (run it again to retry the rest).
    """
    names = [Path(a).name for a in adapters]
    if len(set(names)) < len(names):
        raise ValueError(f"--adapters: two folders share a name ({', '.join(names)}); each names its output")
    folders = [str(Path(a).expanduser().resolve()) for a in adapters]
    missing = [a for a in folders if not Path(a).is_dir()]
    if missing:
        raise ValueError(f"--adapters: no such folder {missing[0]}")
    runs = [
        replace(options, adapters=f, output=Path(options.output) / n)
        for f, n in zip(folders, names, strict=True)
    ]
    for each in runs:  # before the engine loads: e.g. --base-url with --adapters
        each.validate()
    model = choose_model(options.model) if options.model else None
    engine = load_policy(runs[0], model, console, adapters=folders)
    failed = 0
    # One event loop for every checkpoint: vLLM's async engine runs its output handler as a task on the
    # loop of its first request, so a second asyncio.run() finds it dead (EngineDeadError for every
    # episode of the second checkpoint on the H200, 2026-12-02).
    with blocking.Runner() as runner:
        for each, name in zip(runs, names, strict=True):
            console.print(f"[bold]{escape(name)}[/bold]")
            failed |= run_eval(each, console, policy=engine.for_adapter(each.adapters), runner=runner)
    if options.choose_by:
        over = str(Path(options.choose_over).expanduser().resolve()) if options.choose_over else None
        candidates = ({over: over} if over else {}) | {each.adapters: each.output for each in runs}
        chosen = choose(candidates, options.choose_by, incumbent=over)
        write_json(Path(options.output) / CHOSEN_FILE, chosen)
        test = f" · against {over} {gain_text(chosen['gain'])}" if "gain" in chosen else ""
        console.print(
            f"chosen by {options.choose_by}: {escape(chosen['checkpoint'])} ({chosen['score']:.4f}){escape(test)}"
        )
    return failed


def run_eval(
    options: EvalOptions, console: Console, policy: Any = None, runner: blocking.Runner | None = None
) -> int:
    """Run (or resume) an evaluation; 0 when every episode finished, 1 when some failed.

    ``policy``: an engine already loaded for these options (:func:`run_evals`); by default a served model
    (``--base-url``) is loaded and checked at once (:meth:`~.openai_client.OpenAIChatPolicy.check_served`),
    a local one when episodes are left to run. ``runner``: the event loop that engine serves (by default a new one).
    """
    options.validate()
    # A typo in --model fails here, listing what is accepted, not in a hub lookup after the data loads.
    model = choose_model(options.model) if options.model else None
    env = Environment.load(options.env)  # a bad environment stops us before any model loads
    # Closed on every way out (a bad row, a busy folder, other settings, a model that will not load, ^C,
    # a resume with nothing left to run): it holds a thread, the tool cache and the rewards' clients, and
    # the tool servers once started.
    with closing(env):
        if options.base_url and policy is None:
            # a wrong URL, model name or key stops us here in one line, before a folder or the dataset is
            # touched, not as every episode failing
            policy = load_policy(options, model, console)
            policy.check_served()
        if not (options.shifts or options.reference):
            return _run_loaded(options, console, policy, runner, model, env)
        # the set and each shifted set on one engine and one event loop, as in run_evals
        policy = policy or load_policy(options, model, console)
        with ExitStack() as stack:
            runner = runner or stack.enter_context(blocking.Runner())
            score = lambda each: _run_loaded(each, console, policy, runner, model, env)  # noqa: E731
            report = run_shifts(options, console, score, env.reward.required_fields)
        metrics = Path(options.output) / METRICS
        write_json(metrics, {**json.loads(metrics.read_text(encoding="utf-8")), **report.metrics})
        return report.code


def _run_loaded(
    options: EvalOptions,
    console: Console,
    policy: Any,
    runner: blocking.Runner | None,
    model: ModelChoice | None,
    env: Environment,
) -> int:
    """:func:`run_eval` once its environment is loaded (and closed by the caller whatever happens)."""
    # every row holds what the environment's rewards read (a reference answer for em), or we stop
    skipped: list[SkippedRecord] = []
    rows = load_dataset(options.dataset, options.limit, requires=env.reward.required_fields, skipped=skipped)
    if not rows:
        raise ValueError(f"{options.dataset}: no rows")
    for column in options.group_by:
        if not any(column in row for row in rows.values()):
            raise ValueError(f"--group-by {column}: no row of {options.dataset} has that column")
    # As in training, the environment's limit also applies: the smaller wins.
    max_turns = min(options.max_turns or env.max_turns, env.max_turns)
    out = Path(options.output)
    out.mkdir(parents=True, exist_ok=True)
    with _lock_output(out):  # one eval writes a folder at a time, until this run ends
        settings = options.result_settings()
        _check_settings(out / EVAL_CONFIG, settings)

        log = EvalLog.in_folder(out)
        logged = log.load(keep=resume_fields)  # what resuming compares, never the conversations
        check_same_dataset(logged, rows, log.path)
        done = current_records(logged, rows)
        tasks = pending_tasks(rows, options.samples, done)
        total = len(rows) * options.samples
        if total > len(tasks):
            console.print(
                f"resuming {out}: skipped {total - len(tasks)} of {total} episodes already in {log.path.name}"
            )
        changed = sum(1 for i, s in logged.keys() - done.keys() if i in rows and s < options.samples)
        if changed:
            console.print(f"running {changed} episodes again: their dataset rows changed since they ran")

        failures: list[dict[str, Any]] = []
        if tasks:
            policy = policy or load_policy(options, model, console)
            started = time.perf_counter()
            start_for(env, policy)
            run = _run_with_progress(tasks, policy, env, log, max_turns, options.concurrency, console, runner)
            failures = run.failures
            console.print(f"ran {run.ran} episodes in {time.perf_counter() - started:.1f} s")

        logged = log.load(keep=scored_fields)
        records = [r for (_, s), r in current_records(logged, rows).items() if s < options.samples]
        metrics = {**summarize(records, options.samples), "skipped_rows": len(skipped)}
        groups = {
            column: summarize_groups(records, rows, column, options.samples) for column in options.group_by
        }
        by = {f"by_{column}": by_value for column, by_value in groups.items()}
        write_json(out / METRICS, {**metrics, **by, "config": settings, "time": time.time()})
        console.print(metrics_table(metrics, title=results_title(options)))
        for column, by_value in groups.items():
            console.print(groups_table(by_value, column))
        console.print(f"trajectories: {log.path}\nmetrics: {out / METRICS}")
        if failures:
            first = failures[0]
            console.print(
                f"[red]{len(failures)} episodes failed[/red] (first: question {first['index']} sample "
                f"{first['sample']}: {first['error']}); run again with the same --output to retry them",
                highlight=False,
            )
            return 1
        return 0


def results_title(options: EvalOptions) -> str:
    """The results table's title: the dataset, the model and the LoRA checkpoint scored, if any
    (``test.jsonl · Qwen3-4B + v0-20261206-101500/checkpoint-100``)."""
    title = f"{Path(options.dataset).name} · {options.served_model or Path(str(options.model)).name}"
    if options.adapters:
        adapter = Path(options.adapters)
        title += f" + {adapter.parent.name}/{adapter.name}" if adapter.parent.name else f" + {adapter.name}"
    return title


def _check_settings(path: Path, settings: dict[str, Any]) -> None:
    if path.exists():
        try:
            before = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(before, dict):
                raise ValueError(f"a JSON object, got {type(before).__name__}")
        except (ValueError, UnicodeDecodeError) as exc:
            raise ValueError(
                f"{path}: not the settings this folder's results were scored with ({exc}); use another "
                "--output, or remove the folder to score it again"
            ) from None
        changed = {k: (before.get(k), v) for k, v in settings.items() if before.get(k) != v}
        if changed:
            detail = "; ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in changed.items())
            raise ValueError(
                f"{path.parent} holds results of other settings ({detail}): use another --output"
            )
        return
    write_json(path, settings)


def _run_with_progress(
    tasks: list[EvalTask],
    policy: Any,
    env: Environment,
    log: EvalLog,
    max_turns: int,
    concurrency: int,
    console: Console,
    runner: blocking.Runner | None,
) -> EvalRun:
    progress = Progress(
        TextColumn("episodes"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("EM {task.fields[em]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    )
    scores = [0.0, 0]  # the sum and count of EM so far: the bar's mean in constant time per episode
    lines = ProgressLines(len(tasks), console)  # where no live bar shows (a file, a pipe): plain lines
    with progress:
        bar = progress.add_task("episodes", total=len(tasks), em="-")  # "-" until a row with a reference ends

        def on_done(record: dict[str, Any]) -> None:
            score = episode_score(record, "em")  # as metrics.json counts it
            if score is not None:
                scores[0] += score
                scores[1] += 1
            em = f"{scores[0] / scores[1]:.3f}" if scores[1] else "-"
            progress.update(bar, advance=1, em=em)
            lines.done(em)

        run = evaluate(tasks, policy, env, log, max_turns=max_turns, concurrency=concurrency, on_done=on_done)
        return runner.run(run) if runner else blocking.run(run)


class ProgressLines:
    """The progress of an eval as plain lines, for a console that is no terminal (output to a file or a pipe,
    where the live bar shows only at the end): a line when another twentieth of the episodes has finished
    or a minute has passed since the last line, and at the last episode, as ``train`` prints its phases."""

    def __init__(self, total: int, console: Console, every_s: float = 60.0):
        self.total, self.console, self.every_s = total, console, every_s
        self.finished = 0
        self.started = self.last = time.monotonic()
        self._next = 0  # print when finished reaches it

    def done(self, em: str) -> None:
        """One more episode finished; ``em``: the running EM as the bar shows it."""
        self.finished += 1
        if self.console.is_terminal:
            return
        now = time.monotonic()
        if self.finished >= self._next or now - self.last >= self.every_s or self.finished == self.total:
            self.last, self._next = now, self.finished + max(1, self.total // 20)
            self.console.print(
                f"  episodes {self.finished}/{self.total} · EM {em} · {now - self.started:.0f} s",
                markup=False,
            )
