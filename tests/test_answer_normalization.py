"""Exact match and F1 hold for answers in any script, and English scoring is what SQuAD's is.

A DeepSearch user with a Chinese corpus has golden answers like "北京" and a model that answers "北京。";
an English one has "O'Brien" against the model's "O’Brien" (a curly apostrophe copied from a passage), or
"1914–1918" (an en dash). All of these are the same answer.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# -- numbers: each keeps its value, in a plain answer and inside text ----------------------------------
@pytest.mark.parametrize(
    ("prediction", "gold"),
    [
        ("3", "3.5"), ("1,000", "1.000"), ("2", "2nd"), ("1990", "1990s"), ("-5", "5"), ("−5", "5"),
        ("-0.5", "0.5"), ("1 2", "12"), ("1,5", "15"), ("1,2,3", "123"),  # no reading of "1,5" is guessed
        ("1.5 million", "15 million"), ("-5 degrees", "5 degrees"), ("0.5 kg", "5 kg"), (".5 kg", "5 kg"),
        ("12.5%", "125%"), ("-5%", "5%"), ("-$5", "$5"), ("$1.5", "$15"), ("3.5km", "35km"), ("约3.5米", "约35米"),
        ("3/4", "34"), ("5-3", "53"), ("2-1", "21"), ("10:30", "1030"), ("1,000 people", "1.000 people"),
    ],
)  # fmt: skip
def test_different_numbers_do_not_match(prediction: str, gold: str):
    assert exact_match(prediction, [gold]) == exact_match(gold, [prediction]) == 0.0


@pytest.mark.parametrize(
    ("prediction", "gold"),
    [
        ("0.50", "0.5"), ("1,000", "1000"), ("3.0", "3"), ("+7", "7"), ("28080.", "28080"), (".5", "0.5"),
        ("1 000", "1000"), ("1_000", "1000"), ("12,34,567", "1234567"), ("-0", "0"), ("−5", "-5"),
        ("1,000 people", "1000 people"), ("0.50 kg", "0.5 kg"), ("1.5 million", "1.50 million"),
        ("-5 degrees", "−5 degrees"), ("$5", "5"), ("5%", "5"), ("the 1990s", "1990s"), ("F-16", "F16"),
        ("1914–1918", "1914-1918"), ("1, 2, 3", "1,2,3"), ("-$1,000.50", "$-1000.5"),
    ],
)  # fmt: skip
def test_the_same_number_written_another_way_matches(prediction: str, gold: str):
    assert exact_match(prediction, [gold]) == exact_match(gold, [prediction]) == 1.0


def test_f1_keeps_numbers_whole():
    assert token_f1("1.5 million", ["15 million"]) == pytest.approx(0.5)
    assert token_f1("1,000 people", ["1000 people"]) == 1.0


NUMBERS = st.decimals(min_value=-(10**7), max_value=10**7, places=3, allow_nan=False, allow_infinity=False)
CONTEXTS = ["{}", "{} km", "about {} people", "{}%", "${}", "在{}米", "({})"]


def spellings(value: Decimal) -> list[str]:
    """Ways to write ``value``: plain, with trailing zeros, thousands grouped, an explicit sign."""
    plain = format(value, "f")
    signed = plain.replace("-", "\u2212") if value < 0 else "+" + plain
    padded = plain + ("0" if "." in plain else ".00")
    return [plain, signed, padded, f"{value:,f}"]


@given(value=NUMBERS, other=NUMBERS, context=st.sampled_from(CONTEXTS), data=st.data())
@settings(max_examples=300, deadline=None, database=None)
def test_two_spellings_match_exactly_when_their_numbers_are_equal(value, other, context, data):
    other = data.draw(st.sampled_from([other, -value, value * 10, value / 10, value + 1, value]))
    first = context.format(data.draw(st.sampled_from(spellings(value))))
    second = context.format(data.draw(st.sampled_from(spellings(other))))
    assert exact_match(first, [second]) == float(value == other), (first, second)
