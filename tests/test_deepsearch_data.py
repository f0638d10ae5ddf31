"""DeepSearch data: phrasing families, an out-of-distribution split, and extra evaluation files per file."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from swift_rlfactory.env.environment import Environment
from swift_rlfactory.retrieval.format import parse_hits
from swift_rlfactory.rewards.rules import normalize_answer
from swift_rlfactory.tools.calls import ToolCall

from .conftest import AGENT_ENV, ROOT, use_example
from .test_eval import scripted_server, write_dataset

DATA = ROOT / "examples" / "deepsearch" / "data"
use_example(ROOT / "examples" / "deepsearch")
import build_data  # noqa: E402
import build_sft  # noqa: E402
import eval_sets  # noqa: E402


def split(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / f"{name}.jsonl").read_text().splitlines()]


def test_families_are_balanced_and_the_ood_family_never_trains():
    train, val, test, ood = (split(n) for n in ("train", "val", "test", "ood"))
    in_distribution = set(build_data.SINGLE_FAMILIES + build_data.TWO_HOP_FAMILIES)
    for rows in (train, val, test):
        families = Counter(r["family"] for r in rows)
        assert set(families) == in_distribution, families
        single = [families[f] for f in build_data.SINGLE_FAMILIES]
        assert max(single) <= 1.25 * min(single)
        bridges = [families[f] for f in build_data.TWO_HOP_FAMILIES]
        assert max(bridges) <= 1.5 * min(bridges)
        two_hop = sum(r["hops"] == 2 for r in rows) / len(rows)
        assert 0.15 <= two_hop <= build_data.TWO_HOP_SHARE + 0.01
        assert all(r["hops"] == (2 if r["family"] in build_data.TWO_HOP_FAMILIES else 1) for r in rows)
    assert {r["family"] for r in ood} == {build_data.OOD_FAMILY} and len(ood) == 300
    for rows in (train, val, test, ood):  # no question gives its answer away
        for r in rows:
            question = f" {normalize_answer(r['messages'][0]['content'])} "
            assert not any(f" {normalize_answer(a)} " in question for a in r["golden_answers"]), r


def test_no_answer_is_shared_between_splits():
    answers = {n: {r["solution"] for r in split(n)} for n in ("train", "val", "test", "ood")}
    for a, b in [("train", "val"), ("train", "test"), ("train", "ood"), ("test", "ood"), ("val", "test")]:
        assert not answers[a] & answers[b], (a, b)
    assert all(build_data.split_of(t) == "train" for t in answers["train"] | answers["val"])
    assert all(build_data.split_of(t) == "test" for t in answers["test"] | answers["ood"])


def test_the_grpo_pool_is_rich_in_two_hop_questions_and_keeps_val_test_and_holdout_honest():
    pool = split("pool")
    others = {n: split(n) for n in ("train", "val", "test", "ood")}
    assert len(pool) == 1000
    # 418 of 1000: every pair the rules leave (train has 353 two-hop rows of 2000, train's second half ~175)
    assert sum(r["hops"] == 2 for r in pool) / len(pool) >= 0.4
    families = Counter(r["family"] for r in pool)
    assert set(families) == set(build_data.SINGLE_FAMILIES + build_data.TWO_HOP_FAMILIES), families
    single = [families[f] for f in build_data.SINGLE_FAMILIES]
    bridges = [families[f] for f in build_data.TWO_HOP_FAMILIES]
    assert max(single) <= 1.25 * min(single) and max(bridges) <= 1.25 * min(bridges), families
    for r in pool:
        assert r["hops"] == (2 if r["family"] in build_data.TWO_HOP_FAMILIES else 1), r
        assert len(r["support"]) == r["hops"] and r["support"][-1] == r["solution"], r
    # Every article a pool question needs (answer and bridge) is in the train bucket and no val answer:
    # GRPO never rehearses a val, test, ood or holdout question, not even its first hop.
    val_answers = {r["solution"] for r in others["val"]}
    assert all(build_data.split_of(t) == "train" and t not in val_answers for r in pool for t in r["support"])
    assert not {r["solution"] for r in pool} & {r["solution"] for n in ("test", "ood") for r in others[n]}
    texts = [question_of(r) for r in pool]
    assert len(set(texts)) == len(texts)
    assert not set(texts) & {question_of(r) for rows in others.values() for r in rows}
    per_answer = Counter(r["solution"] for r in pool)
    assert max(per_answer.values()) <= build_data.POOL_PER_ANSWER == 3
    assert len({tuple(r["support"]) for r in pool}) == len(pool)  # a pair once, whichever form
    assert sum(n > 1 for n in per_answer.values()) >= 50  # answers do come back, through other bridges


@pytest.mark.timeout(120)
def test_questions_are_answerable_and_sft_demonstrates_every_family(tmp_path: Path):
    rng = random.Random(0)
    single = [r for n in ("test", "ood") for r in split(n) if r["hops"] == 1]
    sample = rng.sample(single, 40)
    train = split("train")
    demo_rows = [
        r for f in sorted({r["family"] for r in train}) for r in [x for x in train if x["family"] == f][:3]
    ]
    with Environment.load(ROOT / "examples" / "deepsearch" / "env.yaml") as env:
        # The real search tool, the question as the query: the answer's article comes back.
        records = env.executor.execute([ToolCall("search", {"query": question_of(r)}) for r in sample])
        found = [r["solution"] in parse_hits(rec.observation) for r, rec in zip(sample, records, strict=True)]
        demonstrator = build_sft.Demonstrator(env)
        episodes = [(r["family"], demonstrator.episode(r)) for r in demo_rows]
    assert sum(found) >= 0.9 * len(sample), [
        question_of(r) for r, ok in zip(sample, found, strict=True) if not ok
    ]
    kept = {family for family, turns in episodes if turns is not None}
    assert kept == {r["family"] for r in train}, episodes  # each family demonstrated by a scripted episode
    for family, turns in episodes:  # both two-hop forms are demonstrated as two searches
        if turns is not None and family in build_data.TWO_HOP_FAMILIES:
            assert sum(m["role"] == "tool" for m in turns) == 2


def question_of(row: dict) -> str:
    return row["messages"][0]["content"]


@pytest.mark.timeout(120)
def test_eval_sh_scores_extra_files_per_file_flashrag_included(tmp_path: Path):
    test = write_dataset(tmp_path / "test.jsonl", [(3, 4), (1, 1)])
    # Someone's own held-out questions in FlashRAG form; the second gold is wrong on purpose (EM 0).
    mine = tmp_path / "mine.jsonl"
    mine.write_text(
        json.dumps({"question": "What is 2 + 3?", "golden_answers": ["5"]}) + "\n"
        + json.dumps({"question": "What is 2 + 2?", "golden_answers": ["5"]}) + "\n"
    )  # fmt: skip
    nq = write_dataset(tmp_path / "nq_dev.jsonl", [(10, 20)])
    out = tmp_path / "out"
    with scripted_server() as server:
        env = {
            **os.environ, "BASE_URL": f"http://127.0.0.1:{server.port}/v1", "SERVED_MODEL": "scripted",
            "EVAL_ENV": str(AGENT_ENV), "DATASET": str(test), "EXTRA_EVAL": f"{mine},{nq}", "GROUP_BY": "",
        }  # fmt: skip
        done = subprocess.run(
            ["bash", "examples/deepsearch/eval.sh", str(out)], cwd=ROOT, env=env, capture_output=True,
            text=True, timeout=110,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    metrics = json.loads((out / "metrics.json").read_text())
    by_split = metrics["by_split"]
    assert set(by_split) == {"test", "mine", "nq_dev"}
    assert (by_split["test"]["questions"], by_split["test"]["em"]) == (2, 1.0)
    assert (by_split["mine"]["questions"], by_split["mine"]["em"]) == (2, 0.5)
    assert (by_split["nq_dev"]["questions"], by_split["nq_dev"]["em"]) == (1, 1.0)
    assert metrics["questions"] == 5 and "by split" in done.stdout


def flashrag(path: Path, n: int, **extra: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        "".join(json.dumps({"question": f"q{i}?", "golden_answers": ["a"], **extra}) + "\n" for i in range(n))
    )
    return path


def eval_sh(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    """eval.sh with no model: everything checked before the engine starts fails first, or it asks for MODEL."""
    unset = ("MODEL", "BASE_URL", "LIMIT", "EXTRA_EVAL")
    base = {k: v for k, v in os.environ.items() if k not in unset}
    env = {**base, "PYTHONPATH": str(ROOT), "GROUP_BY": "", **env}
    return subprocess.run(
        ["bash", "examples/deepsearch/eval.sh", str(tmp_path / "out")], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip


@pytest.mark.timeout(60)
def test_an_extra_file_merged_twice_or_cut_by_limit_is_refused(tmp_path: Path):
    ours = write_dataset(tmp_path / "ours.jsonl", [(1, 1), (2, 2), (3, 3), (4, 4)])
    fr = flashrag(tmp_path / "fr.jsonl", 5)
    merged = tmp_path / "S.jsonl"
    eval_sets.main([str(merged), str(ours), str(fr)])
    # DATASET already holds fr (what h200.sh's prepare writes): merging it again would count it twice
    done = eval_sh(tmp_path, DATASET=str(merged), EXTRA_EVAL=str(fr))
    assert done.returncode != 0 and "already has a split named 'fr'" in done.stderr, done.stderr
    assert not (tmp_path / "out" / "eval-set.jsonl").exists()
    # LIMIT keeps the merged file's first rows: fr, after ours, would vanish from by_split unsaid
    done = eval_sh(tmp_path, DATASET=str(ours), EXTRA_EVAL=str(fr), LIMIT="4")
    assert done.returncode == 2 and "LIMIT" in done.stderr and "EXTRA_EVAL" in done.stderr, done.stderr
    done = eval_sh(tmp_path, DATASET=str(ours), EXTRA_EVAL=str(fr))  # alone each is fine: on to the model
    assert "set MODEL or BASE_URL" in done.stderr, done.stderr


def test_extra_files_are_named_by_file_and_paths_with_equals_or_spaces_are_read(tmp_path: Path):
    ours = [
        {**row, "split": "test"}
        for row in [{"messages": [{"role": "user", "content": "q"}], "solution": "a"}]
    ]
    (tmp_path / "S.jsonl").write_text(json.dumps(ours[0]) + "\n")
    theirs = flashrag(tmp_path / "theirs.jsonl", 2, split="test")  # a third party's own split column
    eq = flashrag(tmp_path / "x=1" / "eq.jsonl", 3)  # "=" in a folder name: a path, not NAME=FILE
    rows = eval_sets.tagged_rows([str(tmp_path / "S.jsonl"), f" {theirs}", f"{eq} ", f" dev = {theirs}"])
    assert Counter(r["split"] for r in rows) == {"test": 1, "theirs": 2, "eq": 3, "dev": 2}


def merge(out: Path, *files: Path) -> subprocess.CompletedProcess:
    """``eval_sets.py OUT FILE...`` as eval.sh runs it."""
    done = subprocess.run(
        [sys.executable, "examples/deepsearch/eval_sets.py", str(out), *map(str, files)], cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.timeout(120)
def test_a_bad_row_of_an_extra_file_keeps_every_later_rows_position_in_the_merge(tmp_path: Path, caplog):
    """The eval keys its episodes by a row's position in the merged file: a bad row of an extra file is
    carried through as a row the eval skips and names (file and line), so fixing it later and merging
    again moves no other row, and a resumed eval runs only the fixed row."""
    from swift_rlfactory.cli import main
    from swift_rlfactory.runs.eval_log import EvalLog

    from .test_eval import served_eval

    test = write_dataset(tmp_path / "test.jsonl", [(3, 4)])
    good = json.dumps({"question": "What is 2 + 3?", "golden_answers": ["5"]})
    mine = tmp_path / "mine.jsonl"
    mine.write_text(good + "\n" + '{"question": "What is 1 + 2?", "golden' + "\n")  # line 2 torn
    nq = write_dataset(tmp_path / "nq_dev.jsonl", [(10, 20)])
    merged = tmp_path / "eval-set.jsonl"
    done = merge(merged, test, mine, nq)
    assert "mine 1 (1 skipped)" in done.stdout and "nq_dev 1" in done.stdout, done.stdout
    assert f"{mine}: skipped 1 of 2 rows" in done.stderr and "line 2" in done.stderr, done.stderr
    out = tmp_path / "out"
    with scripted_server() as server:
        argv = served_eval(f"http://127.0.0.1:{server.port}/v1", merged, out, "--group-by", "split")
        assert main(argv) == 0
        assert f"line 3: {mine}: line 2: not valid JSON" in caplog.text, caplog.text  # eval names the origin
        first = EvalLog(out / "trajectories.jsonl").load()
        assert {i: r["question"] for (i, _), r in first.items()} == {
            0: "What is 3 + 4?", 1: "What is 2 + 3?", 3: "What is 10 + 20?",
        }  # fmt: skip
        assert json.loads((out / "metrics.json").read_text())["skipped_rows"] == 1
        mine.write_text(
            good + "\n" + json.dumps({"question": "What is 1 + 2?", "golden_answers": ["3"]}) + "\n"
        )
        merge(merged, test, mine, nq)
        server.requests[:] = []
        assert main(argv) == 0
    assert [r["messages"][-1]["content"] for r in server.requests] == ["What is 1 + 2?", "3"]
    done = EvalLog(out / "trajectories.jsonl").load()
    assert {i: r["question"] for (i, _), r in done.items()} == {
        0: "What is 3 + 4?", 1: "What is 2 + 3?", 2: "What is 1 + 2?", 3: "What is 10 + 20?",
    }  # fmt: skip
    metrics = json.loads((out / "metrics.json").read_text())
    assert {k: v["questions"] for k, v in metrics["by_split"].items()} == {"test": 1, "mine": 2, "nq_dev": 1}
    assert metrics["skipped_rows"] == 0


def test_a_bad_row_is_carried_through_the_merge_naming_its_file_and_line(tmp_path: Path, caplog):
    from swift_rlfactory.eval.runner import load_dataset

    test = write_dataset(tmp_path / "test.jsonl", [(3, 4)])
    mine = tmp_path / "mine.jsonl"
    mine.write_text(json.dumps({"messages": [{"role": "user", "content": " "}]}) + "\n")  # no question
    mine.write_text(mine.read_text() + json.dumps({"question": "q?", "golden_answers": ["a"]}) + "\n")
    merged = tmp_path / "eval-set.jsonl"
    merge(merged, test, mine)
    skipped: list = []
    rows = load_dataset(merged, skipped=skipped)
    assert sorted(rows) == [0, 2] and rows[2]["split"] == "mine"
    ((where, why),) = [(s[0], s[1]) for s in skipped]
    assert where == "line 2" and why.startswith(f"{mine}: line 1: no question"), why
    again = tmp_path / "again.jsonl"
    merge(again, merged)  # an earlier merge merged again: its carried row keeps its place and its split
    assert again.read_text() == merged.read_text()


@pytest.mark.timeout(60)
def test_search_budget_charges_searches_beyond_the_rows_hops():
    import asyncio

    from swift_rlfactory.rollout.episode import Generation, run_episode

    test = split("test")
    one, two = (next(r for r in test if r["hops"] == n) for n in (1, 2))

    def score(env: Environment, row: dict, searches: int) -> float:
        call = build_sft.call_text(build_sft.keywords(question_of(row)))
        replies = iter([call] * searches + [f"<answer>{row['solution']}</answer>"])

        async def generate(messages):
            return Generation(next(replies))

        prompt = [{"role": "system", "content": env.system_prompt}, *row["messages"]]
        trajectory = asyncio.run(run_episode(prompt, generate, env.executor, env.max_turns, row=row))
        env.reward.score([trajectory])
        return trajectory.rewards["search_budget.py:search_budget"]

    with Environment.load(ROOT / "examples" / "deepsearch" / "env_budget.yaml") as env:
        assert score(env, one, 1) == 1.0 and score(env, one, 2) == 0.5 and score(env, one, 3) == 0.0
        assert score(env, two, 2) == 1.0 and score(env, two, 3) == 0.5
        assert score(env, one, 0) == 0.0  # answering without searching earns no tool reward


@pytest.mark.timeout(60)
def test_search_hit_credits_the_first_search_turn_that_brings_back_the_answers_article():
    import asyncio

    from swift_rlfactory.rollout.episode import Generation, run_episode

    row = next(r for r in split("test") if r["hops"] == 1)
    hit = build_sft.call_text(row["solution"])  # the answer's own title as the query: BM25 brings it back
    miss = build_sft.call_text("zzzz qqqq")  # no article holds these words

    def turns(env: Environment, calls: list[str], history: list[dict] = ()) -> tuple[list[float], float]:
        replies = iter([*calls, f"<answer>{row['solution']}</answer>"])

        async def generate(messages):
            return Generation(next(replies))

        prompt = [{"role": "system", "content": env.system_prompt}, *history, *row["messages"]]
        trajectory = asyncio.run(run_episode(prompt, generate, env.executor, env.max_turns, row=row))
        env.reward.score([trajectory])
        name = "search_hit.py:search_hit"
        return trajectory.turn_rewards[name], trajectory.rewards[name]

    with Environment.load(ROOT / "examples" / "deepsearch" / "env_grpo.yaml") as env:
        assert env.config.credit.mode == "trajectory"
        assert turns(env, [hit]) == ([1.0, 0.0], 0.5)  # the answer turn makes no call: no_call = 0
        assert turns(env, [miss, hit]) == ([0.0, 1.0, 0.0], pytest.approx(1 / 3))
        # a row with earlier chat history: its assistant message is prompt, not a turn to score
        earlier = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<answer>Hi</answer>"}]
        assert turns(env, [miss, hit], earlier) == ([0.0, 1.0, 0.0], pytest.approx(1 / 3))
        assert turns(env, [hit, hit]) == ([1.0, 0.0, 0.0], pytest.approx(1 / 3))  # finding it again: nothing
        assert turns(env, [miss]) == ([0.0, 0.0], 0.0)
        assert turns(env, []) == ([0.0], 0.0)


def test_a_lighter_warm_start_keeps_every_two_hop_demonstration():
    train = split("train")[:1000]
    rows = build_sft.warm_start_rows(train, 150)
    assert [r for r in rows if r["hops"] == 2] == [r for r in train if r["hops"] == 2]  # all 185, in order
    assert [r for r in rows if r["hops"] == 1] == [r for r in train if r["hops"] == 1][:150]
    assert [train.index(r) for r in rows] == sorted(train.index(r) for r in rows)  # the file's order
    assert build_sft.warm_start_rows(train, None) == train


@pytest.mark.timeout(120)
def test_sft_sh_passes_single_hop_to_the_demonstrations(tmp_path: Path):
    """sft.sh's SINGLE_HOP reaches build_sft.py; swift itself is stubbed (SWIFT), the demonstrations are real."""
    train = split("train")
    rows = [r for r in train if r["hops"] == 1][:3] + [r for r in train if r["hops"] == 2][:2]
    dataset = tmp_path / "rows.jsonl"
    dataset.write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "v0" / "checkpoint-1").mkdir(parents=True)
    for step in ("sft", "export"):  # $SWIFT.sft and $SWIFT.export
        (tmp_path / f"swift.{step}").write_text("#!/bin/sh\nexit 0\n")
        (tmp_path / f"swift.{step}").chmod(0o755)
    done = subprocess.run(
        ["bash", "examples/deepsearch/sft.sh"], cwd=ROOT, capture_output=True, text=True, timeout=110,
        env={**os.environ, "MODEL": "m", "DATASET": str(dataset), "OUTPUT": str(tmp_path), "SINGLE_HOP": "1",
             "SWIFT": str(tmp_path / "swift")},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    demonstrated = [json.loads(line) for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    questions = [m["content"] for d in demonstrated for m in d["messages"] if m["role"] == "user"]
    assert (
        rows[1]["messages"][0]["content"] not in questions
        and rows[2]["messages"][0]["content"] not in questions
    )
    assert "/5 questions kept" not in done.stdout and "/3 questions kept" in done.stdout
