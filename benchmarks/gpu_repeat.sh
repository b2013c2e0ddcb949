#!/usr/bin/env bash
# Does a seed repeat on a GPU, and what does fp32 scoring change? One seed of suites/standard.yaml
# with deterministic kernels (`budget.deterministic=true`), twice, each in its own run directory
# with cold compile caches (run A, run B); then run B's directory again with `eval.dtype=float32`
# (run C: its trained models loaded, every cell scored again in fp32 under new cell keys). Then
# benchmarks/compare_cells.py: A against B (the same numbers?) and B against C (bf16 against fp32
# scoring, per cell, through the run itself).
#
#   bash benchmarks/gpu_repeat.sh [extra --set overrides...]
#
# Three full standard seeds pass a device call's 10 minutes; a reduced seed fits (BENCHMARKS.md,
# "Determinism"): FRESH=1 GPU_DIR=$PWD/.gpu bash benchmarks/gpu_repeat.sh budget.train_bytes=8000000 \
#   budget.warmup_bytes=1000000 eval.max_docs=100
#
# Data and wheels as for gpu_standard.sh (docs/gpu.md). Writes $OUT/{A,B,C}_{run.log,run.json,
# results.csv} and $OUT/compare_{AB,BC}.log; RUN_TIMEOUT per run (default 200 s); SKIP_FP32=1
# leaves run C out; SKIP_B=1 leaves run B out (run C then scores A's models: one full seed with
# deterministic kernels and its fp32 scoring fit a device call; compare_AC.log); SUITE=smoke (or another suite name) repeats that suite instead of the
# standard one. A run that fails (an op without a deterministic kernel is one line in its
# log) stops the script.
source "$(dirname "$0")/gpu_common.sh"
gpu_unpack standard
export TOKBENCH_CACHE=${TOKBENCH_CACHE:-$GPU_DIR/cache}
cd "$ROOT"
BASE=${RUN_DIR:-/tmp/tokbench-repeat}
rm -rf "$BASE"
gpu_env_log
SETS=(--set "seeds=[0]" --set budget.deterministic=true)
for s in "$@"; do SETS+=(--set "$s"); done
run_one() {  # NAME DIR [more args]: one run, its files copied to $OUT/NAME_*
  local name=$1 dir=$2
  shift 2
  timeout ${RUN_TIMEOUT:-200} python3 -m harness.cli run "${SUITE:-standard}" "${SETS[@]}" "$@" --device cuda --no-prepare \
    --quiet --no-report --out "$dir" > "$OUT/${name}_run.log" 2>&1
  local rc=$?
  tail -3 "$OUT/${name}_run.log"
  cp "$dir/run.json" "$OUT/${name}_run.json" 2>/dev/null
  # a failed run's directory can hold an earlier run's results.csv (run C reuses B's): not its own
  [ $rc -ne 0 ] || cp "$dir/results.csv" "$OUT/${name}_results.csv" 2>/dev/null
  echo "run $name: exit $rc"
  return $rc
}
cold() {  # empty compile caches for the next run, as on a fresh machine
  export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d /tmp/inductor.XXXX) TRITON_CACHE_DIR=$(mktemp -d /tmp/triton.XXXX)
}
cold; run_one A "$BASE/A" || exit 1
LAST=A
if [ -z "$SKIP_B" ]; then
  cold; run_one B "$BASE/B" || exit 1
  python3 benchmarks/compare_cells.py "$OUT/A" "$OUT/B" --bound 0 2>&1 | tee "$OUT/compare_AB.log"
  LAST=B
fi
[ -z "$SKIP_FP32" ] || exit 0
run_one C "$BASE/$LAST" --set eval.dtype=float32 || exit 1
python3 benchmarks/compare_cells.py "$OUT/$LAST" "$OUT/C" 2>&1 | tee "$OUT/compare_${LAST}C.log"
