"""Every script of benchmarks/ still loads against today's packages: a script that reaches into
a module the house moved (an attribute or a class that is gone) fails here, not on a GPU call."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from bench_script import BENCHMARKS

# Loads each script as a module in one fresh process (a script may patch modules as it loads,
# so it stays out of the test session) and prints the scripts that failed with their last error
# line. GPU-only code runs under main(), never at load.
LOADER = """
import json, sys, traceback
sys.path.insert(0, sys.argv[1])
from bench_script import load_benchmark
failed = {}
for name in sys.argv[2:]:
    try:
        load_benchmark(name)
    except BaseException as e:
        failed[name] = traceback.format_exception_only(type(e), e)[-1].strip()
print(json.dumps(failed))
"""


def test_every_benchmark_script_loads() -> None:
    # fuzzytok_aot compiles for real, so it refuses a kernels module that another script loaded
    # under the interpreter: it loads first
    names = sorted((p.stem for p in BENCHMARKS.glob("*.py")), key=lambda n: (n != "fuzzytok_aot", n))
    assert "bench_scoring_host" in names and len(names) > 20
    here = Path(__file__).resolve().parents[1]  # tests/harness, where bench_script lives
    out = subprocess.run([sys.executable, "-c", LOADER, str(here), *names], capture_output=True, text=True,
                         timeout=600, cwd=BENCHMARKS.parent)
    assert out.returncode == 0, out.stderr[-2000:]
    failed = json.loads(out.stdout.strip().splitlines()[-1])
    assert failed == {}, failed
