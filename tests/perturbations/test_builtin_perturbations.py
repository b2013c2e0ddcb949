"""Hand-checked behaviour of the non-typo built-ins (unicode, case, spacing, layout, translit)."""

from __future__ import annotations

import random
import unicodedata

import pytest

from perturbations.case import RandomCase, UpperCase
from perturbations.layout import LAYOUTS, WrongLayout
from perturbations.measure import edit_rate
from perturbations.repeat import RepeatChars
from perturbations.space import AntSpeak, RandomSpace
from perturbations.translit import Transliterate
from perturbations.unicode import (
    HOMOGLYPHS,
    STYLES,
    Decompose,
    Homoglyph,
    StripDiacritics,
    Styling,
    style_map,
)

R = random.Random


def test_nfd_full_severity_equals_unicodedata_nfd() -> None:
    text = "Ça coûte cher à Zürich; 한국어; Ångström"
    out = Decompose(severity=1.0).perturb(text, R(0))
    assert out == unicodedata.normalize("NFD", text)
    assert unicodedata.normalize("NFC", out) == text  # same text, other bytes
    partial = Decompose(severity=0.5).perturb(text * 20, R(0))
    assert unicodedata.normalize("NFC", partial) == text * 20 and partial != text * 20


def test_homoglyph_swaps_both_ways() -> None:
    assert Homoglyph(severity=1.0, target="cyrillic").perturb("copy", R(0)) == "сору"
    assert Homoglyph(severity=1.0, target="cyrillic").perturb("сору", R(0)) == "copy"
    out = Homoglyph(severity=1.0, target="greek").perturb("OK", R(0))
    assert out == "ΟΚ" and unicodedata.name(out[0]).startswith("GREEK")
    for table in HOMOGLYPHS.values():
        for latin, other in table.items():
            assert latin.isascii() and not other.isascii()


def test_strip_diacritics() -> None:
    p = StripDiacritics(severity=1.0)
    assert p.perturb("café naïve Ångström Ζεύς", R(0)) == "cafe naive Angstrom Ζευς"
    assert p.perturb("e\u0301", R(0)) == "e"  # a free-standing combining accent goes too
    assert p.perturb("שָׁלוֹם", R(0)) == "שלום"  # Hebrew points
    assert p.perturb("हिन्दी ไทย", R(0)) == "हिन्दी ไทย"  # vowel signs are letters: kept


@pytest.mark.parametrize("style", STYLES)
def test_every_styled_letter_is_an_assigned_character(style: str) -> None:
    for src, dst in style_map(style).items():
        assert len(dst) == 1 and unicodedata.name(dst, "") != "", (style, src)


def test_styling_examples() -> None:
    assert Styling(severity=1.0).perturb("Bold 42!", R(0)) == "𝐁𝐨𝐥𝐝 𝟒𝟐!"
    assert Styling(severity=1.0, style="fullwidth").perturb("ab 1", R(0)) == "ａｂ １"
    assert Styling(severity=1.0, style="script").perturb("He", R(0)) == "ℋℯ"
    assert Styling(severity=1.0, style="circled").perturb("a0", R(0)) == "ⓐ⓪"
    mixed = Styling(severity=1.0, style="random").perturb("word " * 40, R(0)).split()
    assert len(set(mixed)) > 3 and "word" not in mixed


def test_case() -> None:
    assert UpperCase(severity=1.0).perturb("straße über alles", R(0)) == "STRASSE ÜBER ALLES"
    out = RandomCase(severity=0.5).perturb("abcdefghij" * 100, R(0))
    assert out.lower() == "abcdefghij" * 100
    assert 0.4 < sum(c.isupper() for c in out) / 1000 < 0.6


def test_antspeak_keeps_marks_and_emoji_attached() -> None:
    p = AntSpeak(severity=1.0)
    assert p.perturb("abc de", R(0)) == "a b c d e"
    assert p.perturb("e\u0301t", R(0)) == "e\u0301 t"
    assert p.perturb("👍🏽x", R(0)) == "👍 🏽 x"  # skin tone modifiers are symbols, not marks
    assert p.perturb("a\u200db", R(0)) == "a\u200db"  # ZWJ sequences stay joined


def test_space_random_is_calibrated() -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 200
    for action in ("both", "insert", "delete"):
        out = RandomSpace(severity=0.05, action=action).perturb(text, R(1))
        assert edit_rate(text, out) == pytest.approx(0.05, rel=0.2)
        assert out.replace(" ", "") == text.replace(" ", "")


def test_repeat_chars() -> None:
    text = "good" * 500
    out = RepeatChars(severity=0.2, max_repeats=1).perturb(text, R(0))
    # each chosen character doubled: 20 % of 2000 characters -> ~400 extra
    assert 300 < len(out) - len(text) < 500
    assert edit_rate(text, out) == pytest.approx(0.2, rel=0.25)


def test_wrong_layout_both_directions() -> None:
    p = WrongLayout(severity=1.0, layout="ru")
    assert p.perturb("привет", R(0)) == "ghbdtn"
    assert p.perturb("ghbdtn", R(0)) == "привет"
    assert p.perturb("Привет, мир.", R(0)) == "Ghbdtn? vbh/"
    assert WrongLayout(severity=1.0, lang="el").perturb("καλημέρα", R(0))[:4] == "kalh"
    assert WrongLayout(severity=1.0, direction="to_latin").perturb("hello", R(0)) == "hello"
    for layout, table in LAYOUTS.items():  # every key maps to one character
        assert all(len(k) == 1 and len(v) == 1 for k, v in table.items()), layout


def test_translit() -> None:
    p = Transliterate(severity=1.0)
    assert p.perturb("Москва, Щука, ёжик", R(0)) == "Moskva, Shchuka, yozhik"
    assert p.perturb("Αθήνα", R(0)) == "Athina"
    assert p.perturb("Киев", R(0)) == "Kiev"
    assert Transliterate(severity=1.0, lang="uk").perturb("Київ, Харків", R(0)) == "Kyiv, Kharkiv"
    assert p.perturb("東京 abc", R(0)) == "東京 abc"


def test_word_level_severity_is_a_fraction_of_words() -> None:
    text = "word " * 1000
    out = UpperCase(severity=0.3).perturb(text, R(0))
    assert 250 < out.count("WORD") < 350
