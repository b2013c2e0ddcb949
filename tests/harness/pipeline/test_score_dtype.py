"""``eval.dtype``: the scoring precision, apart from the training's ``budget.dtype``.

What the run passes to ``score_items``, which cells it keeps (a cell scored in another precision
is another cell; ``auto`` and the training's own precision keep the old keys), and run.json's
``precision`` (what the device computed in: bf16 autocast applies on CUDA only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_run import make_suite

import harness.pipeline.scoring
from harness.cli import main
from harness.config import load_suite


@pytest.mark.parametrize(("budget", "ev", "want"), [
    ("float32", "auto", "float32"), ("bfloat16", "auto", "bfloat16"),
    ("bfloat16", "float32", "float32"), ("float32", "bfloat16", "bfloat16"),
    ("bfloat16", "bfloat16", "bfloat16"),
])
def test_auto_follows_the_training_and_a_value_wins(tmp_path: Path, budget: str, ev: str, want: str) -> None:
    suite = load_suite(make_suite(tmp_path), (f"budget.dtype={budget}", f"eval.dtype={ev}"))
    assert suite.score_dtype == want


def test_a_bad_value_is_one_line_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = make_suite(tmp_path)
    assert main(["run", str(suite), "--out", str(tmp_path / "o"), "--set", "eval.dtype=float16"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "eval.dtype" in err and "float16" in err


def _cells(out: Path) -> set[str]:
    return {p.name for p in (out / "cells").glob("*.json")}


def _bf16_flags(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Record the ``bf16`` argument of every packed scoring job the run starts (``start_scoring``)."""
    seen: list[bool] = []
    real = harness.pipeline.scoring.start_scoring

    def spy(encoder, items, device, batch_windows=32, bf16=False, **kw):  # noqa: ANN001, ANN003, ANN202
        seen.append(bf16)
        return real(encoder, items, device, batch_windows, bf16, **kw)

    monkeypatch.setattr(harness.pipeline.scoring, "start_scoring", spy)
    return seen


def test_the_run_scores_in_eval_dtype_and_keys_cells_by_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    suite, out = make_suite(tmp_path), tmp_path / "out"
    base = ["run", str(suite), "--out", str(out), "--quiet", "--no-report"]
    seen = _bf16_flags(monkeypatch)

    assert main(base) == 0  # budget.dtype float32, eval.dtype auto
    assert seen and not any(seen)
    first, rows = _cells(out), (out / "results.csv").read_text()
    assert json.loads((out / "run.json").read_text())["precision"] == {"train": "float32", "score": "float32",
                                                                     "deterministic": False}

    # The training's own precision, named: the same cells, none scored again.
    seen.clear()
    assert main([*base, "--set", "eval.dtype=float32"]) == 0
    assert not seen and _cells(out) == first

    # Another precision: every cell again under new keys, the same model (its key has budget.dtype).
    assert main([*base, "--set", "eval.dtype=bfloat16"]) == 0
    assert seen and all(seen)
    again = _cells(out)
    assert len(again) == 2 * len(first) and first < again
    assert len(list((out / "models").glob("*.pt"))) == 1
    # On the CPU bf16 autocast does not apply: the numbers are the fp32 ones, and run.json says so.
    assert (out / "results.csv").read_text() == rows
    assert json.loads((out / "run.json").read_text())["precision"] == {"train": "float32", "score": "float32",
                                                                     "deterministic": False}
