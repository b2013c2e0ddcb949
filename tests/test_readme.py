"""The README is a map that tells the truth: it stays short, its links resolve, its CLI summary and
`make` commands exist, and its example suite loads. The how-to examples it links to work when
followed literally: the encoder plugin (docs/encoders.md) and the data source plugin
(docs/sources.md); the perturbation example (docs/perturbations.md) is tested in
tests/perturbations/test_plugin*.py."""

from __future__ import annotations

import csv
import json
import random
import re
import sys
from pathlib import Path

import pytest

from harness.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
# Docs that other branches of issue #13's round add; README links them already (the lead checks
# at merge that they exist; drop a name here once its file has landed).
LANDING_ELSEWHERE: set[str] = set()


def section(title: str, doc: str = "README.md") -> str:
    text = (ROOT / doc).read_text(encoding="utf-8")
    start = text.index(title)
    end = text.find("\n#", start + len(title))
    return text[start:end]


def test_readme_is_a_short_map() -> None:
    assert len(README.read_text(encoding="utf-8").splitlines()) <= 250


def test_readme_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    targets = {t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text)}
    local = {t for t in targets if t and "://" not in t}
    assert local, "README links nothing"
    missing = sorted(t for t in local - LANDING_ELSEWHERE if not (ROOT / t).exists())
    assert not missing, missing


def test_readme_cli_summary_names_real_commands() -> None:
    from harness.cli import build_parser

    block = re.findall(r"```sh\n(.*?)```", section("## Command line"), flags=re.S)[0]
    commands = [line.split()[1] for line in block.splitlines() if line.startswith("tokbench ")]
    sub = next(a for a in build_parser()._actions if a.dest == "cmd")
    assert commands and set(commands) <= set(sub.choices), set(commands) - set(sub.choices)
    assert set(sub.choices) <= set(commands), "a tokbench command is missing from the README"


def test_readme_make_targets_exist() -> None:
    block = re.findall(r"```sh\n(.*?)```", section("## Quick start"), flags=re.S)[0]
    targets = [line.split()[1] for line in block.splitlines() if line.startswith("make ")]
    assert targets == ["demo", "test"]
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for target in targets:
        assert re.search(rf"^{target}:", makefile, flags=re.M), target


def test_readme_example_suite_is_valid(tmp_path: Path) -> None:
    """The example suite validates as written (its include and corpus paths created empty-ish)."""
    from harness.config import load_suite

    block = re.findall(r"```yaml\n(.*?)```", section("## An example suite"), flags=re.S)[0]
    (tmp_path / "mysuite.yaml").write_text(block, encoding="utf-8")
    (tmp_path / "base.yaml").write_text("seeds: [7]\n", encoding="utf-8")
    for d in ("corpus", "extra"):
        (tmp_path / d).mkdir()
    (tmp_path / "de.txt").write_text("Hallo Welt.\n", encoding="utf-8")
    suite = load_suite(tmp_path / "mysuite.yaml")
    assert suite.name == "mysuite" and list(suite.seeds) == [0, 1, 2]  # local keys win over include
    labels = [e.label for e in suite.encoders]
    assert labels == ["bytes", "fuzzytok", "bpe-1024", "bpe-4096", "blt", "fuzzytok-convonly"], labels
    # the held-out set is the training source (its test part), not a second source read whole
    from harness.data.load import source_key

    heldout = next(e for e in suite.data.eval if e.name == "heldout")
    assert source_key(heldout) == source_key(suite.data.train)


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    enc = re.findall(r"```python\n(.*?)```", section("## How to add an encoder", "docs/encoders.md"), flags=re.S)[0]
    src = re.findall(r"```python\n(.*?)```", section("## How to add a data source", "docs/sources.md"), flags=re.S)[0]
    (tmp_path / "my_encoders.py").write_text(enc, encoding="utf-8")
    (tmp_path / "my_sources.py").write_text(src, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    for m in ("my_encoders", "my_sources"):
        sys.modules.pop(m, None)


def test_readme_encoder_passes_the_causality_probe(plugin_dir: Path) -> None:
    from harness.sanity.probes import fit_and_train, tiny_encoder
    from harness.score.causality import causality_text, probe_causality

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


def test_results_doc_lists_the_results_columns() -> None:
    """docs/results.md's results.csv table is the schema, in order (new columns may follow it)."""
    from core.schema import RESULT_COLUMNS

    text = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    table = text[text.index("`results.csv` — one row per cell"):text.index("`samples.jsonl` —")]
    listed = re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.M)
    assert listed == RESULT_COLUMNS[:len(listed)] and "encoder_name" in listed
    # at least every column up to `fingerprint` (the columns appended after it are documented
    # by the branches that add them, as rows of the same table)
    assert len(listed) > RESULT_COLUMNS.index("fingerprint"), listed
