"""The report's scaling section: IsoFLOP curves, frontiers, parity table, robustness vs compute.

    sec = scaling_section(results_frame, out_dir / "figures", n_boot=200, seed=0)
    if sec is not None: html += sec.html; md += sec.markdown

Rendered from results rows alone (``reports.scaling`` does the fitting); returns None when the
results hold no sweep rows (``flop_budget`` empty), so ordinary runs render as before. Kept apart
from ``reports.render`` on purpose: the main report hooks it in with one call. Tables, Markdown
escaping and the template environment (templates/sections/scaling.html.j2, the shared table
macro) are render's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import markupsafe
import numpy as np
import pandas as pd

from reports.blocks import FigureOut, Table, _jinja, md_table, md_text, save_figure
from reports.fmt import ci, num
from reports.scaling import (
    CONVENTIONS,
    MAX_CI_DECADES,
    PoolingError,
    ScalingFit,
    fit_scaling,
    fmt_flops,
)

CONV_TEXT = {
    "half": "causal attention counted at half cost (train_flops)",
    "full": "attention counted at full cost (train_flops_full_attn)",
}


@dataclass
class ScalingSection:
    """The rendered section: an HTML fragment (already escaped), Markdown, and the fit itself."""

    fit: ScalingFit
    html: markupsafe.Markup
    markdown: str
    figures: list[FigureOut] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)


def trend_reading(lo: float, hi: float) -> str:
    """How a robustness slope's CI reads: the gap grows (CI above 0), shrinks (below 0), or a
    tie with no trend (CI holds 0); "—" without a CI (no resamples)."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "—"
    if lo > 0:
        return "gap grows"
    if hi < 0:
        return "gap shrinks"
    return "tie (no trend)"


def build_tables(fit: ScalingFit) -> list[Table]:
    """The section's tables as formatted text cells (escaping happens in the template)."""
    lvl = f"{fit.level:.0%}"
    out = []
    rows = []
    for r in fit.parity.itertuples():
        withheld = not math.isfinite(r.c_lo) and not r.e_identified  # E on a bound: no interval
        ci_cell = ("unbounded" if r.ci_decades > MAX_CI_DECADES else
                   "not given (E on a bound)" if withheld else ci(r.c_lo, r.c_hi, ".2g"))
        rows.append([r.dataset, r.convention + (" (headline)" if r.convention == fit.headline else ""),
                     r.byte, r.bpe, r.status, fmt_flops(r.c_star), ci_cell,
                     num(r.frac_inside, ".0%"), r.statement])
    out.append(Table("scaling_parity", "Parity: where a byte-level encoder reaches BPE",
                      ["eval set", "FLOPs", "byte-level", "BPE", "status", "C* (FLOPs)", f"{lvl} CI",
                       "resamples inside range", "statement"], rows,
                      "C*: training compute where the two fitted frontiers L(C) = E + A·C^(−α) cross "
                      "(E is shared, so it cancels). 'outside' = no crossing within the budgets run; "
                      "C* is then an extrapolation. The CI comes from bootstrap resamples that refit "
                      "vertices, frontier and crossing each time; one wider than "
                      f"{MAX_CI_DECADES:g} decades reads 'unbounded'."))
    rows = []
    for r in fit.exponents.itertuples():
        e = fit.irreducible[(fit.irreducible.dataset == r.dataset) & (fit.irreducible.convention == r.convention)]
        ident = bool(e.identified.iloc[0]) if len(e) and "identified" in e.columns else True
        unid = " (not identified: E on a bound of its fit)"
        e_txt = ("—" if not len(e) else f"{num(e.E.iloc[0])} {ci(e.E_lo.iloc[0], e.E_hi.iloc[0])}" if ident
                 else f"{num(e.E.iloc[0])}{unid}")
        a_txt = (f"{num(r.alpha)} {ci(r.alpha_lo, r.alpha_hi)}" if ident or not math.isfinite(r.alpha)
                 else f"{num(r.alpha)} (rests on E's bound)")
        rows.append([r.dataset, r.convention, r.encoder, a_txt,
                     f"{num(math.exp(r.lnA), '.3g') if math.isfinite(r.lnA) else '—'}", e_txt,
                     f"{num(r.a)} {ci(r.a_lo, r.a_hi)}", f"{num(r.b)} {ci(r.b_lo, r.b_hi)}"])
    out.append(Table("scaling_exponents", "Frontier and allocation exponents",
                      ["eval set", "FLOPs", "encoder", f"α [{lvl} CI]", "A", f"E (shared) [{lvl} CI]",
                       f"a: N_opt ∝ C^a [{lvl} CI]", f"b: D_opt ∝ C^b [{lvl} CI]"], rows,
                      "L(C) = E + A·C^(−α) in bits per byte, C in training FLOPs; N = non-embedding "
                      "parameters, D = training bytes. Where the shared E sits on a bound of its fit "
                      "(0, or the lowest compute-optimal loss) these budgets do not identify it: E, α "
                      "and A are shown without an interval (one would not hold the truth at its "
                      "level); a and b do not depend on E."))
    rows = []
    for r in fit.law.itertuples():
        rows.append([r.dataset, r.encoder, f"{num(r.E)} {ci(r.E_lo, r.E_hi)}", f"{num(r.a)} {ci(r.a_lo, r.a_hi)}",
                     f"{num(r.b)} {ci(r.b_lo, r.b_hi)}", f"{r.A:.3g}", f"{r.B:.3g}", num(r.rms, ".3f"),
                     str(r.n_points)])
    if rows:
        out.append(Table("scaling_law", "L(N, D) over every point (cross-check of E)",
                          ["eval set", "encoder", f"E (shared) [{lvl} CI]", f"a [{lvl} CI]", f"b [{lvl} CI]",
                           "A", "B", "rms (BPB)", "points"], rows,
                          "L(N, D) = E + A·N^(−a) + B·D^(−b) in bits per byte, least squares over every "
                          "ladder point of every budget (Hoffmann et al.'s approach 3), one E for all "
                          "encoders; N = non-embedding parameters, D = training bytes. The frontier's E "
                          "rests on the IsoFLOP vertices alone; this one on all points, with intervals "
                          "from the same resamples. Where the two disagree, E is not determined by "
                          "these budgets."))
    rows = []
    for r in fit.optima.itertuples():
        rows.append([r.dataset, r.encoder, fmt_flops(r.budget), f"{r.n_opt:.3g}", f"{r.d_opt:.3g}",
                     num(r.passes, ".1f"), num(r.loss_opt), fmt_flops(r.c_half), fmt_flops(r.c_full),
                     r.edge or "—", str(r.n_points)])
    out.append(Table("scaling_optima", "Compute-optimal point per budget (IsoFLOP vertices)",
                      ["eval set", "encoder", "budget", "N_opt", "D_opt (bytes)", "passes at D_opt",
                       "BPB at N_opt", "C (half)", "C (full)", "flag", "points"], rows,
                      "flag: below/above = the minimum is on (or beyond) the ladder's first/last rung — "
                      "the vertex is clamped to the ladder and the ladder should be widened there; "
                      "flat = no upward curvature, the best observed point is used. passes at D_opt: "
                      "D_opt ÷ the training text's bytes (run.json; — when unknown)."))
    rows = []
    for r in fit.robustness.itertuples():
        rows.append([r.dataset, r.encoder, r.perturbation, f"{num(r.slope, '+.4f')}",
                     ci(r.slope_lo, r.slope_hi, "+.4f"), trend_reading(r.slope_lo, r.slope_hi)])
    out.append(Table("scaling_robustness", "Robustness vs compute",
                      ["eval set", "encoder", "perturbation", "ΔBPB per decade of C", f"{lvl} CI",
                       "reading"], rows,
                      "ΔBPB: clean_target BPB under the perturbation minus clean, at the fitted N_opt of "
                      "each budget; slope against log10 C (headline FLOPs). Negative = the robustness "
                      f"gap shrinks with compute; a slope whose {lvl} CI holds 0 is a tie with no "
                      "trend."))
    return out


# ---------------------------------------------------------------------------------------------
# Figures


def make_figures(fit: ScalingFit, dataset: str) -> list[tuple[str, str, str, Any]]:
    """(key, title, caption, matplotlib Figure) for one eval set."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # encoder labels and eval-set names are data: a '$' prints as itself, never as mathtext
    matplotlib.rcParams["text.parse_math"] = False
    encs = sorted(fit.optima.encoder.unique())
    from reports.figures import palette  # the report's colours

    colors = palette(encs)
    prof = fit.profiles[fit.profiles.dataset == dataset]
    opt = fit.optima[fit.optima.dataset == dataset]
    out = [_isoflop_figure(plt, prof, opt, encs, dataset),
           _frontier_figure(plt, fit, opt, encs, colors, dataset)]
    robustness = _robustness_figure(plt, fit, encs, colors, dataset)
    if robustness is not None:
        out.append(robustness)
    return out


def _isoflop_figure(plt: Any, prof: pd.DataFrame, opt: pd.DataFrame, encs: list[str],
                    dataset: str) -> tuple[str, str, str, Any]:
    """IsoFLOP profiles of one eval set: BPB vs N per budget with the fitted parabola, one
    panel per encoder."""
    # IsoFLOP curves: one panel per encoder, one colour per budget (light → dark = more compute)
    fig, axes = plt.subplots(1, len(encs), figsize=(4.2 * len(encs), 3.4), squeeze=False,
                             constrained_layout=True)
    for ax, enc in zip(axes[0], encs):
        p, o = prof[prof.encoder == enc], opt[opt.encoder == enc]
        budgets = sorted(p.budget.unique())
        cmap = plt.get_cmap("viridis")
        for i, b in enumerate(budgets):
            col = cmap(0.1 + 0.8 * i / max(1, len(budgets) - 1))
            g = p[p.budget == b]
            ax.plot(g.n, g.loss, "o", color=col, ms=4, label=f"{fmt_flops(b)}")
            c2, c1, c0 = g.c2.iloc[0], g.c1.iloc[0], g.c0.iloc[0]
            if math.isfinite(c2):
                xs = np.linspace(np.log(g.n.min()), np.log(g.n.max()), 60)
                ax.plot(np.exp(xs), c2 * xs**2 + c1 * xs + c0, "-", color=col, lw=1)
            ob = o[o.budget == b]
            if len(ob):
                flagged = bool(ob.edge.iloc[0])
                ax.plot(ob.n_opt, ob.loss_opt, "*", ms=11, mec="k",
                        mfc="none" if flagged else col, zorder=5)
        ax.set_xscale("log")
        ax.set_xlabel("non-embedding parameters N")
        ax.set_ylabel("clean BPB")
        ax.set_title(enc)
        ax.legend(title="budget (FLOPs)", fontsize=7, title_fontsize=7)
    return (f"scaling_isoflop_{dataset}", f"IsoFLOP profiles ({dataset})",
            "BPB vs parameters at each FLOP budget, with the fitted parabola in ln N; stars mark the "
            "compute-optimal vertex (hollow = flagged at the ladder's edge).", fig)


def _frontier_figure(plt: Any, fit: ScalingFit, opt: pd.DataFrame, encs: list[str],
                     colors: dict[str, Any], dataset: str) -> tuple[str, str, str, Any]:
    """The compute-optimal frontier of one eval set with its bootstrap bands, one panel per
    FLOP convention."""
    # Frontier per encoder, log-log, fit and bootstrap band; one panel per convention
    fig, axes = plt.subplots(1, len(CONVENTIONS), figsize=(5.0 * len(CONVENTIONS), 3.6), squeeze=False,
                             constrained_layout=True)
    for ax, conv in zip(axes[0], CONVENTIONS):
        fr = fit.frontier.get(dataset, {}).get(conv)
        for enc in encs:
            o = opt[opt.encoder == enc]
            c = o[f"c_{conv}"].to_numpy(float)
            ax.plot(c, o.loss_opt, "o", color=colors[enc], label=enc)
            if fr is not None and enc in fr.alpha:
                grid = np.linspace(np.log(c.min()) - 0.5, np.log(c.max()) + 0.5, 80)
                ax.plot(np.exp(grid), fr.predict(enc, grid), "-", color=colors[enc], lw=1.2)
            band = fit.bands.get(dataset, {}).get(conv, {}).get(enc)
            if band is not None:
                ax.fill_between(np.exp(band[0]), band[1], band[2], color=colors[enc], alpha=0.18, lw=0)
        if fr is not None and math.isfinite(fr.e):
            ax.axhline(fr.e, color="0.5", ls=":", lw=1, label=f"E = {fr.e:.3f}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"training FLOPs ({conv})")
        ax.set_ylabel("BPB at N_opt")
        ax.set_title(f"frontier, {conv} attention" + (" (headline)" if conv == fit.headline else ""))
        ax.legend(fontsize=7)
    return (f"scaling_frontier_{dataset}", f"Compute-optimal frontier ({dataset})",
            f"L(C) = E + A·C^(−α) per encoder, one E shared; bands are {fit.level:.0%} bootstrap "
            "bands of the fitted curve. Left: causal attention at half cost (headline); right: at "
            "full cost.", fig)


def _robustness_figure(plt: Any, fit: ScalingFit, encs: list[str], colors: dict[str, Any],
                       dataset: str) -> tuple[str, str, str, Any] | None:
    """ΔBPB at N_opt vs compute, one panel per perturbation; None without robustness points."""
    rp = fit.robustness_points[fit.robustness_points.dataset == dataset]
    if not len(rp):
        return None
    perts = sorted(rp.perturbation.unique())
    fig, axes = plt.subplots(1, len(perts), figsize=(3.8 * len(perts), 3.2), squeeze=False,
                             constrained_layout=True)
    for ax, pert in zip(axes[0], perts):
        for enc in encs:
            g = rp[(rp.perturbation == pert) & (rp.encoder == enc)].sort_values("c")
            if len(g):
                ax.plot(g.c, g.delta, "o-", color=colors[enc], label=enc, ms=4)
        ax.set_xscale("log")
        ax.axhline(0, color="0.6", lw=0.8)
        ax.set_xlabel("training FLOPs (half)")
        ax.set_ylabel("ΔBPB at N_opt")
        ax.set_title(pert, fontsize=9)
        ax.legend(fontsize=7)
    return (f"scaling_robustness_{dataset}", f"Robustness vs compute ({dataset})",
            "clean_target ΔBPB under each perturbation at the fitted N_opt of each budget.", fig)


# ---------------------------------------------------------------------------------------------

def _markdown(fit: ScalingFit, tables: list[Table], figs: list[FigureOut]) -> str:
    L = ["## Scaling (compute-matched)", "",
         f"Headline FLOPs: {CONV_TEXT[fit.headline]}. Intervals: {fit.level:.0%} bootstrap, {fit.n_boot} "
         "resamples refitting the whole chain.", ""]
    L += [f"> {md_text(n)}" for n in fit.notes] + ([""] if fit.notes else [])
    L += [f"![{md_text(f.title)}]({f.file})" for f in figs] + [""]
    L += [md_table(t) for t in tables if t.rows]
    return "\n".join(L).rstrip() + "\n"


def scaling_section(results: pd.DataFrame, fig_dir: Path | None = None, *, n_boot: int = 200, seed: int = 0,
                    svg: bool = False) -> ScalingSection | None:
    """Fit and render the scaling section; None when ``results`` has no sweep rows.

    results: results.csv rows (one run, or several runs of one grid concatenated). fig_dir: where
    PNG (and SVG if asked) files go (figure paths in the Markdown are ``figures/<key>.png``).

    Rows that may not be pooled (``reports.scaling.pool_points``: the same grid point with two
    different results, different eval or training text) give a section that says so and shows no
    fit, so the rest of a merged report still renders and the refusal sits where the fits would."""
    try:
        fit = fit_scaling(results, n_boot=n_boot, seed=seed)
    except PoolingError as err:
        return _refused_section(str(err), n_boot)
    if fit.empty:
        return None
    figs: list[FigureOut] = []
    for dataset in sorted(fit.optima.dataset.unique()):
        for key, title, caption, fig in make_figures(fit, dataset):
            safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in key)
            figs.append(save_figure(fig, safe, title, caption, fig_dir, svg, dpi=110))
    tables = build_tables(fit)
    other = next(c for c in CONVENTIONS if c != fit.headline)
    html = _jinja().get_template("sections/scaling.html.j2").render(
        headline_text=CONV_TEXT[fit.headline], other_text=CONV_TEXT[other], level=f"{fit.level:.0%}",
        n_boot=fit.n_boot, notes=fit.notes, tables=tables, figures=figs)
    return ScalingSection(fit, markupsafe.Markup(html), _markdown(fit, tables, figs), figs, tables)


def _refused_section(message: str, n_boot: int) -> ScalingSection:
    """The section when the sweep rows may not be pooled: the refusal, no tables, no figures."""
    fit = fit_scaling(pd.DataFrame(), n_boot=n_boot)  # empty tables of the right shape
    fit.notes = [message]
    other = next(c for c in CONVENTIONS if c != fit.headline)
    html = _jinja().get_template("sections/scaling.html.j2").render(
        headline_text=CONV_TEXT[fit.headline], other_text=CONV_TEXT[other],
        level=f"{fit.level:.0%}", n_boot=fit.n_boot, notes=fit.notes, tables=[], figures=[])
    return ScalingSection(fit, markupsafe.Markup(html), _markdown(fit, [], []), [], [])
