# Sourced by the benchmarks/gpu_*.sh scripts: the output folder, the repo root, the carried
# `.gpu` folder (wheels the GPU image lacks are installed from it), and $OUT/env.log with the
# date, GPU, driver and torch/triton/CUDA versions that every BENCHMARKS.md entry names, and the
# CPU model, usable cores and single-thread host pace (`harness.infra.provenance.host_pace_us`).
set -o pipefail
OUT=${OUT:-/tmp/tokbench-gpu-out}
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "${BASH_SOURCE[1]}")/.." && pwd)
GPU_DIR=${GPU_DIR:-$ROOT/../.gpu}
if ls "$GPU_DIR"/wheels/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-deps --no-index "$GPU_DIR"/wheels/*.whl 2>&1 | tail -2
fi
export PYTHONPATH=$ROOT PYTHONUNBUFFERED=1
# FRESH=1: empty inductor, Triton and data caches for this command, as on a fresh machine, so a
# second call on a warm machine (a baseline beside a candidate) starts as cold as the first.
if [ -n "$FRESH" ]; then
  export TORCHINDUCTOR_CACHE_DIR=$(mktemp -d /tmp/inductor.XXXX) TRITON_CACHE_DIR=$(mktemp -d /tmp/triton.XXXX)
  rm -rf /tmp/tokbench-cache
fi
gpu_env_log() {
  { date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader;
    python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, 'cuda', torch.version.cuda)"
    python3 -c "from harness.infra.provenance import host_facts; h = host_facts(); print('cpu', h['cpu_model'], 'usable cores', h['cpu_usable'], 'host pace', h['host_pace_us'], 'us')"; } \
    2>&1 | tee "$OUT/env.log"
}
# gpu_unpack SUITE: when $TOKBENCH_CACHE is unset and $GPU_DIR/SUITE-data.tar.gz exists (`tokbench
# data pack SUITE --slim` on a connected machine), unpack it into /tmp/tokbench-cache and use that
# (unpack checks every file and replaces package dirs whole: a few seconds).
gpu_unpack() {
  if [ -z "$TOKBENCH_CACHE" ] && [ -f "$GPU_DIR/$1-data.tar.gz" ]; then
    export TOKBENCH_CACHE=/tmp/tokbench-cache
    python3 -m harness.cli data unpack "$GPU_DIR/$1-data.tar.gz" || exit 2
  fi
}
