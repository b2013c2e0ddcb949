"""The run's results files from its cells (``harness.pipeline.outputs.assemble``: results.csv, samples.jsonl,
buckets.csv) on synthetic cells shaped like one seed of suites/standard.yaml, and the parts of
reading one cell back (``harness.infra.cache.read_sealed_json``: the file, the JSON, the checksum).

    PYTHONPATH=$PWD python benchmarks/bench_assemble.py [--cells 840] [--docs 300] [--procs N]

Why: "results files" took 5.4 s of a standard seed on an H100 host (before part files and the in-place seal check),
GPU idle. Cells: ``--docs`` sample rows each, as ``harness.pipeline.cells.score_cell`` makes them (the first of
every six cells — the first encoder's — with both texts of about 1.5 KB, and four rows a cell
with per-byte NLL of 1 KB and their segments); a result row of 40 fields; no buckets.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

from harness.infra.cache import read_sealed_json
from harness.infra.results import RunDir
from harness.pipeline import outputs as run_mod


def cell(k: int, docs: int, rng: random.Random) -> dict:
    keys = {"encoder": f"enc{k % 6}", "encoder_name": "bytes", "seed": 0, "dataset": "stdlib", "language": "en",
            "script": "Latn", "perturbation": "typo.keyboard", "perturbation_id": f"p{k // 12}",
            "severity": 0.05, "mode": "full"}
    samples = []
    for i in range(docs):
        row = {**keys, "doc_id": f"email/parser.py:{i}", "doc_language": "en", "doc_script": "Latn",
               "nll_nats": rng.random() * 1000, "n_bytes": rng.randint(200, 8000), "n_bytes_clean": 1000,
               "n_tokens": 300, "n_words": 54, "edit_rate": rng.random() / 10, "edit_rate_method": "exact"}
        if k % 6 == 0:
            text = "".join(rng.choice("abcdefgh ij\n\"é") for _ in range(1500))
            row.update(text=text, text_perturbed=text[::-1], truncated=False)
        if i < 4:
            row["scored_text"] = "x" * 1024
            row["byte_nll"] = [round(rng.random() * 5, 5) for _ in range(1024)]
            row["segments"] = [4] * 256
        samples.append(row)
    res = {**keys, **{f"metric_{j}": rng.random() for j in range(30)}}
    return {"row": res, "samples": samples, "buckets": []}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", type=int, default=840)
    ap.add_argument("--docs", type=int, default=300)
    ap.add_argument("--procs", type=int, default=0, help="assemble_processes (0: the run's choice)")
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        rd = RunDir(Path(tmp))
        keys = [f"{k:040x}" for k in range(args.cells)]
        t0 = time.perf_counter()
        for k, key in enumerate(keys):
            rd.save_cell(key, cell(k, args.docs, rng))
        size = sum(rd.cell_path(k).stat().st_size for k in keys)
        print(f"{args.cells} cells of {args.docs} rows written in {time.perf_counter() - t0:.1f} s, "
              f"{size / 1e6:.0f} MB")
        path = rd.cell_path(keys[0])
        for name, fn in (("read bytes", lambda: path.read_bytes()), ("read_sealed_json", lambda: read_sealed_json(path))):
            times = []
            for _ in range(5):
                t = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t)
            print(f"  one first-encoder cell ({path.stat().st_size / 1e6:.1f} MB): {name} {statistics.median(times) * 1e3:.1f} ms")
        if args.procs:
            run_mod.assemble_processes = lambda n: args.procs  # type: ignore[assignment]
        for _ in range(args.reps):
            t = time.perf_counter()
            run_mod.assemble(rd, keys)
            out = Path(tmp) / "samples.jsonl"
            print(f"assemble, {run_mod.assemble_processes(len(keys))} processes: {time.perf_counter() - t:.2f} s "
                  f"(samples.jsonl {out.stat().st_size / 1e6:.0f} MB)")


if __name__ == "__main__":
    main()
