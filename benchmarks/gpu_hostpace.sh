#!/usr/bin/env bash
# What paces the host-bound parts of the standard suite on one GPU: BLT's training step
# (benchmarks/profile_train.py: cProfile of the loop's thread, the torch profiler's ops by host and
# by device time) and the scoring loop of BPE-1024 and BLT (benchmarks/bench_score_items.py with
# --profile). Logs to $OUT/{blt_train_profile,bpe_score_profile,blt_score_profile}.log.
#
#   bash benchmarks/gpu_hostpace.sh        # STEPS (BLT training steps profiled, default 30)
#
# Data as benchmarks/gpu_standard.sh expects it ($GPU_DIR/cache or $GPU_DIR/standard-data.tar.gz).
source "$(dirname "$0")/gpu_common.sh"
gpu_unpack standard
export TOKBENCH_CACHE=${TOKBENCH_CACHE:-$GPU_DIR/cache}
cd "$ROOT"
gpu_env_log
timeout ${TRAIN_TIMEOUT:-200} python3 benchmarks/profile_train.py suites/standard.yaml --only blt --steps ${STEPS:-30} \
  --device cuda --top 30 2>&1 | grep -v USDT | tee "$OUT/blt_train_profile.log"
timeout ${SCORE_TIMEOUT:-90} python3 benchmarks/bench_score_items.py --vocab 1024 --grid 1:256 --profile 6 \
  2>&1 | tee "$OUT/bpe_score_profile.log"
timeout ${SCORE_TIMEOUT:-90} python3 benchmarks/bench_score_items.py --blt --grid 1:256 --profile 6 \
  2>&1 | tee "$OUT/blt_score_profile.log"
