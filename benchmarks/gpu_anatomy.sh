#!/usr/bin/env bash
# Where the standard suite's training step and scoring forward spend GPU time, on one GPU:
# benchmarks/step_anatomy.py (the ops' rates at the step's shapes, then profiled training steps per
# encoder, flash attention as the run uses it), the byte model's steps again with cuDNN attention,
# the scoring forward in parts (bench_score_forward.py, compiled) and FuzzyTok's host cost a call.
# ENCODERS, PARTS (step_anatomy's --parts), CUDNN_MODE (the second run's TOKBENCH_CUDNN_SDPA),
# SKIP_CUDNN=1 / SKIP_HOST=1 (leave those runs out) narrow a call.
#
#   bash benchmarks/gpu_anatomy.sh          # logs to $OUT/{anatomy,anatomy_cudnn,score_forward,fuzzytok_host}.log
#
# Data as benchmarks/gpu_standard.sh expects it ($GPU_DIR/cache or $GPU_DIR/standard-data.tar.gz).
source "$(dirname "$0")/gpu_common.sh"
gpu_unpack standard
export TOKBENCH_CACHE=${TOKBENCH_CACHE:-$GPU_DIR/cache}
cd "$ROOT"
gpu_env_log
ENCODERS=${ENCODERS:-bytes,fuzzytok,bpe-1024,bpe-16384,blt}
timeout ${ANATOMY_TIMEOUT:-300} python3 benchmarks/step_anatomy.py suites/standard.yaml --encoders "$ENCODERS" --parts ${PARTS:-ops,ops320,steps} \
  2>&1 | grep -v USDT | tee "$OUT/anatomy.log"
[ -n "$SKIP_CUDNN" ] || TOKBENCH_CUDNN_SDPA=${CUDNN_MODE:-1} timeout ${CUDNN_TIMEOUT:-90} python3 benchmarks/step_anatomy.py suites/standard.yaml \
  --parts steps --encoders bytes 2>&1 | grep -v USDT | tee "$OUT/anatomy_cudnn.log"
timeout ${SCORE_TIMEOUT:-120} python3 benchmarks/bench_score_forward.py --compile yes 2>&1 | tee "$OUT/score_forward.log"
[ -n "$SKIP_HOST" ] || timeout ${HOST_TIMEOUT:-90} python3 benchmarks/bench_fuzzytok.py --quick --parts host 2>&1 | tee "$OUT/fuzzytok_host.log"
