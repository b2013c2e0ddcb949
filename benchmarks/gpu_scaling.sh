#!/usr/bin/env bash
# The scaling grid (suites/scaling.yaml) on one GPU, budget by budget, each budget in its own run
# directory, as docs/scaling.md describes; stops starting budgets when the time left is short and
# packs each finished budget's results.csv, run.json and log into $OUT/b<BUDGET>.tgz.
#
#   TOTAL_S=560 bash benchmarks/gpu_scaling.sh 1e14 2e14 4e14 8e14 1.6e15 [-- extra --set overrides]
#
# Expects (docs/gpu.md): the data cache at $TOKBENCH_CACHE (default ../.gpu/cache or $GPU_DIR/cache)
# — or, when $GPU_DIR/scaling-data.tar.gz exists (`tokbench data pack scaling --slim`, 13.9 MB), that
# archive, unpacked into /tmp/tokbench-cache — and wheels of missing packages in $GPU_DIR/wheels.
# RUN_TAG=-bytes names the run directories b<BUDGET>-bytes (a budget split by encoder over two
# commands, each `--set 'encoders=[...]'`, must not share a run directory). SUITE=scaling_large
# runs another scaling suite (its archive: $GPU_DIR/SUITE-data.tar.gz). A budget argument of the
# form 1e14+3.2e14 trains those budgets in one command (one data load; run directory b1e14+3.2e14).
# DRY=1 first prints the dry run of the budgets given, or of DRY_BUDGETS=1e14,1e16 (step times
# measured on this GPU, the estimated wall of each point) into $OUT/dry.log.
# Merge the pieces anywhere with
#   tokbench report b1e14 b2e14 ... --out scaling-report
source "$(dirname "$0")/gpu_common.sh"
SUITE=${SUITE:-scaling}
gpu_unpack "$SUITE"
export TOKBENCH_CACHE=${TOKBENCH_CACHE:-$GPU_DIR/cache}
cd "$ROOT"
BUDGETS=(); SETS=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; for s in "$@"; do SETS+=(--set "$s"); done; break; fi
  BUDGETS+=("$1"); shift
done
START=$(date +%s); TOTAL=${TOTAL_S:-560}; MIN_LEFT=${MIN_LEFT_S:-60}
gpu_env_log
if [ "${DRY:-0}" = 1 ]; then
  ALL=${DRY_BUDGETS:-$(IFS=,; echo "${BUDGETS[*]}" | tr + ,)}
  python3 -m harness.cli run "$SUITE" --dry-run --device cuda --no-prepare "${SETS[@]}" \
    --set "scaling.only_budgets=[$ALL]" >"$OUT/dry.log" 2>&1
  echo "dry run rc=$? wall $(( $(date +%s) - START )) s" | tee -a "$OUT/env.log"; tail -4 "$OUT/dry.log"
fi
for B in "${BUDGETS[@]}"; do
  left=$(( TOTAL - ($(date +%s) - START) ))
  if [ "$left" -lt "$MIN_LEFT" ]; then echo "budget $B not started: ${left}s left" | tee -a "$OUT/env.log"; continue; fi
  N=b$B${RUN_TAG:-}; RUN=/tmp/scaling/$N; t0=$(date +%s); mkdir -p /tmp/scaling
  timeout "$left" python3 -m harness.cli run "$SUITE" --device cuda --no-prepare --quiet --no-report \
    "${SETS[@]}" --set "scaling.only_budgets=[${B//+/,}]" --out "$RUN" >"$RUN.log" 2>&1
  rc=$?
  echo "budget $B rc=$rc wall $(( $(date +%s) - t0 )) s" | tee -a "$OUT/env.log"
  tail -3 "$RUN.log"
  cp "$RUN.log" "$RUN/" 2>/dev/null
  (cd /tmp/scaling && tar czf "$OUT/$N.tgz" "$N/results.csv" "$N/run.json" "$N/$N.log" 2>/dev/null)
done
