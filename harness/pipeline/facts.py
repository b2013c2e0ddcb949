"""run.json: what a run was (suite, software, machine, precision) and what it measured (the
encoders' facts, timings in seconds, MFU and throughput, the dry run's estimate beside the
actual). The file's fields are in docs/results.md.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import torch

from encoders.base import config_to_dict
from harness.config.suite import SCHEMA_VERSION, EncoderSpec, Suite
from harness.infra.provenance import git_sha, hardware, package_versions, tokbench_version
from perturbations.measure import EXACT_LIMIT, WINDOW

if TYPE_CHECKING:
    from harness.pipeline.run import Runner

ESTIMATE_FILE = "estimate.json"  # written by --dry-run into the run directory


def estimate_key(suite: Any, limit: int | None) -> str:
    """What a dry run's estimate is of: the resolved suite and ``--limit``. A run compares
    itself with ``estimate.json`` only when its own key is the same."""
    blob = json.dumps({"suite": suite.raw, "limit": limit}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def run_json(runner: Runner, status: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """run.json's content for ``runner`` now, with ``status`` ("running", "finished") and ``extra`` keys."""
    r = runner
    return {
        "schema_version": SCHEMA_VERSION,
        "tokbench_version": tokbench_version(),
        "status": status,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "suite": r.suite.raw,
        "suite_path": r.suite.path,
        "git_sha": git_sha(),
        "packages": package_versions(),
        "hardware": hardware(r.device),
        "precision": precision_facts(r.suite, r.device),
        "data": r.data_facts,
        "encoders": r.encoder_facts,
        "analyses": r.analysis_facts,
        "timings": r.timings,
        "edit_rate": {"exact_limit_chars": EXACT_LIMIT, "window_chars": WINDOW,
                      "windowed_documents": r.windowed_docs},
        "speed": speed_facts(r),
        "estimate_vs_actual": estimate_vs_actual(r),
        "compile_ahead": r.compile_ahead.facts() if r.compile_ahead is not None else {"on": False},
        "score_compile_cache": r.score_compile_cache,
        **({"compile": r.compile_facts} if r.compile_facts else {}),
        **({"report_figure_seconds": r.report_figure_seconds} if r.report_figure_seconds else {}),
        **({"scaling": r.scaling_facts} if r.suite.scaling is not None else {}),
        **(extra or {}),
    }


def precision_facts(suite: Suite, device: torch.device) -> dict[str, Any]:
    """The compute precision training and scoring actually ran in on this device (bf16
    autocast applies on CUDA only; ``budget.dtype`` and ``eval.dtype`` ask for it), and
    whether the kernels were deterministic ones (``budget.deterministic``)."""
    cuda = device.type == "cuda"
    return {"train": suite.budget.dtype if cuda else "float32",
            "score": suite.score_dtype if cuda else "float32",
            "deterministic": suite.budget.deterministic}


def estimate_vs_actual(runner: Runner) -> dict[str, Any] | None:
    """The dry run's per-seed estimate (``estimate.json`` in the run directory, if any, and
    only if it is of this suite and ``--limit``: ``estimate_key``) beside this run's
    measured phases, per seed."""
    path = runner.rd.root / ESTIMATE_FILE
    if not path.exists() or "total_seconds" not in runner.timings:
        return None
    est = json.loads(path.read_text())
    if est.get("key") != estimate_key(runner.suite, runner.opts.limit):
        return None  # an estimate of another suite, --set or --limit
    t, n = runner.timings, max(1, len(runner.suite.seeds))
    fits = sum(float(m["fit"].get("wall_seconds", 0.0)) for f in runner.encoder_facts.values() for m in f["seeds"].values())
    actual = {"data": t.get("data_seconds", 0.0), "fits": fits / n, "training": (t.get("train_seconds", 0.0) - fits) / n,
              "perturbation": t.get("perturb_fit_seconds", 0.0) / n + t.get("perturb_seconds", 0.0) / n,
              "analyses": t.get("analyses_seconds", 0.0) / n, "scoring": t.get("score_forward_seconds", 0.0) / n,
              "results": t.get("assemble_seconds", 0.0) / n,
              "per_seed": (t["total_seconds"] - t.get("report_seconds", 0.0)) / n}
    # the run's training time holds each model's cold compile (its first step)
    e = {**est["seconds_per_seed"]}
    e["training"] = e.get("training", 0.0) + e.pop("compile", 0.0)
    return {"estimated": e, "actual": actual, "device": est.get("device"),
            "ratio_per_seed": e["per_seed"] / actual["per_seed"] if actual["per_seed"] else None}


def train_mfu(st: dict[str, Any], peak: float) -> dict[str, float]:
    """Training MFU of one model's train stats ``st`` (run.json ``encoders.*.seeds.*.train``)
    against ``peak`` FLOP/s (the bf16 GEMM ceiling): ``mfu`` (model FLOPs with causal attention
    at half, ``flops_causal_attn_half``, ÷ training seconds), ``mfu_full_attn`` (run.json's own
    count), ``mfu_after_first_step`` (the first step's FLOPs and seconds, the cold compile's,
    left out) and, on CUDA, ``mfu_median_step`` (the mean step's FLOPs after the first ÷ the
    median device step time of ``step_clock``: the steady pace, with neither the compile nor
    the slow steps a GPU shared with other work makes). A data-parallel model's FLOPs are the
    sums over its ranks (train stats ``ranks``): it divides by ranks × peak. Fields whose inputs
    are missing are left out (records from before them, one-step runs)."""
    if "flops_causal_attn_half" not in st or not peak:
        return {}
    ranks_peak = peak * st.get("ranks", 1)
    sec = st["seconds"] or math.nan
    f = st["flops_causal_attn_half"]
    out = {"mfu": f / sec / ranks_peak, "mfu_full_attn": st["flops"] / sec / ranks_peak}
    steps = st.get("steps", 0)
    first_f = st.get("first_step_flops_causal_attn_half")
    first_s = st.get("first_step_seconds") or 0.0
    if first_f is not None and steps > 1 and sec > first_s:
        out["mfu_after_first_step"] = (f - first_f) / (sec - first_s) / ranks_peak
    clock = st.get("step_clock")
    if clock and clock.get("median_ms") and steps > 1:
        # without the first step's own count (older records), every step is taken as equal
        per_step = (f - first_f) / (steps - 1) if first_f is not None else f / steps
        out["mfu_median_step"] = per_step / (clock["median_ms"] / 1e3) / ranks_peak
    return out


def speed_facts(runner: Any) -> dict[str, Any]:
    """MFU and throughput: model FLOPs per second ÷ the bf16 GEMM rate measured in this
    process (``gemm_bf16_tflops``; null on CPU, where no MFU is given). Training MFU counts
    causal attention at half (``flops_causal_attn_half``); ``mfu_full_attn`` uses run.json's
    own count (attention at full cost); ``mfu_after_first_step`` and ``mfu_median_step``
    the steady pace (``train_mfu``). Scoring: forward FLOPs of the packed scoring jobs.
    ``runner``: anything with ``gemm_tflops``, ``encoder_facts`` and ``score_facts`` (and,
    for a scaling sweep, ``suite``, ``timings`` and ``gpus``)."""
    peak = runner.gemm_tflops * 1e12 if runner.gemm_tflops else None
    train: dict[str, Any] = {}
    for label, facts in runner.encoder_facts.items():
        for seed, meta in facts.get("seeds", {}).items():
            if meta.get("trained_elsewhere"):  # no training here: nothing to time
                continue
            st = meta["train"]
            row = {"bytes_per_s": st["bytes_per_s"], "seconds": st["seconds"],
                   "first_step_seconds": st.get("first_step_seconds"), "fit_seconds": meta["fit"].get("wall_seconds"),
                   "peak_mem_bytes": st["peak_mem_bytes"]}
            if peak:
                row.update(train_mfu(st, peak))
            train[f"{label} s{seed}"] = row
    score = {}
    for label, st in runner.score_facts.items():
        # per mode (score_items' groups): FLOPs and seconds of mixed batches are shares
        modes = {m: _rates(g, peak) for m, g in st.get("groups", {}).items()}
        score[label] = {**_rates({k: v for k, v in st.items() if k != "groups"}, peak), "modes": modes}
    out = {"gemm_bf16_tflops": runner.gemm_tflops, "train": train, "score": score}
    if getattr(getattr(runner, "suite", None), "scaling", None) is not None and "train_seconds" in runner.timings:
        from harness.pipeline.sweep_speed import sweep_speed

        out["sweep"] = sweep_speed(runner.encoder_facts, runner.timings["train_seconds"], peak, runner.gpus)
    return out


def _rates(st: dict[str, Any], peak: float | None) -> dict[str, Any]:
    """A scoring job's stats with its throughput (MB/s of scored bytes) and MFU added."""
    sec = st.get("seconds") or math.nan
    out = {**st, "mb_per_s": st.get("scored_bytes", 0.0) / sec / 1e6,
           "mfu": st.get("forward_flops", 0.0) / sec / peak if peak else None}
    if st.get("device_seconds"):  # CUDA: how much of the wall the GPU spent in forwards
        out["device_busy"] = st["device_seconds"] / sec
        out["mfu_in_forwards"] = st.get("forward_flops", 0.0) / st["device_seconds"] / peak if peak else None
    return out


def record_encoder_facts(encoder_facts: dict[str, dict[str, Any]], label: str, spec: EncoderSpec, seed: int,
                         meta: dict[str, Any], extra: tuple[str, ...] = ()) -> None:
    """Put a trained model's ``meta`` into run.json's ``encoders[label]``: under its seed,
    and its size and FLOP facts (and the ``extra`` keys of ``meta``) at the top."""
    facts = encoder_facts.setdefault(label, {"name": spec.name, "config": config_to_dict(spec.config),
                                             "backbone": config_to_dict(spec.backbone), "seeds": {}})
    facts["seeds"][str(seed)] = meta
    for k in ("params_total", "params_embedding", "params_non_embedding", "flops_per_byte_train",
              "flops_per_byte_infer", "describe", *extra):
        facts[k] = meta[k]
    if meta.get("trained_elsewhere"):  # the report keeps it out of compute-matched claims
        facts["trained_elsewhere"] = True
        facts["backbone"] = None  # its own architecture: the suite's backbone does not apply


def record_bytes_per_segment(rows: list[dict[str, Any]], encoder_facts: dict[str, dict[str, Any]],
                             first_mode: str) -> None:
    """bytes per token / patch / byte on each clean eval set (BPE's "multilingual inequity"),
    from results.csv's ``rows`` into run.json's ``encoders``."""
    for r in rows:
        if r["perturbation_id"] == "clean" and r["mode"] == first_mode and r["encoder"] in encoder_facts:
            per = encoder_facts[r["encoder"]].setdefault("bytes_per_segment_by_eval", {})
            per[f"{r['dataset']} (seed {r['seed']})"] = r["bytes_per_segment"]
