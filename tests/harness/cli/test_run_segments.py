"""End to end: BLT's segments in samples.jsonl tile the scored text of full and clean_target rows,
and results.csv ``bytes_per_segment`` is Σ bytes / Σ segments of the cell (core.segments)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from harness.cli import main

SUITE = """\
name: blt-segments
seeds: [0]
data:
  train:
    paths: [corpus.txt]
    docs: paragraph
    language: en
  eval:
    - name: heldout
      paths: [corpus.txt]
      docs: paragraph
      language: en
budget: {train_bytes: 3000, context_bytes: 64, batch_bytes: 512, warmup_bytes: 200}
backbone: {layers: 1, dim: 16, heads: 2}
encoders:
  - name: blt
    local_dim: 16
    local_heads: 2
    ngram_sizes: [3]
    ngram_table_size: 64
    entropy_dim: 16
    entropy_layers: 1
    entropy_heads: 2
    entropy_train_bytes: 1000
    threshold_fit_bytes: 2048
    target_patch_size: 3.0
perturbations:
  - {name: case.upper, severity: [1.0]}
eval: {max_docs: 4, target_bytes: 40, sample_docs: 4}
"""


@pytest.mark.slow
def test_blt_samples_segments_tile_scored_text(tmp_path: Path) -> None:
    paras = [f"Paragraph {p}: the quick brown fox jumps over the lazy dog, then naps; "
             f"patches of bytes follow entropy {p * 7 % 13}." for p in range(24)]
    (tmp_path / "corpus.txt").write_text("\n\n".join(paras))
    (tmp_path / "s.yaml").write_text(SUITE)
    out = tmp_path / "out"
    assert main(["run", str(tmp_path / "s.yaml"), "--out", str(out), "--quiet",
                 "--no-report"]) == 0
    samples = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    shown = [s for s in samples if "scored_text" in s]
    assert {s["mode"] for s in shown} == {"full", "clean_target"}
    for s in shown:
        n = len(s["scored_text"].encode("utf-8", "surrogateescape"))
        assert sum(s["segments"]) == n == s["n_bytes"] and min(s["segments"]) >= 1, s["mode"]
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        segs = [x for s in shown if (s["mode"], s["perturbation_id"]) ==
                (r["mode"], r["perturbation_id"]) for x in s["segments"]]
        # every document is a sample here, so the cell's ratio is the samples' ratio
        assert float(r["bytes_per_segment"]) == pytest.approx(sum(segs) / len(segs))
        assert int(r["n_segments"]) == len(segs)
