"""`tokbench report` with figures drawn serially vs in forked processes, alternated (issue 16).

    PYTHONPATH=$PWD python benchmarks/bench_report.py RUN_DIR [RUN_DIR ...] [--reps 2] [--phases]
    PYTHONPATH=$PWD python benchmarks/bench_report.py --make RUN_DIR --results R.csv --run-json R.json \
        [--synth-samples]

Timing: for each run folder, ``reps`` rounds of ``TOKBENCH_REPORT_PROCESSES=1`` then ``=N``
(``--processes``, default 2), each a fresh ``python -m harness.cli report RUN --out DIR`` (imports
included, as a user runs it), with ``uptime`` before and after (the machine may be shared), and a
``cmp`` of every output file of the last serial and parallel outputs (report.html without its
"rendered" minute). One untimed serial report first warms the page cache and the bytecode.
``--phases``: first, one serial render in a fresh process with wall clocks around the report's
phases (load, tables, each figure, the rest), to see what the figures are worth. ``--tasks``:
in a fresh process, the figures and pairwise tests' pool (add_comparisons) with 1 and then N processes, twice, with each
figure's time in the process that drew it (how much slower a figure is beside another).

``--make``: a run folder from committed results files (GPU runs keep no samples.jsonl);
``--synth-samples`` adds a samples.jsonl with each results row's NLL split over its ``n_docs``
documents (log-normal weights, seeded), so the report's bootstrap and paired tests run at the
real size — for timing only, the numbers mean nothing.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path


def make_run(out: Path, results: Path, run_json: Path, synth_samples: bool) -> None:
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(results, out / "results.csv")
    shutil.copyfile(run_json, out / "run.json")
    if not synth_samples:
        return
    rng = random.Random(0)
    with open(results, newline="", encoding="utf-8") as f, \
            open(out / "samples.jsonl", "w", encoding="utf-8") as s:
        for r in csv.DictReader(f):
            if r.get("kind") not in ("", "model", None):  # compressor baselines: no samples
                continue
            n = int(float(r["n_docs"]))
            w = [rng.lognormvariate(0.0, 0.2) for _ in range(n)]
            tot = sum(w)
            for i in range(n):
                s.write(json.dumps({
                    **{k: r[k] for k in ("encoder", "encoder_name", "dataset", "language",
                                         "script", "perturbation", "perturbation_id", "mode")},
                    "seed": int(r["seed"]), "severity": float(r["severity"]),
                    "doc_id": f"{r['dataset']}:{i}", "doc_language": r["language"],
                    "doc_script": r["script"], "nll_nats": float(r["nll_nats"]) * w[i] / tot,
                    "n_bytes": int(float(r["n_bytes"])) // n,
                    "n_bytes_clean": int(float(r["n_bytes_clean"])) // n,
                    "n_tokens": int(float(r["n_tokens"] or 0)) // n, "n_words": 50,
                    "edit_rate": float(r["edit_rate"] or 0.0), "edit_rate_method": "exact"}) + "\n")


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def timed_report(run: Path, out: Path, processes: int) -> float:
    shutil.rmtree(out, ignore_errors=True)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "harness.cli", "report", str(run), "--out", str(out)],
                   check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "TOKBENCH_REPORT_PROCESSES": str(processes)})
    return time.perf_counter() - t0


_RENDERED = re.compile(rb"rendered \d{4}-\d\d-\d\d \d\d:\d\d UTC")


def same_files(a: Path, b: Path) -> tuple[int, list[str]]:
    """(files compared, names that differ) between two report outputs."""
    names = sorted(str(p.relative_to(a)) for p in a.rglob("*") if p.is_file())
    names_b = sorted(str(p.relative_to(b)) for p in b.rglob("*") if p.is_file())
    bad = sorted(set(names) ^ set(names_b))
    for n in set(names) & set(names_b):
        x, y = (a / n).read_bytes(), (b / n).read_bytes()
        if n == "report.html":
            x, y = _RENDERED.sub(b"", x), _RENDERED.sub(b"", y)
        if x != y:
            bad.append(n)
    return len(names), bad


def phases(run: Path) -> None:
    """One serial render in this process, wall clocks around its phases."""
    os.environ["TOKBENCH_REPORT_PROCESSES"] = "1"
    t0 = time.perf_counter()
    import reports.figures as F
    import reports.render as R
    import reports.scaling_report as S
    from reports import load
    print(f"  imports (pandas, matplotlib, seaborn, scipy) {time.perf_counter() - t0:6.2f} s")
    acc: dict[str, float] = {}

    def wrap(mod: object, name: str, label: str | None = None) -> None:
        fn = getattr(mod, name)

        def timed(*a: object, **k: object) -> object:
            s = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                key = label or name
                acc[key] = acc.get(key, 0.0) + time.perf_counter() - s
        setattr(mod, name, timed)

    wrap(load, "load_run")
    wrap(R, "tables_before_comparisons", "tables_before_comparisons (bootstrap, tests)")
    wrap(R, "add_comparisons", "add_comparisons (paired tests, every figure drawn)")
    wrap(R, "build_tables")
    wrap(R, "_write_figures", "_write_figures (figure files written)")
    wrap(R, "figure_bytes", "  of which layout + PNG + SVG (figure_bytes)")
    for n in ("severity_curves", "delta_heatmap", "language_bars", "bucket_bars", "segment_hist",
              "loss_curves"):
        wrap(F, n, f"  of which drawing {n}")
    wrap(S, "scaling_section")
    s = time.perf_counter()
    R.render_run(run, Path("/tmp/bench-report-phases"))
    total = time.perf_counter() - s
    print(f"  render_run {total:6.2f} s:")
    for k, v in acc.items():
        print(f"    {k:46s} {v:6.2f} s")
    rest = total - sum(v for k, v in acc.items() if not k.startswith(" "))
    print(f"    {'rest (samples, HTML and Markdown, writing)':46s} {rest:6.2f} s")


def tasks(run: Path, processes: int, reps: int) -> None:
    """The pool that draws the figures and resamples the pairwise comparisons
    (``reports.tables.add_comparisons``) with 1 and ``processes`` processes, alternated; each
    figure timed where it is drawn (in this process or a worker)."""
    import reports.render as R
    import reports.tables as T

    fork_map = T.fork_map
    spent: dict[str, float] = {}

    def timed_map(fn, n, procs, what="report figure"):  # type: ignore[no-untyped-def]
        if "figure" not in what:
            return fork_map(fn, n, procs, what)

        def timed(i: int) -> object:
            s = time.perf_counter()
            out = fn(i)
            if isinstance(out, tuple):  # a figure's (files, seconds); a comparison's dict is not
                print(f"    figure task {i} in pid {os.getpid()}: {time.perf_counter() - s:.2f} s",
                      flush=True)
            return out
        return fork_map(timed, n, procs, what)

    add = R.add_comparisons

    def timed_add(*a: object, **k: object) -> object:
        s = time.perf_counter()
        out = add(*a, **k)
        spent["figures"] = time.perf_counter() - s
        return out

    T.fork_map, R.add_comparisons = timed_map, timed_add
    for _ in range(reps):
        for p in (1, processes):
            R.render_run(run, Path(f"/tmp/bench-report-tasks-{p}"), processes=p)
            print(f"  processes={p}: figures and pairwise tests (add_comparisons) {spent['figures']:.2f} s",
                  flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="*", type=Path)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--phases", action="store_true")
    ap.add_argument("--phases-only", action="store_true", help=argparse.SUPPRESS)  # the child
    ap.add_argument("--tasks", action="store_true")
    ap.add_argument("--tasks-only", action="store_true", help=argparse.SUPPRESS)  # the child
    ap.add_argument("--make", type=Path)
    ap.add_argument("--results", type=Path)
    ap.add_argument("--run-json", type=Path)
    ap.add_argument("--synth-samples", action="store_true")
    args = ap.parse_args()
    if args.make:
        make_run(args.make, args.results, args.run_json, args.synth_samples)
        return 0
    if args.phases_only:
        phases(args.runs[0])
        return 0
    if args.tasks_only:
        tasks(args.runs[0], args.processes, args.reps)
        return 0
    for run in args.runs:
        print(f"## {run} ({', '.join(sorted(p.name for p in run.iterdir() if p.is_file() and not p.name.startswith('report')))})")
        if args.phases:
            print(f"uptime: {uptime()}", flush=True)
            subprocess.run([sys.executable, __file__, "--phases-only", str(run)], check=True)
        if args.tasks:
            print(f"uptime: {uptime()}", flush=True)
            subprocess.run([sys.executable, __file__, "--tasks-only", str(run), "--processes",
                            str(args.processes), "--reps", str(args.reps)], check=True)
            print(f"uptime: {uptime()}", flush=True)
        timed_report(run, Path(f"/tmp/bench-report/{run.name}-warm"), 1)
        print(f"uptime before: {uptime()}")
        times: dict[int, list[float]] = {1: [], args.processes: []}
        for _ in range(args.reps):
            for p in (1, args.processes):
                t = timed_report(run, Path(f"/tmp/bench-report/{run.name}-p{p}"), p)
                times[p].append(t)
                print(f"  TOKBENCH_REPORT_PROCESSES={p} python -m harness.cli report {run} --out "
                      f"/tmp/bench-report/{run.name}-p{p}   {t:6.2f} s wall", flush=True)
        print(f"uptime after:  {uptime()}")
        n, bad = same_files(Path(f"/tmp/bench-report/{run.name}-p1"),
                            Path(f"/tmp/bench-report/{run.name}-p{args.processes}"))
        print(f"  serial {' / '.join(f'{t:.2f}' for t in times[1])} s; {args.processes} processes "
              f"{' / '.join(f'{t:.2f}' for t in times[args.processes])} s; "
              f"{n} files compared, {'all identical' if not bad else 'DIFFER: ' + ', '.join(bad)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
