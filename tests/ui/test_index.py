"""The trajectory index and the step timeline, without a browser: offsets, filters, growth, big logs."""

from __future__ import annotations

import asyncio
import json
import time
import tracemalloc
from pathlib import Path

import pytest

from swift_rlfactory.adapters.swift_timeline import StepTimeline
from swift_rlfactory.ui.index import ERROR_CHARS, Filters, TrajectoryIndex
from swift_rlfactory.ui.render import SHOWN_CHARS, attempts_html, trajectory_html
from swift_rlfactory.ui.runs import Run

from .conftest import RECORDED_RUN


def line(
    step: int, prompt: str, reward: float, stop: str = "answer", error: str | None = None, pad: int = 0
) -> str:
    call = {
        "tool": "add",
        "arguments": {"a": 1},
        "observation": "2",
        "error": error,
        "latency_s": 0.01,
        "turn": 1,
    }
    record = {
        "step": step,
        "messages": [
            {"role": "user", "content": prompt},
            {"role": "assistant", "content": "<tool_call>x</tool_call>" + "y" * pad},
            {"role": "tool", "content": "2"},
        ],
        "tool_calls": [call],
        "turns": 1,
        "stop_reason": stop,
        "rewards": {"em": reward, "total": reward},
    }
    return json.dumps(record) + "\n"


def test_filters_groups_and_reads_by_offset(tmp_path: Path):
    path = tmp_path / "trajectories.jsonl"
    path.write_text(
        line(1, "What is 1 + 1?", 1.0)
        + line(1, "What is 1 + 1?", 0.0, stop="max_turns")
        + line(1, "What is 2 + 2?", 0.5, error="boom")
        + line(2, 'Say "héllo"\nplease', 0.2)
    )
    index = TrajectoryIndex(path)
    assert index.refresh() == 4
    assert index.steps() == [1, 2]
    groups = index.groups(step=1)
    assert [len(g) for g in groups.values()] == [2, 1]  # one group per prompt of a step
    assert [e.number for e in index.select(Filters(reward_min=0.4))] == [0, 2]
    assert [e.number for e in index.select(Filters(reward_max=0.3, step=1))] == [1]
    assert [e.number for e in index.select(Filters(stop_reason="max_turns"))] == [1]
    assert [e.number for e in index.select(Filters(tool_errors_only=True))] == [2]
    assert [e.number for e in index.select(Filters(text='"HÉLLO"\nplease'))] == [3]  # as JSON escapes it
    assert index.read(3)["messages"][0]["content"] == 'Say "héllo"\nplease'


def test_text_search_ignores_case_beyond_ascii(tmp_path: Path):
    path = tmp_path / "trajectories.jsonl"
    # as TrajectoryLog writes: non-ASCII text raw (ensure_ascii=False), next to an all-ASCII line
    record = {
        "step": 1,
        "messages": [{"role": "user", "content": "Где находится Москва? Ärger in München, Straße"}],
    }
    path.write_text(json.dumps(record, ensure_ascii=False) + "\n" + line(1, "Plain ASCII", 0.0))
    index = TrajectoryIndex(path)
    index.refresh()
    for needle in ("Москва", "москва", "МОСКВА", "ärger", "ÄRGER", "MÜNCHEN", "STRASSE", "где"):
        assert [e.number for e in index.select(Filters(text=needle))] == [0], needle
    assert [e.number for e in index.select(Filters(text="plain ascii"))] == [1]
    assert index.select(Filters(text="Париж")) == []


def test_growing_log_is_read_incrementally_and_a_torn_line_waits(tmp_path: Path):
    path = tmp_path / "trajectories.jsonl"
    path.write_text(line(1, "a", 1.0))
    index = TrajectoryIndex(path)
    assert index.refresh() == 1
    whole = line(2, "b", 0.0)
    with open(path, "a") as f:
        f.write(whole[:20])  # a writer mid-line
    assert index.refresh() == 0
    with open(path, "a") as f:
        f.write(whole[20:])
    assert index.refresh() == 1 and index.read(1)["step"] == 2


def test_a_big_log_is_indexed_without_holding_it(tmp_path: Path):
    """~20 MB here (a 100 MB log scales linearly); memory stays a small fraction of the file."""
    path = tmp_path / "trajectories.jsonl"
    with open(path, "w") as f:
        for i in range(2000):
            f.write(line(i // 16, f"question {i // 4}", (i % 5) / 4, pad=10_000))
    size = path.stat().st_size
    tracemalloc.start()
    start = time.perf_counter()
    index = TrajectoryIndex(path)
    index.refresh()
    selected = index.select(Filters(reward_min=0.5), limit=200)
    record = index.read(1999)
    found = index.select(Filters(text="question 499"))
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(index.entries) == 2000 and len(selected) == 200 and record["step"] == 124
    assert [e.number for e in found] == [1996, 1997, 1998, 1999]
    assert peak < size / 4, (peak, size)
    assert elapsed < 60  # seconds, on a loaded 2-core machine; it is ~1 s on an idle one


def test_recorded_run_reads_and_renders():
    run = Run(RECORDED_RUN)
    assert len(run.metrics.rows) == 2 and len(run.trajectories.entries) == 8
    assert {p["metric"] for p in run.metrics.series(("reward", "rlfactory/"))} >= {"reward", "rlfactory/em"}
    html = trajectory_html(run.trajectories.read(0))
    assert "call</b> <code>add</code>" in html and "total" in html
    assert "<script" not in trajectory_html(
        {"messages": [{"role": "assistant", "content": "<script>x</script>"}]}
    )


# the line swift-rlfactory eval writes for an episode that failed on every attempt (eval/runner.py)
FAILED_EVAL = {
    "index": 3,
    "sample": 1,
    "question": "What is <i>2</i> + 5?",
    "row": {"solution": "7"},
    "failed": True,
    "error": "RuntimeError: answered 400: <b>maximum context</b> length (Bearer <api key>)",
    "time": 1.0,
}


def test_a_failed_eval_episode_is_an_entry_with_its_error_found_by_stop_reason_and_text(tmp_path: Path):
    path = tmp_path / "trajectories.jsonl"
    path.write_text(json.dumps(FAILED_EVAL) + "\n" + line(1, "What is 1 + 1?", 1.0))
    index = TrajectoryIndex(path)
    assert index.refresh() == 2
    failed = index.entries[0]
    assert (failed.stop_reason, failed.group, failed.prompt) == ("failed", "q3", "What is <i>2</i> + 5?")
    assert failed.reward is None and failed.error.startswith("RuntimeError: answered 400")
    assert index.stop_reasons() == ["answer", "failed"]
    assert [e.number for e in index.select(Filters(stop_reason="failed"))] == [0]
    assert [e.number for e in index.select(Filters(text="maximum context"))] == [0]

    html = trajectory_html(index.read(0))
    assert "episode failed on every attempt" in html and "question 3 · sample 1" in html
    assert "&lt;b&gt;maximum context&lt;/b&gt;" in html and "&lt;api key&gt;" in html  # escaped, as written
    assert "What is &lt;i&gt;2&lt;/i&gt; + 5?" in html
    assert "<b>maximum" not in html and "<i>2" not in html
    assert '<table class="rlf-rewards"' not in html  # never scored: no empty rewards table


def test_an_eval_episode_retried_counts_once_as_its_last_line(tmp_path: Path):
    """An eval run writes a failed episode's line, the next run with the same --output appends its retry:
    the index counts each (index, sample) once, as its last line (what eval's metrics.json counts), and
    the earlier attempts stay readable by number."""
    answered = {**FAILED_EVAL, "failed": False, "error": None, "stop_reason": "answer", "turns": 1}
    answered["rewards"] = {"em": 1.0, "total": 1.0}
    still = {**FAILED_EVAL, "index": 4, "question": "still refused", "error": "second refusal"}
    path = tmp_path / "trajectories.jsonl"
    lines = [FAILED_EVAL, {**still, "error": "first refusal"}, answered, still]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines) + line(1, "a training line", 0.5))
    index = TrajectoryIndex(path)
    assert index.refresh() == 5 and (index.count(), index.replaced()) == (3, 2)
    assert [e.number for e in index.select(Filters())] == [2, 3, 4]
    assert [e.number for e in index.select(Filters(stop_reason="failed"))] == [3]
    assert [e.number for e in index.select(Filters(text="first refusal"))] == []  # a replaced line
    assert [e.number for e in index.groups()["q3"]] == [2] and index.stop_reasons() == ["answer", "failed"]
    retried, replaced = index.entries[2], index.entries[0]
    assert retried.earlier == (0,) and index.latest(replaced) is retried and index.read(0)["failed"] is True

    shown = trajectory_html(index.read(2), attempts=attempts_html(retried, retried, [replaced]))
    assert "attempt 2 of question 3 · sample 1; earlier attempts: #0 (failed)" in shown
    assert "episode failed" not in shown
    old = attempts_html(replaced, index.latest(replaced), [])
    assert "trajectory #2 replaced it and is the one that counts" in old

    with open(path, "a") as f:  # a third run answers question 4: its failures are replaced too
        f.write(json.dumps({**answered, "index": 4, "question": "still refused"}) + "\n")
    assert index.refresh() == 1 and index.count() == 3 and index.entries[5].earlier == (1, 3)
    assert index.select(Filters(stop_reason="failed")) == [] and index.stop_reasons() == ["answer"]


def test_a_training_trajectory_that_stopped_with_an_error_shows_it(tmp_path: Path):
    record = json.loads(line(4, "q", 0.0, stop="error"))
    record["error"] = "on_turn_end: TimeoutError: <judge> did not answer"
    path = tmp_path / "trajectories.jsonl"
    path.write_text(json.dumps(record) + "\n")
    index = TrajectoryIndex(path)
    index.refresh()
    assert index.entries[0].error == record["error"] and index.entries[0].stop_reason == "error"
    html = trajectory_html(record)
    assert "on_turn_end: TimeoutError: &lt;judge&gt; did not answer" in html
    assert html.index("TimeoutError") < html.index("assistant · turn 1")  # above the turns
    assert '<table class="rlf-rewards"' in html


def test_a_huge_error_is_cut_on_the_page_and_in_the_index_but_kept_in_the_log(tmp_path: Path):
    error = "E" * 1_000_000
    path = tmp_path / "trajectories.jsonl"
    path.write_text(json.dumps({**FAILED_EVAL, "error": error}) + "\n")
    index = TrajectoryIndex(path)
    index.refresh()
    assert len(index.entries[0].error) == ERROR_CHARS
    html = trajectory_html(index.read(0))
    assert len(html) < 30_000 and f"({1_000_000 - SHOWN_CHARS} more characters in the log)" in html
    assert index.read(0)["error"] == error


@pytest.mark.parametrize(
    "written",
    [
        "{}",
        '{"failed": true}',  # no error, no question
        '{"failed": true, "error": {"code": 400}, "question": 7}',
        '{"messages": "hi", "tool_calls": {"a": 1}, "turns": "many", "rewards": [1], "step": true}',
        '{"messages": [1, null, {"role": "user"}], "tool_calls": [2, {"error": "x", "turn": "one", '
        '"latency_s": "slow"}], "rewards": {"total": "0.5", "em": true}, "turn_rewards": {"t": [null]}}',
        '{"index": "<q>", "sample": null, "stop_reason": 5, "reward": 0.25}',
    ],
)
def test_a_line_with_missing_or_odd_fields_is_indexed_and_shown(tmp_path: Path, written: str):
    path = tmp_path / "trajectories.jsonl"
    path.write_text(written + "\n" + line(1, "next", 1.0))
    index = TrajectoryIndex(path)
    assert index.refresh() == 2 and index.skipped == 0  # the line after it is read too
    html = trajectory_html(index.read(0), title="trajectory #0")
    assert "trajectory #0" in html and "<q>" not in html


def test_lines_that_are_not_json_objects_are_counted_and_a_torn_last_line_waits(tmp_path: Path):
    path = tmp_path / "trajectories.jsonl"
    path.write_bytes(
        b'[1, 2]\n"text"\nnot json\n\xff\xfe\n' + line(1, "a", 1.0).encode() + b'{"index": 0, "sam'
    )
    index = TrajectoryIndex(path)
    assert index.refresh() == 1 and index.skipped == 4 and index.entries[0].prompt == "a"


def test_a_rows_chat_history_is_shown_apart_from_the_generated_turns_and_their_scores():
    record = {
        "messages": [
            {"role": "user", "content": "earlier q"},
            {"role": "assistant", "content": "OLD-ANSWER"},
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "CALL-TURN"},
            {"role": "tool", "content": "2"},
            {"role": "assistant", "content": "ANSWER-TURN"},
        ],
        "tool_calls": [{"tool": "add", "arguments": {}, "observation": "2", "error": None, "turn": 1}],
        "turns": 2,
        "turn_rewards": {"turn_tool_success": [0.75, 0.25]},
    }
    html = trajectory_html(record)
    old, call, answer = (html.index(text) for text in ("OLD-ANSWER", "CALL-TURN", "ANSWER-TURN"))
    assert "assistant · history" in html[:old] and "turn score" not in html[:old]
    assert old < html.index("assistant · turn 1") < html.index("0.75") < call < html.index("<code>add</code>")
    assert html.index("<code>add</code>") < html.index("assistant · turn 2") < html.index("0.25") < answer
    assert "turn 3" not in html


def test_step_timeline_charges_each_phase_its_own_time():
    clock = [0.0]
    timeline = StepTimeline(clock=lambda: clock[0])

    class Trainer:
        def training_step(self):
            clock[0] += 1.0  # forward/backward
            self._generate_completions()

        def _generate_completions(self):
            clock[0] += 2.0  # generation
            asyncio.run(self._tools())
            self._score_completions()

        async def _tools(self):
            await asyncio.gather(
                self.multi_turn_scheduler.on_turn_end(Req("a")),
                self.multi_turn_scheduler.on_turn_end(Req("b")),
            )

        def _score_completions(self):
            clock[0] += 0.5

    class Req:
        def __init__(self, uuid):
            self.uuid = uuid

    class Scheduler:
        async def on_turn_end(self, request):
            clock[0] += 0.25  # two calls overlapping in wall time: each advances the shared clock
            await asyncio.sleep(0)

    trainer = Trainer()
    trainer.multi_turn_scheduler = Scheduler()
    assert set(timeline.install(trainer)) == {
        "training_step",
        "_generate_completions",
        "_score_completions",
        "on_turn_end",
    }
    timeline.begin_step()
    trainer.training_step()
    clock[0] += 0.1  # optimizer
    metrics = timeline.end_step()
    assert metrics["timeline/train_s"] == pytest.approx(1.0)
    assert metrics["timeline/generation_s"] == pytest.approx(2.0)
    assert metrics["timeline/tools_s"] == pytest.approx(0.5)
    assert metrics["timeline/reward_s"] == pytest.approx(0.5)
    assert metrics["timeline/other_s"] == pytest.approx(0.1)
    assert metrics["timeline/step_s"] == pytest.approx(4.1)
    assert metrics["timeline/tool_chain_s"] <= metrics["timeline/tools_s"]


def test_steps_a_resumed_run_logs_again_replace_the_stopped_runs_lines_of_them_and_after(tmp_path: Path):
    """A run logged steps 1-3 (two groups a step, two ranks writing) and stopped; resumed from its step-1
    checkpoint into the same folder, it logs step 2 again, then 3. The table shows each step's lines once,
    the resumed run's, where it showed steps 2 and 3 twice; the stopped run's lines are read by number."""
    path = tmp_path / "trajectories.jsonl"
    stopped = [line(s, f"q{s}{g}", 0.0) for s in (1, 2, 3) for g in "ab"]
    path.write_text("".join(stopped) + line(2, "again 2a", 1.0))
    index = TrajectoryIndex(path)
    assert index.refresh() == 7
    assert [e.number for e in index.select(Filters())] == [0, 1, 6]
    assert (index.count(), index.relogged(), index.steps()) == (3, 4, [1, 2])
    with open(path, "a") as f:  # the other rank's line of step 2, then step 3
        f.write(line(2, "again 2b", 1.0) + line(3, "again 3a", 1.0))
    index.refresh()
    assert [e.number for e in index.select(Filters())] == [0, 1, 6, 7, 8]
    assert [e.prompt for group in index.groups(step=2).values() for e in group] == ["again 2a", "again 2b"]
    assert [e.number for e in index.select(Filters(step=3))] == [8]
    assert index.select(Filters(text="q3a")) == []  # the stopped run's step 3
    assert (index.count(), index.relogged(), index.steps()) == (5, 4, [1, 2, 3])
    resumed = [index.resumed_by(e) for e in index.entries]
    assert [None if e is None else e.number for e in resumed] == [None, None, 6, 6, 6, 6, None, None, None]
    assert index.read(4)["messages"][0]["content"] == "q3a"


def test_a_step_of_an_eval_log_or_a_line_without_a_step_is_never_taken_for_a_resume(tmp_path: Path):
    path = tmp_path / "trajectories.jsonl"
    no_step = json.loads(line(1, "no step", 0.0))
    del no_step["step"]
    path.write_text(
        line(3, "a", 0.0) + json.dumps(no_step) + "\n" + json.dumps(FAILED_EVAL) + "\n" + line(3, "b", 0)
    )
    index = TrajectoryIndex(path)
    index.refresh()
    assert index.count() == 4 and index.relogged() == 0


def test_a_text_search_in_a_log_removed_since_it_was_indexed_finds_nothing(tmp_path: Path):
    path = tmp_path / "trajectories.jsonl"
    path.write_text(line(1, "a", 1.0))
    index = TrajectoryIndex(path)
    index.refresh()
    path.unlink()
    assert index.refresh() == 0 and index.count() == 1
    assert index.select(Filters(text="a")) == []  # where the search raised FileNotFoundError
