"""Hits rendered as the observation text the model reads, exactly as Search-R1 renders them
(``Doc 1(Title: "Nebula") A nebula is ...``), and read back; see docs/data.md ("Observation text").
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .index import Hit

NO_RESULTS = "No results found."
# One document of an observation: its title, quoted as here (and in Search-R1's corpora), where it may hold
# parentheses ("Mercury (planet)"), or bare up to the first ")"; then its text up to the next document.
_DOC = re.compile(
    r'Doc \d+\(Title: (?:"(?P<quoted>[^"]*)"|(?P<bare>.*?))\) ?(?P<text>.*?)(?=\nDoc \d+\(Title: |\Z)', re.S
)


def format_hits(hits: Sequence[Hit]) -> str:
    """One line per hit, numbered from 1; :data:`NO_RESULTS` when there are none."""
    if not hits:
        return NO_RESULTS
    return "\n".join(
        f'Doc {rank}(Title: "{hit.passage.title}") {hit.passage.text}'
        for rank, hit in enumerate(hits, start=1)
    )


def parse_hits(observation: str) -> dict[str, str]:
    """The inverse of :func:`format_hits`: title -> text of each document, best first, the text as the model
    saw it (cut where the observation was truncated); empty for :data:`NO_RESULTS` or any other text."""
    return {
        m["quoted"] if m["quoted"] is not None else m["bare"]: m["text"] for m in _DOC.finditer(observation)
    }
