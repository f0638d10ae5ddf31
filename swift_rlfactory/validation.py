"""The validation beside training (``swift-rlfactory train --val-file``): each checkpoint scored on a val set.

A thread of ``train``'s own process scores the starting model (step 0), then each ``checkpoint-<step>``
ms-swift saves, one after another, each by a ``swift-rlfactory eval --shifts`` subprocess; it records each
in ``validation.jsonl``, raises the robustness alarms, can stop the trainer, and at the end chooses the
checkpoint on its worst shift, or the starting model when none beats it by more than the set's noise.
Cost, flags and files: docs/run.md#validation-beside-training.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from swift_rlfactory.eval.choose import choose
from swift_rlfactory.eval.robustness import ShiftScore, check_options, find_alarms
from swift_rlfactory.runs.folder import CHECKPOINT, METRICS, checkpoint_step, write_json
from swift_rlfactory.runs.validation import (
    SCORE,
    SHIFT,
    STOP_FILE,
    VALIDATION_DIR,
    VALIDATION_SUMMARY,
    WORST,
    append_record,
)

STEP_0 = "step-0"  # the eval folder of the starting model
SAVED = "trainer_state.json"  # the last file the trainer writes into a checkpoint: the save is complete


@dataclass
class ValOptions:
    """What ``--val-*`` asked for; ``shifts``: ``all`` or names (``--val-shifts``)."""

    file: Path
    shifts: str = "all"
    margin: float = 0.05
    reference: Path | None = None
    stop_on_alarm: bool = False
    engine: str | None = None  # the eval's --engine; None: its default (vLLM where torch sees a GPU)
    limit: int | None = None

    @classmethod
    def from_args(cls, args: Any) -> ValOptions | None:
        """The options ``train``'s ``--val-*`` flags give (``args``: its parsed namespace); ``None`` without
        ``--val-file``; ``ValueError`` for a ``--val-*`` flag without it."""
        if args.val_file is None:
            if args.val_stop_on_alarm or args.val_reference:
                raise ValueError("--val-reference and --val-stop-on-alarm need --val-file")
            return None
        return cls(args.val_file, args.val_shifts, args.val_margin, args.val_reference, args.val_stop_on_alarm,
                   args.val_engine, args.val_limit)  # fmt: skip

    def check(self) -> None:
        """Refuse, before training starts, a val file that is missing, a shift or a reference that is wrong."""
        if not Path(self.file).is_file():
            raise ValueError(f"--val-file {self.file}: no such file")
        check_options(self.shifts, self.reference)


@dataclass(frozen=True)
class EvalModel:
    """The model the trainer starts from, as ``eval`` loads it, and the environment variables it needs."""

    env: Path
    model: str
    model_type: str | None
    template: str | None
    env_vars: dict[str, str]


class Validator:
    """Scores step 0 and then each complete checkpoint of ``run_dir`` in a thread, one at a time."""

    def __init__(self, options: ValOptions, model: EvalModel, run_dir: Path, console: Console):
        self.options, self.model, self.run_dir, self.console = options, model, Path(run_dir), console
        self.records: list[dict[str, Any]] = []
        self.alarms: list[dict[str, Any]] = []
        self.stopped = False  # a stop was asked for
        self._training_done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="validation", daemon=True)
        self._step0: dict[str, Any] | None = None
        self._reference = check_options(None, options.reference)[1]

    def start(self) -> None:
        """Begin with step 0, then follow the checkpoints as the trainer saves them."""
        self._thread.start()

    def finish(self) -> dict[str, Any]:
        """After training: score the checkpoints not scored yet, choose the best, write the summary."""
        self._training_done.set()
        self._thread.join()
        summary = self.summary()
        write_json(self.run_dir / VALIDATION_SUMMARY, summary)
        return summary

    def _loop(self) -> None:
        self._score([(0, None)])
        while True:
            last_look = self._training_done.is_set()  # set before the look: a checkpoint saved last is seen
            pending = self._pending()
            if pending:  # every checkpoint saved meanwhile in one eval: one model load for all
                self._score(pending)
            elif last_look:
                return
            else:
                time.sleep(1.0)

    def _pending(self) -> list[tuple[int, Path | None]]:
        done = {r["checkpoint"] for r in self.records}
        found: list[tuple[int, Path | None]] = []
        for folder in self.run_dir.glob(f"{CHECKPOINT}*"):
            step = checkpoint_step(folder)
            if step is not None and (folder / SAVED).is_file() and folder.name not in done:
                found.append((step, folder))
        return sorted(found)

    def _score(self, checkpoints: list[tuple[int, Path | None]]) -> None:
        """Score ``checkpoints`` (step, adapter folder; ``None``: the starting model) in one ``eval``."""
        names = [STEP_0 if adapter is None else adapter.name for _, adapter in checkpoints]
        base = self.run_dir / VALIDATION_DIR
        out = base if len(names) > 1 else base / names[0]  # eval --adapters A B writes OUTPUT/<name>/ each
        out.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        with open(
            base / f"{names[0]}.log" if len(names) == 1 else base / f"{names[0]}-{names[-1]}.log", "w"
        ) as log:
            code = subprocess.call(self._command(out, [a for _, a in checkpoints if a is not None]), stdout=log,
                                   stderr=subprocess.STDOUT, env={**os.environ, **self.model.env_vars})  # fmt: skip
        seconds = (time.monotonic() - started) / len(names)
        for (step, adapter), name in zip(checkpoints, names, strict=True):
            metrics = _read_metrics(base / name)
            if metrics is None:
                self.console.print(
                    f"[yellow]validation of {escape(name)} failed (eval exit {code}); see {log.name}"
                )
                self.records.append({"checkpoint": name, "step": step, "error": f"eval exited with {code}"})
                continue
            self._recorded(self._record(name, step, metrics, seconds), stoppable=adapter is not None)

    def _recorded(self, record: dict[str, Any], stoppable: bool) -> None:
        self.records.append(record)
        append_record(self.run_dir, record)
        self.console.print(escape(_line(record)), soft_wrap=True)
        for alarm in record["alarms"]:
            self.console.print(
                f"[bold red]VALIDATION ALARM[/] step {record['step']}: {escape(alarm['text'])}"
            )
        if record["alarms"] and self.options.stop_on_alarm and stoppable and not self.stopped:
            self.stopped = True
            (self.run_dir / STOP_FILE).write_text(f"validation alarm at step {record['step']}\n")
            self.console.print("[bold red]stopping training after its current step (--val-stop-on-alarm)")

    def _command(self, out: Path, adapters: list[Path]) -> list[str]:
        o, m = self.options, self.model
        argv = [sys.executable, "-m", "swift_rlfactory.cli", "eval", "--env", str(m.env), "--model", m.model,
                "--dataset", str(o.file), "--output", str(out), "--shifts", o.shifts]  # fmt: skip
        for flag, value in (("--model-type", m.model_type), ("--template", m.template), ("--engine", o.engine),
                            ("--limit", o.limit)):  # fmt: skip
            if value is not None:
                argv += [flag, str(value)]
        return argv + (["--adapters", *map(str, adapters)] if adapters else [])

    def _record(self, name: str, step: int, metrics: dict[str, Any], seconds: float) -> dict[str, Any]:
        shifts = [
            ShiftScore(key.split("/")[1], metrics.get(f"shift/{key.split('/')[1]}/questions") or 0, 0, value)
            for key, value in metrics.items()
            if key.startswith("shift/") and key.endswith("/em") and key != "shift/worst/em"
        ]
        alarms = []
        if step == 0:
            self._step0 = metrics
        else:
            alarms += _alarms(metrics, shifts, self._step0, "step 0", self.options.margin)
        alarms += _alarms(metrics, shifts, self._reference, "reference", self.options.margin)
        self.alarms += alarms
        record: dict[str, Any] = {
            "step": step,
            "checkpoint": name,
            SCORE: metrics.get("em"),
            "val/f1": metrics.get("f1"),
        }
        record |= {f"{SHIFT}{s.name}": s.em for s in shifts}
        record |= {WORST: metrics.get("shift/worst/em"), "worst_shift": metrics.get("shift/worst/name")}
        return record | {
            "alarms": alarms,
            "seconds": round(seconds, 1),
            "eval": str(self.run_dir / VALIDATION_DIR / name),
        }

    def summary(self) -> dict[str, Any]:
        """The checkpoint chosen on the worst shift (``best_checkpoint``; ``None`` when none beat the
        starting model by more than the set's noise), the alarms and whether training was stopped by one."""
        scored = {r["checkpoint"]: r["eval"] for r in self.records if "eval" in r}
        incumbent = STEP_0 if STEP_0 in scored else None
        checkpoints = [name for name in scored if name != STEP_0]
        best = None
        if checkpoints:
            try:
                best = choose(scored, "worst-shift", incumbent)
            except ValueError:  # no shift applied to any question: choose on the set's own EM
                best = choose(scored, "em", incumbent)
        chosen = best["checkpoint"] if best else None
        return {
            "best_checkpoint": str(self.run_dir / chosen) if chosen not in (None, STEP_0) else None,
            "chosen": chosen,
            "chosen_by": best["by"] if best else None,
            "score": best["score"] if best else None,
            "gain": best.get("gain") if best else None,
            "alarms": self.alarms,
            "stopped_on_alarm": self.stopped,
            "checkpoints": len(checkpoints),
        }


def _alarms(metrics, shifts, baseline, against: str, margin: float) -> list[dict[str, Any]]:
    """The alarms of one checkpoint's ``metrics`` against a ``baseline`` eval's (step 0's or the reference's)."""
    if baseline is None:
        return []
    found = find_alarms(metrics, shifts, baseline, margin)
    alarms = []
    for a in found:
        if a.against != "reference":  # a shift below the same model's original: not what this check asks
            continue
        text = a.text() if against == "reference" else a.text().replace("the reference's", f"{against}'s")
        alarms.append({"shift": a.shift, "em": a.em, "against": against, "baseline": a.baseline,
                       "margin": margin, "text": text})  # fmt: skip
    return alarms


def _read_metrics(out: Path) -> dict[str, Any] | None:
    try:
        metrics = json.loads((out / METRICS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return metrics if isinstance(metrics, dict) and "em" in metrics else None


def _line(record: dict[str, Any]) -> str:
    def f(value: Any) -> str:
        return "-" if value is None else f"{value:.3f}"

    shifts = " ".join(f"{k.removeprefix(SHIFT)} {f(v)}" for k, v in record.items() if k.startswith(SHIFT))
    return (
        f"validation step {record['step']}: EM {f(record[SCORE])} · worst shift {f(record[WORST])} "
        f"({record.get('worst_shift') or '-'}) · {shifts} · {record['seconds']:.0f} s"
    )
