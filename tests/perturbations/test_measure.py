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


def test_windowed_bound_stays_tight_where_alike_insertions_and_deletions_pile_up() -> None:
    # space.random (insert and delete) at severity 0.5 on 465k characters: one chaining alone
    # gave 1.60x the exact distance; the smaller of the two stays within a few per cent
    from pydoc_data.topics import topics

    from harness.data.perturb import apply
    from perturbations.measure import edit_distance, windowed_distance
    from perturbations.registry import REGISTRY

    text = "".join(topics.values())
    p = REGISTRY.resolve("space.random")(severity=0.5, action="both")
    out = apply(p, text, 0, "space.random", {"severity": 0.5, "action": "both"}, "a")
    exact, windowed = edit_distance(text, out), windowed_distance(text, out)
    assert exact <= windowed <= 1.05 * exact
