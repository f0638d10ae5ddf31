"""BM25 finds words inside text written without spaces (Chinese, Japanese), as it does in English.

A Chinese or Japanese corpus is one "word" per clause to a whitespace tokenizer, so before, a query for
"東京" found nothing in "東京は日本の首都です" and only the whole clause matched.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from swift_rlfactory.retrieval.corpus import Passage
from swift_rlfactory.retrieval.index import BM25Retriever

PASSAGES = [
    Passage("p0", "大阪", "大阪は日本の商業の中心地で、たこ焼きで有名です。"),
    Passage("p1", "東京", "東京は日本の首都です。人口は約1400万人です。"),
    Passage("p2", "北京", "北京是中华人民共和国的首都，也是政治和文化中心。"),
    Passage("p3", "上海", "上海是中国最大的城市和经济中心。"),
    Passage("p4", "Paris", "Paris is the capital and largest city of France."),
    Passage("p5", "서울", "서울특별시는 대한민국의 수도이다."),
]


@pytest.mark.parametrize(
    ("query", "best"),
    [
        ("東京", "p1"),
        ("日本の首都", "p1"),
        ("たこ焼き", "p0"),
        ("中华人民共和国的首都是哪里", "p2"),
        ("最大的城市", "p3"),
        ("capital of France", "p4"),
        ("대한민국의 수도", "p5"),
    ],
)
def test_a_word_inside_unspaced_text_finds_its_passage(tmp_path: Path, query: str, best: str):
    (hits,) = BM25Retriever(PASSAGES, cache_dir=tmp_path).search([query], topk=3)
    assert hits and hits[0].passage.id == best


def test_an_unrelated_query_still_finds_nothing(tmp_path: Path):
    assert BM25Retriever(PASSAGES, cache_dir=tmp_path).search(["量子力学"], topk=3) == [[]]
