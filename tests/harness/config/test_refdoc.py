"""harness.config.refdoc: the suite reference doc (docs/suite_reference.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from config_fixtures import FakeEncoder, FakeSource, FakeTypo, write

from encoders.registry import REGISTRY as ENCODERS
from harness.config import (
    EXAMPLE_SUITE,
    load_suite,
    suite_reference,
)
from perturbations.registry import REGISTRY as PERTURBATIONS
from sources.registry import REGISTRY as SOURCES

# ---------------------------------------------------------------------------------------------
# Reference documentation


def test_suite_reference_covers_every_key() -> None:
    md = suite_reference(include_plugins=False)
    for key in (
        "`name`",
        "`seeds`",
        "`budget.train_bytes`",
        "`budget.match`",
        "`backbone.heads`",
        "`eval.context_fraction`",
        "`data.valid_fraction`",
        "`part`",
        "`severity`",
        "`include`",
    ):
        assert key in md, key
    # meaning comes from the dataclass docstrings
    assert "| `budget.context_bytes` | int | `256` | window length in bytes" in md


def test_reference_doc_is_current() -> None:
    doc = Path(__file__).resolve().parents[3] / "docs" / "suite_reference.md"
    if not doc.exists():
        pytest.skip("docs/suite_reference.md not generated yet")
    head = suite_reference(include_plugins=False)
    assert doc.read_text().startswith(head.rstrip("\n")), (
        "regenerate: python -m harness.config > docs/suite_reference.md"
    )

def test_reference_example_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the example in docs/suite_reference.md is a real suite (bpe / typo.keyboard stand-ins here,
    # since those modules are developed separately)
    monkeypatch.setitem(ENCODERS, "bpe", FakeEncoder)
    monkeypatch.setitem(PERTURBATIONS, "typo.keyboard", FakeTypo)
    monkeypatch.setitem(SOURCES, "stdlib", FakeSource)
    assert EXAMPLE_SUITE in suite_reference(include_plugins=False)
    s = load_suite(write(tmp_path, EXAMPLE_SUITE).name)
    assert [e.label for e in s.encoders] == ["bytes", "bpe-1024", "bpe-4096", "bigram"]
    assert s.encoders[3].backbone is None
    assert s.data.eval[1].source == "files" and s.data.eval[1].config.paths == ("my_texts/",)
    assert s.budget.train_bytes == 2_000_000
