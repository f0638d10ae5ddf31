"""``eval/choose.py`` with an incumbent: a checkpoint replaces the starting model only when it beats it, on
the questions of the set its score comes from, on more questions than chance allows (eval folders on disk)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from swift_rlfactory.eval.choose import choose, paired_gain

from .conftest import AGENT_ENV, SumEngine

N = 200


def outcomes(wins: int = 0, losses: int = 0, right: int = 140) -> tuple[list[float], list[float]]:
    """(incumbent, challenger) EM per question over N: both right on ``right`` questions, the challenger
    alone on ``wins`` more, the incumbent alone on ``losses`` more."""
    incumbent = [1.0] * right + [0.0] * wins + [1.0] * losses
    challenger = [1.0] * right + [1.0] * wins + [0.0] * losses
    pad = [0.0] * (N - len(incumbent))
    return incumbent + pad, challenger + pad


def write_eval(folder: Path, original: list[float], typos: list[float] | None = None) -> Path:
    """An eval folder as ``eval --shifts typos`` writes one: records, metrics, the shift's own folder."""

    def write(where: Path, ems: list[float], metrics: dict) -> None:
        where.mkdir(parents=True, exist_ok=True)
        records = [
            {"index": i, "sample": 0, "question": f"q{i}", "row": {"solution": "a"}, "metrics": {"em": em}}
            for i, em in enumerate(ems)
        ]
        (where / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        (where / "metrics.json").write_text(json.dumps({"em": sum(ems) / len(ems), **metrics}))

    shift = {}
    if typos is not None:
        write(folder / "shifts" / "typos-seed0", typos, {})
        shift = {
            "shift/worst/em": sum(typos) / len(typos),
            "shift/worst/name": "typos",
            "shift_check": {"seed": 0},
        }
    write(folder, original, shift)
    return folder


# 9 better and 6 worse: p 0.30 (2026-12-07's checkpoint 15 was 3 questions ahead on val's typos and behind on
# test); 3 and 0: p 0.125; 20 and 2: p < 0.001; 7 and 1: p 0.035
@pytest.mark.parametrize(
    ("wins", "losses", "replaced"), [(9, 6, False), (3, 0, False), (20, 2, True), (7, 1, True)]
)
def test_a_checkpoint_replaces_the_incumbent_only_beyond_the_noise_of_its_worst_set(
    tmp_path: Path, wins: int, losses: int, replaced: bool
):
    sft, ckpt = outcomes(wins, losses)
    folders = {
        "sft": write_eval(tmp_path / "sft", sft, sft),
        "checkpoint-15": write_eval(tmp_path / "c15", ckpt, ckpt),
    }
    chosen = choose(folders, "worst-shift", incumbent="sft")
    assert chosen["checkpoint"] == ("checkpoint-15" if replaced else "sft")
    assert chosen["score"] == chosen["scores"][chosen["checkpoint"]]
    gain = chosen["gain"]
    assert gain["set"] == "shifts/typos-seed0" and gain["questions"] == N and gain["beats"] is replaced
    assert (gain["wins"], gain["losses"]) == (wins, losses) and gain["gain"] == pytest.approx(
        (wins - losses) / N
    )
    assert choose(folders, "worst-shift")["checkpoint"] == "checkpoint-15"  # without an incumbent: the higher


def test_the_gain_is_counted_on_the_set_the_score_comes_from(tmp_path: Path):
    # far ahead on the original set, within noise on its worst shift: the incumbent stays under worst-shift,
    # and is replaced under em, which ranks by the original set
    sft_typos, ckpt_typos = outcomes(wins=8, losses=6, right=120)
    sft, ckpt = outcomes(wins=30, losses=0)
    folders = {
        "sft": write_eval(tmp_path / "sft", sft, sft_typos),
        "ckpt": write_eval(tmp_path / "ckpt", ckpt, ckpt_typos),
    }
    by_shift = choose(folders, "worst-shift", incumbent="sft")
    assert by_shift["checkpoint"] == "sft" and by_shift["gain"]["gain"] == pytest.approx(2 / N)
    by_em = choose(folders, "em", incumbent="sft")
    assert by_em["checkpoint"] == "ckpt" and by_em["gain"]["set"] == "original"
    assert by_em["gain"]["gain"] == pytest.approx(30 / N)


def test_an_incumbent_ranked_first_stays_without_a_test(tmp_path: Path):
    sft, ckpt = outcomes(wins=0, losses=10)
    folders = {"sft": write_eval(tmp_path / "sft", sft), "ckpt": write_eval(tmp_path / "ckpt", ckpt)}
    chosen = choose(folders, "em", incumbent="sft")
    assert chosen["checkpoint"] == "sft" and "gain" not in chosen
    tied = {"ckpt": write_eval(tmp_path / "tied", sft), "sft": folders["sft"]}  # a tie goes to the incumbent
    assert choose(tied, "em", incumbent="sft")["checkpoint"] == "sft"
    assert choose(tied, "em")["checkpoint"] == "ckpt"  # without one, to the earlier
    with pytest.raises(ValueError, match="incumbent 'base' is none of the evals"):
        choose(folders, "em", incumbent="base")


def test_without_paired_questions_the_incumbent_stays(tmp_path: Path):
    # the incumbent was scored on other questions (or its records are gone): nothing shows the gain is real
    sft, ckpt = outcomes(wins=40)
    folders = {"sft": write_eval(tmp_path / "sft", sft), "ckpt": write_eval(tmp_path / "ckpt", ckpt)}
    (tmp_path / "sft" / "trajectories.jsonl").write_text("")
    chosen = choose(folders, "em", incumbent="sft")
    assert chosen["checkpoint"] == "sft"
    assert chosen["gain"]["questions"] == 0 and chosen["gain"]["p"] == 1.0 and not chosen["gain"]["beats"]


def test_samples_of_one_question_count_as_their_mean_and_failed_episodes_as_wrong(tmp_path: Path):
    for name, ems, failed in (("a", [1.0, 1.0, 0.0, 0.0], None), ("b", [1.0, 0.0, 1.0, 1.0], 3)):
        folder = tmp_path / name
        folder.mkdir()
        records = [
            {"index": i // 2, "sample": i % 2, "question": f"q{i // 2}", "row": {"solution": "a"},
             "metrics": {"em": em}, **({"failed": True} if i == failed else {})}
            for i, em in enumerate(ems)
        ]  # fmt: skip
        (folder / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    gain = paired_gain(tmp_path / "a", tmp_path / "b", "")
    # a: q0 1.0, q1 0.0; b: q0 0.5, q1 0.5 (its second sample failed): differences -0.5 and +0.5
    assert gain["questions"] == 2 and gain["gain"] == pytest.approx(0.0) and not gain["beats"]
    assert (gain["wins"], gain["losses"], gain["p"]) == (1, 1, 0.75)


@pytest.mark.parametrize(("wrong_from", "kept"), [(5, False), (10, True)])
def test_eval_chooses_over_the_starting_models_eval_only_beyond_chance(
    tmp_path: Path, monkeypatch, capsys, wrong_from: int, kept: bool
):
    # 12 questions: the base model misses 7 (checkpoint-20 is right on all: sign test p 1/128) or 2 (p 0.25)
    from swift_rlfactory.cli import main
    from swift_rlfactory.eval import command

    def wrong(adapter: str, question: str) -> bool:  # the base model from wrong_from on, checkpoint-20 never
        a = int(re.findall(r"\d+", question)[0])
        return {"": a >= wrong_from, "checkpoint-20": False}.get(adapter, question == question.lower())

    monkeypatch.setattr(command, "load_policy", lambda *args, **kwargs: SumEngine(wrong))
    checkpoints = [tmp_path / "run" / name for name in ("checkpoint-10", "checkpoint-20")]
    for folder in checkpoints:
        folder.mkdir(parents=True)
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}")
    dataset, other = tmp_path / "q.jsonl", tmp_path / "other.jsonl"
    rows = [
        {"messages": [{"role": "user", "content": f"What is {a} + 3?"}], "solution": str(a + 3)}
        for a in range(12)
    ]
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    other.write_text("".join(json.dumps(r) + "\n" for r in rows[:6]))
    common = [
        "eval",
        "--env",
        str(AGENT_ENV),
        "--model",
        str(tmp_path / "model"),
        "--shifts",
        "lowercase,polite",
    ]
    assert main([*common, "--dataset", str(dataset), "--output", str(tmp_path / "base")]) == 0
    assert main([*common, "--dataset", str(other), "--output", str(tmp_path / "base-other")]) == 0
    choice = [
        *common,
        "--dataset",
        str(dataset),
        "--adapters",
        *map(str, checkpoints),
        "--choose-by",
        "worst-shift",
    ]
    capsys.readouterr()

    assert (
        main([*choice, "--output", str(tmp_path / "x"), "--choose-over", str(tmp_path / "base-other")]) == 2
    )
    assert "--choose-over" in capsys.readouterr().err  # another set: its questions do not pair with ours
    assert main([*choice[:-2], "--output", str(tmp_path / "y"), "--choose-over", str(tmp_path / "base")]) == 2
    assert "--choose-over needs --choose-by" in capsys.readouterr().err

    assert main([*choice, "--output", str(tmp_path / "out"), "--choose-over", str(tmp_path / "base")]) == 0
    chosen = json.loads((tmp_path / "out" / "chosen.json").read_text())
    base = str((tmp_path / "base").resolve())
    assert chosen["incumbent"] == base and chosen["checkpoint"] == (base if kept else str(checkpoints[1]))
    gain = chosen["gain"]
    assert (gain["wins"], gain["losses"], gain["beats"]) == (12 - wrong_from, 0, not kept)
    assert "sign test p" in capsys.readouterr().out
