#!/usr/bin/env bash
# Inductor's compile workers started before the data loads (harness.accel.warm_compile_pool)
# against at the first compile (TOKBENCH_WARM_COMPILE_POOL=0), on the CPU: the smoke suite's
# data (stdlib text, a few seconds to load) and its byte model alone with budget.compile=true, a
# short training, fresh inductor caches each run, the two settings alternated REPS times.
# Prints each run's first-step seconds, its compile seconds and the run's total.
#
#   bash benchmarks/warm_pool_cpu.sh [REPS] [WORK_DIR]      # ≈ 1 min a run on the 2-core VM
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REPS=${1:-2}
W=${2:-/tmp/tokbench-warm-pool}
rm -rf "$W" && mkdir -p "$W"
cd "$ROOT"
python3 - "$W/suite.yaml" <<'PY'
import re
import sys

text = open("suites/smoke.yaml").read()
text = re.sub(r"(?ms)^encoders:\n.*?(?=^perturbations:)", "encoders:\n  - name: bytes\n\n", text)
text = text.replace("budget:\n", "budget:\n  compile: true\n", 1).replace("train_bytes: 600000", "train_bytes: 40000")
open(sys.argv[1], "w").write(text)
PY
for r in $(seq "$REPS"); do
  for w in 0 1; do
    out=$W/r$r-w$w
    TORCHINDUCTOR_CACHE_DIR=$out/inductor TOKBENCH_WARM_COMPILE_POOL=$w \
      python3 -m harness.cli run "$W/suite.yaml" --out "$out/run" --quiet --no-report --device cpu > "$out.log" 2>&1
    echo "rep $r TOKBENCH_WARM_COMPILE_POOL=$w exit $?: $(grep -E '^\[time\] (bytes s0|total)' "$out.log" | tr -s ' ' | tr '\n' ' ')"
  done
done
