"""ISO 15924 script detection from code points (sources.script)."""

from __future__ import annotations

import pytest

from sources.script import char_script, detect_script, detect_script_bytes, script_counts


@pytest.mark.parametrize(
    ("text", "script"),
    [
        ("The quick brown fox", "Latn"),
        ("Über Größe, naïve façade, Łódź", "Latn"),
        ("Съешь же ещё этих мягких булок", "Cyrl"),
        ("Αθήνα είναι ωραία πόλη", "Grek"),
        ("مرحبا بالعالم", "Arab"),
        ("שָׁלוֹם עולם", "Hebr"),  # niqqud are marks inside the Hebrew block
        ("नमस्ते दुनिया", "Deva"),  # matras and virama are marks of the Devanagari block
        ("สวัสดีชาวโลก", "Thai"),
        ("中文文本处理", "Hani"),
        ("東京は大きい", "Jpan"),  # Han + Hiragana
        ("カタカナ", "Jpan"),
        ("한국어 문장", "Kore"),
        ("ქართული", "Geor"),
        ("1234 !?… — ©", "Zyyy"),
        ("", "Zyyy"),
        ("\u0301\u0308", "Zyyy"),  # lone combining marks are Zinh: not counted
    ],
)
def test_detect_script(text: str, script: str) -> None:
    assert detect_script(text) == script


def test_non_latin_wins_over_embedded_latin() -> None:
    # 13 Latin letters of option names, 9 kana/kanji (41 %): Japanese text with identifiers
    text = "ls --all --classify は一覧を表示します"
    counts = script_counts(text)
    assert (counts["Latn"], counts["Hira"] + counts["Hani"]) == (13, 9)
    assert detect_script(text) == "Jpan"
    # below 25 % the text is Latin
    assert detect_script("ls --almost-all --ignore-backups --classify は一覧を表示します") == "Latn"


def test_mixed_scripts() -> None:
    assert detect_script("Привет мир Καλημέρα κόσμε") == "Mixd"  # two non-Latin scripts ≥ 25 %
    # Latin below half, no non-Latin script at 25 %: Mixd
    assert detect_script("abcd" + "жз" + "αβ" + "אב" + "ابت") == "Mixd"
    assert detect_script("abcdefghij ж") == "Latn"  # 1 of 11 letters Cyrillic: Latin text


def test_char_script_categories() -> None:
    assert char_script("a") == "Latn" and char_script("é") == "Latn"
    assert char_script("5") == "Zyyy" and char_script("。") == "Zyyy"
    assert char_script("\u0301") == "Zinh"
    assert char_script("ⴰ") == "Zzzz"  # Tifinagh: a letter of a script not in the table


def test_counts_are_letters_only() -> None:
    assert script_counts("ab 12, вг!") == {"Latn": 2, "Cyrl": 2}


def test_detect_script_bytes_ignores_invalid_utf8() -> None:
    assert (
        detect_script_bytes(b"\xff\xfe\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82") == "Cyrl"
    )
