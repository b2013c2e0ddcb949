"""The report's segment-length figure (``reports.figures.segment_hist``) at a real run's size.

    PYTHONPATH=$PWD python benchmarks/bench_segment_hist.py [--results R.csv] [--sample-docs 4] [--reps 3]

A standard seed's report spent 8.2 of its 10.0 s of figures on this one figure on the H200 host
(BENCHMARKS.md, session 17): it histograms every segment of the displayed samples. This builds
displayed samples shaped like that run's — for each results row, ``--sample-docs`` documents with
the row's segments per document (``n_segments / n_docs``; lengths drawn from a seeded geometric
distribution with the row's mean bytes per segment) — and times the figure, drawn and encoded as
PNG as the report does, ``--reps`` times in this process. Prints the segment count and each time.
Default results: the committed session-17 standard seed.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np

from reports import figures as F
from reports.render import figure_bytes

ROOT = Path(__file__).resolve().parents[1]


def displayed_samples(results: Path, sample_docs: int, seed: int = 0) -> tuple[list[dict], list[str]]:
    """Samples carrying ``segments`` as the report loads them (only the keys the figure reads)."""
    rng = np.random.default_rng(seed)
    texts: list[dict] = []
    encoders: list[str] = []
    with open(results, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            if r.get("kind") not in ("", "model", None) or not r.get("n_segments"):
                continue
            encoders += [r["encoder"]] if r["encoder"] not in encoders else []
            n_docs, n_seg = float(r["n_docs"]), float(r["n_segments"])
            per_doc = max(1, round(n_seg / n_docs))
            mean = max(1.0, float(r["n_bytes"]) / n_seg)
            for _ in range(sample_docs):
                segs = rng.geometric(1.0 / mean, per_doc) if mean > 1 else np.ones(per_doc, int)
                texts.append({"encoder": r["encoder"], "perturbation_id": r["perturbation_id"],
                              "severity": float(r["severity"] or 0.0), "mode": r["mode"],
                              "segments": segs.tolist()})
    return texts, encoders


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", type=Path, default=ROOT / "benchmarks/results/gpu_s17/call1_results.csv")
    ap.add_argument("--sample-docs", type=int, default=4, help="the suite's eval.sample_docs")
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    F.setup_style()
    texts, encoders = displayed_samples(args.results, args.sample_docs)
    n = sum(len(s["segments"]) for s in texts)
    print(f"{len(texts)} displayed samples, {n:,} segments, {len(encoders)} encoders")
    for k in range(args.reps):
        t0 = time.perf_counter()
        fig = F.segment_hist(texts, encoders, {e: 3.0 for e in encoders})
        png, _ = figure_bytes(fig, svg=False)
        print(f"rep {k}: {time.perf_counter() - t0:.2f} s (PNG {len(png):,} bytes)")


if __name__ == "__main__":
    main()
