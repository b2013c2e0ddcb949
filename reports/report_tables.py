"""The report's tables: numbers formatted for people (``f3``, ``fci``, ``fp``, ...) and each
table of the report (``build_tables``; the matrices, the efficiency and bucket tables) as a
``reports.blocks.Table`` built from ``reports.tables.Tables``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

import pandas as pd

from reports import load
from reports.blocks import (
    Table,
)
from reports.comparisons import ALPHA, pair_matrix, significant
from reports.findings import INTERVAL_NOTE, covers_phrase
from reports.fmt import p_phrase, pvalue, sig3
from reports.tables import Tables, clean_buckets

# ----------------------------------------------------------------------------- formatting


def _ok(x: Any) -> bool:
    """False for None / NaN / NA (shown as "—")."""
    try:
        return not pd.isna(x)
    except (TypeError, ValueError):  # array-likes: pd.isna gives an array
        return True


def f3(x: Any) -> str:
    """Three decimals (BPB; bytes per segment, as in the BLT fit log); "—" for None / NaN / NA.
    An infinite value shows as "inf" (``fmt.num`` shows "—" for it)."""
    return f"{float(x):.3f}" if _ok(x) else "—"


def fsign(x: Any) -> str:
    """A signed difference with three significant digits (``reports.fmt.sig3``)."""
    return sig3(x) if _ok(x) else "—"


def fpct(x: Any) -> str:
    """A signed percentage with three significant digits."""
    return f"{sig3(100 * float(x))} %" if _ok(x) else "—"


def fci(lo: Any, hi: Any, sign: bool = False) -> str:
    if not (_ok(lo) and _ok(hi)):
        return "—"
    f = fsign if sign else f3
    return f"[{f(lo)}, {f(hi)}]"


def _signed_ci(x: Any, lo: Any, hi: Any) -> str:
    """A signed difference with its CI after it, or alone where there is none (no samples)."""
    return f"{fsign(x)} {fci(lo, hi, True)}" if _ok(lo) and _ok(hi) else fsign(x)


def fp(p: Any) -> str:
    return pvalue(p) if _ok(p) else "—"


def fsi(x: Any, unit: str = "") -> str:
    """1.2 M, 3.4 G … (decimal prefixes)."""
    if not _ok(x):
        return "—"
    x = float(x)
    for div, pre in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g} {pre}{unit}".rstrip()
    return f"{x:.3g} {unit}".rstrip()


def fbytes(x: Any) -> str:
    """Bytes in the largest binary unit that keeps the number ≥ 1: three significant digits,
    whole numbers from 1000 to 1023 (never "1.01e+03 MiB")."""
    if not _ok(x):
        return "—"
    x = float(x)
    for div, pre in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if x >= div:
            v = x / div
            return f"{v:.0f} {pre}" if v >= 999.5 else f"{v:.3g} {pre}"
    return f"{x:.0f} B"


def fsev(x: Any) -> str:
    return f"{float(x):g}" if _ok(x) else "—"


# ----------------------------------------------------------------------------- tables


def spec_table(key: str, title: str, spec: Sequence[tuple[str, Callable[[Any], str], bool]],
               df: pd.DataFrame, note: str = "", collapsed: bool = False) -> Table:
    """A ``Table`` of ``df``'s rows, one column per ``spec`` item (header, the row's cell text,
    whether it is numeric)."""
    rows = [[fn(r) for _, fn, _ in spec] for r in df.itertuples(index=False)] if len(df) else []
    return Table(key, title, [c for c, _, _ in spec], rows, note,
                 {i for i, (_, _, num) in enumerate(spec) if num}, collapsed)


def _keyed(t: Tables, key: str, title: str, df: pd.DataFrame, keys: list[tuple[str, str]],
           spec: Sequence[tuple[str, Callable[[Any], str], bool]], note: str = "",
           collapsed: bool = False) -> Table:
    """A table sorted by its key columns in run order (``_ordered``), which lead it as text
    columns; keys: (heading, column) pairs."""
    lead = [(head, attrgetter(col), False) for head, col in keys]
    return spec_table(key, title, [*lead, *spec], _ordered(t, df, [c for _, c in keys]), note,
                  collapsed)


def _seeds_note(t: Tables) -> str:
    """The seeds behind each encoder's numbers, counted per encoder: runs merged by ``tokbench
    compare`` may hold one seed each, which is not "pooled over 2 seeds"."""
    counts = t.encoder_seeds or {e: t.n_seeds for e in t.encoders}
    distinct = sorted(set(counts.values()))
    if distinct == [1]:
        return ("One seed per encoder: every CI covers the documents only, not the variance "
                "between trained models; no across-seed sd.")
    boot = ("CI: t-interval over seeds × documents (docs/report.md), covering training variance "
            "where an encoder has several seeds and the documents only where it has one")
    if len(distinct) == 1:
        return (f"BPB pooled over {distinct[0]} seeds per encoder; {boot}; mean ± sd: across "
                "seeds.")
    per = ", ".join(f"{e}: {n}" for e, n in counts.items())
    return (f"Seeds differ between encoders ({per}); each encoder's BPB is pooled over its own "
            f"seeds; {boot}; mean ± sd: across seeds, where there are several.")


def _verdict_table(t: Tables) -> Table:
    """The per-encoder verdict table: clean BPB, seed spread, mean and worst degradation,
    cost."""
    seeds_note = _seeds_note(t)
    v = t.verdict
    return spec_table("verdict", "Per encoder", [
        ("encoder", lambda r: r.encoder, False),
        (f"clean BPB ({t.level_mode}) [95 % CI]",
         lambda r: f"{f3(r.clean_bpb)} {fci(r.clean_lo, r.clean_hi)}", True),
        ("seeds: mean ± sd", lambda r: (f"{f3(r.seed_mean)} ± {f3(r.seed_sd)}"
                                        if _ok(r.seed_sd) else "—"), True),
        (f"mean ΔBPB ({t.primary_mode}) [95 % CI]",
         lambda r: _signed_ci(r.mean_delta, getattr(r, "mean_lo", None), getattr(r, "mean_hi", None)),
         True),
        ("rel.", lambda r: fpct(r.mean_rel), True),
        ("ΔBPB / +10 % edits", lambda r: fsign(r.mean_slope / 10
                                                if _ok(r.mean_slope) else None), True),
        ("worst case", lambda r: (f"{fsign(r.worst_delta)} ({r.worst})" if r.worst else "—"),
         True),
        ("FLOPs/byte", lambda r: fsi(r.flops_per_byte), True),
        ("params", lambda r: fsi(r.params), True),
    ], v, note=f"Lower BPB is better; ΔBPB > 0 is degradation. Robustness columns use "
               f"{t.primary_mode} mode at each perturbation's highest severity; the mean ΔBPB's "
               "CI is paired over the documents scored in all of those cells. "
               f"{seeds_note}")


def _robustness_tables(t: Tables) -> dict[str, Table]:
    """Per mode: the robustness, family and degradation-matrix tables (keys suffixed
    ``_<mode>`` for modes other than the primary one)."""
    out: dict[str, Table] = {}
    rob_note = ("ΔBPB = BPB(perturbed) − BPB(clean) on the same eval sets and seeds; the CI is "
                "paired (perturbed and clean NLL of a document taken together) over seeds × "
                "documents. Slope: least-squares slope of BPB on measured character edit rate, "
                "clean point included.")
    # The primary mode leads; every other mode (full, when clean_target is primary) gets its own
    # tables in a separate section, because its numbers measure something else (FULL_MODE_NOTE).
    for mode in t.modes:
        sfx = "" if mode == t.primary_mode else f"_{mode}"
        rob = t.robustness[t.robustness["mode"] == mode] if len(t.robustness) else t.robustness
        fam = t.families[t.families["mode"] == mode] if len(t.families) else t.families
        out["robustness" + sfx] = _keyed(
            t, "robustness" + sfx, f"Robustness per perturbation ({mode})", rob,
            [("perturbation", "perturbation_id"), ("encoder", "encoder")], [
                ("clean BPB", lambda r: f3(r.clean), True),
                ("top severity", lambda r: fsev(r.top_severity), True),
                ("edit rate", lambda r: fpct(r.edit_rate_top).lstrip("+"), True),
                ("ΔBPB", lambda r: fsign(r.delta_top), True),
                ("95 % CI", lambda r: fci(r.delta_top_lo, r.delta_top_hi, True), True),
                ("rel.", lambda r: fpct(r.rel_top), True),
                ("slope / +10 % edits", lambda r: fsign(r.slope / 10 if _ok(r.slope) else None),
                 True),
                ("ΔBPB by severity", lambda r: r.curve, False),
            ], note=rob_note, collapsed=len(rob) > 40)
        out["families" + sfx] = _keyed(
            t, "families" + sfx, f"Robustness per perturbation family ({mode})", fam,
            [("family", "family"), ("encoder", "encoder")], [
                ("perturbations", lambda r: str(r.n_perturbations), True),
                ("mean ΔBPB", lambda r: fsign(r.mean_delta), True),
                ("mean rel.", lambda r: fpct(r.mean_rel), True),
                ("mean slope / +10 %", lambda r: fsign(r.mean_slope / 10
                                                       if _ok(r.mean_slope) else None), True),
                ("worst", lambda r: r.worst, False),
                ("worst ΔBPB", lambda r: fsign(r.worst_delta), True),
            ])
        out["matrix" + sfx] = degradation_matrix(t, mode)
    return out


def _anomalies_table(t: Tables) -> Table:
    """Cells where a perturbation significantly improves an encoder's BPB."""
    return spec_table("anomalies", "Anomalies: perturbations that improve an encoder", [
        ("mode", lambda r: r.mode, False),
        ("perturbation", lambda r: f"{r.perturbation_id} @ {fsev(r.severity)}", False),
        ("encoder", lambda r: r.encoder, False),
        ("ΔBPB", lambda r: fsign(r.delta), True),
        ("95 % CI", lambda r: fci(r.delta_lo, r.delta_hi, True), True),
        ("p (Holm)", lambda r: fp(r.p_delta_holm), True),
        ("docs", lambda r: f"{r.n_docs:.0f}" if _ok(r.n_docs) else "—", True),
    ], t.anomalies, note=("Cells whose ΔBPB is significantly below zero: a paired test of "
                          "perturbed vs clean NLL on the same documents and seeds (t over seeds × "
                          f"documents), Holm-adjusted over every ΔBPB-vs-zero test in this report, p < {ALPHA}, "
                          "and a paired 95 % CI below zero. An improvement under noise is unexpected; read it as a question about "
                          "the data or the model, not as robustness."))


def _comparisons_table(t: Tables) -> Table:
    """The paired encoder-vs-encoder comparisons, in run order of mode."""
    cmp = _ordered(t, t.comparisons, ["mode"])
    return spec_table("comparisons", "Paired comparisons", [
        ("A", lambda r: r.a, False),
        ("B", lambda r: r.b, False),
        ("mode", lambda r: r.mode, False),
        ("cell", lambda r: (r.perturbation_id if r.perturbation_id == load.CLEAN_ID
                            else f"{r.perturbation_id} @ {fsev(r.severity)}"), False),
        ("quantity", lambda r: r.quantity, False),
        ("A", lambda r: fsign(r.value_a) if r.quantity != "BPB" else f3(r.value_a), True),
        ("B", lambda r: fsign(r.value_b) if r.quantity != "BPB" else f3(r.value_b), True),
        ("A − B", lambda r: fsign(r.diff), True),
        ("95 % CI", lambda r: (r.untested if isinstance(getattr(r, "untested", ""), str)
                               and getattr(r, "untested", "") else fci(r.ci_lo, r.ci_hi, True)),
         True),
        ("docs", lambda r: str(int(r.n_units)), True),
        ("p (Holm)", lambda r: fp(r.p_holm), True),
        ("p (perm., docs)", lambda r: fp(r.p_perm), True),
        ("p (Wilcoxon)", lambda r: fp(r.p_wilcoxon), True),
        ("agree", lambda r: {True: "yes", False: "no"}.get(r.wilcoxon_agrees, "—"), False),
        ("CI covers", lambda r: covers_phrase(getattr(r, "covers", "")) or "—", False),
    ], cmp, note="Pairs are the same documents under the same seed. On clean cells the quantity "
                 "is BPB; on perturbed cells it is ΔBPB, so A − B < 0 means A degrades less. "
                 f"{INTERVAL_NOTE} p (Holm): that p Holm-adjusted "
                 "over every encoder-vs-encoder test in this report (every cell, both modes, and "
                 "the mean-degradation tests of the summary). Significant = Holm-adjusted p < "
                 f"{ALPHA} and a 95 % CI that excludes zero. 'docs': paired (seed, document) "
                 "units. p (perm., docs): two-sided byte-weighted sign-flip permutation test on "
                 "documents, each document's seeds pooled — a test of these trained models only, "
                 "blind to training variance, so it can be small where the report's p is not. "
                 "Wilcoxon: signed-rank test on the same per-document BPB differences "
                 "(unweighted); 'agree' = same decision at 0.05 as that permutation "
                 "test.", collapsed=len(cmp) > 60)


def _language_tables(t: Tables) -> dict[str, Table]:
    """The wide per-eval-set (clean BPB, mean ΔBPB) and per-script tables."""
    out: dict[str, Table] = {}
    out["languages"] = _wide(
        "languages", "Clean BPB per eval set [95 % CI]", t.languages, "dataset",
        [("language", lambda g: g.language.iloc[0] or "—"), ("script", lambda g: g.script.iloc[0]
                                                            or "—")],
        t.encoders, lambda r: f"{f3(r.bpb)} {fci(r.ci_lo, r.ci_hi)}",
        note=f"{t.level_mode} mode; CI over the eval set's documents and seeds (one seed: "
             "documents only).")
    out["languages_delta"] = _wide(
        "languages_delta", f"Mean ΔBPB per eval set ({t.primary_mode})", t.languages, "dataset",
        [], t.encoders, lambda r: fsign(r.mean_delta),
        note="Mean over perturbations of ΔBPB at each perturbation's highest severity.")
    out["scripts"] = _wide(
        "scripts", "Clean BPB per document script [95 % CI]", t.scripts, "script",
        [("documents", lambda g: str(int(g.n_docs.max())))], t.encoders,
        lambda r: f"{f3(r.bpb)} {fci(r.ci_lo, r.ci_hi)}",
        note="Scripts of the documents themselves (ISO 15924), so a mixed set splits by script.")
    return out


def _cells_table(t: Tables) -> Table:
    """Every cell group (mode, perturbation, severity, encoder), collapsed."""
    g = _ordered(t, t.groups, ["mode", "perturbation_id", "severity", "encoder"])
    return spec_table("cells", "All cell groups", [
        ("mode", lambda r: r.mode, False),
        ("perturbation", lambda r: r.perturbation_id, False),
        ("severity", lambda r: fsev(r.severity), True),
        ("encoder", lambda r: r.encoder, False),
        ("BPB", lambda r: f3(r.bpb), True),
        ("95 % CI", lambda r: fci(r.ci_lo, r.ci_hi), True),
        ("mean ± sd (seeds)", lambda r: (f"{f3(r.seed_mean)} ± {f3(r.seed_sd)}"
                                         if _ok(r.seed_sd) else f3(r.seed_mean)), True),
        ("BPB per scored byte", lambda r: f3(r.bpb_scored), True),
        ("ΔBPB", lambda r: fsign(r.delta), True),
        ("ΔBPB 95 % CI", lambda r: fci(r.delta_lo, r.delta_hi, True), True),
        ("edit rate", lambda r: fpct(r.edit_rate).lstrip("+"), True),
        ("docs", lambda r: f"{r.n_docs:.0f}" if _ok(r.n_docs) else "—", True),
    ], g, note="Pooled over eval sets and seeds. BPB is bpb in clean_target mode and bpb_clean "
               "(NLL per clean byte) in full mode; 'BPB per scored byte' divides by the bytes "
               "actually scored (the perturbed text in full mode).", collapsed=True)


def build_tables(t: Tables) -> dict[str, Table]:
    """Every table of the report by key, in the order the report shows them."""
    return {
        "verdict": _verdict_table(t),
        **_robustness_tables(t),
        "matrix_clean": clean_matrix(t),
        "anomalies": _anomalies_table(t),
        "comparisons": _comparisons_table(t),
        **_language_tables(t),
        "efficiency": efficiency_table(t),
        "cells": _cells_table(t),
    }


def efficiency_table(t: Tables) -> Table:
    """The cost table (``Tables.efficiency``): one row per encoder."""
    eff = t.efficiency
    # a page-wide table: the registry name only where a label differs from it, the kind of
    # memory in the heading when every row has the same
    elsewhere = "trained_elsewhere" in eff and bool(eff.trained_elsewhere.fillna(False).astype(bool).any())
    named = elsewhere or (len(eff) and bool((eff.name.astype(str) != eff.encoder.astype(str)).any()))
    kinds = set(eff.peak_mem_kind) if len(eff) and "peak_mem_kind" in eff else set()
    rss_all = kinds == {"process_max_rss"}
    spec = [
        ("encoder", lambda r: r.encoder, False),
        *([("name", lambda r: r.name + (" (trained elsewhere)" if getattr(r, "trained_elsewhere", False)
                                        is True else ""), False)] if named else []),
        ("params", lambda r: fsi(r.params_total), True),
        ("embedding share", lambda r: fpct(r.embedding_share).lstrip("+"), True),
        ("FLOPs/byte train", lambda r: fsi(r.flops_per_byte_train), True),
        ("FLOPs/byte infer", lambda r: fsi(r.flops_per_byte_infer), True),
        ("train bytes", lambda r: fsi(r.train_bytes, "B"), True),
        ("train bytes/s", lambda r: fsi(r.bytes_per_s), True),
        ("train time", lambda r: f"{r.train_seconds:.1f} s" if _ok(r.train_seconds) else "—",
         True),
        ("peak memory (RSS)" if rss_all else "peak memory",
         lambda r: fbytes(r.peak_mem_bytes) + (" (RSS)" if r.peak_mem_kind == "process_max_rss"
                                               and not rss_all else ""), True),
        ("bytes / unit (eval, clean)", lambda r: (f"{f3(r.bytes_per_segment)} "
                                                  f"({r.token_unit or 'segment'})"
                                                  if _ok(r.bytes_per_segment) else "—"), True),
        ("bytes / unit (training fit)", lambda r: f3(r.bytes_per_segment_train), True),
    ]
    return spec_table("efficiency", "Cost per encoder", spec, eff, note=(
        "From run.json, averaged over trained seeds (peak memory: the maximum; RSS = "
        "whole-process resident memory on CPU, not the model alone). Bytes per unit = Σ scored "
        "bytes / Σ segments (token, patch or byte; a segment running into the scored span from "
        "its context counts once): 'eval' pools the clean cells of results.csv "
        f"({t.level_mode} mode; the same number as the segments figure), 'training fit' is what "
        "the encoder's fit measured on training windows (the BLT fit log's bytes/patch)."))


def _wide(key: str, title: str, df: pd.DataFrame, row_key: str,
          extra: list[tuple[str, Callable[[pd.DataFrame], str]]], encoders: list[str],
          cell: Callable[[Any], str], note: str = "") -> Table:
    """A row per ``row_key`` value and a column per encoder (compact for many encoders)."""
    if not len(df):
        return Table(key, title, [], [], note)
    encs = [e for e in encoders if e in set(df.encoder)]
    rows = []
    for val, g in df.groupby(row_key, sort=True):
        by = {r.encoder: r for r in g.itertuples(index=False)}
        rows.append([str(val)] + [fn(g) for _, fn in extra]
                    + [cell(by[e]) if e in by else "—" for e in encs])
    cols = [row_key.replace("dataset", "eval set")] + [c for c, _ in extra] + encs
    return Table(key, title, cols, rows, note, set(range(1 + len(extra), len(cols))))


MATRIX_CLASSES = {"win": "win", "loss": "loss", "tie": "tie", "mixed": "mixed"}


def degradation_matrix(t: Tables, mode: str) -> Table:
    """Encoder × encoder: "wins–losses–ties" of the row encoder against the column encoder over
    the perturbed cells of ``mode`` (win = degrades significantly less, Holm-adjusted)."""
    m = pair_matrix(t.comparisons, t.encoders, mode)
    key = "matrix" if mode == t.primary_mode else f"matrix_{mode}"
    title = f"Degradation matrix ({mode}): row vs column, wins–losses–ties"
    if not len(m):
        return Table(key, title, [], [])
    encs = [e for e in t.encoders if e in set(m.row) | set(m.col)]
    by = {(r.row, r.col): r for r in m.itertuples(index=False)}
    rows, classes = [], []
    for r in encs:
        row, cls = [r], ["enc"]
        for c in encs:
            x = by.get((r, c))
            if r == c or x is None:
                row.append("—")
                cls.append("self")
                continue
            cell = f"{x.wins}–{x.losses}–{x.ties}" + (f" (+{x.untested} untested)"
                                                      if x.untested else "")
            row.append(cell)
            cls.append("win" if x.wins and not x.losses else "loss" if x.losses and not x.wins
                       else "mixed" if x.wins else "tie")
        rows.append(row)
        classes.append(cls)
    n = int(m.iloc[0][["wins", "losses", "ties", "untested"]].sum())
    note = (f"Each entry counts the {n} perturbed {mode} cells (perturbation × severity) the two "
            "encoders share: wins = the row encoder's ΔBPB is significantly smaller (it degrades "
            "less), losses = significantly larger, ties = not distinguishable; significance = "
            f"Holm-adjusted p < {ALPHA} over every encoder comparison in this report and a "
            "95 % CI that excludes zero (both from a t over seeds × documents: docs/report.md). "
            "Every cell: table "
            "'Paired comparisons'.")
    return Table(key, title, ["row \\ column", *encs], rows, note, set(range(1, len(encs) + 1)),
                 classes=classes)


def clean_matrix(t: Tables) -> Table:
    """Encoder × encoder on the clean baseline (headline mode): is the row's BPB lower?"""
    c = t.comparisons
    c = c[(c["mode"] == t.level_mode) & (c.perturbation_id == load.CLEAN_ID)] if len(c) else c
    title = f"Clean BPB matrix ({t.level_mode}): row − column"
    if not len(c) or len(t.encoders) < 2:
        return Table("matrix_clean", title, [], [])
    rows, classes = [], []
    for r in t.encoders:
        row, cls = [r], ["enc"]
        for col in t.encoders:
            x = c[((c.a == r) & (c.b == col)) | ((c.a == col) & (c.b == r))]
            if r == col or not len(x):
                row.append("—")
                cls.append("self")
                continue
            x = x.iloc[0]
            why = x.get("untested", "")
            if isinstance(why, str) and why:  # no paired documents: no difference to show
                row.append(why)
                cls.append("tie")
                continue
            d = x["diff"] if x.a == r else -x["diff"]
            sig = bool(significant(x.p_holm, x.ci_lo, x.ci_hi))
            word = ("lower" if d < 0 else "higher") if sig else "not distinguishable"
            row.append(f"{fsign(d)} ({word}, Holm {p_phrase(x.p_holm)})")
            cls.append(("win" if d < 0 else "loss") if sig else "tie")
        rows.append(row)
        classes.append(cls)
    return Table("matrix_clean", title, ["row \\ column", *t.encoders], rows,
                 f"Clean BPB of the row encoder minus the column encoder on the same documents "
                 f"and seeds; 'lower'/'higher' only when Holm-adjusted p < {ALPHA} and the "
                 "difference's 95 % CI excludes zero; 'no shared documents': the two scored no "
                 "document under the same seed (e.g. runs on different data or seeds), so no "
                 "difference is given.",
                 set(range(1, len(t.encoders) + 1)), classes=classes)


def _ordered(t: Tables, df: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """Sort by ``cols`` in the run's own order (modes: primary first; encoders, perturbations
    and families: first appearance), not alphabetically."""
    if not len(df):
        return df
    order = {
        "mode": t.modes,
        "encoder": t.encoders,
        "perturbation_id": list(dict.fromkeys(t.groups.perturbation_id)),
        "family": list(dict.fromkeys(t.groups.family)),
    }

    def key(s: pd.Series) -> pd.Series:
        if s.name in order:
            rank = {v: i for i, v in enumerate(order[str(s.name)])}
            return s.map(lambda v: rank.get(v, len(rank)))
        return s

    return df.sort_values(cols, key=key, kind="stable")


def bucket_table(buckets: pd.DataFrame, encoders: list[str]) -> Table:
    """BPB per (analysis, bucket) with one column per encoder, clean text, pooled over seeds and
    eval sets; words and bytes are those of the first encoder (the same text for all)."""
    title = "BPB per per-word bucket (clean text)"
    note = "Pooled over seeds and eval sets from buckets.csv (no per-document rows, so no CI)."
    if not len(buckets):
        return Table("buckets", title, [], [], note)
    b = clean_buckets(buckets)
    encs = [e for e in encoders if e in set(b.encoder)] + sorted(set(b.encoder) - set(encoders))
    rows = []
    for (an, bucket), g in b.groupby(["analysis", "bucket"], sort=False):
        by = {r.encoder: r for r in g.itertuples(index=False)}
        first = by[next(e for e in encs if e in by)]
        rows.append([str(an), str(bucket), f"{first.n_words:.0f}", f"{first.n_bytes:.0f}"]
                    + [f3(by[e].bpb) if e in by else "—" for e in encs])
    return Table("buckets", title, ["analysis", "bucket", "n words", "n bytes", *encs], rows, note,
                 set(range(2, 4 + len(encs))))


# ----------------------------------------------------------------------------- markdown


# ----------------------------------------------------------------------------- rendering
