"""The context-fragility panel: permuted minus original BPB per model and per compressor, and
compressor rows (kind = baseline) kept out of every other table."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from conftest import FAST

from reports import load, render_run
from reports.fragility import permutation_summary
from reports.tables import compute_tables

LN2 = math.log(2.0)
# (label, encoder_name, kind, permutation, block_bytes, bpb on each of two seeds)
ROWS = [
    ("bytes", "bytes", "model", "none", "", (2.0, 2.2)),
    ("bytes~global", "bytes", "model", "global", "", (4.0, 4.2)),
    ("bytes~inter_block-16", "bytes", "model", "inter_block", 16, (2.5, 2.7)),
    ("bytes~intra_block-4", "bytes", "model", "intra_block", 4, (3.0, 3.2)),
    ("bpe", "bpe", "model", "none", "", (1.8, 1.8)),
    ("bpe~global", "bpe", "model", "global", "", (3.0, 3.0)),
    ("deflate", "deflate", "baseline", "none", "", (3.1, 3.1)),
    ("deflate~global", "deflate", "baseline", "global", "", (5.6, 5.6)),
    ("lzma~inter_block-16", "lzma", "baseline", "inter_block", 16, (3.5, 3.5)),
    ("lzma", "lzma", "baseline", "none", "", (3.0, 3.0)),
]


def write_run(path: Path, *, new_columns: bool = True) -> Path:
    path.mkdir(parents=True)
    rows = []
    for label, name, kind, perm, bb, bpbs in ROWS:
        if not new_columns and (kind == "baseline" or perm != "none"):
            continue
        for seed, bpb in enumerate(bpbs):
            n = 1000 + 500 * seed  # unequal bytes: pooling is Σnll / Σbytes, not a mean of BPB
            row = dict(encoder=label, encoder_name=name, seed=seed, dataset="en", language="en",
                       script="Latn", perturbation="identity", perturbation_id="clean",
                       severity=0.0, mode="full", n_docs=3, n_bytes=n, n_bytes_clean=n,
                       nll_nats=bpb * LN2 * n, bpb=bpb)
            if new_columns:
                row.update(kind=kind, permutation=perm, block_bytes=bb)
            rows.append(row)
    pd.DataFrame(rows).to_csv(path / "results.csv", index=False)
    return path


def pooled(a: float, b: float) -> float:
    return (a * 1000 + b * 1500) / 2500


def test_summary_is_permuted_minus_original(tmp_path: Path) -> None:
    data = load.load_run(write_run(tmp_path / "r"))
    assert set(data.results.encoder) == {r[0] for r in ROWS if r[2] == "model"}
    assert set(data.baselines.encoder) == {r[0] for r in ROWS if r[2] == "baseline"}
    s = permutation_summary(data.results, data.baselines).set_index(["base", "permutation", "bb"])
    assert s.loc[("bytes", "none", 0), "bpb"] == pytest.approx(pooled(2.0, 2.2))
    assert s.loc[("bytes", "global", 0), "delta"] == pytest.approx(pooled(4.0, 4.2) - pooled(2.0, 2.2))
    assert s.loc[("bytes", "inter_block", 16), "delta"] == pytest.approx(0.5)
    assert s.loc[("bpe", "global", 0), "delta"] == pytest.approx(1.2)
    assert s.loc[("deflate", "global", 0), "delta"] == pytest.approx(2.5)
    assert s.loc[("lzma", "inter_block", 16), "delta"] == pytest.approx(0.5)
    assert (s.loc[("lzma", "none", 0), "kind"]) == "baseline"


def test_baselines_stay_out_of_winners_and_tests(tmp_path: Path) -> None:
    data = load.load_run(write_run(tmp_path / "r"))
    t = compute_tables(data, n_boot=50, n_perm=100, seed=0)
    assert not {"deflate", "lzma", "deflate~global", "lzma~inter_block-16"} & set(t.encoders)
    assert not any("deflate" in f.text or "lzma" in f.text for f in t.verdict_lines)
    html = render_run(data.path, tmp_path / "out", **FAST).read_text()
    assert 'id="fragility"' in html and "inter_block" in html
    verdict = html.split('id="summary"')[1].split("</section>")[0]
    assert "deflate" not in verdict and "lzma" not in verdict
    assert (tmp_path / "out" / "figures" / "permutations.png").is_file()
    md = (tmp_path / "out" / "report.md").read_text()
    assert "## Context fragility" in md


def test_old_results_without_the_columns_still_load(tmp_path: Path) -> None:
    data = load.load_run(write_run(tmp_path / "old", new_columns=False))
    assert set(data.results["kind"]) == {"model"} and set(data.results["permutation"]) == {"none"}
    assert not len(data.baselines)
    assert not len(permutation_summary(data.results, data.baselines))  # no panel
    html = render_run(data.path, tmp_path / "out", **FAST).read_text()
    assert 'id="fragility"' not in html


def test_bad_kind_is_a_one_line_error(tmp_path: Path) -> None:
    p = write_run(tmp_path / "bad")
    df = pd.read_csv(p / "results.csv", dtype=str, keep_default_na=False)
    df.loc[0, "kind"] = "oracle"
    df.to_csv(p / "results.csv", index=False)
    with pytest.raises(ValueError, match="column 'kind' has 'oracle'"):
        load.load_run(p)
