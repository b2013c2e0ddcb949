"""typo.*: severity = expected fraction of characters edited. On ~100 kB of real English (the
Python documentation topics shipped with the stdlib: no network, no install) the measured
Levenshtein edit rate stays within ±20 % of the nominal severity for 0.01-0.2."""

from __future__ import annotations

import random
from pydoc_data.topics import topics

import pytest

from harness.data.perturb import apply
from perturbations.measure import edit_rate
from perturbations.typo import KeyboardTypo, OcrTypo, RandomTypo, SpellingTypo


def english_100k() -> str:
    text = "\n\n".join(topics[k] for k in sorted(topics))
    return text[:100_000]


TEXT = english_100k()
SEVERITIES = (0.01, 0.02, 0.05, 0.1, 0.2)
MAKERS = {
    "typo.keyboard": lambda s: KeyboardTypo(severity=s),
    "typo.random/insert": lambda s: RandomTypo(severity=s, action="insert"),
    "typo.random/substitute": lambda s: RandomTypo(severity=s, action="substitute"),
    "typo.random/swap": lambda s: RandomTypo(severity=s, action="swap"),
    "typo.random/delete": lambda s: RandomTypo(severity=s, action="delete"),
    "typo.ocr": lambda s: OcrTypo(severity=s),
    "typo.spelling": lambda s: SpellingTypo(severity=s),
}


def test_sample_is_real_english_of_100kB() -> None:
    assert len(TEXT) == 100_000
    assert TEXT.count(" the ") > 500


@pytest.mark.parametrize("label", sorted(MAKERS))
def test_measured_edit_rate_tracks_severity(label: str) -> None:
    for s in SEVERITIES:
        out = apply(MAKERS[label](s), TEXT, 0, label, {"severity": s}, "english-100k")
        rate = edit_rate(TEXT, out)
        assert abs(rate / s - 1) <= 0.2, f"{label} severity {s}: measured edit rate {rate:.4f}"


@pytest.mark.parametrize("label", sorted(MAKERS))
def test_edits_scale_with_document_length(label: str) -> None:
    """No per-call cap (nlpaug stops at 10): 10x the text gets ~10x the edits."""
    short, long = TEXT[:5_000], TEXT[:50_000]
    p = MAKERS[label](0.05)
    d_short = edit_rate(short, p.perturb(short, random.Random(1))) * len(short)
    d_long = edit_rate(long, p.perturb(long, random.Random(1))) * len(long)
    assert 7 < d_long / d_short < 13


@pytest.mark.parametrize("label", sorted(MAKERS))
def test_untouched_text_is_byte_identical(label: str) -> None:
    """nlpaug's tokenizer rewrote whitespace and punctuation; ours leaves them alone: the
    whitespace skeleton survives every typo perturbation (they edit inside words only, or
    substitute single characters)."""
    text = "it's e-mail:  x@y.com\tTAB\n  (nested [brackets]) — ok?\n\n" * 20
    out = MAKERS[label](0.05).perturb(text, random.Random(3))
    assert out != text
    if not label.startswith("typo.spelling"):
        assert [t for t in text.split("\n")][-1] == out.split("\n")[-1]
    assert out.count("\n") == text.count("\n")
    assert out.count("\t") == text.count("\t")


def test_swap_counts_two_edits_and_keeps_letters() -> None:
    text = "abcdefgh " * 200
    out = RandomTypo(severity=0.1, action="swap").perturb(text, random.Random(0))
    assert sorted(out) == sorted(text)  # a permutation of the same characters
    assert edit_rate(text, out) == pytest.approx(0.1, rel=0.2)


def test_keyboard_uses_document_language_and_layout() -> None:
    text = "йцукен фыва пролдж " * 50
    uk = KeyboardTypo(severity=0.1, lang="uk").perturb(text, random.Random(0))
    en = KeyboardTypo(severity=0.1, lang="ru").perturb(text, random.Random(0))  # no ru map -> en
    assert uk != text and en == text  # Cyrillic keys exist only on the uk map
    assert KeyboardTypo(severity=0.1, layout="de").perturb("zzzz " * 40, random.Random(0)) != "zzzz " * 40


def test_keyboard_substitutes_neighbours_and_keeps_case() -> None:
    out = KeyboardTypo(severity=1.0).perturb("G", random.Random(0))
    assert out in set("RTYFHVB")  # upper-cased neighbours of g on QWERTY (nlpaug's en map)


def test_spelling_preserves_case_and_leaves_other_text() -> None:
    # 'esteem' is listed only in lower case (-> estime, esstem, steem); the case is carried over
    text = "Esteem ESTEEM esteem " * 30
    out = SpellingTypo(severity=0.3).perturb(text, random.Random(0)).split()
    for group, forms in [
        (out[0::3], {"Esteem", "Estime", "Esstem", "Steem"}),
        (out[1::3], {"ESTEEM", "ESTIME", "ESSTEM", "STEEM"}),
        (out[2::3], {"esteem", "estime", "esstem", "steem"}),
    ]:
        assert set(group) <= forms and len(set(group)) > 1
    assert SpellingTypo(severity=0.2).perturb("Привет мир " * 10, random.Random(0)) == "Привет мир " * 10


def test_ocr_extended_map_reaches_higher_rates_than_nlpaug_alone() -> None:
    base = OcrTypo(severity=0.2, extended=False).perturb(TEXT[:20_000], random.Random(0))
    ext = OcrTypo(severity=0.2, extended=True).perturb(TEXT[:20_000], random.Random(0))
    assert edit_rate(TEXT[:20_000], base) < 0.15 < edit_rate(TEXT[:20_000], ext)


@pytest.mark.parametrize("bad", [-0.1, 1.5, "high", True])
def test_bad_severity_is_a_one_line_error(bad: object) -> None:
    with pytest.raises(ValueError, match="typo.keyboard: severity must be a number between 0 and 1"):
        KeyboardTypo(severity=bad)  # type: ignore[arg-type]


def test_bad_choice_names_the_field() -> None:
    with pytest.raises(ValueError, match="typo.random: action must be one of delete, insert, substitute, swap"):
        RandomTypo(severity=0.1, action="flip")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="layout"):
        KeyboardTypo(severity=0.1, layout="xx")
