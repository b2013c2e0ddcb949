"""Compare two runs cell by cell (``benchmarks/gpu_repeat.sh``: a seed against its repeat, bf16
scoring against fp32): each run's ``precision`` and seconds from run.json, and each model cell's
BPB gap.

    python benchmarks/compare_cells.py OUT/A OUT/B [--bound 2e-4]

reads ``<prefix>_run.json`` and ``<prefix>_results.csv`` of each prefix. Cells are matched by
(encoder, seed, dataset, perturbation_id, severity, mode, permutation); a cell in one run only is
an error (the runs must score the same cells)."""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
from pathlib import Path

KEY = ("encoder", "seed", "dataset", "perturbation_id", "severity", "mode", "permutation")


def cells(path: Path) -> dict[tuple[str, ...], float]:
    """Model rows of a results.csv: cell key -> BPB."""
    with open(path, newline="", encoding="utf-8") as f:
        return {tuple(r.get(k, "") for k in KEY): float(r["bpb"]) for r in csv.DictReader(f)
                if r.get("kind", "model") == "model"}


def gaps(a: dict[tuple[str, ...], float], b: dict[tuple[str, ...], float]) -> dict[tuple[str, ...], float]:
    """|BPB_a − BPB_b| per cell; the two runs must hold the same cells."""
    if a.keys() != b.keys():
        only = sorted(a.keys() ^ b.keys())[:3]
        raise ValueError(f"the runs score different cells, e.g. {only}")
    return {k: abs(a[k] - b[k]) for k in a}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("first", help="prefix of the first run's files, e.g. OUT/A")
    ap.add_argument("second", help="prefix of the second run's files, e.g. OUT/B")
    ap.add_argument("--bound", type=float, default=2e-4, help="the per-cell bound to count against (BPB)")
    args = ap.parse_args(argv)
    runs = []
    for prefix in (args.first, args.second):
        run = json.loads(Path(f"{prefix}_run.json").read_text(encoding="utf-8"))
        t = run.get("timings", {})
        print(f"{prefix}: precision {run.get('precision')}; scoring {t.get('score_seconds', 0):.1f} s "
              f"(packed jobs {t.get('score_items_seconds', 0):.1f} s, of which compiling "
              f"{t.get('score_compile_seconds', 0):.1f} s); training {t.get('train_seconds', 0):.1f} s; "
              f"total {t.get('total_seconds', 0):.1f} s")
        for label, v in run.get("speed", {}).get("train", {}).items():
            if "mfu_median_step" in v:
                print(f"  train {label:<16} MFU at the median step {v['mfu_median_step']:.3f}")
        runs.append(cells(Path(f"{prefix}_results.csv")))
    try:
        g = gaps(*runs)
    except ValueError as e:
        print(f"compare_cells: {e}", file=sys.stderr)
        return 2
    by_encoder: dict[str, list[float]] = {}
    for k, v in g.items():
        by_encoder.setdefault(k[0], []).append(v)
    clean = {k: v for k, v in g.items() if k[3] == "clean"}
    for enc, vs in by_encoder.items():
        on_clean = [v for k, v in clean.items() if k[0] == enc]
        print(f"{enc:<12} cells {len(vs):>4}  median |ΔBPB| {statistics.median(vs):.2e}  max {max(vs):.2e}"
              f"  max on clean cells {max(on_clean, default=0):.2e}  within {args.bound:g}: "
              f"{sum(v <= args.bound for v in vs)}")
    within = sum(v <= args.bound for v in g.values())
    print(f"all: {within} of {len(g)} cells within {args.bound:g}; max |ΔBPB| {max(g.values(), default=0):.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
