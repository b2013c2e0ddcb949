"""Seconds to load a suite's prepared data (``harness.data.load_data``, the run's "data" phase)
and a digest of every document it loaded (ids and bytes, train part and eval sets in order), to
compare two commits: same digest, same data.

    TOKBENCH_CACHE=DIR PYTHONPATH=. python benchmarks/bench_load_data.py [SUITE] [--repeat N]
"""

from __future__ import annotations

import argparse
import hashlib
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", nargs="?", default="standard")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    from harness.cli import find_suite
    from harness.config import load_suite
    from harness.data import load_data, source_context

    suite = load_suite(find_suite(a.suite), ())
    ctx = source_context(suite, None, lambda s: None)
    times, digest = [], ""
    for _ in range(a.repeat):
        t = time.perf_counter()
        data = load_data(suite, ctx, prepare=False, log=lambda s: None)
        times.append(time.perf_counter() - t)
        h = hashlib.sha256()
        for part in [data.train, *data.evals]:
            for d in part.docs:
                h.update(d.id.encode() + b"\0" + hashlib.sha256(d.data).digest())
        digest = h.hexdigest()
    print(f"{a.suite}: load_data {' '.join(f'{t:.2f}' for t in times)} s; documents {digest[:16]}")


if __name__ == "__main__":
    main()
