"""The context-fragility panel (issue #18): BPB by permutation type and block size, per encoder,
with the compressor baselines as reference lines. From results.csv alone (no torch).

Rows are told apart by the columns ``kind`` (model | baseline), ``permutation`` (none | global |
inter_block | intra_block) and ``block_bytes``; an encoder's variants share the label before
``~`` (``bytes~inter_block-16`` is ``bytes`` under that permutation). The headline is the
permuted minus the original BPB, per model and per compressor, on clean text in full mode.
Compressor rows (kind = baseline) appear only here: ``split_baselines`` keeps them out of every
other table, winner statement and pairwise test.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from core.metrics import bpb
from reports.fmt import num

KIND_ORDER = {"none": 0, "global": 1, "inter_block": 2, "intra_block": 3}
COLUMNS = ["dataset", "encoder", "kind", "permutation", "block bytes", "BPB", "Δ vs original"]


def fill_columns(df: pd.DataFrame) -> pd.DataFrame:
    """Defaults for results files written before these columns existed: every row a model on
    the original stream."""
    df = df.copy()
    if "kind" not in df.columns:
        df["kind"] = "model"
    df["kind"] = df["kind"].replace("", "model")
    if "permutation" not in df.columns:
        df["permutation"] = "none"
    df["permutation"] = df["permutation"].replace("", "none")
    if "block_bytes" not in df.columns:
        df["block_bytes"] = np.nan
    df["block_bytes"] = pd.to_numeric(df["block_bytes"].replace("", np.nan), errors="coerce")
    bad = ~df["kind"].isin(["model", "baseline"])
    if bad.any():
        raise ValueError(f"results.csv: column 'kind' has {df['kind'][bad].iloc[0]!r}; "
                         "expected model or baseline")
    bad = ~df["permutation"].isin(list(KIND_ORDER))
    if bad.any():
        raise ValueError(f"results.csv: column 'permutation' has {df['permutation'][bad].iloc[0]!r}; "
                         f"expected one of {', '.join(KIND_ORDER)}")
    return df


def split_baselines(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(model rows, baseline rows) of a results table with ``fill_columns`` applied."""
    is_base = df["kind"] == "baseline"
    return df[~is_base].reset_index(drop=True), df[is_base].reset_index(drop=True)


def permutation_summary(models: pd.DataFrame, baselines: pd.DataFrame) -> pd.DataFrame:
    """BPB per (dataset, base encoder, permutation, block size) on clean text in full mode,
    pooled over seeds as ΣNLL / (ln 2 · Σ bytes), with the difference to the same encoder's
    original stream. Empty when the run has neither permutations nor baselines."""
    both = pd.concat([models, baselines], ignore_index=True)
    if not len(both) or (not len(baselines) and (both["permutation"] == "none").all()):
        return pd.DataFrame()
    d = both[(both["perturbation_id"] == "clean") & (both["mode"] == "full")].copy()
    if not len(d):
        return pd.DataFrame()
    d["base"] = d["encoder"].astype(str).str.split("~").str[0]
    d["bb"] = d["block_bytes"].fillna(0).astype(int)
    g = (d.groupby(["dataset", "base", "kind", "permutation", "bb"], sort=False)
         .agg(nll=("nll_nats", "sum"), n_bytes=("n_bytes", "sum")).reset_index())
    g["bpb"] = bpb(g["nll"], g["n_bytes"])
    orig = g[g["permutation"] == "none"].set_index(["dataset", "base"])["bpb"]
    g["delta"] = [r.bpb - orig.get((r.dataset, r.base), np.nan) for r in g.itertuples()]
    g["order"] = g["permutation"].map(KIND_ORDER)
    base_order = {b: i for i, b in enumerate(dict.fromkeys(d["base"]))}
    g["base_order"] = g["base"].map(base_order)
    g["kind_order"] = (g["kind"] == "baseline").astype(int)  # models first, then compressors
    g = g.sort_values(["dataset", "kind_order", "base_order", "order", "bb"], kind="stable")
    return g.drop(columns=["order", "base_order", "kind_order"]).reset_index(drop=True)


def table_rows(summary: pd.DataFrame) -> list[list[str]]:
    """Display rows for ``COLUMNS`` (numeric columns: block bytes, BPB, Δ)."""
    return [[str(r.dataset), str(r.base), str(r.kind), str(r.permutation),
             str(r.bb) if r.bb else "", num(r.bpb), "" if r.permutation == "none" else num(r.delta, "+.3f")]
            for r in summary.itertuples()]


NOTE = ("Clean text, full mode, pooled over seeds. A permuted model is trained and scored on the "
        "same static permutation of every window (it learns the permuted stream); blocks are "
        "in bytes and end on token boundaries for BPE. Compressors (kind baseline: DEFLATE, bz2, "
        "lzma on raw streams, C(context ‖ x) − C(context)) see the same windows permuted byte-"
        "wise; they are reference lines, never candidates in winner statements or tests. Δ: "
        "permuted minus original BPB of the same encoder or compressor.")


def permutation_figure(summary: pd.DataFrame, colors: dict[str, Any]) -> Any:
    """BPB vs block size (log scale), one panel per block kind, pooled over eval sets; each
    encoder's original (thin solid) and global (dotted) BPB as horizontal lines; compressors
    dashed in grey tones. None when there is nothing to plot."""
    if not len(summary):
        return None
    import matplotlib.pyplot as plt  # only when rendering
    from matplotlib.lines import Line2D

    s = (summary.groupby(["base", "kind", "permutation", "bb"], sort=False)
         .agg(nll=("nll", "sum"), n_bytes=("n_bytes", "sum")).reset_index())
    s["bpb"] = bpb(s["nll"], s["n_bytes"])
    kinds = [k for k in ("inter_block", "intra_block") if (s["permutation"] == k).any()] or ["none"]
    fig, axes = plt.subplots(1, len(kinds), figsize=(max(6.5, 4.2 * len(kinds)), 3.4),
                             squeeze=False, constrained_layout=True)
    greys = ["0.2", "0.45", "0.65"]
    bases = list(dict.fromkeys(s["base"]))
    style_of: dict[str, tuple[Any, str]] = {}
    for i, base in enumerate(bases):
        if (s[s["base"] == base]["kind"] == "baseline").any():
            style_of[base] = (greys[len([b for b in style_of if style_of[b][1] == "--"]) % 3], "--")
        else:
            style_of[base] = (colors.get(base, f"C{i}"), "-")
    for ax, kind in zip(axes.flat, kinds):
        for base in bases:
            b = s[s["base"] == base]
            color, style = style_of[base]
            p = b[b["permutation"] == kind].sort_values("bb")
            if len(p):
                ax.plot(p["bb"], p["bpb"], style, marker="o", ms=4, lw=1.6, color=color, label=base)
            for perm, ls in (("none", "-"), ("global", ":")):
                h = b[b["permutation"] == perm]
                if len(h):
                    ax.axhline(float(h["bpb"].iloc[0]), ls=ls, lw=0.9, color=color, alpha=0.8)
        if kind != "none":
            ax.set_xscale("log", base=2)
        ax.set_title(kind if kind != "none" else "original")
        ax.set_xlabel("block size (bytes)")
        ax.set_ylabel("bits per byte")
    # one legend entry per encoder / compressor, also for those drawn only as horizontal lines
    handles = [Line2D([], [], color=style_of[b][0], ls=style_of[b][1], marker="o", ms=4, lw=1.6)
               for b in bases]
    fig.legend(handles, bases, loc="outside lower center", ncols=min(6, len(bases)), frameon=False)
    fig.suptitle("Context fragility: horizontal lines = original (solid) and global (dotted)",
                 fontsize=10)
    return fig
