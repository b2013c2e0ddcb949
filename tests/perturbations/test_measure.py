"""perturbations.measure: plain Levenshtein / length in code points (a swap counts 2)."""

from __future__ import annotations

import random

import pytest
from rapidfuzz.distance import Levenshtein

from perturbations.measure import edit_distance, edit_rate


@pytest.mark.parametrize(
    ("a", "b", "d"),
    [
        ("", "", 0),
        ("abc", "abc", 0),
        ("ab", "ba", 2),  # adjacent swap = 2 (not Damerau's 1)
        ("kitten", "sitting", 3),
        ("", "abc", 3),
        ("abc", "", 3),
        ("café", "cafe\u0301", 2),  # code points, not graphemes: é -> e + U+0301
        ("😀x", "x", 1),  # one code point, not four bytes
    ],
)
def test_hand_computed_distances(a: str, b: str, d: int) -> None:
    assert edit_distance(a, b) == d


def test_rate_divides_by_original_length() -> None:
    assert edit_rate("abcd", "abXd") == 0.25
    assert edit_rate("ab", "ba") == 1.0
    assert edit_rate("", "") == 0.0
    assert edit_rate("", "xy") == 2.0  # denominator max(len, 1)


def test_banded_search_is_exact_on_long_texts() -> None:
    rng = random.Random(0)
    a = "".join(rng.choice("abcdefgh ") for _ in range(20_000))
    for k in (1, 100, 3000):
        b = list(a)
        for i in rng.sample(range(len(b)), k):
            b[i] = "X"
        b = "".join(b)
        assert edit_distance(a, b) == Levenshtein.distance(a, b)
    shifted = a[500:] + a[:500]
    assert edit_distance(a, shifted) == Levenshtein.distance(a, shifted)
