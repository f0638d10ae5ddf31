"""The Agent RL tab's handlers called as gradio calls them, without a browser: what each shows for good and
bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("gradio", reason="the ui extra is not installed: pip install -e '.[ui]'")

from swift_rlfactory.ui import launch_form, page  # noqa: E402

from .conftest import FakeSwift  # noqa: E402


@pytest.fixture
def format_env(tmp_path: Path) -> Path:
    """An environment with one rule reward and no tools, so scoring starts nothing."""
    path = tmp_path / "env.yaml"
    path.write_text("name: plain\nreward:\n  - {name: format}\n")
    return path


@pytest.mark.parametrize("total", ['"0.5"', "[1]", "true"])
def test_try_a_reward_shows_a_logged_total_that_is_not_a_number_as_text(format_env: Path, total: str):
    pasted = '{"messages": [], "rewards": {"total": ' + total + "}}"
    shown = page._score(str(format_env), "", None, pasted)
    assert "cannot score" not in shown
    assert "not a number" in shown


def test_try_a_reward_shows_a_logged_number_total(format_env: Path):
    shown = page._score(str(format_env), "", None, '{"messages": [], "rewards": {"total": 0.123456}}')
    assert "the log recorded total 0.1235" in shown


def launch_values(env: Path, output_dir: Path, **changed) -> list:
    """The Launch form's values in the order gradio passes them, with ``changed`` fields replaced."""
    values = dict(
        model="m", dataset="d", env=str(env), output_dir=str(output_dir), steps=10, lora_rank=8, mode="cpu",
        gpu_memory_utilization=0.5, max_turns=4, num_generations=4, batch_size=4, max_completion_length=512,
        learning_rate=1e-5, extra="",
    )  # fmt: skip
    return list({**values, **changed}.values())


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("steps", None),  # an emptied number box
        ("steps", float("inf")),
        ("steps", 2.5),
        ("lora_rank", float("nan")),
        ("max_completion_length", -5),
        ("max_completion_length", 0),
        ("learning_rate", 0),
        ("learning_rate", -1.0),
        ("learning_rate", None),
        ("learning_rate", float("inf")),
        ("gpu_memory_utilization", None),
    ],
)
def test_launch_refuses_a_bad_number_naming_its_field(format_env: Path, tmp_path: Path, field: str, value):
    values = launch_values(format_env, tmp_path / "out", **{field: value})
    shown = launch_form._command(*values)
    assert shown.startswith(f"# invalid: {field}:"), shown
    message, _ = launch_form._start(*values)
    assert message.startswith(f"invalid: {field}:"), message
    assert not (tmp_path / "out").exists()  # nothing was started


def test_launch_takes_whole_numbers_gradio_sends_as_floats(format_env: Path, tmp_path: Path):
    shown = launch_form._command(
        *launch_values(format_env, tmp_path, steps=20.0, max_completion_length=256.0)
    )
    assert "--max_steps 20 " in shown and "--max_completion_length 256 " in shown


def test_start_again_stops_the_old_trainer_before_the_new_one_starts(
    format_env: Path, tmp_path: Path, fake_swift: FakeSwift
):
    values = launch_values(format_env, tmp_path / "out")
    launch_form._start(*values)
    fake_swift.wait_for("start")
    message, _ = launch_form._start(*values)
    assert message.startswith("started"), message
    fake_swift.wait_for("start", count=2)
    first, second = fake_swift.pids()
    # one trainer per output folder at any time, so the new one's log is not written by two
    assert fake_swift.lines() == ["start", str(first), "exit", str(first), "start", str(second)]
    assert launch_form._stop(str(tmp_path / "out")) == "stopped"


def table_note(folder: str) -> str:
    """The note the Trajectories tab shows over its table for ``folder``, no filter set."""
    return page._table(folder, "all", "all", "", "", "all", False, "")[-1]


def test_the_trajectory_table_says_why_it_is_empty(tmp_path: Path):
    """A mistyped folder, a run that has not finished a trajectory yet, and no folder at all each say so,
    where the table said "0 shown of 0 trajectories" for all three."""
    assert table_note(str(tmp_path / "typo")) == f"no such folder: `{tmp_path / 'typo'}`"
    starting = tmp_path / "run"
    starting.mkdir()
    (starting / "logging.jsonl").write_text('{"model_info": "the trainer has only just started"}\n')
    assert table_note(str(starting)).startswith(f"no trajectories.jsonl in `{starting}` yet")
    assert table_note("") == "open a run or eval folder"
    (starting / "trajectories.jsonl").write_text("")  # created: an honest count from now on
    assert table_note(str(starting)) == "0 shown of 0 trajectories"


def test_lines_of_logging_jsonl_that_are_not_json_are_counted_on_the_metrics_tab(tmp_path: Path):
    step = '{"loss": 1.0, "reward": 0.5, "global_step/max_steps": "%d/9"}\n'
    (tmp_path / "logging.jsonl").write_bytes(
        b"not json\n\n\xff\xfe\n" + (step % 1).encode() + (step % 2).encode() + b'{"loss": 0.5, "rew'
    )
    status = page._plots(str(tmp_path))[-1]
    assert status.endswith(
        "2 logged steps, 0 trajectories; 2 lines of logging.jsonl are not JSON objects and left out"
    )


def test_an_eval_folder_shows_its_results_on_the_metrics_tab(tmp_path: Path):
    """An eval logs no training steps: its metrics.json is shown where "no steps logged yet: ... when the
    trainer logs its first step" was, which told an eval's reader to wait for a trainer."""
    metrics = {
        "questions": 3,
        "episodes": 3,
        "em": 2 / 3,
        "samples": 1,
        "pass@1": 2 / 3,
        "failed_episodes": 1,
    }
    (tmp_path / "metrics.json").write_text(json.dumps({**metrics, "config": {"env": "e.yaml"}, "time": 1.5}))
    (tmp_path / "trajectories.jsonl").write_text("")
    status = page._plots(str(tmp_path))[-1]
    assert "no steps logged yet" not in status and "eval results" in status
    assert "| **EM** | 0.6667 |" in status and "| failed_episodes | 1 |" in status
    assert "config" not in status and "time" not in status


def test_the_table_and_the_viewer_say_which_lines_a_resumed_run_logged_again(tmp_path: Path):
    step = '{"step": %d, "messages": [{"role": "user", "content": "%s"}], "rewards": {"total": 1.0}}\n'
    (tmp_path / "trajectories.jsonl").write_text(
        step % (1, "a") + step % (2, "b") + step % (3, "c") + step % (2, "d")
    )
    note = table_note(str(tmp_path))
    assert note == (
        "2 shown of 2 trajectories; 2 trajectories of steps a resumed run logged again are left out (the "
        "resumed run's lines count)"
    )
    for stopped in ("1", "2"):
        shown = page._show(str(tmp_path), stopped)
        assert "from a run that stopped: the run resumed at step 2 (trajectory #3) logs that step" in shown
    assert "resumed" not in page._show(str(tmp_path), "3") and "resumed" not in page._show(str(tmp_path), "0")


def test_the_live_refresh_sends_only_the_charts_that_changed(tmp_path: Path):
    """A chart sent again is drawn again from scratch: the 3 s refresh of a long run on a slow machine kept
    its charts blank (CI 2026-12-06). Unchanged charts are skipped; a new step redraws what it changed."""
    import gradio as gr

    recorded = Path(__file__).parent / "fixtures" / "run" / "logging.jsonl"
    lines = recorded.read_text().splitlines()
    (tmp_path / "logging.jsonl").write_text(lines[0] + "\n")
    *values, shown = page._shown_plots(str(tmp_path))
    assert all(value != gr.skip() for value in values)  # the first look: everything
    *again, still = page._changed_plots(str(tmp_path), True, shown)
    assert again == [gr.skip()] * len(again) and still == shown
    with open(tmp_path / "logging.jsonl", "a") as f:
        f.write(lines[1] + "\n")
    *after, now = page._changed_plots(str(tmp_path), True, shown)
    redrawn = [name for name, value in zip([*page.PLOTS, "status"], after, strict=True) if value != gr.skip()]
    assert "Reward and components" in redrawn and "status" in redrawn and now != shown
    assert page._changed_plots(str(tmp_path), False, now) == [gr.skip()] * (len(page.PLOTS) + 2)
