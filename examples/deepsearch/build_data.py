"""Build the DeepSearch question set from the bundled Wikipedia summaries, in several phrasing families.

Every question is answered by an article title. A policy trained on one template learns the template (the
"two-hop habit" of issue 15), so questions come in families that differ in where the clue comes from and
how it is phrased (``family`` column; ``hops`` says how many searches it takes):

* ``definition`` (1 hop) - the first sentence with its subject removed: "A nebula is a distinct luminescent
  part of interstellar medium, ..." gives "What is a distinct luminescent part of interstellar medium,
  ...?" -> ``Nebula``. Clauses that name the answer (its title, aliases, derived forms) are cut.
* ``entity_type`` (1 hop) - the same clue behind the article's short description as its type: "Which
  Indian independence activist (1869-1948) was ...?"
* ``attribute`` (1 hop) - a later sentence whose subject is a pronoun becomes the clue: "It is the largest
  city of ..." gives "Which place is the largest city of ...?"
* ``cloze`` (1 hop) - a later sentence that names the article, the name blanked: 'What name fills the
  blank in "In 1990, ___ became ..."?'
* ``bridge_mention`` (2 hops) - a bridge article A whose summary (after its first sentence) names article
  B: "Which <description of B> is mentioned in the encyclopedia summary of the thing that <clue of A>?"
* ``bridge_names`` (2 hops) - the same pair, said the other way round: "The encyclopedia summary of the
  person who <clue of A> names a <description of B>. What is it?"
* ``passage`` (1 hop, **out of distribution**) - a sentence quoted from a random position after the first,
  with nothing naming the article: 'Which encyclopedia article contains the sentence "..."?' It is never
  in train, val or the SFT data (they come from train): ``data/ood.jsonl`` tests whether a policy answers a
  phrasing it never saw.

Every question is checked against BM25 over the same corpus: a single-hop question must retrieve its
article in the top 5 (one good search can answer it), a two-hop question must retrieve A in the top 5 but
not B in the top 3 (it really takes two hops). Within a split, the in-distribution families share the
single-hop questions equally and two-hop questions are ``TWO_HOP_SHARE`` of the rows, split equally
between the two forms.

Answers are split by a hash of their title - 80 % train, 10 % test, 10 % holdout - and each answer is used
once per split family set, so no answer appears in two splits. ``val`` (scored on checkpoints during
GRPO) takes its answers from the train bucket but none of train's; ``ood`` takes its answers from the
test bucket but none of test's. (The bridge article of a two-hop question may belong to any split: it is
context there, never the answer.) The split does not depend on ``--seed``; the seed only changes which
questions are sampled. ``data/train.jsonl`` (2000), ``data/val.jsonl`` (200), ``data/test.jsonl`` (300)
and ``data/ood.jsonl`` (300) are committed; the holdout split never is, so ``--holdout N`` makes
questions no checkpoint has seen::

    python examples/deepsearch/build_data.py                       # train, val, test, ood
    python examples/deepsearch/build_data.py --holdout 500 --seed 7 --train 0 --val 0 --test 0 --ood 0
    python examples/deepsearch/build_data.py --pool 1000           # all of the above and data/pool.jsonl

``data/pool.jsonl`` (``--pool N``, committed at 1000) holds questions for GRPO only. GRPO learns only from
the questions the SFT model solves sometimes but not always (``swift-rlfactory select``), so a pool with
few two-hop questions gives it little two-hop signal: on 2026-12-01 the pool was train's second half, with
~175 two-hop questions of which 46 were mixed, and GRPO left two-hop test EM where SFT had it (0.294).
The train split itself has only 353 two-hop rows (not ``TWO_HOP_SHARE``), because each answer is used
once per split and a two-hop question needs a bridge pair. The pool is built after the splits, from the
same candidates, with the same BM25 checks and the same family balancing, but by its own rules:

* ``--pool-two-hop-share`` (default 0.5) of it is two-hop, as far as the pairs go (418 of 1000 with the
  default seed: every pair left that passes the rules below); single-hop families share the rest.
* An answer may come back with different bridges, at most ``POOL_PER_ANSWER`` (3) questions per answer
  so that a popular answer ("Soviet Union", mentioned by many summaries) does not dominate; each pair of
  articles is asked once (the other form of a pair is the same question said differently) and every
  question text once.
* Every article a question needs, answer and bridge, is in the train bucket and is not an answer of
  ``val.jsonl``: GRPO never rehearses the first hop of a val, test or holdout question. (Allowing bridges
  from any bucket would give 498 two-hop questions, 96 of them through a test or ood answer or a
  holdout-bucket article.)
* No question text of train, val, test or ood. The pool may ask about train's answers (train is for
  training) and may ask a train pair in its other form.

The pool keeps clear of the split files in ``--out``: those written in the same run, else those already
there (``--pool 1000 --train 0 --val 0 --test 0 --ood 0`` writes only the pool, next to the committed
splits).

Rows are ms-swift rows (see swift_rlfactory.data.qa) plus ``family``, ``hops``, ``support`` (the
titles of the articles needed) and ``clue`` / ``target`` (the parts of the question text that the first and
second search are about; ``target`` is empty for single-hop rows; build_sft.py builds its scripted queries
from them), which the rewards ignore and evaluation can break scores down by.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bm25s.stopwords import STOPWORDS_EN

from swift_rlfactory.data.qa import qa_row, write_jsonl
from swift_rlfactory.retrieval.corpus import Passage, load_wiki_offline, wiki_offline_data_dir
from swift_rlfactory.retrieval.index import BM25Retriever

SPLITS = ("train", "test", "holdout")
SINGLE_FAMILIES = ("definition", "entity_type", "attribute", "cloze")
TWO_HOP_FAMILIES = ("bridge_mention", "bridge_names")
OOD_FAMILY = "passage"
TWO_HOP_SHARE = 0.35
POOL_PER_ANSWER = 3  # at most this many pool questions share an answer (through different bridges)
MIN_SENTENCE_WORDS, MAX_SENTENCE_WORDS = 8, 40
MIN_CLUE_WORDS, MAX_CLUE_WORDS = 8, 35
STOPWORDS = frozenset(STOPWORDS_EN) | {"from", "its", "were"}  # bm25s's English list, the one BM25 uses
_ABBREVIATIONS = {"st", "mr", "mrs", "dr", "jr", "sr", "mt", "no", "vs", "ca", "u.s", "u.k", "inc"}
_SENTENCE_END = re.compile(r"[.!?][\"')\]]?\s+(?=[A-Z0-9\"(])")
_PARENTHETICAL = re.compile(r"\s*\([^()]*\)")
_COPULA = re.compile(r"^(?P<subject>.{1,160}?)\s+(?P<verb>is|was|are|were)\s+(?P<predicate>.+)$")
_WHO = re.compile(r"\bwho\b")
_LIFE_DATES = re.compile(r"\((?:born |died |c\. )?\d{3,4}(?: BC)?\s*[–-]")
_WORD = re.compile(r"\w+")
_PRONOUN = re.compile(
    r"^(?:It|He|She|They)\s+(?P<verb>is|was|are|were|has|had|became|won|wrote|founded)\s+(?P<rest>.+)$"
)
_CONTEXT = re.compile(r"^(?:in|within) [^,]+,\s*", re.IGNORECASE)
_NAME_SEPARATOR = re.compile(
    r"\s*(,|\bor\b|\bknown as\b|\bcalled\b|\bspell?(?:ed|t)(?: as)?\b|\bwritten as\b|\babbreviated as\b"
    r"|\breferred to as\b)\s*"
)
_FILLER = re.compile(
    r"^(?:(?:and|also|commonly|more commonly|simply|often|sometimes|formerly|officially|natively|the|a|an)\s+)+"
    r"|(?:\s+(?:also|commonly|simply|often|sometimes|formerly|officially|natively))+$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Article:
    """A corpus passage with what the question templates need."""

    passage: Passage
    description: str
    topic: str
    first_sentence: str
    aliases: tuple[str, ...]
    clue: Clue | None = None

    @property
    def title(self) -> str:
        """The article title, which is the answer of every question about this article."""
        return self.passage.title


@dataclass(frozen=True)
class Clue:
    """A title-free description of an article, from its first sentence."""

    verb: str
    text: str
    person: bool


def main(argv: list[str] | None = None) -> None:
    """Build the splits and write them as JSONL."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("data"))
    parser.add_argument("--train", type=int, default=2000, help="train questions (0: skip)")
    parser.add_argument("--val", type=int, default=200, help="validation questions (0: skip)")
    parser.add_argument("--test", type=int, default=300, help="test questions (0: skip)")
    parser.add_argument("--ood", type=int, default=300, help=f"{OOD_FAMILY!r}-family questions (0: skip)")
    parser.add_argument("--holdout", type=int, default=0, help="holdout questions, never committed (0: skip)")
    parser.add_argument("--pool", type=int, default=0, help="GRPO pool questions (0: skip)")
    parser.add_argument(
        "--pool-two-hop-share", type=float, default=0.5, help="share of two-hop questions in the pool"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--cache-dir", type=Path, help="BM25 index cache (default $RLFACTORY_CACHE/retrieval)"
    )
    args = parser.parse_args(argv)
    if not 0 <= args.pool_two_hop_share <= 1:
        parser.error(f"--pool-two-hop-share must be between 0 and 1, got {args.pool_two_hop_share}")

    articles = load_articles()
    retriever = TopTitles(BM25Retriever([a.passage for a in articles], cache_dir=args.cache_dir))
    pool = candidates(articles)
    # (name, answer bucket, size, families); val before train and test before ood, so they get answers first
    plan = [
        ("val", "train", args.val, SINGLE_FAMILIES + TWO_HOP_FAMILIES),
        ("train", "train", args.train, SINGLE_FAMILIES + TWO_HOP_FAMILIES),
        ("test", "test", args.test, SINGLE_FAMILIES + TWO_HOP_FAMILIES),
        ("ood", "test", args.ood, (OOD_FAMILY,)),
        ("holdout", "holdout", args.holdout, SINGLE_FAMILIES + TWO_HOP_FAMILIES),
    ]
    ledgers = {bucket: Ledger() for bucket in SPLITS}
    for name, bucket, size, families in plan:
        if size:
            rows = build_split(
                pool, families, retriever, bucket, size, f"{args.seed}:{name}", ledgers[bucket]
            )
            _write(rows, args.out / f"{name}.jsonl")
    if args.pool:
        # After the splits, from the files: the ones just written, else those already in --out (committed).
        kept = {name: _read(args.out / f"{name}.jsonl") for name in ("train", "val", "test", "ood")}
        val_answers = {row["solution"] for row in kept["val"]}
        ledger = Ledger(
            per_answer=POOL_PER_ANSWER,
            articles=lambda title: split_of(title) == "train" and title not in val_answers,
            blocked_questions={_question(row) for rows in kept.values() for row in rows},
        )
        families = SINGLE_FAMILIES + TWO_HOP_FAMILIES
        seed = f"{args.seed}:pool"
        rows = build_split(
            pool, families, retriever, "train", args.pool, seed, ledger, args.pool_two_hop_share
        )
        _write(rows, args.out / "pool.jsonl")
        print(f"pool: {len({row['solution'] for row in rows})} distinct answers")


def _write(rows: list[dict[str, Any]], path: Path) -> None:
    write_jsonl(rows, path)
    counts = Counter(row["family"] for row in rows)
    hops = Counter(row["hops"] for row in rows)
    print(f"{path.stem}: {len(rows)} questions ({hops[1]} single-hop, {hops[2]} two-hop) {dict(counts)}")


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise SystemExit(f"--pool keeps clear of {path.name}, which is not in {path.parent}: build it first")
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _question(row: dict[str, Any]) -> str:
    return row["messages"][0]["content"]


def load_articles() -> list[Article]:
    """Every wiki passage with its description, topic, first sentence, answer aliases and clue."""
    raw = json.loads((wiki_offline_data_dir() / "summaries_en-us.json").read_text(encoding="utf-8"))
    meta = {entry.get("title") or key: entry for key, entry in raw.items()}
    articles = []
    for passage in load_wiki_offline():
        entry = meta[passage.title]
        first = first_sentence(passage.text)
        article = Article(
            passage=passage,
            description=(entry.get("description") or "").strip(),
            topic=entry.get("topic") or "",
            first_sentence=first,
            aliases=aliases(passage.title, first),
        )
        articles.append(replace(article, clue=clue(article)))
    return articles


def split_of(title: str) -> str:
    """80/10/10 train/test/holdout by a hash of the title: stable across seeds, runs and machines."""
    bucket = hashlib.sha256(title.encode("utf-8")).digest()[0] % 10
    return "train" if bucket < 8 else SPLITS[bucket - 7]


class Ledger:
    """What a split may still take: each answer ``per_answer`` times, each question text and each set of
    supporting articles once, only questions all of whose supporting articles ``articles`` allows, and no
    text of ``blocked_questions``.

    The committed splits take each answer once (``per_answer=1``; val and train share the train bucket's
    ledger, so val's answers are none of train's). The pool may take an answer up to ``POOL_PER_ANSWER``
    times, each time through another bridge: a set of supporting articles once, since the other form of
    the same pair is the same question said differently.
    """

    def __init__(
        self,
        per_answer: int = 1,
        articles: Callable[[str], bool] = lambda title: True,
        blocked_questions: Iterable[str] = (),
    ):
        self.per_answer = per_answer
        self._articles = articles
        self._answers: Counter[str] = Counter()
        self._questions = set(blocked_questions)
        self._supports: set[tuple[str, ...]] = set()

    def admits(self, row: dict[str, Any]) -> bool:
        """May ``row`` join the split?"""
        return (
            self._answers[row["solution"]] < self.per_answer
            and _question(row) not in self._questions
            and tuple(row["support"]) not in self._supports
            and all(map(self._articles, row["support"]))
        )

    def take(self, row: dict[str, Any]) -> None:
        """Record ``row`` as part of the split."""
        self._answers[row["solution"]] += 1
        self._questions.add(_question(row))
        self._supports.add(tuple(row["support"]))


class TopTitles:
    """The top-5 titles BM25 retrieves for a question, each question searched once per build.

    Families take turns picking a few questions at a time, so the same candidates are checked again and again.
    """

    def __init__(self, retriever: BM25Retriever):
        self.retriever = retriever
        self._found: dict[str, list[str]] = {}

    def top5(self, questions: list[str]) -> list[list[str]]:
        """The titles of the five best passages for each question, in order."""
        new = list(dict.fromkeys(q for q in questions if q not in self._found))
        if new:
            for question, hits in zip(new, self.retriever.search(new, topk=5), strict=True):
                self._found[question] = [h.passage.title for h in hits]
        return [self._found[q] for q in questions]


def candidates(articles: list[Article]) -> dict[str, list[dict[str, Any]]]:
    """Every family's candidate questions (before the BM25 check), by family name."""
    pool: dict[str, list[dict[str, Any]]] = {name: [] for name in (*SINGLE_FAMILIES, OOD_FAMILY)}
    vocab = _capitalisation(articles)
    for article in articles:
        for name, make in SINGLE_HOP.items():
            row = make(article, vocab) if make is entity_type else make(article)
            if row is not None and not _names_answer(row):
                pool[name].append(row)
    for name in TWO_HOP_FAMILIES:
        pool[name] = []
    for row in two_hop_candidates(articles):
        if not _names_answer(row):
            pool[row["family"]].append(row)
    return pool


def _names_answer(row: dict[str, Any]) -> bool:
    """Does the question hold an accepted answer as a phrase? (Catches short names ``_leaks`` skips: "Qi".)"""
    question = f" {_normalized(row['messages'][0]['content'])} "
    return any(f" {_normalized(answer)} " in question for answer in row["golden_answers"])


def build_split(
    pool: dict[str, list[dict[str, Any]]],
    families: tuple[str, ...],
    retriever: TopTitles,
    bucket: str,
    size: int,
    seed: str,
    ledger: Ledger,
    two_hop_share: float = TWO_HOP_SHARE,
) -> list[dict[str, Any]]:
    """``size`` questions whose answers are in ``bucket`` and that ``ledger`` admits (it grows), families balanced.

    Two-hop families share ``two_hop_share`` of the rows (when any is asked for), single-hop families the
    rest, each family an equal part; a family short of questions leaves its part to the others.
    """
    rng = random.Random(seed)
    shuffled = {}
    for name in families:
        rows = [row for row in pool[name] if split_of(row["solution"]) == bucket]
        rng.shuffle(rows)
        shuffled[name] = rows
    double = [f for f in families if f in TWO_HOP_FAMILIES]
    single = [f for f in families if f not in TWO_HOP_FAMILIES]
    n_double = round(size * two_hop_share) if double and single else (size if double else 0)
    quotas = {f: n_double // len(double) + (i < n_double % len(double)) for i, f in enumerate(double)}
    n_single = size - n_double
    quotas |= {f: n_single // len(single) + (i < n_single % len(single)) for i, f in enumerate(single)}
    # Families take turns, a few answers at a time: an answer can serve several families (a bridge pair
    # gives both two-hop forms), and the first family to pick must not take all of them.
    picked: dict[str, list[dict[str, Any]]] = {f: [] for f in families}
    for limit in (quotas, dict.fromkeys(families, size)):  # the quotas, then a top-up to ``size``
        progress = True
        while progress and sum(map(len, picked.values())) < size:
            progress = False
            for f in families:
                room = min(8, limit[f] - len(picked[f]), size - sum(map(len, picked.values())))
                if room > 0:
                    found = _accepted(shuffled[f], retriever, ledger, room)
                    picked[f] += found
                    progress = progress or bool(found)
    rows = [row for f in families for row in picked[f]]
    rng.shuffle(rows)
    return rows


def _accepted(
    candidates: list[dict[str, Any]], retriever: TopTitles, ledger: Ledger, limit: int
) -> list[dict[str, Any]]:
    """Candidates that pass the BM25 check and ``ledger``, checked in batches until ``limit``."""
    rows: list[dict[str, Any]] = []
    for start in range(0, len(candidates), 256):
        if len(rows) >= limit:
            break
        batch = [c for c in candidates[start : start + 256] if ledger.admits(c)]
        if not batch:
            continue
        hits = retriever.top5([_question(c) for c in batch])
        for candidate, titles in zip(batch, hits, strict=True):
            if len(rows) < limit and ledger.admits(candidate) and _searchable(candidate, titles):
                ledger.take(candidate)
                rows.append(candidate)
    return rows


def _searchable(row: dict[str, Any], top5: list[str]) -> bool:
    if row["hops"] == 1:
        return row["solution"] in top5
    bridge, answer = row["support"]
    return bridge in top5 and answer not in top5[:3]


def _row(question: str, article: Article, family: str, clue_text: str) -> dict[str, Any]:
    row = qa_row(question, article.aliases)
    return {**row, "family": family, "hops": 1, "support": [article.title], "clue": clue_text, "target": ""}


def single_hop(article: Article) -> dict[str, Any] | None:
    """``definition``: "What/Who <verb> <clue>?"; ``None`` without a clean clue."""
    found = article.clue
    if found is None:
        return None
    return _row(
        f"{'Who' if found.person else 'What'} {found.verb} {found.text}?", article, "definition", found.text
    )


def entity_type(article: Article, vocab: Counter[str]) -> dict[str, Any] | None:
    """``entity_type``: "Which <short description> <verb> <clue>?" when the description names no alias."""
    found, description = article.clue, article.description
    if (
        found is None
        or not description
        or len(description.split()) > 8
        or _leaks(description, article.aliases)
    ):
        return None
    question = f"Which {_lower_first(description, vocab)} {found.verb} {found.text}?"
    return _row(question, article, "entity_type", found.text)


def attribute(article: Article) -> dict[str, Any] | None:
    """``attribute``: a later sentence "It/He/She <verb> ..." as "Which <kind> <verb> ...?"."""
    for sentence in _later_sentences(article)[:3]:
        match = _PRONOUN.match(_PARENTHETICAL.sub("", sentence).rstrip("."))
        if match is None or not _usable(match["rest"], article):
            continue
        question = f"Which {_kind(article)} {match['verb']} {match['rest']}?"
        return _row(question, article, "attribute", match["rest"])
    return None


def cloze(article: Article) -> dict[str, Any] | None:
    """``cloze``: the first later sentence that names the article verbatim, the name blanked."""
    name = _PARENTHETICAL.sub("", article.title).strip()
    for sentence in _later_sentences(article):
        if name not in sentence:
            continue
        blanked = sentence.replace(name, "___")
        if _usable(blanked, article):
            return _row(f'What name fills the blank in "{blanked}"?', article, "cloze", blanked)
    return None


def passage(article: Article) -> dict[str, Any] | None:
    """``passage`` (OOD): a sentence quoted from a position after the first, chosen by a hash of the title."""
    usable = [s for s in _later_sentences(article) if _usable(s, article)]
    if not usable:
        return None
    sentence = usable[hashlib.sha256(article.title.encode()).digest()[1] % len(usable)]
    question = f'Which encyclopedia article contains the sentence "{sentence}"?'
    return _row(question, article, OOD_FAMILY, sentence)


SINGLE_HOP = {
    "definition": single_hop,
    "entity_type": entity_type,
    "attribute": attribute,
    "cloze": cloze,
    OOD_FAMILY: passage,
}


def _later_sentences(article: Article) -> list[str]:
    """The sentences of the summary after the first."""
    rest = article.passage.text[len(article.first_sentence) :].strip()
    sentences = []
    while rest:
        sentence = first_sentence(rest)
        sentences.append(sentence)
        rest = rest[len(sentence) :].strip()
    return sentences


def _usable(text: str, article: Article) -> bool:
    words = len(text.split())
    return (
        MIN_SENTENCE_WORDS <= words <= MAX_SENTENCE_WORDS
        and _balanced(text)
        and not _leaks(text, article.aliases)
    )


def _kind(article: Article) -> str:
    found = article.clue
    if (found is not None and found.person) or article.topic == "People":
        return "person"
    return "place" if article.topic == "Geography" else "thing"


def two_hop_candidates(corpus: list[Article]) -> Iterator[dict[str, Any]]:
    """Bridge questions over pairs (A, B) where A's summary mentions B after its first sentence.

    Each pair gives a question in both forms (``bridge_mention``, ``bridge_names``); an answer is still used
    once per split, so a split holds one of them.
    A question belongs to the split of its answer B; the bridge A may come from any split (it is never
    the answer here, and requiring both in a 10 % split would leave a handful of pairs).
    """
    by_title = {a.title: a for a in corpus if _mentionable(a)}
    matcher = TitleMatcher(by_title)
    vocab = _capitalisation(corpus)
    for bridge in corpus:
        found = bridge.clue
        if found is None:
            continue
        mentioned = [by_title[t] for t in matcher.find(bridge.passage.text[len(bridge.first_sentence) :])]
        descriptions = Counter(b.description for b in mentioned)
        for answer in mentioned:
            if answer.title == bridge.title or descriptions[answer.description] > 1:
                continue
            if _leaks(answer.description, answer.aliases) or _leaks(found.text, answer.aliases):
                continue
            kind = "person" if found.person else "place" if bridge.topic == "Geography" else "thing"
            description = _lower_first(answer.description, vocab)
            pronoun = "who" if found.person else "that"
            who = "Who" if answer.topic == "People" or _LIFE_DATES.search(answer.description) else "What"
            forms = {
                "bridge_mention": f"Which {description} is mentioned in the encyclopedia summary "
                f"of the {kind} that {found.verb} {found.text}?",
                "bridge_names": f"The encyclopedia summary of the {kind} {pronoun} {found.verb} {found.text} "
                f"names a {description}. {who} is it?",
            }
            for family, question in forms.items():
                yield {
                    **qa_row(question, answer.aliases), "family": family, "hops": 2,
                    "support": [bridge.title, answer.title], "clue": found.text, "target": description,
                }  # fmt: skip


def clue(article: Article) -> Clue | None:
    """The predicate of the first sentence, cut before the first clause that names the article."""
    sentence = article.first_sentence.rstrip(".")
    match = _COPULA.match(_PARENTHETICAL.sub("", sentence))
    if match is None or len(match["subject"].split()) > 12:
        return None
    if not _subject_is_title(match["subject"], article.title):
        return None
    words: list[str] = []
    for chunk in match["predicate"].split(", "):
        if _leaks(chunk, article.aliases) or len(words) + len(chunk.split()) > MAX_CLUE_WORDS:
            break
        words += chunk.split()
        words[-1] += ","
    text = " ".join(words).rstrip(",;: ")
    if len(text.split()) < MIN_CLUE_WORDS or not _balanced(text):
        return None
    return Clue(verb=match["verb"], text=text, person=_is_person(article, text))


def _is_person(article: Article, clue_text: str) -> bool:
    # A thousand articles are "Uncategorized", people among them; a person's description carries life
    # dates, "Indian independence activist (1869-1948)", and the clue says "who".
    return article.topic == "People" or bool(
        _LIFE_DATES.search(article.description) and _WHO.search(clue_text)
    )


def first_sentence(text: str) -> str:
    """The text up to the first sentence end that is not an abbreviation or inside parentheses."""
    for end in _SENTENCE_END.finditer(text):
        before = text[: end.start() + 1]
        last_word = before.rsplit(None, 1)[-1].rstrip(".").lower()
        if last_word in _ABBREVIATIONS or len(last_word) == 1 or before.count("(") != before.count(")"):
            continue
        return before.strip()
    return text.strip()


def aliases(title: str, sentence: str) -> tuple[str, ...]:
    """Accepted answers: the title, the title without "(disambiguation)", other names in the subject.

    "Saraswati, also spelled as Sarasvati, is ..." adds Sarasvati. A name counts when a naming phrase
    ("known as", "called", "or", ...) introduces it or when it shares a word with the title, which keeps
    out appositions like "Augusta Ada King, Countess of Lovelace" -> "Countess of Lovelace".
    """
    names = [title, _PARENTHETICAL.sub("", title).strip()]
    match = _COPULA.match(_PARENTHETICAL.sub("", sentence.rstrip(".")))
    if match and _subject_is_title(match["subject"], title):
        subject = _CONTEXT.sub("", match["subject"])
        parts = _NAME_SEPARATOR.split(subject)
        for marker, part in zip([","] + parts[1::2], parts[0::2], strict=True):
            name = _FILLER.sub("", part).strip(" \"'")
            if not name or len(name.split()) > 6 or not re.search(r"[^\W\d]", name) or "[" in name:
                continue
            if marker != "," or _leaks(name, (title,)):
                names.append(name)
    unique: dict[str, str] = {}
    for name in names:
        unique.setdefault(_normalized(name), name)
    return tuple(unique.values())


class TitleMatcher:
    """Finds titles in running text, longest match first at each position (n-gram lookup, no regex)."""

    def __init__(self, titles: Iterable[str]):
        self.titles = set(titles)
        self._longest: dict[str, int] = {}  # first word -> most words in a title starting with it
        for title in self.titles:
            head = title.split(" ", 1)[0]
            self._longest[head] = max(self._longest.get(head, 0), title.count(" ") + 1)

    def find(self, text: str) -> list[str]:
        """Titles occurring verbatim in ``text``, in order of first occurrence, without repeats."""
        words = [w.strip(",.;:!?()[]\"'") for w in text.split()]
        found: list[str] = []
        i = 0
        while i < len(words):
            for n in range(min(self._longest.get(words[i], 0), len(words) - i), 0, -1):
                candidate = " ".join(words[i : i + n])
                if candidate in self.titles:
                    if candidate not in found:
                        found.append(candidate)
                    i += n - 1
                    break
            i += 1
        return found


def _mentionable(article: Article) -> bool:
    # One-word titles are often common nouns ("Light", "Water") capitalised at a sentence start; only names
    # of people and places are safe to match.
    title = article.title
    multiword = len(title.split()) > 1 and "(" not in title
    return bool(article.description) and (multiword or article.topic in ("People", "Geography"))


def _subject_is_title(subject: str, title: str) -> bool:
    subject_words = {w.lower() for w in _WORD.findall(subject)}
    title_words = {w.lower() for w in _WORD.findall(_PARENTHETICAL.sub("", title))} - STOPWORDS
    return bool(title_words & subject_words)


def _leaks(text: str, names: tuple[str, ...]) -> bool:
    """Does ``text`` contain a content word of any name, a derived form ("Iraqi") or its first five letters?"""
    name_words = {w.lower() for n in names for w in _WORD.findall(n) if len(w) > 2} - STOPWORDS
    stems = {w[:5] for w in name_words if len(w) >= 5}
    prefixes = tuple(w for w in name_words if len(w) >= 4)
    for word in _WORD.findall(text.lower()):
        if word in name_words or word.startswith(prefixes) or word[:5] in stems:
            return True
    return False


def _normalized(name: str) -> str:
    return " ".join(w for w in _WORD.findall(name.lower()) if w not in ("a", "an", "the"))


def _balanced(text: str) -> bool:
    return text.count("(") == text.count(")") and text.count('"') % 2 == 0


def _capitalisation(corpus: list[Article]) -> Counter[str]:
    """How often each word form occurs mid-sentence in the corpus: tells "Country" (a noun) from "Italian"."""
    counts: Counter[str] = Counter()
    for article in corpus:
        counts.update(_WORD.findall(article.passage.text)[1:])
    return counts


def _lower_first(description: str, vocab: Counter[str]) -> str:
    first, _, rest = description.partition(" ")
    if vocab[first.lower()] > vocab[first]:
        first = first.lower()
    return f"{first} {rest}".strip()


if __name__ == "__main__":
    main()
