"""Retrieval for search agents (the DeepSearch example): corpora, retrievers, servers.

:mod:`.corpus` (passages), :mod:`.index` (BM25, dense, hybrid and remote retrievers), :mod:`.format`
(Search-R1 observation text), :mod:`.server` (MCP ``search`` tool, ``POST /retrieve``); heavy
dependencies load only when used. See docs/data.md ("Retrieval").
"""

from swift_rlfactory.data.qa import convert_qa_record, load_qa

from .corpus import Passage, load_corpus, load_jsonl_corpus, load_wiki_offline
from .format import format_hits, parse_hits
from .index import (
    BM25Retriever,
    DenseRetriever,
    Hit,
    HybridRetriever,
    RemoteSearchR1Retriever,
    Retriever,
    make_retriever,
)

__all__ = [
    "BM25Retriever",
    "DenseRetriever",
    "Hit",
    "HybridRetriever",
    "Passage",
    "RemoteSearchR1Retriever",
    "Retriever",
    "convert_qa_record",
    "format_hits",
    "load_corpus",
    "load_jsonl_corpus",
    "load_qa",
    "load_wiki_offline",
    "make_retriever",
    "parse_hits",
]
