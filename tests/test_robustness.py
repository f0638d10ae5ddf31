"""``swift-rlfactory eval --shifts``: the set scored under phrasing shifts beside the original, against a
served model whose answers depend on the wording, through the real agent loop and tools."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from swift_rlfactory.eval.robustness import Alarm, ShiftScore, find_alarms, shift_metrics
from swift_rlfactory.runs.log import read_trajectories

from .conftest import AGENT_ENV, ScriptedChat, SumEngine

QUESTIONS = ["What is 3 + 4?", "Compute 2 + 5.", "What is 6 + 1?"]


def wording_sensitive(body: dict[str, Any]) -> str:
    """Calls ``add`` with the question's two numbers, then answers the sum, except for a question that
    says "Compute" or is all lower case (a model that learnt one wording): then it answers 0."""
    question = next(m["content"] for m in body["messages"] if m["role"] == "user")
    last = body["messages"][-1]
    if last["role"] == "user":
        a, b = map(int, re.findall(r"\d+", last["content"]))
        return "<tool_call>\n" + json.dumps({"name": "add", "arguments": {"a": a, "b": b}}) + "\n</tool_call>"
    wrong = "Compute" in question or question == question.lower()
    return f"<answer>{0 if wrong else last['content']}</answer>"


def run(server: ScriptedChat, dataset: Path, out: Path, *extra: str) -> int:
    from swift_rlfactory.cli import main

    return main([
        "eval", "--env", str(AGENT_ENV), "--base-url", f"http://127.0.0.1:{server.port}/v1",
        "--served-model", "scripted", "--dataset", str(dataset), "--output", str(out), *extra,
    ])  # fmt: skip


@pytest.fixture()
def dataset(tmp_path: Path) -> Path:
    path = tmp_path / "set.jsonl"
    rows = [{"messages": [{"role": "user", "content": q}], "solution": str(sum(map(int, re.findall(r"\d+", q))))}
            for q in QUESTIONS]  # fmt: skip
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_each_shift_is_scored_beside_the_original_on_the_same_questions(
    tmp_path: Path, dataset: Path, capsys
):
    out = tmp_path / "out"
    with ScriptedChat(wording_sensitive) as server:
        code = run(server, dataset, out, "--shifts", "lowercase,paraphrase,typos")
        printed = capsys.readouterr().out
        assert code == 0, printed  # an alarm, but no --fail-on-alarm
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["em"] == pytest.approx(2 / 3) and metrics["questions"] == 3
        # lowercase: every question, all answered wrong, against the original's 2 of 3
        assert metrics["shift/lowercase/questions"] == 3 and metrics["shift/lowercase/em"] == 0.0
        assert metrics["shift/lowercase/em_original"] == pytest.approx(2 / 3)
        # paraphrase applies to the two "What is" questions only: compared with the original on those two
        assert metrics["shift/paraphrase/questions"] == 2 and metrics["shift/paraphrase/em"] == 1.0
        assert metrics["shift/paraphrase/em_original"] == 1.0
        assert metrics["shift/typos/questions"] == 0 and metrics["shift/typos/em"] is None  # no long word
        assert metrics["shift/worst/name"] == "lowercase" and metrics["shift/worst/em"] == 0.0
        assert metrics["shift/alarms"] == [
            {
                "shift": "lowercase",
                "em": 0.0,
                "against": "original",
                "baseline": pytest.approx(2 / 3),
                "margin": 0.05,
            }
        ]
        assert metrics["shift_check"]["shifts"] == ["lowercase", "paraphrase", "typos"]
        assert "robustness under phrasing shifts" in printed and "ALARM" in printed and "typos" in printed
        # each shifted set is an eval of its own, whose episodes pair with the original's by index
        folder = out / "shifts" / "paraphrase-seed0"
        records = read_trajectories(folder / "trajectories.jsonl")
        assert sorted((r["index"], r["question"]) for r in records) == [
            (0, "What exactly is 3 + 4?"), (2, "What exactly is 6 + 1?"),
        ]  # fmt: skip
        asked = len(server.requests)
        assert asked == 2 * (3 + 3 + 2)  # two turns an episode: the set, lowercase, paraphrase

        # the same command again resumes every folder: nothing is asked twice, and it fails on the alarm
        assert run(server, dataset, out, "--shifts", "lowercase,paraphrase,typos", "--fail-on-alarm") == 3
        assert len(server.requests) == asked
        assert json.loads((out / "metrics.json").read_text())["shift/lowercase/em"] == 0.0


def test_scores_fall_below_a_reference_run(tmp_path: Path, dataset: Path, capsys):
    reference = tmp_path / "best"
    reference.mkdir()
    (reference / "metrics.json").write_text(json.dumps({"em": 0.7, "shift/paraphrase/em": 1.0}))
    with ScriptedChat(wording_sensitive) as server:
        code = run(server, dataset, tmp_path / "out", "--shifts", "paraphrase,polite", "--reference",
                   str(reference), "--fail-on-alarm")  # fmt: skip
        printed = capsys.readouterr().out
        metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
        # the original (0.667) is within 0.05 of the reference's 0.7; polite (0.667, "Compute" still wrong)
        # is compared with the reference's original EM since the reference ran no polite shift: within too
        assert metrics["shift/alarms"] == [] and code == 0, printed
        assert "reference" in printed
        asked = len(server.requests)
        code = run(server, dataset, tmp_path / "out", "--shifts", "paraphrase,polite", "--reference",
                   str(reference), "--shift-margin", "0.01", "--fail-on-alarm")  # fmt: skip
        assert code == 3 and len(server.requests) == asked  # resumed: every episode already scored
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert [(a["shift"], a["against"]) for a in metrics["shift/alarms"]] == [
        ("original", "reference"), ("polite", "reference"),
    ]  # fmt: skip
    assert metrics["shift_check"]["reference"] == str(reference.resolve())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--shifts", "lowercase,nonsense"], "unknown shift 'nonsense'"),
        (
            ["--reference", "/nonexistent/metrics.json"],
            "--reference /nonexistent/metrics.json: not an eval's",
        ),
    ],
)
def test_a_bad_shift_or_reference_stops_before_any_episode(
    tmp_path: Path, dataset: Path, capsys, extra, message
):
    with ScriptedChat(wording_sensitive) as server:
        assert run(server, dataset, tmp_path / "out", *extra) == 2
        assert server.requests == []
    assert message in capsys.readouterr().err


def test_alarms_fall_past_the_margin_only():
    results = [
        ShiftScore("a", 10, 10, em=0.75, em_original=0.8),
        ShiftScore("b", 10, 10, em=0.7, em_original=0.8),
    ]
    alarms = find_alarms({"em": 0.8}, results, None, margin=0.05)
    assert alarms == [Alarm("b", 0.7, "original", 0.8, 0.05)]  # a: exactly the margin, not past it
    assert "shift b: EM 0.7000 is 0.1000 below the original's on the same questions" in alarms[0].text()
    assert find_alarms({"em": 0.8}, results, {"em": 0.9, "shift/a/em": 0.75}, margin=0.05) == [
        Alarm("original", 0.8, "reference", 0.9, 0.05),
        Alarm("b", 0.7, "original", 0.8, 0.05),
        Alarm("b", 0.7, "reference", 0.9, 0.05),
    ]
    assert shift_metrics(results, [])["shift/worst/name"] == "b"
    assert "shift/worst/em" not in shift_metrics([ShiftScore("c", 0, 3)], [])  # no shift applied


def wording(adapter: str, question: str) -> bool:
    """Whom the checkpoints of the choice test get wrong: ``checkpoint-10`` every question in lower case,
    any other (``checkpoint-20``) 8 + 9 whatever its wording."""
    if adapter == "checkpoint-10":
        return question == question.lower()
    return [int(n) for n in re.findall(r"\d+", question)] == [8, 9]


@pytest.mark.parametrize(("by", "best"), [("em", "checkpoint-10"), ("worst-shift", "checkpoint-20")])
def test_choose_the_checkpoint_by_em_or_by_its_worst_shift(tmp_path: Path, monkeypatch, by: str, best: str):
    from swift_rlfactory.cli import main
    from swift_rlfactory.eval import command

    monkeypatch.setattr(command, "load_policy", lambda *args, **kwargs: SumEngine(wording))
    checkpoints = [tmp_path / "run" / name for name in ("checkpoint-10", "checkpoint-20")]
    for folder in checkpoints:
        folder.mkdir(parents=True)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")  # a local model folder; the engine is the fake
    dataset = tmp_path / "q.jsonl"
    pairs = [(3, 4), (2, 5), (6, 1), (8, 9)]
    dataset.write_text("".join(
        json.dumps({"messages": [{"role": "user", "content": f"What is {a} + {b}?"}], "solution": str(a + b)}) + "\n"
        for a, b in pairs
    ))  # fmt: skip
    code = main([
        "eval", "--env", str(AGENT_ENV), "--model", str(tmp_path / "model"), "--dataset", str(dataset),
        "--output", str(tmp_path / "out"), "--adapters", *map(str, checkpoints), "--shifts", "lowercase,polite",
        "--choose-by", by,
    ])  # fmt: skip
    assert code == 0
    chosen = json.loads((tmp_path / "out" / "chosen.json").read_text())
    assert chosen["checkpoint"] == str(tmp_path / "run" / best) and chosen["by"] == by
    worst = {Path(c).name: s for c, s in chosen["scores"].items()}
    assert worst == ({"checkpoint-10": 1.0, "checkpoint-20": 0.75} if by == "em" else
                     {"checkpoint-10": 0.0, "checkpoint-20": 0.75})  # fmt: skip
    ten = json.loads((tmp_path / "out" / "checkpoint-10" / "metrics.json").read_text())
    assert ten["shift/lowercase/em"] == 0.0 and ten["shift/polite/em"] == 1.0  # scored with its own adapter


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--choose-by", "em"], "--choose-by chooses among several --adapters"),
        (["--adapters", "a", "b", "--choose-by", "worst-shift"], "--choose-by worst-shift needs --shifts"),
    ],
)
def test_choose_by_needs_several_checkpoints_and_shifts(
    tmp_path: Path, dataset: Path, capsys, extra, message
):
    from swift_rlfactory.cli import main

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    code = main(["eval", "--env", str(AGENT_ENV), "--model", "x", "--dataset", str(dataset), "--output",
                 str(tmp_path / "out"), *[str(tmp_path / e) if e in "ab" else e for e in extra]])  # fmt: skip
    assert code == 2 and message in capsys.readouterr().err


def test_choose_needs_the_score_it_ranks_by(tmp_path: Path):
    from swift_rlfactory.eval.choose import choose

    for name, metrics in {"a": {"em": 0.5}, "b": {"em": 0.6}, "c": {"em": 0.6}}.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.json").write_text(json.dumps(metrics))
    folders = {name: tmp_path / name for name in "abc"}
    assert choose(folders)["checkpoint"] == "b"  # a tie goes to the earlier checkpoint
    with pytest.raises(ValueError, match="no eval holds 'shift/worst/em'"):
        choose(folders, "worst-shift")
    with pytest.raises(ValueError, match="no eval's metrics.json"):
        choose({"d": tmp_path / "d"})
