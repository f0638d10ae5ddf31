"""``swift-rlfactory rewards``: re-score a recorded trajectories file with an environment's reward spec.

The recorded file is a real one: the DeepSearch CPU-diagnosis eval run in ``tests/fixtures/deepsearch_cpu_eval/``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from swift_rlfactory.cli import main
from swift_rlfactory.rewards import judge_text
from swift_rlfactory.rewards.rescore import TrajectoryFileError, load_recorded
from swift_rlfactory.trajectory import Trajectory

from .test_judge import judge_url, server  # noqa: F401  (fixtures)

ROOT = Path(__file__).resolve().parents[1]
RECORDED = ROOT / "tests" / "fixtures" / "deepsearch_cpu_eval" / "trajectories.jsonl"
SAME_REWARDS = """\
reward:
  - {name: em, weight: 1.0}
  - {name: format, weight: 0.2}  # the weights that run used
  - {name: tool_use, weight: 0.05, args: {max_calls: 3}}
  - {name: turn_tool_success, weight: 0.0}
  - {name: turn_format, weight: 0.0}
"""


def env_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "env.yaml"
    path.write_text(text)
    return path


def test_rescoring_a_recorded_eval_run_reproduces_its_totals(tmp_path, capsys):
    env = env_file(tmp_path, SAME_REWARDS)
    assert main(["rewards", str(env), "--trajectories", str(RECORDED), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    lines = [json.loads(line) for line in RECORDED.read_text().splitlines() if line.strip()]
    assert len(report["rows"]) == len(lines) == 12
    assert report["components"] == ["em", "format", "tool_use", "turn_tool_success", "turn_format"]
    for row, line in zip(report["rows"], lines, strict=True):
        assert row["rewards"]["total"] == pytest.approx(line["rewards"]["total"])  # same spec, same scores
        assert row["recorded_total"] == pytest.approx(line["rewards"]["total"])
        turns = sum(1 for m in line["messages"] if m["role"] == "assistant")
        assert len(row["turn_rewards"]["turn_format"]) == len(row["turn_rewards"]["total"]) == turns
    assert report["summary"]["em"] == pytest.approx(sum(x["rewards"]["em"] for x in lines) / 12)
    assert "turn/turn_format" in report["summary"] and report["errors"] == 0
    # the table form names every component and the per-turn scores
    assert main(["rewards", str(env), "--trajectories", str(RECORDED.parent), "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "3 trajectories re-scored" in out and "per-turn scores" in out and "mean: em" in out
    assert out.count("turn_format") >= 3  # one per-turn row per trajectory


def test_rescoring_with_a_group_judge_sends_one_request_per_question(tmp_path, capsys, server):  # noqa: F811
    env = env_file(
        tmp_path,
        f"reward:\n  - {{name: judge, args: {{mode: group, base_url: '{server.url}', model: rule}}}}\n",
    )
    assert main(["rewards", str(env), "--trajectories", str(RECORDED), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    prompts = {judge_text.group_key(r.trajectory) for r in load_recorded(RECORDED)}
    assert server.requests() == len(prompts) < 12
    assert report["summary"]["judge/calls"] == len(prompts) and report["errors"] == 0


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ("", "no trajectories in the file"),
        ('{"messages": []}\nnot json at all\n', r"trajectories\.jsonl:2: not JSON"),
        ('{"messages": []}\n\n[1, 2]\n', r":3: expected a JSON object \(one trajectory\), got list"),
        ('{"messages": []}\n{"messages": [{"ro\n{"messages": []}', r":2: not JSON"),  # torn, not last
        ('{"messages": []}\n{"messages": [\n', r":2: not JSON"),  # finished (a newline), so not torn
        ('{"rewards": {}}\n', r":1: 'messages' must be a list"),
        ('{"messages": [{"content": "hi"}]}\n', r":1: messages\[0\] must be an object with a 'role'"),
        ('{"messages": [{"role": "user", "content": [1]}]}\n', r":1: messages\[0\]\.content must be text"),
        ('{"messages": [], "tool_calls": {"a": 1}}\n', r":1: 'tool_calls' must be a list"),
        ('{"messages": [], "row": []}\n', r":1: 'row' must be a object"),
        ('{"messages": [], "turns": null}\n', r":1: 'turns' must be a whole number"),  # was a TypeError
        ('{"messages": [], "turns": "2"}\n', r":1: 'turns' must be a whole number"),
    ],
)
def test_bad_files_fail_clearly_naming_the_line(tmp_path, capsys, content, message):
    path = tmp_path / "trajectories.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(TrajectoryFileError, match=message):
        load_recorded(path)
    env = env_file(tmp_path, "reward:\n  - {name: format}\n")
    assert main(["rewards", str(env), "--trajectories", str(path)]) == 2
    assert "--trajectories:" in capsys.readouterr().err


def test_a_folder_without_a_log_and_a_bad_env_fail_clearly(tmp_path, capsys):
    def printed() -> str:  # rich wraps the message at the console's width, which the tmp path can pass
        return " ".join(capsys.readouterr().err.split())

    assert main(["rewards", str(env_file(tmp_path, "reward: []\n")), "--trajectories", str(tmp_path)]) == 2
    assert "a folder without trajectories.jsonl" in printed()
    bad = env_file(tmp_path, "reward:\n  - {name: emm}\n")
    assert main(["rewards", str(bad), "--trajectories", str(RECORDED)]) == 2
    assert "reward[0].name: unknown reward 'emm'" in printed()


def test_recorded_lines_round_trip_through_trajectory():
    first = load_recorded(RECORDED, limit=1)[0]
    assert first.line == 1 and isinstance(first.trajectory, Trajectory)
    assert first.trajectory.rewards == {} and first.trajectory.golden_answers


def test_an_eval_log_with_a_failed_episode_rescores_the_finished_ones(tmp_path, capsys):
    """``eval`` logs an episode that failed on every attempt as a line without a trajectory: skipped."""
    lines = RECORDED.read_text().splitlines()[:2]
    failed = {"index": 5, "sample": 0, "question": "q", "failed": True, "error": "RuntimeError: HTTP 401"}
    path = tmp_path / "trajectories.jsonl"
    path.write_text("\n".join([lines[0], json.dumps(failed), lines[1]]) + "\n")
    assert [r.line for r in load_recorded(path)] == [1, 3]
    env = env_file(tmp_path, SAME_REWARDS)
    assert main(["rewards", str(env), "--trajectories", str(path), "--json"]) == 0
    assert [row["line"] for row in json.loads(capsys.readouterr().out)["rows"]] == [1, 3]


def test_a_torn_last_line_is_read_past_and_left_as_it_is(tmp_path, capsys, caplog):
    """A killed ``eval`` or training run leaves half a line at the end; ``eval`` cuts it when it resumes,
    so ``rewards`` must read the same file: it warns, scores the rest and does not touch the file."""
    lines = RECORDED.read_text().splitlines()[:2]
    path = tmp_path / "trajectories.jsonl"
    torn = "\n".join(lines).encode() + b"\n" + lines[1].encode()[:70]  # killed while writing line 3
    path.write_bytes(torn)
    assert [r.line for r in load_recorded(path)] == [1, 2]
    assert f"{path}:3 is unfinished" in caplog.text
    env = env_file(tmp_path, SAME_REWARDS)
    assert main(["rewards", str(env), "--trajectories", str(path), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["rows"]) == 2
    assert path.read_bytes() == torn


def test_an_output_dir_of_versioned_runs_is_read_at_its_newest_run(tmp_path, capsys):
    """``swift rlhf --output_dir out`` writes each run into ``out/v<N>-<timestamp>/``: the folder a user
    gave is the one to pass, and the newest run in it is the one scored (as ``view`` opens it)."""
    lines = RECORDED.read_text().splitlines()
    older, newer = tmp_path / "out" / "v0-20261201-100140", tmp_path / "out" / "v1-20261202-090000"
    for folder, text in ((older, lines[0]), (newer, "\n".join(lines[:2]))):
        folder.mkdir(parents=True)
        (folder / "trajectories.jsonl").write_text(text + "\n")
        (folder / "logging.jsonl").write_text("")
    os.utime(older, (1, 1))  # the newer run is the one written last
    env = env_file(tmp_path, SAME_REWARDS)
    assert main(["rewards", str(env), "--trajectories", str(tmp_path / "out"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [row["line"] for row in report["rows"]] == [1, 2]
    assert report["file"] == str(newer / "trajectories.jsonl")  # which run was scored is said
    assert main(["rewards", str(env), "--trajectories", str(tmp_path / "out")]) == 0
    assert f"read {newer / 'trajectories.jsonl'}" in capsys.readouterr().out  # in the table form too
