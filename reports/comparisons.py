"""Paired comparisons between encoders (per cell and on the mean degradation), the Holm
family over them, the significance rule the whole report uses (``significant``) and the
win / loss / tie matrix.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from core.metrics import LN2
from core.schema import CLEAN_ID
from reports import stats
from reports.paired import Index, align, crossed_test, doc_pooled, group_rng
from reports.pool import fork_map


def _paired_units(idx: Index, a: str, b: str, pid: str, sev: float, mode: str
                  ) -> dict[str, np.ndarray] | None:
    """Per paired unit: A, B (nll nats), bytes, seed, doc; for perturbed cells also the clean
    baselines Ac, Bc. None when the two encoders share no scored documents."""
    sa, sb = idx.get(a, pid, sev, mode), idx.get(b, pid, sev, mode)
    if sa is None or sb is None:
        return None
    if pid == CLEAN_ID:
        ia, ib = align(sa, sb)
        out = dict(A=sa.nll[ia], B=sb.nll[ib])
    else:
        ca, cb = idx.get(a, CLEAN_ID, 0.0, mode), idx.get(b, CLEAN_ID, 0.0, mode)
        if ca is None or cb is None:
            return None
        ia, ib, ica, icb = align(sa, sb, ca, cb)
        out = dict(A=sa.nll[ia], B=sb.nll[ib], Ac=ca.nll[ica], Bc=cb.nll[icb])
    if not len(ia):
        return None
    out.update(bytes=sa.nbytes[ia], seed=sa.seed[ia], doc=sa.doc[ia])
    return out


NO_SAMPLES = "no per-document samples"
NO_SHARED = "no shared documents"
NO_SAME_CELLS = "not scored under the same perturbations"


def untested_reason(idx: Index, a: str, b: str, pid: str, sev: float, mode: str) -> str:
    """Why encoders ``a`` and ``b`` could not be paired on a cell: NO_SAMPLES when a cell they
    need has no per-document rows, else NO_SHARED (both scored documents, but no (seed, eval
    set, document) in common: other seeds, other eval sets, or data kept apart by
    ``reports.load.merge_runs``)."""
    need = [(a, pid, sev), (b, pid, sev)]
    if pid != CLEAN_ID:
        need += [(a, CLEAN_ID, 0.0), (b, CLEAN_ID, 0.0)]
    return NO_SAMPLES if any(idx.get(e, p, s, mode) is None for e, p, s in need) else NO_SHARED


def _comparison_stats(idx: Index, key: tuple, n_perm: int, seed: int) -> dict[str, Any]:
    """The paired numbers of one comparison ``key = (a, b, pid, sev, mode)`` (``comparison_table``'s
    unit of work in a worker) — or nothing when the two encoders share no scored documents:

    ci_lo, ci_hi, p_test, df, covers, n_seeds: ``stats.crossed_test`` (seeds × documents; what
    the report's rule uses); n_units: paired (seed, document) units; diff_paired: the pooled
    difference on them; p_perm, p_wilcoxon: the byte-weighted sign-flip permutation test and the
    Wilcoxon signed-rank test on documents (each document's seeds pooled, flipped together) —
    tests of "no difference between *these* trained models", blind to training variance. The
    permutation draws come from a generator keyed by ``key`` alone, so they do not depend on the
    process or the order."""
    a, b, pid, sev, mode = key
    j = _paired_units(idx, a, b, pid, sev, mode)
    if j is None:
        return {}
    if pid == CLEAN_ID:
        cols, plus, minus = ["A", "B", "bytes"], [0], [1]
        d_nats = j["A"] - j["B"]
    else:
        cols, plus, minus = ["A", "Ac", "B", "Bc", "bytes"], [0, 3], [1, 2]
        d_nats = (j["A"] - j["Ac"]) - (j["B"] - j["Bc"])
    out: dict[str, Any] = {}
    r = crossed_test(j["seed"], j["doc"], [j[c] for c in cols], plus, minus)
    out["ci_lo"], out["ci_hi"] = r["lo"], r["hi"]
    out["n_units"] = len(d_nats)
    out["diff_paired"] = float(d_nats.sum() / (LN2 * j["bytes"].sum()))
    d_doc, w_doc = doc_pooled(j["seed"], j["doc"], d_nats, j["bytes"])
    out["p_perm"] = stats.paired_permutation_test(d_doc, w_doc, n_perm, group_rng(seed, "perm", *key))
    out["p_wilcoxon"] = stats.wilcoxon_p(d_doc)
    out.update(p_test=r["p"], df=r["df"], covers=r["covers"], n_seeds=r["n_seeds"])
    return out


def comparison_table(groups: pd.DataFrame, idx: Index, encoders: list[str], n_perm: int,
                     seed: int, processes: int = 1,
                     beside: Sequence[Callable[[], Any]] = ()) -> tuple[pd.DataFrame, list[Any]]:
    """Every encoder pair on every shared group: on clean cells the BPB difference, on perturbed
    cells the ΔBPB difference (difference in degradation: negative = A degrades less). CI and
    ``p_test`` over seeds × documents (``stats.crossed_test``), with ``covers``; the documents-only
    permutation and Wilcoxon p (``_comparison_stats``); ``holm_family`` adds ``p_holm``.

    processes: how many forked processes run the comparisons' resampling
    (``_comparison_stats``, one comparison a task; 1 = in this one); the same table either way.
    beside: tasks for the same pool, handed out first (they are the longer ones); returns the
    table and their results, in order."""
    out = []
    tasks: list[tuple] = []  # (a, b, pid, sev, mode), one per row
    keys = list(groups[["perturbation_id", "severity", "mode"]].drop_duplicates()
                .itertuples(index=False, name=None))
    by = {(r.encoder, r.perturbation_id, r.severity, r.mode): r
          for r in groups.itertuples(index=False)}
    for a, b in combinations(encoders, 2):
        for pid, sev, mode in keys:
            ga, gb = by.get((a, pid, sev, mode)), by.get((b, pid, sev, mode))
            if ga is None or gb is None:
                continue
            clean = pid == CLEAN_ID
            qa = ga.bpb if clean else ga.delta
            qb = gb.bpb if clean else gb.delta
            row: dict[str, Any] = dict(
                a=a, b=b, perturbation_id=pid, severity=sev, mode=mode,
                quantity="BPB" if clean else "ΔBPB", value_a=qa, value_b=qb, diff=qa - qb,
                ci_lo=math.nan, ci_hi=math.nan, n_units=0, p_perm=math.nan,
                p_wilcoxon=math.nan, diff_paired=math.nan, p_test=math.nan, df=math.nan,
                covers="", n_seeds=0)
            out.append(row)
            tasks.append((a, b, pid, sev, mode))
    nb = len(beside)
    both = fork_map(lambda i: beside[i]() if i < nb else _comparison_stats(idx, tasks[i - nb], n_perm, seed),
                    nb + len(tasks), processes,
                    "report table (comparisons)" if not nb else "report figure or table (comparisons)")
    done = both[nb:]
    for row, task, st in zip(out, tasks, done):
        row.update(st)
        # Without paired documents the two pooled levels come from different documents (or
        # different data): their difference would be a claim with no CI and no test, so none is
        # given, and the row says why it is untested.
        row["untested"] = "" if st else untested_reason(idx, *task)
        if not st:
            row["diff"] = math.nan
    df = pd.DataFrame(out)
    if len(df):
        sig_p = df.p_perm < 0.05
        sig_w = df.p_wilcoxon < 0.05
        df["wilcoxon_agrees"] = np.where(df.p_wilcoxon.isna(), None, sig_p == sig_w)
    return df, both[:nb]


def _top_cells(groups: pd.DataFrame, mode: str) -> dict[str, float]:
    """perturbation_id -> its highest severity in ``mode`` (the cells the headline summarises)."""
    g = groups[(groups["mode"] == mode) & (groups.perturbation_id != CLEAN_ID)]
    return {str(k): float(v) for k, v in g.groupby("perturbation_id", sort=False).severity.max()
            .items()}


def mean_delta_cis(groups: pd.DataFrame, idx: Index, encoders: list[str], mode: str
                   ) -> dict[str, tuple[float, float]]:
    """Per encoder, the 95 % CI of its mean ΔBPB over perturbations at their highest severity in
    ``mode`` (the verdict's "mean ΔBPB" and the summary's "smallest mean degradation"): a paired
    ``stats.crossed_test`` (seeds × documents) over the documents present in every one of those
    cells and the clean
    cell — per document u the mean over the P perturbations of its perturbed NLL against its clean
    NLL, Σ_u (Σ_p A_pu / P − Ac_u) / (ln 2 · Σ_u b_u). (NaN, NaN) without per-document samples
    or shared documents."""
    top = _top_cells(groups, mode)
    out: dict[str, tuple[float, float]] = {}
    for enc in encoders:
        out[enc] = (math.nan, math.nan)
        cells = [idx.get(enc, pid, sev, mode) for pid, sev in top.items()]
        c = idx.get(enc, CLEAN_ID, 0.0, mode)
        if not top or c is None or any(x is None for x in cells):
            continue
        al = align(c, *cells)
        if not len(al[0]):
            continue
        s = sum(x.nll[i] for x, i in zip(cells, al[1:])) / len(top)
        ic = al[0]
        r = crossed_test(c.seed[ic], c.doc[ic], [s, c.nll[ic], c.nbytes[ic]], [0], [1])
        out[enc] = (r["lo"], r["hi"])
    return out


def mean_degradation_tests(groups: pd.DataFrame, idx: Index, encoders: list[str],
                           modes: list[str], n_perm: int, seed: int) -> pd.DataFrame:
    """Per encoder pair and mode: a test of the *mean* ΔBPB over perturbations (each at its
    highest severity) — the quantity the summary's "smallest mean degradation" names.

    On documents present in every one of those cells (same seed), with P perturbations, clean
    metric bytes b_u and NLL (nats) A_pu, Ac_u, B_pu, Bc_u, the per-document difference is
    d_u = Σ_p [(A_pu − Ac_u) − (B_pu − Bc_u)] / (P · ln 2 · b_u); its byte-weighted mean is the
    difference of the two encoders' mean ΔBPB (every cell scores the same clean bytes per
    document in both modes). CI and p_test: ``stats.crossed_test`` (seeds × documents), with
    df, covers and n_seeds; p_perm: the byte-weighted sign-flip permutation test on d pooled per
    document over its seeds (these trained models only). Columns: a, b, mode, value_a, value_b
    (mean ΔBPB on the shared documents), diff, ci_lo, ci_hi, n_units, n_cells, p_perm,
    untested (NO_SHARED on a row whose cells share no document, NO_SAME_CELLS where one encoder
    lacks one of the cells — runs of other perturbations merged by compare: no difference, NaN p;
    else ""), p_test, df, covers, n_seeds.
    """
    rows = []
    have = set(zip(groups.encoder, groups.perturbation_id, groups.severity, groups["mode"]))
    for mode in modes:
        top = _top_cells(groups, mode)
        if not top:
            continue
        for a, b in combinations(encoders, 2):
            cells = {e: [idx.get(e, pid, sev, mode) for pid, sev in top.items()]
                     for e in (a, b)}
            ca, cb = idx.get(a, CLEAN_ID, 0.0, mode), idx.get(b, CLEAN_ID, 0.0, mode)
            if ca is None or cb is None or any(c is None for c in cells[a] + cells[b]):
                # say why where it is not a lack of samples: runs merged by compare may have
                # scored different perturbations (no test, so the summary must not claim one)
                if any((e, pid, sev, mode) not in have for e in (a, b) for pid, sev in top.items()):
                    rows.append(dict(a=a, b=b, mode=mode, value_a=math.nan, value_b=math.nan,
                                     diff=math.nan, ci_lo=math.nan, ci_hi=math.nan, n_units=0,
                                     n_cells=len(top), p_perm=math.nan, untested=NO_SAME_CELLS))
                continue
            al = align(ca, cb, *cells[a], *cells[b])
            n, P = len(al[0]), len(top)
            if not n:  # untested (NaN p: outside the Holm family), so the summary says why
                rows.append(dict(a=a, b=b, mode=mode, value_a=math.nan, value_b=math.nan,
                                 diff=math.nan, ci_lo=math.nan, ci_hi=math.nan, n_units=0,
                                 n_cells=P, p_perm=math.nan, untested=NO_SHARED,
                                 p_test=math.nan, df=math.nan, covers="", n_seeds=0))
                continue
            ia, ib = al[0], al[1]
            sa = sum(c.nll[i] for c, i in zip(cells[a], al[2:2 + P])) / P
            sb = sum(c.nll[i] for c, i in zip(cells[b], al[2 + P:])) / P
            w = ca.nbytes[ia]
            d_nats = (sa - ca.nll[ia]) - (sb - cb.nll[ib])
            key = (a, b, "mean-top", mode)
            r = crossed_test(ca.seed[ia], ca.doc[ia], [sa, ca.nll[ia], sb, cb.nll[ib], w],
                              [0, 3], [1, 2])
            d_doc, w_doc = doc_pooled(ca.seed[ia], ca.doc[ia], d_nats, w)
            va = float((sa - ca.nll[ia]).sum() / (LN2 * w.sum()))
            vb = float((sb - cb.nll[ib]).sum() / (LN2 * w.sum()))
            rows.append(dict(
                a=a, b=b, mode=mode, value_a=va, value_b=vb, diff=va - vb, ci_lo=r["lo"],
                ci_hi=r["hi"], n_units=n, n_cells=P,
                p_perm=stats.paired_permutation_test(d_doc, w_doc, n_perm,
                                                     group_rng(seed, "meanperm", *key)),
                untested="", p_test=r["p"], df=r["df"], covers=r["covers"],
                n_seeds=r["n_seeds"]))
    return pd.DataFrame(rows, columns=["a", "b", "mode", "value_a", "value_b", "diff", "ci_lo",
                                       "ci_hi", "n_units", "n_cells", "p_perm", "untested",
                                       "p_test", "df", "covers", "n_seeds"])


def holm_family(*frames: pd.DataFrame) -> None:
    """Holm-adjust the ``p_test`` columns (seeds × documents) of several tables as ONE family
    (adds ``p_holm`` in place): every encoder-vs-encoder test of the report, whichever table
    shows it."""
    ps = np.concatenate([f["p_test"].to_numpy(float) if len(f) else np.zeros(0)
                         for f in frames])
    adj = stats.holm(ps)
    i = 0
    for f in frames:
        f["p_holm"] = adj[i:i + len(f)] if len(f) else pd.Series(dtype=float)
        i += len(f)


ALPHA = 0.05  # significance level after Holm, everywhere in the report


def significant(p_holm: Any, lo: Any, hi: Any) -> np.ndarray:
    """Whether tested differences are called significant (elementwise; a 0-d array for scalars):
    Holm-adjusted p < ALPHA **and** the 95 % CI excludes zero.

    The p and the CI come from one test (``stats.crossed_test``: seeds × documents), so before
    Holm they agree; after Holm the p is the stricter of the two. The CI condition stays for
    tables whose p and CI come from elsewhere: a difference whose CI holds zero is a tie
    whatever p says. A CI that was not computed (NaN) leaves the decision to p."""
    p, lo, hi = (np.asarray(v, dtype=float) for v in (p_holm, lo, hi))
    known = np.isfinite(lo) & np.isfinite(hi)
    return np.isfinite(p) & (p < ALPHA) & (~known | (lo > 0) | (hi < 0))


def pair_matrix(cmp: pd.DataFrame, encoders: list[str], mode: str) -> pd.DataFrame:
    """Encoder × encoder counts over the perturbed cells of ``mode`` (ΔBPB comparisons).

    One row per ordered pair (row encoder r, column encoder c, r ≠ c): ``wins`` = cells where r
    degrades significantly less than c (``significant``: Holm-adjusted p < ALPHA and a CI
    without zero), ``losses`` = significantly
    more, ``ties`` = tested but not distinguishable, ``untested`` = no paired documents.
    """
    out = []
    p = cmp[(cmp["mode"] == mode) & (cmp.quantity == "ΔBPB")] if len(cmp) else cmp
    for r in encoders:
        for c in encoders:
            if r == c:
                continue
            fwd = p[(p.a == r) & (p.b == c)] if len(p) else p
            rev = p[(p.a == c) & (p.b == r)] if len(p) else p
            diff = np.r_[fwd["diff"].to_numpy(float), -rev["diff"].to_numpy(float)] \
                if len(p) else np.zeros(0)
            ph = np.r_[fwd.p_holm.to_numpy(float), rev.p_holm.to_numpy(float)] \
                if len(p) else np.zeros(0)
            if not len(diff):
                continue
            # a reversed pair's CI is the negated one: whether it holds zero is the same
            lo = np.r_[fwd.ci_lo.to_numpy(float), rev.ci_lo.to_numpy(float)]
            hi = np.r_[fwd.ci_hi.to_numpy(float), rev.ci_hi.to_numpy(float)]
            tested = np.isfinite(ph)
            sig = tested & significant(ph, lo, hi)
            out.append(dict(row=r, col=c, wins=int((sig & (diff < 0)).sum()),
                            losses=int((sig & (diff > 0)).sum()), ties=int((tested & ~sig).sum()),
                            untested=int((~tested).sum())))
    return pd.DataFrame(out, columns=["row", "col", "wins", "losses", "ties", "untested"])
