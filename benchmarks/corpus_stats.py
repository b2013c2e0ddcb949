"""The size, languages, split and duplicate removal of a suite's training source, as run.json
records them (docs/sources.md "The large training corpus" cites its output).

    TOKBENCH_CACHE=... python benchmarks/corpus_stats.py suites/scaling_large.yaml > stats.json

The source must be prepared (``tokbench data prepare SUITE``); the first call builds the
deduplicated document cache (and says how long that took), a second one reads it back.
"""

from __future__ import annotations

import argparse
import collections
import json
import time
from pathlib import Path

from harness.config import load_suite
from harness.data.load import source_context, split_of


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", type=Path)
    args = ap.parse_args()
    suite = load_suite(args.suite)
    ctx = source_context(suite)
    src = suite.data.train.config
    by_pkg: collections.Counter[str] = collections.Counter()
    by_lang: collections.Counter[str] = collections.Counter()
    parts: collections.Counter[str] = collections.Counter()
    t0 = time.perf_counter()
    n = 0
    for d in src.documents(ctx):
        n += 1
        by_pkg[str(d.meta.get("package"))] += len(d.data)
        by_lang[str(d.language)] += len(d.data)
        parts[split_of(d.id, suite.data.valid_fraction, suite.data.test_fraction)] += len(d.data)
    first = time.perf_counter() - t0
    prov = src.provenance(ctx)
    t0 = time.perf_counter()
    again = sum(1 for _ in src.documents(ctx))
    print(json.dumps({
        "suite": str(args.suite), "seconds_documents": round(first, 1),
        "seconds_documents_again": round(time.perf_counter() - t0, 1), "docs": n, "docs_again": again,
        "bytes": sum(by_pkg.values()), "part_bytes": dict(parts),
        "package_MB": {k: round(v / 1e6, 2) for k, v in by_pkg.most_common()},
        "language_MB": {k: round(v / 1e6, 2) for k, v in by_lang.most_common()},
        "dedup": prov.get("dedup"),
        "licences": {p["package"]: p["licences"] for m in prov.get("members", []) for p in m.get("packages", [])},
    }, indent=1))


if __name__ == "__main__":
    main()
