#!/usr/bin/env bash
# The scaling sweep engine on one GPU: the 5.12e14 budget of the seven-budget grid (issue 56),
# bytes then BPE-4096, each as one torchrun job of several ranks sharing the GPU, byte-level
# steps replayed as CUDA graphs; prints per job the command's wall, the grid's training FLOPs,
# TFLOP/s, % of the GEMM rate the run measured, per-rung MFU and each point's step time
# (benchmarks/sweep_summary.py), and packs results.csv, run.json and the log into $OUT.
#
#   GPU_DIR=$PWD/.gpu bash benchmarks/gpu_sweep.sh [BUDGET] [-- extra --set overrides]
#
# BYTES_RANKS / BPE_RANKS (default 6 and 4: one rank per grid point of that budget), GRAPHS
# (default true: budget.cuda_graphs), DRY (default 1: afterwards, the bytes job's dry run on the
# GPU, whose estimated wall is to be set beside the measured one). Data as for gpu_scaling.sh
# ($GPU_DIR/scaling-data.tar.gz).
source "$(dirname "$0")/gpu_common.sh"
gpu_unpack scaling
export TOKBENCH_CACHE=${TOKBENCH_CACHE:-$GPU_DIR/cache}
cd "$ROOT"
BUDGET=${1:-5.12e14}; [ $# -gt 0 ] && shift
SETS=(); if [ "${1:-}" = "--" ]; then shift; for s in "$@"; do SETS+=(--set "$s"); done; fi
gpu_env_log
B='scaling.budgets=[8e12,1.6e13,3.2e13,6.4e13,1.28e14,2.56e14,5.12e14]'
for job in "bytes ${BYTES_RANKS:-6} {name: bytes}" "bpe ${BPE_RANKS:-4} {name: bpe, vocab_size: 4096}"; do
  read -r name ranks enc <<<"$job"
  RUN=/tmp/sweep/$name-b$BUDGET; mkdir -p /tmp/sweep; t0=$(date +%s.%N)
  python3 -m harness.cli run scaling --device cuda --no-prepare --quiet --no-report --nproc "$ranks" \
    --set budget.compile=false --set "budget.cuda_graphs=${GRAPHS:-true}" --set scaling.max_passes=8 \
    --set "$B" --set "encoders=[$enc]" --set "scaling.only_budgets=[$BUDGET]" "${SETS[@]}" \
    --out "$RUN" >"$RUN.log" 2>&1
  rc=$?; wall=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
  echo "$name: rc=$rc command wall $wall s ($ranks ranks)" | tee -a "$OUT/env.log"
  [ $rc -eq 0 ] || tail -20 "$RUN.log"
  python3 benchmarks/sweep_summary.py "$RUN" "$wall" 2>&1 | tee -a "$OUT/env.log"
  cp "$RUN.log" "$RUN/" 2>/dev/null
  (cd /tmp/sweep && tar czf "$OUT/$name-b$BUDGET.tgz" "$name-b$BUDGET/results.csv" "$name-b$BUDGET/run.json" \
    "$name-b$BUDGET/$name-b$BUDGET.log" 2>/dev/null)
done
if [ "${DRY:-1}" = 1 ]; then  # last: the measurements above are complete if the call is cut here
  python3 -m harness.cli run scaling --dry-run --device cuda --nproc "${BYTES_RANKS:-6}" \
    --set budget.compile=false --set "budget.cuda_graphs=${GRAPHS:-true}" --set scaling.max_passes=8 \
    --set "$B" --set 'encoders=[{name: bytes}]' --set "scaling.only_budgets=[$BUDGET]" "${SETS[@]}" \
    2>&1 | grep -v '^  bytes@' | tail -14 | tee -a "$OUT/env.log"
fi
