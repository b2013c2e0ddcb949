"""A single very long document scores in time linear in its length, with a progress bar: the
exact Levenshtein edit rate (quadratic when most characters change) is used only up to
EXACT_LIMIT characters, a windowed upper bound above, and results say which (samples.jsonl
``edit_rate_method``, run.json ``edit_rate``); sampled per-byte NLL is capped."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from rapidfuzz.distance import Levenshtein

import perturbations.measure as measure
from harness.cli import main
from perturbations.measure import edit_distance, edit_rate_measured, windowed_distance


def _edit(text: str, rng: random.Random, p: float) -> str:
    out = []
    for c in text:
        u = rng.random()
        if u < p / 3:
            out.append("#")  # substitution
        elif u < 2 * p / 3:
            out.append(c + "+")  # insertion
        elif u < p:
            continue  # deletion
        else:
            out.append(c)
    return "".join(out)


@pytest.mark.parametrize("p", [0.0, 0.02, 0.1, 0.5, 0.9])
@pytest.mark.parametrize("seed", [0, 1])
def test_windowed_distance_bounds_the_exact_one(p: float, seed: int) -> None:
    rng = random.Random(seed)
    a = "".join(rng.choice("abcde fgh") for _ in range(3000))
    b = _edit(a, rng, p)
    exact, windowed = edit_distance(a, b), windowed_distance(a, b, window=128)
    assert exact <= windowed
    if p <= 0.1:  # sparse edits: the chained alignment is (near) optimal
        assert windowed <= exact * 1.02 + 2


def test_each_alignment_is_on_a_bounded_piece(monkeypatch: pytest.MonkeyPatch) -> None:
    """Linear time: every call aligns at most ~1.5 windows, whatever the text's length."""
    seen: list[int] = []
    real_opcodes, real_distance = Levenshtein.opcodes, measure.edit_distance

    class Spy:
        @staticmethod
        def opcodes(a: str, b: str):  # type: ignore[no-untyped-def]
            seen.append(max(len(a), len(b)))
            return real_opcodes(a, b)

        distance = staticmethod(Levenshtein.distance)

    monkeypatch.setattr(measure, "Levenshtein", Spy)
    monkeypatch.setattr(measure, "edit_distance", lambda a, b: seen.append(max(len(a), len(b))) or real_distance(a, b))
    a = "the quick brown fox " * 5000  # 100k characters
    windowed_distance(a, a.upper(), window=256)
    assert len(seen) >= len(a) // 256 and max(seen) <= 256 * 1.6 + 64


def test_method_switches_at_the_limit() -> None:
    a = "abc " * 100
    assert edit_rate_measured(a, a.upper(), exact_limit=1000) == (pytest.approx(0.75), "exact")
    rate, method = edit_rate_measured(a, a.upper(), exact_limit=100)
    assert method == "windowed" and rate == pytest.approx(0.75)


def test_one_long_line_scores_with_progress_and_says_windowed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from reliability_suite import SUITE, make_suite

    rng = random.Random(0)
    words = "the quick brown fox jumps over lazy dog".split()
    line = " ".join(rng.choice(words) for _ in range(measure.EXACT_LIMIT // 4))  # ~ 110k characters
    (tmp_path / "long.txt").write_text(line + "\n")
    text = SUITE.replace("    - name: heldout\n      paths: [corpus]\n      language: en",
                         "    - name: long\n      paths: [long.txt]\n      docs: file")
    suite = make_suite(tmp_path, text)
    out = tmp_path / "o"
    assert main(["run", str(suite), "--out", str(out), "--no-report"]) == 0
    assert "score bytes long" in capsys.readouterr().err  # the per-window progress bar
    samples = [json.loads(s) for s in (out / "samples.jsonl").read_text().splitlines()]
    upper_full = [s for s in samples if s["perturbation_id"] == "case.upper" and s["mode"] == "full"]
    assert upper_full and all(s["edit_rate_method"] == "windowed" for s in upper_full)
    clean = [s for s in samples if s["perturbation_id"] == "clean"]
    assert all(s["edit_rate_method"] == "exact" for s in clean)
    run = json.loads((out / "run.json").read_text())
    assert run["edit_rate"]["windowed_documents"] == len(upper_full)
    full = [s for s in samples if "byte_nll" in s and s["mode"] == "full"]
    assert full and all(len(s["byte_nll"]) <= 65_536 and s.get("byte_nll_truncated") for s in full)
