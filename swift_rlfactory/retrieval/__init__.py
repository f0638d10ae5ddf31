"""Retrieval for search agents (the DeepSearch example): corpora, retrievers, servers, QA data.

* :mod:`.corpus` - :class:`Passage`, the bundled Wikipedia summaries, Search-R1 JSONL corpora;
* :mod:`.index` - the :class:`Retriever` protocol and its BM25, dense, hybrid and remote implementations;
* :mod:`.format` - hits rendered as Search-R1 observation text, and read back from it;
* :mod:`.server` - the retriever as an MCP ``search`` tool or a Search-R1 ``POST /retrieve`` API;
* QA files (FlashRAG / Search-R1) are read by :mod:`swift_rlfactory.data.qa`.

Heavy dependencies (bm25s, sentence-transformers, FastAPI, the MCP SDK) load only when the piece that
needs them is used.
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
