"""Throughput of every registered perturbation, in MB of UTF-8 input per second on one core.

    python benchmarks/bench_perturbations.py [--mb 1.0] [--severity 0.05 --severity 0.2] [--repeats 3]

Inputs: ~1 MB of English (the stdlib's ``pydoc_data.topics``, repeated) and ~1 MB of multilingual
text (``perturbations.contract.RICH_TEXT``: Latin with accents, Cyrillic, Greek, Hebrew, Arabic,
Hangul, CJK), one document each. Each cell is the best of ``--repeats`` timed calls after one
warm-up call (which builds the per-process lookup tables), timed in CPU seconds of this process
(``time.process_time``) so that other load on the machine does not count. Targets (issue 6): >= 5 MB/s for our
character-level perturbations, >= 1 MB/s for the nlpaug-backed ``typo.*`` family.
Prints a markdown table (paste into BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import time
from pydoc_data.topics import topics

from harness.infra.plugins import available, resolve
from perturbations import contract


def corpus(n_bytes: int) -> dict[str, str]:
    en = "\n\n".join(topics[k] for k in sorted(topics))
    multi = contract.RICH_TEXT + "\n"

    def grow(t: str) -> str:
        reps = n_bytes // len(t.encode("utf-8")) + 1
        return (t * reps).encode("utf-8")[:n_bytes].decode("utf-8", "ignore")

    return {"english": grow(en), "multilingual": grow(multi)}


def throughput(name: str, severity: float, text: str, repeats: int) -> float:
    """MB (10^6 bytes of UTF-8 input) per CPU second, best of ``repeats``."""
    p = contract.build(resolve("perturbation", name), severity)
    p.perturb(text[:10_000], random.Random(0))  # warm-up: lazy tables
    best = float("inf")
    for r in range(repeats):
        t0 = time.process_time()
        p.perturb(text, random.Random(r))
        best = min(best, time.process_time() - t0)
    return len(text.encode("utf-8")) / 1e6 / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=1.0, help="input size per document in MB")
    ap.add_argument("--severity", type=float, action="append", help="severities (default 0.05, 0.2)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", action="append", help="only these perturbation names")
    args = ap.parse_args()
    sevs = args.severity or [0.05, 0.2]
    texts = corpus(int(args.mb * 1e6))
    names = args.only or sorted(available("perturbation"))
    print(f"# perturbation throughput, MB of UTF-8 input per CPU second, 1 core ({platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()})\n")
    cols = [f"{lang} @{s:g}" for lang in texts for s in sevs]
    print("| perturbation | target | " + " | ".join(cols) + " |")
    print("|---|---|" + "---|" * len(cols))
    for name in names:
        target = "1" if name.startswith("typo.") else "5"
        cells = [f"{throughput(name, s, t, args.repeats):.1f}" for t in texts.values() for s in sevs]
        print(f"| `{name}` | {target} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
