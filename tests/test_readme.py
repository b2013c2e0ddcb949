"""The README's examples work when followed literally: the encoder and the data source plugins
(the perturbation example is tested in tests/perturbations/test_plugin*.py)."""

from __future__ import annotations

import csv
import json
import random
import re
import sys
from pathlib import Path

import pytest

from harness.cli import main

README = Path(__file__).resolve().parents[1] / "README.md"


def section(title: str) -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index(title)
    end = text.find("\n#", start + len(title))
    return text[start:end]


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    enc = re.findall(r"```python\n(.*?)```", section("### How to add an encoder"), flags=re.S)[0]
    src = re.findall(r"```python\n(.*?)```", section("### How to add a data source"), flags=re.S)[0]
    (tmp_path / "my_encoders.py").write_text(enc, encoding="utf-8")
    (tmp_path / "my_sources.py").write_text(src, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for m in ("my_encoders", "my_sources"):
        sys.modules.pop(m, None)


def test_readme_encoder_passes_the_causality_probe(plugin_dir: Path) -> None:
    from harness.sanity import causality_text, fit_and_train, probe_causality, tiny_encoder

    enc = tiny_encoder("my_encoders:TrigramBytes")
    fit_and_train(enc, [causality_text()] * 4, 2_000, __import__("torch").device("cpu"))
    r = probe_causality(enc, causality_text(), random.Random(0))
    assert r.ok, r.detail


def test_readme_encoder_and_source_run_in_a_suite(plugin_dir: Path) -> None:
    with open(plugin_dir / "data.jsonl", "w", encoding="utf-8") as f:
        for i in range(60):
            f.write(json.dumps({"text": f"Line {i}: plugins are named in suites as module:Class, ünïcödé too."}) + "\n")
    (plugin_dir / "s.yaml").write_text(
        "name: readme\nseeds: [0]\n"
        "data:\n  train: {source: 'my_sources:JsonlSource', path: data.jsonl}\n"
        "  eval: [{name: lines, source: 'my_sources:JsonlSource', path: data.jsonl}]\n"
        "budget: {train_bytes: 3000, context_bytes: 64, batch_bytes: 512, warmup_bytes: 200}\n"
        "backbone: {layers: 1, dim: 16, heads: 2}\n"
        "encoders: [{name: 'my_encoders:TrigramBytes'}]\n"
        "eval: {modes: [full], max_docs: 3}\n",
        encoding="utf-8",
    )
    assert main(["run", "s.yaml", "--out", "out", "--quiet", "--no-report"]) == 0
    rows = list(csv.DictReader(open(plugin_dir / "out" / "results.csv", encoding="utf-8")))
    assert rows and rows[0]["encoder"] == "TrigramBytes" and float(rows[0]["bpb"]) > 0


def test_readme_lists_the_results_columns() -> None:
    """The README's results.csv column list is the schema's (new columns may follow it)."""
    from core.schema import RESULT_COLUMNS

    block = re.search(r"results\.csv +one row per cell: (.*?)\n  samples\.jsonl",
                      README.read_text(encoding="utf-8"), flags=re.S)
    assert block is not None
    listed = [c.strip() for c in block.group(1).replace("\n", " ").split(",")]
    assert listed == RESULT_COLUMNS[:len(listed)] and "encoder_name" in listed
