#!/usr/bin/env bash
# The scaling sweep engine on one GPU: one budget of the seven-budget grid (issue 56; default
# 5.12e14), bytes then BPE-4096; prints per job the command's wall, the grid's training FLOPs,
# TFLOP/s, % of the GEMM rate the run measured, per-rung MFU and each point's step time
# (benchmarks/sweep_summary.py), and packs results.csv, run.json and the log into $OUT.
#
#   GPU_DIR=$PWD/.gpu bash benchmarks/gpu_sweep.sh [BUDGET] [-- extra --set overrides]
#
# STACK=1 (the default), per encoder (ONLY=bytes or ONLY=bpe: that one only): first the whole
# seven-budget grid in one command with scaling.stack (a rung's points at every budget trained as
# one stacked model, each step a CUDA-graph replay for bytes, eager for BPE; should it fail, again eagerly), then the same
# whole grid one point at a time with graphs (BASE=0 skips it): the two walls are the ratio, each
# summary the TFLOP/s and % of the GEMM rate; BASE=only runs the baseline alone. A command of one
# budget has one point per rung, so nothing to stack. STACK=0: the one-budget jobs below instead;
# STACK=ranks: the one budget's points dealt over RANKS ranks (default 6) sharing the GPU, graphs on.
# STACK=streams: the one budget's points trained at once, each a stack of one on its own CUDA stream
# (scaling.streams=STREAMS, default 6, graphs on), then its dry run, then the same points one at a
# time with graphs (BASE=0 skips it), then eagerly as the issue's baseline command (EAGER=1). STREAMS
# also applies to STACK=1's stacked job. JOB_TIMEOUT: seconds a job may run (default: no limit).
# Within ten minutes a call, one encoder a call: ONLY=bytes BASE=0 DRY=0 bash benchmarks/gpu_sweep.sh
#
# Each encoder (STACK=0): one process, one point at a time, each step a CUDA-graph replay
# (budget.cuda_graphs: on an H100 the bytes command took 116.8 s against 232 s eager, BENCHMARKS.md
# "Sweep engine"); should that job fail, it runs again as RANKS ranks sharing the GPU (default 6,
# graphs on), then eager in one process. Afterwards (DRY=1, the default) the bytes
# job's dry run on the GPU, to set its estimated wall beside the measured one.
# RESUME=1: each job resumes its earlier run directory (/tmp/sweep/NAME) instead of starting empty.
# Data as for gpu_scaling.sh ($GPU_DIR/scaling-data.tar.gz).
source "$(dirname "$0")/gpu_common.sh"
gpu_unpack scaling
export TOKBENCH_CACHE=${TOKBENCH_CACHE:-$GPU_DIR/cache}
cd "$ROOT"
BUDGET=${1:-5.12e14}; [ $# -gt 0 ] && shift
SETS=(); if [ "${1:-}" = "--" ]; then shift; for s in "$@"; do SETS+=(--set "$s"); done; fi
gpu_env_log
# SUITE / DEVICE: another suite and device, to try the script at toy size (SUITE=path DEVICE=cpu)
SUITE=${SUITE:-scaling}; DEVICE=${DEVICE:-cuda}
GRID=(--set budget.compile=false --set "scaling.only_budgets=[$BUDGET]")
[ "$SUITE" = scaling ] && GRID+=(--set scaling.max_passes=8
  --set 'scaling.budgets=[8e12,1.6e13,3.2e13,6.4e13,1.28e14,2.56e14,5.12e14]')
mkdir -p /tmp/sweep
job() {  # job NAME RANKS ENCODER [--set ...]: one command, timed, summarised and packed; its rc
  local name=$1 ranks=$2 enc=$3; shift 3
  local RUN=/tmp/sweep/$name t0 rc wall
  # a kept directory would resume an earlier (killed) run from its model cache, so its wall is no baseline
  [ "${RESUME:-0}" = 1 ] || rm -rf "$RUN"
  t0=$(date +%s.%N)
  ${JOB_TIMEOUT:+timeout $JOB_TIMEOUT} python3 -m harness.cli run "$SUITE" --device "$DEVICE" --no-prepare \
    --quiet --no-report --nproc "$ranks" \
    "${GRID[@]}" --set "encoders=[$enc]" "$@" "${SETS[@]}" --out "$RUN" >"$RUN.log" 2>&1
  rc=$?; wall=$(python3 -c "import time; print(f'{time.time() - $t0:.1f}')")
  echo "$name: rc=$rc command wall $wall s ($ranks rank(s); $*)" | tee -a "$OUT/env.log"
  if [ $rc -ne 0 ]; then tail -15 "$RUN.log" | tee -a "$OUT/env.log"; else
    python3 benchmarks/sweep_summary.py "$RUN" "$wall" 2>&1 | tee -a "$OUT/env.log"; fi
  cp "$RUN.log" "$RUN/" 2>/dev/null
  (cd /tmp/sweep && tar czf "$OUT/$name.tgz" "$name/results.csv" "$name/run.json" "$name/$name.log" 2>/dev/null)
  return $rc
}
BYTES='{name: bytes}'
for enc in "bytes $BYTES" "bpe {name: bpe, vocab_size: 4096}"; do
  read -r name spec <<<"$enc"
  [ -n "${ONLY:-}" ] && [ "$ONLY" != "$name" ] && continue
  if [ "${STACK:-1}" = 1 ]; then  # the whole grid: every budget (only_budgets empty overrides GRID's)
    [ "${BASE:-1}" != only ] && { job "$name-stack" 1 "$spec" --set 'scaling.only_budgets=[]' \
      --set scaling.stack=true --set budget.cuda_graphs=true --set "scaling.streams=${STREAMS:-1}" \
      || job "$name-stack-eager" 1 "$spec" --set 'scaling.only_budgets=[]' --set scaling.stack=true; }
    [ "${BASE:-1}" != 0 ] && job "$name-graphs-all" 1 "$spec" --set 'scaling.only_budgets=[]' \
      --set budget.cuda_graphs=true
    continue
  fi
  if [ "${STACK:-1}" = streams ]; then  # the one budget's points at once, each on its own stream
    job "$name-streams" 1 "$spec" --set "scaling.streams=${STREAMS:-6}" --set budget.cuda_graphs=true
    [ "${DRY:-1}" = 1 ] && ${JOB_TIMEOUT:+timeout $JOB_TIMEOUT} python3 -m harness.cli run "$SUITE" --dry-run --device "$DEVICE" "${GRID[@]}" \
      --set "encoders=[$spec]" --set budget.cuda_graphs=true --set "scaling.streams=${STREAMS:-6}" "${SETS[@]}" \
      2>&1 | grep -v "^  $name@" | tail -12 | tee -a "$OUT/env.log"
    [ "${BASE:-1}" != 0 ] && job "$name-graphs" 1 "$spec" --set budget.cuda_graphs=true
    [ "${EAGER:-0}" = 1 ] && job "$name-eager" 1 "$spec"
    continue
  fi
  if [ "${STACK:-1}" = ranks ]; then  # the one budget's points dealt over RANKS ranks sharing the GPU
    job "$name-ranks" "${RANKS:-6}" "$spec" --set budget.cuda_graphs=true
    continue
  fi
  job "$name-graphs" 1 "$spec" --set budget.cuda_graphs=true \
    || job "$name-ranks" "${RANKS:-6}" "$spec" --set budget.cuda_graphs=true \
    || job "$name-eager" 1 "$spec"
done
if [ "${DRY:-1}" = 1 ] && [ "${STACK:-1}" != streams ]; then  # last: the measurements above are complete if the call is cut here
  STACKED=(); [ "${STACK:-1}" = 1 ] && STACKED=(--set 'scaling.only_budgets=[]' --set scaling.stack=true)
  python3 -m harness.cli run "$SUITE" --dry-run --device "$DEVICE" "${GRID[@]}" --set "encoders=[$BYTES]" \
    --set budget.cuda_graphs=true "${STACKED[@]}" "${SETS[@]}" \
    2>&1 | grep -v '^  bytes@' | tail -12 | tee -a "$OUT/env.log"
fi
