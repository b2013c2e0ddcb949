#!/usr/bin/env bash
# What `eval.dtype: float32` costs and changes on a GPU: one seed of suites/standard.yaml (bf16
# training, scored as the suite says: bf16), then the same command into the same run directory
# with `--set eval.dtype=float32`, which loads the trained models and scores every cell again in
# fp32 under new cell keys. Prints both runs' scoring seconds and each cell's BPB gap
# (benchmarks/score_precision_compare.py).
#
#   bash benchmarks/gpu_score_precision.sh [extra --set overrides...]
#
# Data and wheels as for gpu_standard.sh (docs/gpu.md). Writes $OUT/{run_bf16,run_fp32}.log,
# $OUT/{bf16,fp32}_{run.json,results.csv} and $OUT/compare.log. RUN_TIMEOUT per run (default 300).
source "$(dirname "$0")/gpu_common.sh"
gpu_unpack standard
export TOKBENCH_CACHE=${TOKBENCH_CACHE:-$GPU_DIR/cache}
cd "$ROOT"
RUN=${RUN_DIR:-/tmp/tokbench-precision}
rm -rf "$RUN"
gpu_env_log
SETS=(--set "seeds=[0]")
for s in "$@"; do SETS+=(--set "$s"); done
for p in bf16 fp32; do
  extra=()
  [ "$p" = fp32 ] && extra=(--set eval.dtype=float32)
  timeout ${RUN_TIMEOUT:-300} python3 -m harness.cli run standard "${SETS[@]}" "${extra[@]}" --device cuda \
    --no-prepare --quiet --no-report --out "$RUN" 2>&1 | tee "$OUT/run_$p.log"
  cp "$RUN/run.json" "$OUT/${p}_run.json"
  cp "$RUN/results.csv" "$OUT/${p}_results.csv"
done
python3 benchmarks/score_precision_compare.py "$OUT/bf16_run.json" "$OUT/fp32_run.json" 2>&1 | tee "$OUT/compare.log"
