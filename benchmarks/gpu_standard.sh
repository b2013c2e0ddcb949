#!/usr/bin/env bash
# One seed of suites/standard.yaml on one GPU, as a new user runs it: the dry-run estimate, then
# the run itself into the same directory (so run.json holds estimated vs actual), logs to $OUT.
#
#   bash benchmarks/gpu_standard.sh [extra --set overrides...]
#
# Expects (docs/gpu.md): the data cache unpacked at $TOKBENCH_CACHE (default ../.gpu/cache) — or,
# when $GPU_DIR/standard-data.tar.gz exists (`tokbench data pack standard --slim`), that archive,
# unpacked into /tmp/tokbench-cache — and wheels of missing packages in $GPU_DIR/wheels.
# Writes $OUT/{dry_run.log,run.log,run.json,results.csv,speed.log}. DRY_ONLY=1: the dry run alone
# (and $OUT/estimate.json); ESTIMATE=FILE: skip nothing, but start the run directory with that
# estimate.json (two device calls: the dry run and the run each take minutes). RUN_ARGS: more
# arguments of the run itself (e.g. --no-report). DTYPE_CHECK=1: then bf16 against fp32 per
# cell on the run's models (benchmarks/score_dtype_check.py, DTYPE_DOCS documents per eval set,
# default 300 as the run scores, the split and fp32 heads; about 100 s on an H100 at 300
# documents; DTYPE_TIMEOUT seconds, default 300) into $OUT/dtype_check.log. The run's
# environment switches pass through.
# REPORT_PROCS="8 16": then the run's report rendered again with each number of processes
# (TOKBENCH_REPORT_PROCESSES), its parts' seconds into $OUT/report_procs.log. FRESH=1: cold
# caches (gpu_common.sh). PROFILE_SCORING=N: then one seed's scoring again on the run's models
# (benchmarks/bench_scoring_host.py, cProfile of the scoring loop's thread, its N costliest
# functions; PROFILE_MODELS, default bpe-4096,bytes; PROFILE_TIMEOUT s, default 240) into
# $OUT/scoring_profile.log. STACKS=1: see the run's timeout below.
source "$(dirname "$0")/gpu_common.sh"
gpu_unpack standard
export TOKBENCH_CACHE=${TOKBENCH_CACHE:-$GPU_DIR/cache}
cd "$ROOT"
RUN=${RUN_DIR:-/tmp/tokbench-standard-s0}
rm -rf "$RUN"
gpu_env_log
SETS=(--set "seeds=[0]")
for s in "$@"; do SETS+=(--set "$s"); done
[ -n "$SKIP_DRY" ] || timeout ${DRY_TIMEOUT:-300} python3 -m harness.cli run standard "${SETS[@]}" --device cuda --no-prepare --dry-run --out "$RUN" 2>&1 | tee "$OUT/dry_run.log"
if [ -n "$DRY_ONLY" ]; then  # the estimate alone: a later call can carry it back (ESTIMATE=...)
  cp "$RUN/estimate.json" "$OUT/" 2>/dev/null
  exit 0
fi
if [ -n "$ESTIMATE" ]; then  # an estimate.json from an earlier call's dry run (DRY_ONLY=1) of the same tree
  mkdir -p "$RUN" && cp "$ESTIMATE" "$RUN/estimate.json"
fi
# STACKS=1: a run still going at RUN_TIMEOUT gets SIGUSR1 first (every process of its group,
# forked collation workers included, prints each thread's Python stack into run.log:
# ``harness.cli.stacks_on_sigusr1``) and SIGKILL 15 s later, instead of a silent SIGTERM
KILL_ARGS=()
[ -z "$STACKS" ] || KILL_ARGS=(-s USR1 -k 15)
# PYSPY=1: the run's process sampled by py-spy (its wheel in $GPU_DIR/wheels; `--nonblocking`, so
# the run is never paused), every thread, idle samples included, 49 Hz, as collapsed stacks in
# $OUT/pyspy.txt (benchmarks/pyspy_phases.py reads them); where py-spy cannot attach, the run goes on
PROF=()
if [ -n "$PYSPY" ]; then
  SPY=$(command -v py-spy || ls "$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/py-spy" ~/.local/bin/py-spy 2>/dev/null | head -1)
  # sampling must work here first (a container may refuse ptrace): a 2 s trial on a sleeping child
  if [ -n "$SPY" ] && timeout 30 "$SPY" record --nonblocking --rate 49 --format raw -o /tmp/pyspy_trial.txt -- python3 -c "import time; time.sleep(2)" > /tmp/pyspy_trial.log 2>&1; then
    PROF=("$SPY" record --nonblocking --idle --threads --rate 49 --format raw -o "$OUT/pyspy.txt" --)
  fi
  echo "py-spy: ${SPY:-not found}; ${PROF[*]:-not sampling}" | tee -a "$OUT/env.log"
fi
timeout "${KILL_ARGS[@]}" ${RUN_TIMEOUT:-400} "${PROF[@]}" python3 -m harness.cli run standard "${SETS[@]}" --device cuda --no-prepare --quiet $RUN_ARGS --out "$RUN" 2>&1 | tee "$OUT/run.log"
cp "$RUN/run.json" "$RUN/results.csv" "$OUT/" 2>/dev/null
[ ! -f "$RUN/stacks.txt" ] || cp "$RUN/stacks.txt" "$OUT/"  # a stuck loop's stacks (harness.infra.watchdog)
python3 - "$RUN/run.json" <<'PY' | tee "$OUT/speed.log"
import json, sys
r = json.load(open(sys.argv[1]))
sp = r.get("speed", {})
print("gemm bf16 TFLOP/s", sp.get("gemm_bf16_tflops"))
hw = r.get("hardware", {})
print("host", hw.get("cpu_model"), "usable cores", hw.get("cpu_usable"), "host pace us", hw.get("host_pace_us"))
for k, v in sp.get("train", {}).items():
    steady = f"; after the first step {v['mfu_after_first_step']:.3f}" if "mfu_after_first_step" in v else ""
    steady += f"; median step {v['mfu_median_step']:.3f}" if "mfu_median_step" in v else ""
    print(f"train {k:<18} MFU {v.get('mfu', 0):.3f} (full attn {v.get('mfu_full_attn', 0):.3f}{steady}) "
          f"{v['bytes_per_s'] / 1e6:.2f} MB/s first step {v['first_step_seconds']:.1f} s peak {v['peak_mem_bytes'] / 2**30:.1f} GiB")
for k, v in sp.get("score", {}).items():
    busy = f" GPU in forwards {v['device_busy']:.0%} (MFU there {v.get('mfu_in_forwards') or 0:.3f})" if v.get("device_busy") else ""
    print(f"score {k:<18} MFU {v.get('mfu') or 0:.3f} {v['mb_per_s']:.2f} MB/s {v['seconds']:.1f} s{busy}; "
          f"outside the loop: setup {v.get('setup_seconds', 0):.2f} s, first batch {v.get('first_batch_seconds', 0):.2f} s, "
          f"assembly {v.get('assemble_seconds', 0):.2f} s; loop: wait {v.get('loop_wait_seconds', 0):.2f} s, "
          f"launch {v.get('loop_launch_seconds', 0):.2f} s, sync {v.get('loop_sync_seconds', 0):.2f} s, "
          f"finish {v.get('loop_finish_seconds', 0):.2f} s; the loop thread's CPU s: launch "
          f"{v.get('loop_launch_cpu_seconds', 0):.2f}, sync {v.get('loop_sync_cpu_seconds', 0):.2f}, finish "
          f"{v.get('loop_finish_cpu_seconds', 0):.2f}; prefetch thread CPU {v.get('prefetch_cpu_seconds', 0):.2f} s")
    for m, mv in v.get("modes", {}).items():  # FLOPs and seconds of mixed batches are shares
        print(f"score {k + ' ' + m:<18} MFU {mv.get('mfu') or 0:.3f} {mv['mb_per_s']:.2f} MB/s {mv['seconds']:.1f} s")
for label, f in r.get("encoders", {}).items():
    for seed, m in f.get("seeds", {}).items():
        gi = m["train"].get("gpu_idle")
        if gi:
            print(f"gpu idle {label} s{seed}: {gi['idle_fraction']:.1%} of steps {gi['steps']} "
                  f"(wall {gi['wall_seconds']:.2f} s, device busy {gi['device_busy_seconds']:.2f} s)")
for label, f in r.get("encoders", {}).items():
    for seed, m in f.get("seeds", {}).items():
        sc = m["train"].get("step_clock")
        if sc:
            print(f"steps {label} s{seed}: {sc['steps']} on the device: first {sc['first_ms'] / 1e3:.1f} s, median "
                  f"{sc['median_ms']:.1f} ms, p90 {sc['p90_ms']:.1f}, max {sc['max_ms']:.1f}; beyond the median "
                  f"{sc['excess_over_median_ms'] / 1e3:.2f} s; host median {sc['host_median_ms']:.1f} ms; feed close "
                  f"{sc.get('close_seconds', 0):.2f} s; quarters {[round(q, 1) for q in sc.get('quarter_medians_ms', [])]} ms; "
                  f"slowest [step, device ms, host ms] {sc['slowest'][:5]}")
for label, f in r.get("encoders", {}).items():
    for seed, m in f.get("seeds", {}).items():
        t = m["train"]
        print(f"compile {label} s{seed}: graphs {t.get('compile_graph_seconds', 0):.1f} s kernels "
              f"{t.get('compile_kernels_seconds', 0):.1f} s first step {t['first_step_seconds']:.1f} s "
              f"cache {t.get('compile_cache')}")
print("score_compile_cache", r.get("score_compile_cache"))
print("compile_ahead", json.dumps(r.get("compile_ahead"), indent=1))
print("timings", json.dumps(r.get("timings"), indent=1))
print("estimate_vs_actual", json.dumps(r.get("estimate_vs_actual"), indent=1))
PY
for n in $REPORT_PROCS; do
  TOKBENCH_REPORT_PROCESSES=$n python3 - "$RUN" "/tmp/report-p$n" <<'PY' 2>&1 | tee -a "$OUT/report_procs.log"
import os, sys, time
from pathlib import Path
from reports import render_run
from reports.render import LAST_TIMINGS as t
t0 = time.perf_counter()
render_run(Path(sys.argv[1]), Path(sys.argv[2]))
parts = " ".join(f"{k} {t[k]:.2f}" for k in ("load", "tables", "other_tables", "figures", "page") if k in t)
print(f"report at {os.environ['TOKBENCH_REPORT_PROCESSES']} processes: {time.perf_counter() - t0:.2f} s ({parts})")
PY
done
if [ -n "$DTYPE_CHECK" ]; then
  timeout ${DTYPE_TIMEOUT:-300} python3 benchmarks/score_dtype_check.py standard --out "$RUN" "${SETS[@]}" \
    --heads split,fp32 --max-docs ${DTYPE_DOCS:-300} > "$OUT/dtype_check.log" 2>&1
  grep -E "max \|ΔBPB\||all models|in all" "$OUT/dtype_check.log"
fi
if [ -n "$PROFILE_SCORING" ]; then
  timeout ${PROFILE_TIMEOUT:-240} python3 benchmarks/bench_scoring_host.py suites/standard.yaml --device cuda --no-tiny \
    --out "$RUN" "${SETS[@]}" --models "${PROFILE_MODELS:-bpe-4096,bytes}" --profile "$PROFILE_SCORING" \
    > "$OUT/scoring_profile.log" 2>&1
  tail -n 80 "$OUT/scoring_profile.log"
fi
