"""Repeat a suite's run on the CPU with the GPU path's concurrency: two forked collation workers
per scoring job (``harness.accel.collate_processes`` patched to 2; 0 on a CPU otherwise) and each
model's cells made in forked processes behind the next model's scoring
(``TOKBENCH_CELLS_BEHIND=1``). Each run gets ``--timeout`` seconds, then SIGUSR1 (every
process of the run prints its threads' stacks: ``harness.cli.stacks_on_sigusr1``) and SIGKILL 10 s
later. Prints each run's exit code and seconds: a run that hangs shows as 137 (or 2 from the
watchdog) with its stacks in its log.

    PYTHONPATH=$PWD python benchmarks/fork_stress_cpu.py [--suite smoke] [--runs 4] [--timeout 400]

Logs: ``/tmp/tokbench-fork-stress-N.log``; run directories ``/tmp/tokbench-fork-stress-N``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time

CHILD = """
import sys
import harness.accel as accel
import harness.score as score
accel.collate_processes = score.collate_processes = lambda device: 2
from harness.cli import main
sys.exit(main(sys.argv[1:]))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="smoke")
    ap.add_argument("--runs", type=int, default=4)
    ap.add_argument("--timeout", type=int, default=400)
    args = ap.parse_args()
    env = {**os.environ, "TOKBENCH_CELLS_BEHIND": "1"}
    for i in range(1, args.runs + 1):
        out, log = f"/tmp/tokbench-fork-stress-{i}", f"/tmp/tokbench-fork-stress-{i}.log"
        shutil.rmtree(out, ignore_errors=True)
        t0 = time.perf_counter()
        with open(log, "w") as f:
            rc = subprocess.call(["timeout", "-s", "USR1", "-k", "10", str(args.timeout), sys.executable, "-c", CHILD,
                                  "run", args.suite, "--out", out, "--quiet"], stdout=f, stderr=subprocess.STDOUT,
                                 env=env)
        print(f"run {i}: exit code {rc} in {time.perf_counter() - t0:.0f} s (log {log})", flush=True)


if __name__ == "__main__":
    main()
