"""The tables ``tokbench run`` prints at its end: where a run's time went (``phase_table``) and
each encoder's BPB per perturbation (``summary_table``)."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np


def phase_table(timings: dict[str, float], encoders: dict[str, Any]) -> str:
    """Where the wall time went: data, per-model fit / first step (cold compile) / training,
    perturbation, scoring forward, report."""
    lines = ["[time] phase                         seconds"]
    # (key, label): the indented rows are parts of the row above them
    rows = [("data_seconds", "data"), ("perturb_fit_seconds", "perturb_fit"),
            ("plan_ahead_fit_seconds", "  ahead: fits (overlapped)"),
            ("plan_ahead_plans_seconds", "  ahead: plans (overlapped)"),
            ("plan_ahead_wait_seconds", "  ahead: scoring waited"),
            ("fit_ahead_seconds", "  ahead: encoder fits (overlapped)"),
            ("fit_ahead_wait_seconds", "  ahead: training waited"),
            ("compile_ahead_seconds", "  ahead: compiling (overlapped)"),
            ("train_seconds", "models (fits, training, below)"), ("model_build_seconds", "  building them"),
            ("model_save_seconds", "  saving them"), ("model_other_seconds", "  the rest between them"),
            ("model_setup_seconds", "    loops' set-up"),
            ("model_plan_ahead_check_seconds", "    plan-ahead checks"),
            ("model_record_seconds", "    run.json"),
            ("perturb_seconds", "perturb"),
            ("analyses_prepare_seconds", "  analyses' text work"), ("score_forward_seconds", "score_forward"),
            ("score_items_seconds", "  packed jobs (forwards)"),
            ("score_flatten_seconds", "    windows made distinct"),
            ("score_compile_seconds", "    of which compiling"), ("score_cells_seconds", "  cells from scores"),
            ("score_cells_wait_seconds", "    scoring waited for them"),
            ("score_baselines_seconds", "  compressor baselines"),
            ("model_save_wait_seconds", "waiting for model files"), ("assemble_seconds", "results files"),
            ("report_seconds", "report"), ("report_load_seconds", "  reading the results"),
            ("report_tables_seconds", "  statistics"), ("report_figures_seconds", "  figures, pairwise tests"),
            ("report_page_seconds", "  the page")]
    for k, label in rows:
        if k in timings:
            lines.append(f"[time] {label:<28} {timings[k]:8.1f}")
    for label, facts in encoders.items():
        for seed, meta in facts.get("seeds", {}).items():
            if meta.get("trained_elsewhere"):  # loaded, not trained: no fit or training time
                continue
            st, fit = meta["train"], meta["fit"]
            comp = st.get("compile_graph_seconds", 0.0) + st.get("compile_kernels_seconds", 0.0)
            lines.append(f"[time] {label + ' s' + seed:<20} fit {fit.get('wall_seconds', 0.0):6.1f}  "
                         f"first step {st.get('first_step_seconds', 0.0):6.1f}  train {st['seconds']:7.1f}"
                         + (f"  (compiling {comp:5.1f})" if comp else ""))
    if "total_seconds" in timings:
        lines.append(f"[time] {'total':<28} {timings['total_seconds']:8.1f}")
    return "\n".join(lines)


def summary_table(rows: list[dict[str, Any]]) -> str:
    """A short terminal table per encoder, eval set and mode: clean BPB and the worst ΔBPB under
    perturbation — of ``bpb`` in clean_target mode (scored bytes identical to the clean cell),
    of ``bpb_clean`` in full mode (NLL per clean byte, so byte-count changes cannot move it)."""
    if not rows:
        return "(no results)"
    models = [r for r in rows if r.get("kind", "model") != "baseline"]
    baselines = [r for r in rows if r.get("kind", "model") == "baseline"]
    lines = _summary_lines(models) if models else []
    if baselines:
        # compressors are reference points, not models: kept apart as the report keeps them
        base = sorted({(r["encoder"], r["dataset"], r["mode"], float(r["bpb"])) for r in baselines
                       if r["perturbation_id"] == "clean"})
        lines.append("compressor baselines (not models; clean text):")
        lines += [f"  {enc:<20} {ds:<16} {mode:<13} {bpb:9.3f}" for enc, ds, mode, bpb in base]
    if any(r.get("objective", "ar") == "mdm" for r in models):
        lines.append("(an mdm encoder's bpb is its ELBO: an upper bound)")
    return "\n".join(lines)


# What each mode's Δ measures, printed above its rows: clean_target leads (the report's
# robustness headline); full mode's Δ is mostly the cost of encoding inserted characters, and a
# reader who saw "+46.6" first would take it for the opposite of the report's answer.
SUMMARY_MODES = {
    "clean_target": "clean_target (robustness: the clean continuation scored after a perturbed "
                    "prefix; Δ = bpb − clean bpb)",
    "full": "full (the perturbed text itself scored per clean byte: Δ is mostly the cost of "
            "encoding the changed characters, not robustness)",
}


def _summary_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The per-model rows of ``summary_table``: one block per mode, clean_target first, each
    under a line saying what its Δ measures."""
    by: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        metric = "bpb" if r["mode"] == "clean_target" else "bpb_clean"
        by[(r["encoder"], r["dataset"], r["mode"])][f"{r['perturbation_id']}@{r['severity']:g}"].append(float(r[metric]))
    order = list(SUMMARY_MODES)
    modes = sorted({m for _, _, m in by}, key=lambda m: (order.index(m) if m in order else len(order), m))
    lines = [f"{'encoder':<22} {'dataset':<16} {'clean bpb':>9} {'worst Δ':>8}  worst perturbation"]
    for mode in modes:
        lines.append(f"-- {SUMMARY_MODES.get(mode, mode)}")
        for (enc, ds, m), cells in sorted(by.items()):
            if m != mode:
                continue
            clean = float(np.mean(cells.get("clean@0", [math.nan])))
            worst, wname = -math.inf, "-"
            for k, v in cells.items():
                if not k.startswith("clean@") and float(np.mean(v)) - clean > worst:
                    worst, wname = float(np.mean(v)) - clean, k
            ws = f"{worst:+.3f}" if math.isfinite(worst) else "-"
            lines.append(f"{enc:<22} {ds:<16} {clean:9.3f} {ws:>8}  {wname}")
    lines.append("(lower is better)")
    return lines
