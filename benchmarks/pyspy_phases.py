"""Where a run's threads spent their time, from py-spy's collapsed stacks (issue 16).

    PYTHONPATH=$PWD python3 benchmarks/pyspy_phases.py PYSPY.txt[.gz] [--rate 49] [--top 40] [--thread MainThread]
        [--under FUNCTION]

``benchmarks/gpu_standard.sh`` with ``PYSPY=1`` records the run's process that way (py-spy
``record --idle --threads --format raw``: one line a distinct stack, ``thread (TID): NAME;frame;…
COUNT``, outermost frame first; idle samples kept, so a thread's samples × 1/rate is its wall).
Prints each thread's seconds, then for one thread (``--thread``, default the main one) the
functions with the most seconds *inclusive* (each function counted once per stack: the time
spent in it or in what it called) and *exclusive* (the innermost frame). ``--under F``: only
stacks that pass through a function named F (e.g. ``_score_job``, ``train_encoder``).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

from core.decompress import gunzip

LINE = re.compile(r"^(?P<stack>.*) (?P<count>\d+)$")
THREAD = re.compile(r"^thread \((?P<tid>[^)]*)\)(?:: (?P<name>.*))?$")


def parse(path: Path) -> list[tuple[str, list[str], int]]:
    """(thread name, frames outermost first, samples) per line of a raw py-spy file."""
    out = []
    data = path.read_bytes()
    if path.suffix == ".gz":  # committed profiles are gzipped (a seed's: 4.9 MB of text)
        data = gunzip(data, 1 << 30, str(path))
    for raw in data.decode("utf-8", errors="replace").splitlines():
        m = LINE.match(raw.strip())
        if not m:
            continue
        frames = m["stack"].split(";")
        t = THREAD.match(frames[0])
        if t:
            name = t["name"] or t["tid"]
            frames = frames[1:]
        else:
            name = "?"
        out.append((name, frames, int(m["count"])))
    return out


def func(frame: str) -> str:
    """``name (file:line)`` -> ``name (file)``: one entry per function, whatever line it was on."""
    return re.sub(r":\d+\)$", ")", frame)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", type=Path)
    ap.add_argument("--rate", type=float, default=49.0, help="py-spy's samples a second (gpu_standard.sh: 49)")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--thread", default="MainThread")
    ap.add_argument("--under", default=None, help="only stacks through a function of this name")
    a = ap.parse_args(argv)
    rows = parse(a.file)
    if not rows:
        print(f"{a.file}: no stacks", file=sys.stderr)
        return 2
    per_thread: Counter[str] = Counter()
    for name, _, n in rows:
        per_thread[name] += n
    print(f"{'thread':<50} seconds")
    for name, n in per_thread.most_common():
        print(f"{name[:50]:<50} {n / a.rate:8.1f}")
    mine = [(fr, n) for name, fr, n in rows if name == a.thread]
    if a.under:
        mine = [(fr, n) for fr, n in mine if any(f.split(" (")[0] == a.under for f in fr)]
    total = sum(n for _, n in mine)
    incl: Counter[str] = Counter()
    excl: Counter[str] = Counter()
    for fr, n in mine:
        for f in {func(f) for f in fr}:
            incl[f] += n
        if fr:
            excl[func(fr[-1])] += n
    what = f"thread {a.thread}" + (f", stacks through {a.under}" if a.under else "")
    print(f"\n{what}: {total / a.rate:.1f} s; inclusive seconds (top {a.top})")
    for f, n in incl.most_common(a.top):
        print(f"{n / a.rate:8.1f}  {f}")
    print(f"\n{what}: exclusive seconds (innermost frame; top {a.top})")
    for f, n in excl.most_common(a.top):
        print(f"{n / a.rate:8.1f}  {f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
