"""Warm-start data for DeepSearch: scripted search trajectories, written as ms-swift SFT rows.

Why: a 0.5B model given only the system prompt almost never calls ``search`` (1 malformed call in 12
episodes, see benchmarks/deepsearch/RESULTS.md), so GRPO's groups hold no trajectory that searched and
answered right, and there is nothing to reinforce. A short SFT on demonstrations of the protocol fixes the
format; GRPO then learns the part demonstrations cannot teach well (which query, which passage).

Each train question becomes a scripted episode run against the environment's REAL tool (the MCP search
server of ``env.yaml``, through the same executor, cache and observation truncation as training):

* single-hop - search the question's keywords; if the answer's article is not among the passages, search
  again with its first five keywords (a demonstration of re-searching);
* two-hop - search the keywords of the clue after "... of the thing that", find the bridge article among
  the passages, pick the name in its text that the question asks about, and search the answer's
  description plus that name.

The second hop is a choice, not a lookup: the bridge's summary names about ten people, places and things,
and the question says only which kind ("Which country in Eastern Europe is mentioned in ..."). The
demonstration picks the right name (the teacher knows the answer) but only a name printed in the bridge
passage the model has just read. An earlier script searched the description plus the *bridge's* title,
which never needs the choice and which BM25 answers with the answer's article only about half the time
(47 % of test's two-hop questions, 50 % of train's); the SFT model copied it and sat at 0.29-0.43 two-hop
EM, a ceiling GRPO could not lift (benchmarks/gpu_pipeline/RESULTS.md, run 2026-12-01). Searching the right name with
the description finds the article 98-100 % of the time, so what is left is the choice of name, which the
SFT model makes sometimes right and sometimes wrong: the mixed groups GRPO learns from.

``--recheck SHARE`` (default 0) makes that share of the two-hop episodes try a wrong name of the bridge
passage first and recover: answer from that search's passages when they hold the answer's article, else
search the right name (three searches). Plain demonstrations never show a wrong choice, so GRPO never
samples the recovery; this is the knob for trying whether it can learn one (``RECHECK`` in sft.sh).

An episode is kept only when the answer's article came back in a passage, and it ends with
``<answer>TITLE</answer>``: every demonstrated answer is read off an observation, never invented.
Single-hop queries and the first two-hop query are built from the question text alone, the second two-hop
query from the question and the first observation; the gold title is used only to check the passages and
to choose among the names the bridge passage prints. Rows carry the
environment's system prompt with the tool schemas rendered by the template's own agent template - the
exact system text the ``rlfactory`` scheduler puts in front of every rollout - and ``tool`` messages
exactly as the scheduler appends them, so SFT and GRPO see one prompt format::

    python examples/deepsearch/build_sft.py --out /tmp/sft.jsonl          # from data/train.jsonl
    swift sft --dataset /tmp/sft.jsonl --tuner_type lora ...              # benchmarks/deepsearch/h200.sh

Only the train split is used; test and holdout answers never appear (build_data.py splits by answer).
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path
from typing import Any

from bm25s.stopwords import STOPWORDS_EN

from swift_rlfactory.adapters.swift_template import template_by_name, with_system_prompt
from swift_rlfactory.env.environment import Environment
from swift_rlfactory.eval.runner import load_rows, question_of
from swift_rlfactory.retrieval.format import parse_hits
from swift_rlfactory.rollout.episode import tool_messages
from swift_rlfactory.tools.calls import ToolCall, hermes_call

HERE = Path(__file__).parent
STOPWORDS = frozenset(STOPWORDS_EN) | {"what", "who", "which", "from", "its", "were"}
MAX_QUERY_WORDS = 10
_WORD = re.compile(r"[\w'-]+")
_NAME = re.compile(r"\b[A-Z][\w'-]+(?:(?: (?:of(?: the)?|and|de|del|la|von|van))? [A-Z][\w'-]+)*")
_TWO_HOP = re.compile(
    r"^Which (?P<description>.+?) is mentioned in the encyclopedia summary of the \w+ that (?P<clue>.+?)\??$"
)


def keywords(text: str, limit: int = MAX_QUERY_WORDS) -> str:
    """The first ``limit`` non-stopwords of ``text``, in order: a BM25 query a model can learn to write."""
    words = [w for w in _WORD.findall(text) if w.lower() not in STOPWORDS]
    return " ".join(words[:limit])


def call_text(query: str) -> str:
    """An assistant turn that calls ``search``, in the exact format the system prompt asks for."""
    return hermes_call("search", {"query": query})


def names(text: str) -> list[str]:
    """The capitalised names of a passage, in order, each once: what a reader could pick as "the country it
    mentions". Runs like "Trinidad and Tobago" stay whole; a sentence's capitalised first words ("The",
    "In", "It") are not names and are dropped from the front of a run, as is a lone word that opens a
    sentence ("According to ...")."""
    found = []
    for match in _NAME.finditer(text):
        words = match.group(0).split()
        while words and words[0].lower() in STOPWORDS:
            words.pop(0)
        before = text[: match.start()].rstrip()
        opens_sentence = not before or before[-1] in ".!?"
        if len(words) > 1 or (words and not opens_sentence):
            found.append(" ".join(words))
    return list(dict.fromkeys(found))


class Demonstrator:
    """Runs scripted episodes against a started environment's executor.

    ``recheck`` (0 to 1) is the share of two-hop episodes that first search a wrong name of the bridge
    passage: when that search's passages hold the answer's article anyway (the description's words bring
    it back about 40 % of the time) the episode answers from them, else it searches the right name next.
    Plain demonstrations never search a third time, so GRPO never samples a recovery from a wrong name;
    these show one. ``seed`` fixes which episodes and which wrong names.
    """

    def __init__(self, env: Environment, recheck: float = 0.0, seed: int = 0):
        self.env = env
        self.recheck = recheck
        self.rng = random.Random(seed)

    def search(self, query: str) -> tuple[list[dict[str, Any]], dict[str, str]]:
        """One search turn: the assistant message, its tool message(s), and the passages that came back."""
        records = self.env.executor.execute([ToolCall("search", {"query": query})])
        turn = [{"role": "assistant", "content": call_text(query)}, *tool_messages(records)]
        return turn, {t: text for r in records if r.ok for t, text in parse_hits(r.observation).items()}

    def episode(self, row: dict[str, Any]) -> list[dict[str, Any]] | None:
        """The scripted conversation after the user turn, or ``None`` when the answer was never retrieved."""
        question, answer = question_of(row), row["solution"]
        two_hop = _two_hop_parts(row, question) if row.get("hops") == 2 else None
        if two_hop:
            bridge = row["support"][0]
            turns, found = self.search(keywords(two_hop["clue"]))
            if answer not in found.get(bridge, ""):
                return None  # the bridge did not come back, or its passage was cut before the name
            description = keywords(two_hop["description"], 6)
            wrong = [n for n in names(found[bridge]) if n not in (bridge, answer) and answer not in n]
            answered_by_detour = False
            if wrong and self.rng.random() < self.recheck:
                detour, found = self.search(f"{description} {self.rng.choice(wrong)}")
                turns += detour
                answered_by_detour = answer in found
            if not answered_by_detour:
                second, found = self.search(f"{description} {answer}")
                turns += second
        else:
            turns, found = self.search(keywords(question))
            if answer not in found:
                retry, found = self.search(keywords(question, 5))
                turns += retry
        if answer not in found:
            return None
        return [*turns, {"role": "assistant", "content": f"<answer>{answer}</answer>"}]


def _two_hop_parts(row: dict[str, Any], question: str) -> dict[str, str] | None:
    """The bridge clue and the answer's description: the row's ``clue``/``target`` (parts of the question
    text, every two-hop form of build_data.py), else read from the ``bridge_mention`` wording."""
    if row.get("clue") and row.get("target"):
        return {"clue": row["clue"], "description": row["target"]}
    match = _TWO_HOP.match(question)
    return match.groupdict() if match else None


def warm_start_rows(rows: list[dict[str, Any]], single_hop: int | None = None) -> list[dict[str, Any]]:
    """The rows to demonstrate: every two-hop row, and the first ``single_hop`` single-hop ones (all: None).

    A warm start must teach the protocol, and two searches are a protocol GRPO does not find by itself
    (2026-12-01d: an SFT model shown 38 two-hop episodes never searched twice, nor did it after 100 GRPO
    steps). Which query finds an article is a skill GRPO does learn from single-hop rewards, so fewer
    single-hop demonstrations leave more of it to GRPO without losing the protocol.
    """
    if single_hop is None:
        return rows
    singles = [i for i, row in enumerate(rows) if row.get("hops") != 2][:single_hop]
    keep = set(singles)
    return [row for i, row in enumerate(rows) if row.get("hops") == 2 or i in keep]


def main(argv: list[str] | None = None) -> None:
    """Write one SFT row per train question whose scripted episode retrieved the answer."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", type=Path, default=HERE / "env.yaml")
    parser.add_argument("--dataset", type=Path, default=HERE / "data" / "train.jsonl")
    parser.add_argument("--template", default="qwen2_5", help="ms-swift template of the model to train")
    parser.add_argument("--limit", type=int, help="use only the first N questions")
    parser.add_argument(
        "--single-hop", type=int, metavar="N",
        help="of those, demonstrate only the first N single-hop questions (every two-hop one is kept)",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--recheck", type=float, default=0.0,
        help="share of two-hop episodes that search a wrong name of the bridge passage first (see Demonstrator)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=0, help="which episodes recheck, and which wrong names")
    args = parser.parse_args(argv)

    template = template_by_name(args.template)
    rows = warm_start_rows(load_rows(args.dataset, args.limit), args.single_hop)
    kept = searches = 0
    with Environment.load(args.env) as env:
        system = with_system_prompt([], template, env.system_prompt, env.tool_schemas())
        demonstrator = Demonstrator(env, args.recheck, args.seed)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("w", encoding="utf-8") as out:
            for row in rows:
                turns = demonstrator.episode(row)
                if turns is None:
                    continue
                user = {"role": "user", "content": question_of(row)}
                out.write(json.dumps({"messages": [*system, user, *turns]}, ensure_ascii=False) + "\n")
                kept += 1
                searches += sum(m["role"] == "tool" for m in turns)
    print(f"{kept}/{len(rows)} questions kept, {searches / max(kept, 1):.2f} searches each -> {args.out}")


if __name__ == "__main__":
    main()
