"""Exact match and F1 hold for answers in any script, and English scoring is what SQuAD's is.

A DeepSearch user with a Chinese corpus has golden answers like "北京" and a model that answers "北京。";
an English one has "O'Brien" against the model's "O’Brien" (a curly apostrophe copied from a passage), or
"1914–1918" (an en dash). All of these are the same answer.
"""

from __future__ import annotations

import pytest

from swift_rlfactory.rewards.rules import exact_match, token_f1


@pytest.mark.parametrize(
    ("prediction", "gold"),
    [
        ("北京。", "北京"),  # full stop of CJK punctuation
        ("「東京」", "東京"),  # Japanese quotation brackets
        ("ＢＢＣ", "BBC"),  # full-width Latin letters
        ("１９８４", "1984"),  # full-width digits, compared as numbers
        ("O’Brien", "O'Brien"),  # curly apostrophe
        ("1914–1918", "1914-1918"),  # en dash against hyphen
        ("STRASSE", "Straße"),  # case folding
        ("The Beatles!", "beatles"),  # SQuAD as before: articles and punctuation
    ],
)
def test_the_same_answer_in_another_spelling_matches(prediction: str, gold: str):
    assert exact_match(prediction, [gold]) == 1.0


@pytest.mark.parametrize(
    ("prediction", "gold"),
    [("北京", "南京"), ("東京都", "京都"), ("-227", "227"), ("12.5", "125"), ("Paris", "Paris Hilton")],
)
def test_different_answers_do_not_match(prediction: str, gold: str):
    assert exact_match(prediction, [gold]) == 0.0


def test_f1_counts_each_chinese_or_japanese_character_as_a_token():
    assert token_f1("北京市", ["北京"]) == pytest.approx(0.8)  # 2 of 3 characters, both of 2
    assert token_f1("中华人民共和国", ["中国"]) == pytest.approx(2 * (2 / 7) * 1 / (2 / 7 + 1))
    assert token_f1("上海", ["北京"]) == 0.0
    assert token_f1("the cat sat", ["a cat"]) == pytest.approx(2 / 3)  # English: words, as SQuAD
