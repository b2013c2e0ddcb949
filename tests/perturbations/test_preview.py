"""harness.data.preview: one row per severity with the measured edit rate, UTF-8 size and text."""

from __future__ import annotations

import pytest

from harness.data.perturb import apply
from harness.data.preview import preview
from perturbations.measure import edit_rate
from perturbations.typo import KeyboardTypo


def test_rows_match_apply_and_measure() -> None:
    text = "The quick brown fox jumps over the lazy dog."
    table = preview("typo.keyboard", [0.0, 0.2], text, 5, {})
    lines = table.splitlines()
    assert lines[0].startswith("typo.keyboard  seed=5  44 characters")
    assert lines[1].split() == ["severity", "edit", "rate", "bytes", "text"]
    expected = apply(KeyboardTypo(severity=0.2), text, 5, "typo.keyboard", {"severity": 0.2, "layout": None}, "preview")
    sev, rate, size, shown = lines[-1].split(maxsplit=3)
    assert (sev, shown) == ("0.2", expected)
    assert rate == f"{edit_rate(text, expected):.3f}" and size == str(len(expected.encode()))
    assert lines[-2].split(maxsplit=3)[1:] == ["0.000", "44", text]


def test_invisible_changes_show_in_bytes_and_newlines_stay_on_one_row() -> None:
    table = preview("unicode.nfd", [1.0], "café\nnaïve", 0, {})
    row = table.splitlines()[-1].split()
    assert row[2] == "14" and row[3] == "cafe\u0301⏎nai\u0308ve"  # 12 bytes NFC, 14 decomposed


def test_params_are_passed_and_unknown_ones_rejected() -> None:
    assert "action='swap'" in preview("typo.random", [0.1], "abcdef", 0, {"action": "swap"})
    with pytest.raises(ValueError, match="has no parameter 'actoin' \\(did you mean 'action'\\?\\)"):
        preview("typo.random", [0.1], "abc", 0, {"actoin": "swap"})
