"""Where the report's statistics spend their time: ``reports.tables.compute_tables`` of one run
folder, serially, under cProfile (the functions with the most own time).

    PYTHONPATH=$PWD python benchmarks/profile_report_tables.py RUN_DIR [--top 18]

RUN_DIR holds results.csv, run.json and samples.jsonl (``bench_report.py --make ...
--synth-samples`` builds one at a GPU run's size from its committed files).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from pathlib import Path

from reports.load import load_run
from reports.tables import compute_tables


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--top", type=int, default=18)
    args = ap.parse_args()
    data = load_run(args.run_dir)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    compute_tables(data)
    prof.disable()
    print(f"compute_tables {time.perf_counter() - t0:.1f} s (serial, under cProfile)")
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
