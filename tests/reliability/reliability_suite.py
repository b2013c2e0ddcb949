"""A tiny suite on text files written into a test's tmp dir (1-layer, 16-dim byte model; a
whole run takes about a second), shared by the reliability tests."""

from __future__ import annotations

from pathlib import Path

SUITE = """\
name: tiny
seeds: [0]
data:
  train:
    paths: [corpus]
    docs: paragraph
    language: en
  eval:
    - name: heldout
      paths: [corpus]
      language: en
budget: {train_bytes: 4000, context_bytes: 64, batch_bytes: 512, warmup_bytes: 500}
backbone: {layers: 1, dim: 16, heads: 2}
encoders:
  - name: bytes
perturbations:
  - {name: case.upper, severity: 1.0}
eval: {max_docs: 4, target_bytes: 24, sample_docs: 1}
"""


def make_suite(tmp: Path, text: str = SUITE) -> Path:
    """Write the tiny corpus and a suite file into ``tmp``; returns the suite path."""
    (tmp / "corpus").mkdir(exist_ok=True)
    for f in range(3):
        paras = [f"File {f} paragraph {p}: the quick brown fox jumps over the lazy dog, again."
                 for p in range(20)]
        (tmp / "corpus" / f"f{f}.txt").write_text("\n\n".join(paras))
    p = tmp / "tiny.yaml"
    p.write_text(text)
    return p
