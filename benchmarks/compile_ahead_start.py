"""How long starting the compile-ahead process holds the run (``harness.compileahead.start``),
on the standard suite's data, on this machine's CPU (compiling forced on), and how long stopping
it takes right after.

    TOKBENCH_CACHE=DIR PYTHONPATH=. python benchmarks/compile_ahead_start.py [--module FILE]

``--module FILE``: a ``compileahead.py`` of another commit instead (``git show
REV:harness/compileahead.py > FILE``), to compare.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", help="a compileahead.py file to use instead of harness.compileahead")
    a = ap.parse_args()
    os.environ["TOKBENCH_COMPILE_AHEAD"] = "1"
    from harness.cli import find_suite
    from harness.config import load_suite
    from harness.data import load_data
    from harness.run import Runner, RunOptions

    if a.module:
        sys.path.insert(0, os.path.dirname(os.path.abspath(a.module)))  # the spawned child imports it too
        name = os.path.splitext(os.path.basename(a.module))[0]
        spec = importlib.util.spec_from_file_location(name, a.module)
        assert spec is not None and spec.loader is not None
        ca = importlib.util.module_from_spec(spec)
        sys.modules[name] = ca
        spec.loader.exec_module(ca)
    else:
        from harness import compileahead as ca
    suite = load_suite(find_suite("standard"), ["budget.compile=true", "seeds=[0]"])
    runner = Runner(suite, RunOptions(device="cpu", prepare=False, progress=False, report=False))
    t = time.perf_counter()
    data = load_data(suite, runner.ctx, prepare=False, log=lambda s: None)
    print(f"load_data {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    ahead = ca.start(runner, data.train, data.evals)
    print(f"start {time.perf_counter() - t:.2f} s")
    t = time.perf_counter()
    ahead.stop()
    print(f"stop {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
