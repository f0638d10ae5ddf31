"""The evaluation loop: every (question, sample) through the training agent loop, resumably.

The loop, the :class:`Policy` protocol, what a resumed run skips and how dataset rows are read and skipped:
docs/eval.md ("The evaluation loop").
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from swift_rlfactory import redaction
from swift_rlfactory.data.answers import REFERENCE_COLUMNS, missing
from swift_rlfactory.data.qa import SkippedRecord, convert_qa_record, read_records
from swift_rlfactory.runs.eval_log import EvalLog, is_failed

from ..env.environment import Environment
from ..rewards import rules
from ..rewards.registry import GOLDEN_ANSWERS, row_has_field
from ..rollout.episode import Generation, Messages, Observe, run_episode
from ..rollout.images import ImageBudget
from ..tools.calls import HERMES, call_parser
from ..tools.toolset import DescriptionCap
from ..trajectory import Trajectory

logger = logging.getLogger(__name__)

# Role markers and <tool_response> tags around each observation (as the training scheduler counts them).
OBSERVATION_OVERHEAD = 12
# Row fields that are the prompt, not data for rewards (as the training adapter leaves them out).
_NOT_ROW = {"messages", "tools"}


class EpisodeModel(Protocol):
    """One trajectory's generator."""

    tokens_used: int | None  # prompt + completion tokens of the latest turn, once known

    async def generate(self, messages: Messages) -> Generation: ...


class Policy(Protocol):
    """What the evaluation loop needs from an inference backend."""

    max_length: int | None  # context budget in tokens, or None for no check
    max_tokens: int  # completion tokens allowed per turn, reserved when checking the budget
    call_format: str  # the tool-call format its prompt asks for (tools.calls), "hermes" if absent

    def render_prompt(
        self, messages: Messages, system_prompt: str | None, tools: list[dict] | None
    ) -> Messages: ...

    def new_episode(self) -> EpisodeModel: ...


@dataclass
class EvalTask:
    """One episode to run: sample ``sample`` of the dataset row at position ``index`` (:func:`load_dataset`)."""

    index: int
    sample: int
    row: dict[str, Any]


@dataclass
class EvalRun:
    """What one call of :func:`evaluate` did."""

    ran: int = 0
    failures: list[dict[str, Any]] = field(default_factory=list)  # their log records (see is_failed)


# -- data --------------------------------------------------------------------------------------------
def load_rows(
    path: str | Path,
    limit: int | None = None,
    requires: Mapping[str, Sequence[str]] | None = None,
    skipped: list[SkippedRecord] | None = None,
) -> list[dict[str, Any]]:
    """The rows of :func:`load_dataset`, in file order, without their positions (to convert or merge a
    file: ``build_sft.py``, ``eval_sets.py``)."""
    return list(load_dataset(path, limit, requires, skipped).values())


def load_dataset(
    path: str | Path,
    limit: int | None = None,
    requires: Mapping[str, Sequence[str]] | None = None,
    skipped: list[SkippedRecord] | None = None,
) -> dict[int, dict[str, Any]]:
    """Dataset rows as ms-swift rows, by their position in the file, from ``.jsonl``, ``.json`` (a list) or Search-R1 ``.parquet``.

    Rows that cannot be scored are skipped (and appended to ``skipped``), never scored 0; rows without a
    reference answer are kept but left out of EM, F1 and pass@k. ``limit`` keeps the first ``limit`` rows that
    can be scored. The rules: docs/eval.md ("Dataset rows").
    """
    path = Path(path).expanduser()
    skipped = [] if skipped is None else skipped
    try:
        records = read_records(path, skipped)
    except OSError as exc:  # missing, a folder, no permission
        raise ValueError(f"{path}: cannot read the dataset: {exc.strerror or exc}") from None
    rows: dict[int, dict[str, Any]] = {}
    wheres = []
    for record in records:
        try:
            row = _row(record.value)
            _check_fields(row, requires or {})
        except ValueError as exc:
            skipped.append(SkippedRecord(record.where, str(exc), record.position))
            continue
        rows[record.position] = row
        wheres.append(record.where)
    if not rows:
        why = _skipped_text(skipped) if skipped else "the file holds no records"
        raise ValueError(f"{path}: no row can be scored: {why}")
    if skipped:
        logger.warning(
            "%s: skipped %d of %d rows, which are not in any score: %s",
            path, len(skipped), len(rows) + len(skipped), _skipped_text(skipped),
        )  # fmt: skip
    _warn_of_repeats(list(rows.values()), wheres, path)
    return dict(list(rows.items())[:limit]) if limit is not None else rows


def _skipped_text(skipped: list[SkippedRecord], shown: int = 3) -> str:
    """The rows of ``skipped`` grouped by why, each reason said once with the first places it holds for:
    ``no answer: ... (2 rows: line 3, line 9)``."""
    by_why: dict[str, list[str]] = {}
    for where, why, _ in skipped:
        by_why.setdefault(why, []).append(where)
    parts = []
    for why, wheres in list(by_why.items())[:shown]:
        places = ", ".join(wheres[:shown]) + (", ..." if len(wheres) > shown else "")
        parts.append(f"{places}: {why}" if len(wheres) == 1 else f"{why} ({len(wheres)} rows: {places})")
    more = len(by_why) - shown
    return "; ".join(parts) + (f"; and {more} other reasons" if more > 0 else "")


def _warn_of_repeats(rows: list[dict[str, Any]], wheres: list[str], path: Path) -> None:
    """Log a warning naming the rows that repeat the ``id`` (``_id``) or the question of an earlier row of
    the same ``split``: each copy is scored, so that question weighs twice in EM (a file concatenated
    twice, a copy-paste). They are kept, not dropped: two rows may mean two samples on purpose."""
    first: dict[tuple[Any, ...], str] = {}
    repeats = []
    for row, where in zip(rows, wheres, strict=True):
        ident = row.get("id", row.get("_id"))
        keys = [("question", row.get("split"), question_of(row))]
        keys += [("id", row.get("split"), str(ident))] if ident is not None and not missing(ident) else []
        for key in keys:
            if key in first:
                repeats.append(f"{where} repeats the {key[0]} of {first[key]} ({key[2]!r:.60})")
                break
        for key in keys:
            first.setdefault(key, where)
    if repeats:
        logger.warning(
            "%s: %d rows repeat an earlier row of their split, and are each scored (that question counts "
            "twice): %s%s", path, len(repeats), "; ".join(repeats[:3]), " ..." if len(repeats) > 3 else "",
        )  # fmt: skip


SKIPPED_ROW = "skipped_row"  # the column of a row that holds the place of one skipped elsewhere


def skipped_row(why: str, **columns: Any) -> dict[str, Any]:
    """A row that holds the place of a row no one can score, ``why`` naming it (``"mine.jsonl: line 3: no
    question ..."``): :func:`load_dataset` skips it and says ``why``. A file made of other files
    (``eval_sets.py``) writes one for each skipped row of theirs, so every later row keeps its position
    when the bad one is fixed and the files merged again: an eval resumed on the new file runs the fixed
    row and keeps the others' results. ``columns``: kept beside it (the ``split`` it counts in)."""
    return {SKIPPED_ROW: why, **columns}


def _row(record: Any) -> dict[str, Any]:
    """A record as an ms-swift row: checked when it has ``messages``, converted when it is a QA record."""
    if not isinstance(record, dict):
        raise ValueError(f"a record is a JSON object, got {type(record).__name__}")
    if SKIPPED_ROW in record:
        raise ValueError(str(record[SKIPPED_ROW]))
    if "messages" not in record:
        return convert_qa_record(record)
    messages = record["messages"]
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise ValueError("'messages' must be a list of {role, content} objects")
    users = [m for m in messages if m.get("role") == "user"]
    if not users:
        raise ValueError("no question: 'messages' has no user message")
    content = users[-1].get("content")
    if not (content.strip() if isinstance(content, str) else content):  # text, or a list of parts
        raise ValueError(f"no question: the last user message's content is {content!r}")
    return record


def _check_fields(row: dict[str, Any], requires: Mapping[str, Sequence[str]]) -> None:
    """Raise ``ValueError`` naming the first field of ``requires`` that ``row`` lacks and who needs it."""
    for name, rewards in requires.items():
        if row_has_field(row, name):
            continue
        needs = f"which reward {', '.join(map(repr, rewards))} of the environment scores against"
        if name == GOLDEN_ANSWERS:
            columns = ", ".join(repr(c) for c in REFERENCE_COLUMNS)
            raise ValueError(f"no reference answer (none of {columns} holds one), {needs}")
        raise ValueError(f"no {name!r} field, {needs}")


def row_columns(row: dict[str, Any]) -> dict[str, Any]:
    """A row's fields other than its prompt: what rewards read (``golden_answers``, ``solution``, ...), as
    the trajectory and its log line carry them."""
    return {k: v for k, v in row.items() if k not in _NOT_ROW}


def question_of(row: dict[str, Any]) -> str:
    """The last user message of a row: identifies the question in the log."""
    for message in reversed(row.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return ""


def row_tools(row: dict[str, Any]) -> list[dict] | None:
    """A row's own ``tools`` column (a list, or JSON text), which training renders instead of the env's."""
    tools = row.get("tools")
    if isinstance(tools, str):
        tools = json.loads(tools) if tools.strip() else None
    return tools or None


# -- resuming ------------------------------------------------------------------------------------
def check_same_dataset(
    done: dict[tuple[int, int], dict[str, Any]],
    rows: Mapping[int, dict[str, Any]],
    path: Path,
    advice: str = "use another --output for another dataset",
) -> None:
    """Refuse a log (at ``path``) whose questions differ from the dataset's at the same index (a row's
    position, :func:`load_dataset`): ``eval`` would resume over another dataset's episodes, ``select`` pick
    rows by another dataset's scores. ``advice`` ends the error: what the caller's user should change."""
    for (index, _), record in done.items():
        if index in rows and record.get("question") != question_of(rows[index]):
            raise ValueError(
                f"{path} holds question {index} as {record.get('question')!r}, but the dataset has "
                f"{question_of(rows[index])!r}: {advice}"
            )


def _scored_against(question: Any, columns: Any) -> str:
    """A question and a row's columns as one canonical JSON text, serialised as the log writes them
    (``default=str``), so a row in memory and the copy its log line holds give the same text."""
    return json.dumps([question, columns], sort_keys=True, ensure_ascii=False, default=str)


def current_records(
    done: dict[tuple[int, int], dict[str, Any]], rows: Mapping[int, dict[str, Any]]
) -> dict[tuple[int, int], dict[str, Any]]:
    """The records of ``done`` that still count for ``rows``: of a row of the dataset, scored against that
    row as it is now (its question and every other column, :func:`row_columns`).

    A row whose golden answers (or any column a reward may read) changed under the same question has its
    records left out, so they neither count in the metrics nor stop :func:`pending_tasks` running the row
    again. The row's other messages and its ``tools`` are not compared: no log line keeps them as given.
    """
    now = {index: _scored_against(question_of(row), row_columns(row)) for index, row in rows.items()}
    return {
        (index, sample): record
        for (index, sample), record in done.items()
        if index in now and _scored_against(record.get("question"), record.get("row")) == now[index]
    }


def resume_fields(record: dict[str, Any]) -> dict[str, Any]:
    """What resuming reads of a log record (:func:`check_same_dataset`, :func:`current_records`,
    :func:`pending_tasks`): the question, the row it was scored against and whether it failed, so a resume
    holds these per episode (``EvalLog.load(keep=...)``), not its conversation."""
    return {k: record[k] for k in ("question", "row", "failed") if k in record}


def pending_tasks(
    rows: Mapping[int, dict[str, Any]], samples: int, done: Mapping[tuple[int, int], dict[str, Any]]
) -> list[EvalTask]:
    """Every (row, sample) without a finished record in ``done`` (a failed one is tried again), question
    by question; ``rows`` by position (:func:`load_dataset`)."""
    finished = {key for key, record in done.items() if not is_failed(record)}
    return [
        EvalTask(index, sample, row)
        for index, row in rows.items()
        for sample in range(samples)
        if (index, sample) not in finished
    ]


# -- the loop ----------------------------------------------------------------------------------------
def context_check(policy: Policy, episode: EpisodeModel) -> Callable[[Messages], bool] | None:
    """``fits`` for :func:`run_episode`: the latest turn's context plus the new observations, plus a full
    completion, must stay within ``policy.max_length`` (the training scheduler's ``context`` rule)."""
    if not policy.max_length:
        return None
    count = getattr(policy, "count_tokens", None) or (lambda text: len(text) // 3)

    def fits(messages: Messages) -> bool:
        if episode.tokens_used is None:
            return True
        new = 0
        for message in reversed(messages):
            if message.get("role") == "assistant":
                break
            new += count(str(message.get("content") or "")) + OBSERVATION_OVERHEAD
        return episode.tokens_used + new + policy.max_tokens <= policy.max_length

    return fits


def image_observer(episode: EpisodeModel, env: Environment) -> Observe | None:
    """How ``episode``'s model is shown the images from tools: its ``show_images`` (a served vision
    model's), held to ``env``'s limits, or ``None`` (the model reads each image's note)."""
    show = getattr(episode, "show_images", None)
    return None if show is None else partial(show, ImageBudget.of(env.config.limits))


def start_for(env: Environment, policy: Policy) -> None:
    """Start ``env``'s tools for episodes of ``policy``, its observations truncated by the policy's own
    token counter when it has one (exact, as the training adapter counts them)."""
    env.start()
    count = getattr(policy, "count_tokens", None)
    if count is not None:
        env.executor.count_tokens = count


async def run_row(
    row: dict[str, Any],
    policy: Policy,
    env: Environment,
    max_turns: int,
    tools: list[dict],
    cap: DescriptionCap | None = None,
    *,
    key: str,
    score: bool = True,
) -> Trajectory:
    """One episode of dataset row ``row`` through the agent loop, in an episode state of its own (keyed
    ``key`` plus the episode's id) set up from the row's columns and torn down when it ends; scored by the
    environment's rewards before the teardown when ``score``. A row's own ``tools`` column is offered
    instead of ``tools``, its descriptions cut by ``cap`` (the environment's
    ``limits.max_description_chars`` when not given), as the environment's own tools are."""
    own = row_tools(row)
    if own:
        cap = cap or DescriptionCap(env.config.limits.max_description_chars)
        own = cap.schemas(own, "the dataset's tools column")
    offered = own or tools
    prompt = policy.render_prompt(list(row.get("messages") or []), env.system_prompt, offered)
    episode = policy.new_episode()
    columns = row_columns(row)
    # setup -> turns -> rewards -> teardown: the rewards read the final state before it is torn down
    scope_key = f"{key}-{id(episode)}"
    async with env.episodes.scope(scope_key, columns) as state:
        trajectory = await run_episode(
            prompt,
            episode.generate,
            env.executor,
            max_turns,
            env.config.limits.max_calls_per_turn,
            fits=context_check(policy, episode),
            row=columns,
            parse=call_parser(getattr(policy, "call_format", HERMES), offered),
            state=state,
            episode=scope_key if env.episodes.enabled else None,
            user=env.user,
            observe=image_observer(episode, env),
        )
        if score:
            trajectory.tool_env = env  # tool-verified rewards: trajectory.call_tool runs env's executor
            await env.reward.ascore([trajectory])
    return trajectory


async def run_task(
    task: EvalTask,
    policy: Policy,
    env: Environment,
    max_turns: int,
    tools: list[dict],
    cap: DescriptionCap | None = None,
) -> dict:
    """Run one episode (:func:`run_row`), score it, and return its log record."""
    row = task.row
    trajectory = await run_row(
        row, policy, env, max_turns, tools, cap, key=f"eval-{task.index}-{task.sample}"
    )
    metrics = {
        "em": rules.em(trajectory),
        "f1": rules.f1(trajectory),
        "tool_calls": len(trajectory.tool_calls),
        "tool_errors": sum(1 for c in trajectory.tool_calls if c.get("error")),
    }
    return {
        "index": task.index,
        "sample": task.sample,
        "question": question_of(row),
        **trajectory.to_dict(),
        "metrics": metrics,
        "time": time.time(),
    }


async def evaluate(
    tasks: list[EvalTask],
    policy: Policy,
    env: Environment,
    log: EvalLog,
    *,
    max_turns: int,
    concurrency: int = 16,
    on_done: Callable[[dict[str, Any]], None] | None = None,
) -> EvalRun:
    """Run ``tasks`` with at most ``concurrency`` episodes in flight, appending each record to ``log`` and
    handing it to ``on_done``.

    An episode that raises (an unreachable server, a prompt over the engine's limit) is logged as a failed
    record (:func:`is_failed`) whose error has every known secret redacted, and returned in
    :attr:`EvalRun.failures`; :func:`pending_tasks` gives it to the next run again.
    """
    tools = env.tool_schemas()
    cap = DescriptionCap(env.config.limits.max_description_chars)  # one per run: each tool warned of once
    run = EvalRun()
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(task: EvalTask) -> None:
        async with gate:
            try:
                record = await run_task(task, policy, env, max_turns, tools, cap)
                log.append(record)  # inside: one record that cannot be written fails its episode only
            except Exception as exc:
                logger.debug("episode %s/%s failed", task.index, task.sample, exc_info=True)
                record = {
                    "index": task.index,
                    "sample": task.sample,
                    "question": question_of(task.row),
                    "row": row_columns(task.row),  # what current_records compares, as a finished line
                    "failed": True,
                    "error": redaction.redact(f"{type(exc).__name__}: {exc}"),
                    "time": time.time(),
                }
                log.append(record)
                run.failures.append(record)
            else:
                run.ran += 1
            if on_done is not None:
                on_done(record)

    try:
        await asyncio.gather(*(one(task) for task in tasks))
    finally:
        close = getattr(policy, "aclose", None)
        if close is not None:
            await close()
    return run
