"""The report's numbers: BPB per cell group with CIs, robustness, paired comparisons, efficiency.

A *group* is (encoder, perturbation_id, severity, mode) pooled over eval sets and seeds: its BPB
is ΣNLL / (ln 2 · Σbytes) over all of them. The robustness quantity ("metric") depends on mode:

* ``clean_target`` — the clean continuation is scored after a perturbed prefix, so the scored
  bytes are the same as in the clean baseline: metric = ``bpb``. This is the primary view.
* ``full`` — the perturbed text itself is scored; perturbations change the byte count, so the
  metric divides by the clean text's bytes: metric = ``bpb_clean`` (NLL per clean byte).

ΔBPB = metric(perturbed) − metric(clean baseline of the same encoder, mode, eval sets, seeds);
lower BPB is better, so a larger ΔBPB is a larger degradation.
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from core.metrics import LN2, bpb
from core.schema import CLEAN_ID, MODES
from core.segments import bytes_per_segment
from reports import stats
from reports.fmt import is_num, p_phrase, sig3
from reports.load import RunData
from reports.pool import fork_map

GROUP = ["encoder", "perturbation_id", "severity", "mode"]
UNIT = ["seed", "dataset", "doc_id"]  # a paired unit: one document under one seed
DOC = ["dataset", "doc_id"]  # a sampling unit: one document, all its seeds together


@dataclass
class Tables:
    """All computed tables (pandas frames; BPB in bits per byte)."""

    encoders: list[str]
    modes: list[str]
    primary_mode: str  # mode of the robustness summaries (clean_target when present)
    level_mode: str  # mode of the clean-BPB headline (full when present)
    groups: pd.DataFrame
    robustness: pd.DataFrame
    families: pd.DataFrame
    comparisons: pd.DataFrame
    languages: pd.DataFrame
    scripts: pd.DataFrame
    efficiency: pd.DataFrame
    verdict: pd.DataFrame
    verdict_lines: list[Finding] = field(default_factory=list)
    n_seeds: int = 1  # the most seeds any one encoder has (``encoder_seeds``)
    encoder_seeds: dict[str, int] = field(default_factory=dict)  # encoder -> its seeds
    mean_tests: pd.DataFrame = field(default_factory=pd.DataFrame)  # mean_degradation_tests
    anomalies: pd.DataFrame = field(default_factory=pd.DataFrame)  # anomaly_table
    # encoders scored by the masked-diffusion ELBO: their BPB is an upper bound (``mdm_bounds``)
    bounds: list[str] = field(default_factory=list)


def _rng(base_seed: int, *key: Any) -> np.random.Generator:
    """A generator keyed by the group, so a table's numbers do not depend on computation order."""
    return np.random.default_rng([base_seed, zlib.crc32(repr(key).encode("utf-8"))])


def _sev(x: pd.Series) -> pd.Series:
    return x.astype(float).round(10)


@dataclass
class _Cell:
    """Per-document arrays of one group, sorted by unit code (seed, eval set, document).

    unit: (n,) int64 codes; seed: (n,) int; dataset: (n,) object; nll: (n,) nats;
    nbytes: (n,) metric bytes (scored bytes in clean_target, clean bytes in full mode);
    doc: (n,) int64 codes of (eval set, document), the same document under every seed.
    """

    unit: np.ndarray
    seed: np.ndarray
    dataset: np.ndarray
    nll: np.ndarray
    nbytes: np.ndarray
    doc: np.ndarray

    def take(self, mask_or_idx: np.ndarray) -> _Cell:
        return _Cell(self.unit[mask_or_idx], self.seed[mask_or_idx],
                     self.dataset[mask_or_idx], self.nll[mask_or_idx], self.nbytes[mask_or_idx],
                     self.doc[mask_or_idx])


def _crossed_test(seed: np.ndarray, doc: np.ndarray, cols: list[np.ndarray], plus: list[int],
                  minus: list[int]) -> dict[str, Any]:
    """``stats.crossed_test`` of per-unit columns (the last one the bytes) as plain floats, with
    ``n_seeds`` and ``covers`` (what the interval is about). Units are (seed, document) pairs;
    only documents present under every seed count."""
    x = stats.crossed(seed, doc, cols)
    r = {k: float(v) for k, v in stats.crossed_test(x, plus, minus, len(cols) - 1).items()}
    r["n_seeds"] = int(x.shape[0])
    r["covers"] = stats.covers(x.shape[0])
    r["n_docs_tested"] = int(x.shape[1])
    return r


def _doc_pooled(seed: np.ndarray, doc: np.ndarray, d_nats: np.ndarray, w: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per document (all its seeds pooled): the BPB difference Σ_s d / (ln 2 · Σ_s w) and its
    bytes Σ_s w — the units of the permutation and Wilcoxon tests, so that a document's effect
    counts once however many seeds scored it."""
    x = stats.crossed(seed, doc, [d_nats, w]).sum(0)  # (n, 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return x[:, 0] / (LN2 * x[:, 1]), x[:, 1]


def _align(*cells: _Cell) -> tuple[np.ndarray, ...]:
    """Indices into each cell of the units present in all of them (paired documents)."""
    common = cells[0].unit
    for c in cells[1:]:
        common = np.intersect1d(common, c.unit, assume_unique=True)
    return tuple(np.searchsorted(c.unit, common) for c in cells)


class _Index:
    """Samples split by group once into numpy arrays (cheap lookups and pairing)."""

    def __init__(self, samples: pd.DataFrame) -> None:
        self.by_group: dict[tuple, _Cell] = {}
        if not len(samples):
            return
        s = samples.copy()
        s["severity"] = _sev(s["severity"])
        s["_unit"] = s.groupby(UNIT, sort=False).ngroup().astype(np.int64)
        s["_doc"] = s.groupby(DOC, sort=False).ngroup().astype(np.int64)
        dup = s.duplicated(GROUP + ["_unit"])
        if dup.any():
            row = s.loc[dup].iloc[0]
            raise ValueError(f"samples.jsonl: document {row.doc_id!r} appears twice in cell "
                             f"{row.encoder}/{row.perturbation_id}/{row.severity}/{row['mode']}"
                             f" (seed {row.seed}, {row.dataset})")
        s = s.sort_values("_unit", kind="stable")
        for key, g in s.groupby(GROUP, sort=False):
            self.by_group[tuple(key)] = _Cell(
                g["_unit"].to_numpy(), g["seed"].to_numpy(), g["dataset"].to_numpy(object),
                g["nll_nats"].to_numpy(float), g["metric_bytes"].to_numpy(float),
                g["_doc"].to_numpy())

    def get(self, encoder: str, pid: str, sev: float, mode: str) -> _Cell | None:
        return self.by_group.get((encoder, pid, round(float(sev), 10), mode))


def _baseline(clean: dict[tuple, pd.DataFrame], encoder: str, mode: str, datasets: set,
              seeds: set) -> pd.DataFrame:
    """Clean rows of the same encoder and mode, restricted to the group's eval sets and seeds."""
    b = clean.get((encoder, mode))
    if b is None:
        return pd.DataFrame()
    return b[b.dataset.isin(datasets) & b.seed.isin(seeds)]


def _pooled(rows: pd.DataFrame) -> float:
    """Pooled metric BPB of results/samples rows (NaN for none)."""
    return stats.ratio_bpb(rows.nll_nats, rows.metric_bytes)


def _group_stats(idx: _Index, key: tuple, with_delta: bool) -> dict[str, Any]:
    """The interval numbers of one group (``group_table``'s unit of work in a worker): its BPB
    CI and what it covers and, when ``with_delta`` (a perturbed group with a clean reference),
    the paired ΔBPB CI and ``p_delta`` (``stats.crossed_test``: seeds × documents). Only the keys
    computed are returned (the row keeps NaN for the others)."""
    enc, pid, sev, mode = key
    out: dict[str, Any] = {}
    s = idx.get(enc, pid, sev, mode)
    if s is not None and len(s.unit):
        r = _crossed_test(s.seed, s.doc, [s.nll, s.nbytes], [0], [])
        out["ci_lo"], out["ci_hi"], out["covers"] = r["lo"], r["hi"], r["covers"]
    if with_delta:
        c = idx.get(enc, CLEAN_ID, 0.0, mode)
        if s is not None and c is not None:
            i_s, i_c = _align(s, c)
            if len(i_s):
                r = _crossed_test(s.seed[i_s], s.doc[i_s], [s.nll[i_s], c.nll[i_c], c.nbytes[i_c]],
                                  [0], [1])
                out["delta_lo"], out["delta_hi"], out["p_delta"] = r["lo"], r["hi"], r["p"]
    return out


def group_table(data: RunData, idx: _Index, processes: int = 1) -> pd.DataFrame:
    """One row per group: metric BPB, 95 % CI (``stats.crossed_test``: seeds × documents) and
    ``covers`` (what it covers: ``stats.COVERS_*``), mean ± sd over seeds, edit rate, ΔBPB vs
    clean with a paired CI, relative degradation, and ``p_delta``: the paired p of "ΔBPB = 0"
    (perturbed vs clean NLL of the same document and seed, the same test), which flags a
    perturbation that significantly *improves* an encoder (see ``anomaly_table``).

    processes: how many forked processes run the groups' intervals (``_group_stats``, one
    group a task; 1 = in this one); the table is the same either way."""
    res = data.results.copy()
    res["severity"] = _sev(res["severity"])
    clean = {k: g for k, g in res[res.perturbation_id == CLEAN_ID].groupby(
        ["encoder", "mode"], sort=False)}
    out = []
    # clean reference BPB per (encoder, mode, eval sets, seeds): every perturbation of an encoder
    # shares it, and filtering the clean rows again for each group was a third of this table
    refs: dict[tuple, float | None] = {}
    tasks: list[tuple[tuple, bool]] = []  # (group key, with ΔBPB), one per row
    for key, g in res.groupby(GROUP, sort=False):
        enc, pid, sev, mode = key
        # per seed, in seed order; boolean selection keeps the rows' order, so the sums are
        # the ones groupby("seed").apply(_pooled) gave, without its per-group overhead
        seeds = g.seed.to_numpy()
        per_seed = [_pooled(g[seeds == s]) for s in np.unique(seeds)]
        mean, sd = stats.seed_mean_sd(per_seed)
        row: dict[str, Any] = dict(
            encoder=enc, perturbation_id=pid, perturbation=g.perturbation.iloc[0],
            family=g.family.iloc[0], severity=sev, mode=mode, bpb=_pooled(g),
            bpb_scored=float(bpb(g.nll_nats.sum(), g.n_bytes.sum())),
            seed_mean=mean, seed_sd=sd, n_seeds=int(g.seed.nunique()),
            n_docs=float(g.n_docs.sum()) if g.n_docs.notna().all() else math.nan,
            datasets=",".join(sorted(g.dataset.unique())),
            edit_rate=(float(np.average(g.edit_rate, weights=g.n_docs.fillna(1)))
                       if g.edit_rate.notna().all() else math.nan),
            ci_lo=math.nan, ci_hi=math.nan, delta=math.nan, delta_lo=math.nan,
            delta_hi=math.nan, rel=math.nan, bpb_clean_ref=math.nan, p_delta=math.nan,
            covers="",
        )
        with_delta = False
        if pid != CLEAN_ID:
            datasets, seed_set = set(g.dataset), set(g.seed)
            ref_key = (enc, mode, frozenset(datasets), frozenset(seed_set))
            if ref_key not in refs:
                base = _baseline(clean, enc, mode, datasets, seed_set)
                refs[ref_key] = _pooled(base) if len(base) else None
            if refs[ref_key] is not None:
                row["bpb_clean_ref"] = refs[ref_key]
                row["delta"] = row["bpb"] - row["bpb_clean_ref"]
                row["rel"] = row["delta"] / row["bpb_clean_ref"]
                with_delta = True
        else:
            row["bpb_clean_ref"] = row["bpb"]
        out.append(row)
        tasks.append((tuple(key), with_delta))
    # the resampling (most of this table's time) in workers; the cheap pooled numbers above stay
    # here, where the clean references are cached across groups
    done = fork_map(lambda i: _group_stats(idx, *tasks[i]), len(tasks),
                    processes, "report table (groups)")
    for row, st in zip(out, done):
        row.update(st)  # existing keys: their place in the row (and the frame's columns) stays
    return pd.DataFrame(out)


def robustness_table(groups: pd.DataFrame) -> pd.DataFrame:
    """Per (encoder, perturbation_id, mode): clean BPB, ΔBPB and relative degradation at the
    highest severity, the ΔBPB(severity) curve, and the slope of BPB against measured edit rate
    (bits/byte per unit edit rate, clean point at edit rate 0 included)."""
    out = []
    pert = groups[groups.perturbation_id != CLEAN_ID]
    for (enc, pid, mode), g in pert.groupby(["encoder", "perturbation_id", "mode"], sort=False):
        g = g.sort_values("severity")
        top = g.iloc[-1]
        x = [0.0] + list(g.edit_rate)
        y = [top.bpb_clean_ref] + list(g.bpb)
        out.append(dict(
            encoder=enc, perturbation_id=pid, perturbation=top.perturbation, family=top.family,
            mode=mode, clean=top.bpb_clean_ref, top_severity=top.severity, bpb_top=top.bpb,
            delta_top=top.delta, delta_top_lo=top.delta_lo, delta_top_hi=top.delta_hi,
            rel_top=top.rel, edit_rate_top=top.edit_rate, slope=stats.slope(x, y),
            curve="; ".join(f"{s:g}: {sig3(d)}" for s, d in zip(g.severity, g.delta)),
        ))
    return pd.DataFrame(out)


def family_table(rob: pd.DataFrame) -> pd.DataFrame:
    """Per (encoder, family, mode): mean over the family's perturbations of ΔBPB and relative
    degradation at their highest severity, mean slope, and the worst perturbation."""
    out = []
    if not len(rob):
        return pd.DataFrame(out)
    for (enc, fam, mode), g in rob.groupby(["encoder", "family", "mode"], sort=False):
        worst = g.loc[g.delta_top.idxmax()] if g.delta_top.notna().any() else g.iloc[0]
        out.append(dict(encoder=enc, family=fam, mode=mode, n_perturbations=len(g),
                        mean_delta=g.delta_top.mean(), mean_rel=g.rel_top.mean(),
                        mean_slope=g.slope.mean(), worst=worst.perturbation_id,
                        worst_delta=worst.delta_top))
    return pd.DataFrame(out)


def _paired_units(idx: _Index, a: str, b: str, pid: str, sev: float, mode: str
                  ) -> dict[str, np.ndarray] | None:
    """Per paired unit: A, B (nll nats), bytes, seed, doc; for perturbed cells also the clean
    baselines Ac, Bc. None when the two encoders share no scored documents."""
    sa, sb = idx.get(a, pid, sev, mode), idx.get(b, pid, sev, mode)
    if sa is None or sb is None:
        return None
    if pid == CLEAN_ID:
        ia, ib = _align(sa, sb)
        out = dict(A=sa.nll[ia], B=sb.nll[ib])
    else:
        ca, cb = idx.get(a, CLEAN_ID, 0.0, mode), idx.get(b, CLEAN_ID, 0.0, mode)
        if ca is None or cb is None:
            return None
        ia, ib, ica, icb = _align(sa, sb, ca, cb)
        out = dict(A=sa.nll[ia], B=sb.nll[ib], Ac=ca.nll[ica], Bc=cb.nll[icb])
    if not len(ia):
        return None
    out.update(bytes=sa.nbytes[ia], seed=sa.seed[ia], doc=sa.doc[ia])
    return out


NO_SAMPLES = "no per-document samples"
NO_SHARED = "no shared documents"
NO_SAME_CELLS = "not scored under the same perturbations"


def untested_reason(idx: _Index, a: str, b: str, pid: str, sev: float, mode: str) -> str:
    """Why encoders ``a`` and ``b`` could not be paired on a cell: NO_SAMPLES when a cell they
    need has no per-document rows, else NO_SHARED (both scored documents, but no (seed, eval
    set, document) in common: other seeds, other eval sets, or data kept apart by
    ``reports.load.merge_runs``)."""
    need = [(a, pid, sev), (b, pid, sev)]
    if pid != CLEAN_ID:
        need += [(a, CLEAN_ID, 0.0), (b, CLEAN_ID, 0.0)]
    return NO_SAMPLES if any(idx.get(e, p, s, mode) is None for e, p, s in need) else NO_SHARED


def _comparison_stats(idx: _Index, key: tuple, n_perm: int, seed: int) -> dict[str, Any]:
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
    r = _crossed_test(j["seed"], j["doc"], [j[c] for c in cols], plus, minus)
    out["ci_lo"], out["ci_hi"] = r["lo"], r["hi"]
    out["n_units"] = len(d_nats)
    out["diff_paired"] = float(d_nats.sum() / (LN2 * j["bytes"].sum()))
    d_doc, w_doc = _doc_pooled(j["seed"], j["doc"], d_nats, j["bytes"])
    out["p_perm"] = stats.paired_permutation_test(d_doc, w_doc, n_perm, _rng(seed, "perm", *key))
    out["p_wilcoxon"] = stats.wilcoxon_p(d_doc)
    out.update(p_test=r["p"], df=r["df"], covers=r["covers"], n_seeds=r["n_seeds"])
    return out


def comparison_table(groups: pd.DataFrame, idx: _Index, encoders: list[str], n_perm: int,
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


def mean_delta_cis(groups: pd.DataFrame, idx: _Index, encoders: list[str], mode: str
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
        al = _align(c, *cells)
        if not len(al[0]):
            continue
        s = sum(x.nll[i] for x, i in zip(cells, al[1:])) / len(top)
        ic = al[0]
        r = _crossed_test(c.seed[ic], c.doc[ic], [s, c.nll[ic], c.nbytes[ic]], [0], [1])
        out[enc] = (r["lo"], r["hi"])
    return out


def mean_degradation_tests(groups: pd.DataFrame, idx: _Index, encoders: list[str],
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
            al = _align(ca, cb, *cells[a], *cells[b])
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
            r = _crossed_test(ca.seed[ia], ca.doc[ia], [sa, ca.nll[ia], sb, cb.nll[ib], w],
                              [0, 3], [1, 2])
            d_doc, w_doc = _doc_pooled(ca.seed[ia], ca.doc[ia], d_nats, w)
            va = float((sa - ca.nll[ia]).sum() / (LN2 * w.sum()))
            vb = float((sb - cb.nll[ib]).sum() / (LN2 * w.sum()))
            rows.append(dict(
                a=a, b=b, mode=mode, value_a=va, value_b=vb, diff=va - vb, ci_lo=r["lo"],
                ci_hi=r["hi"], n_units=n, n_cells=P,
                p_perm=stats.paired_permutation_test(d_doc, w_doc, n_perm,
                                                     _rng(seed, "meanperm", *key)),
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


# What can make a perturbation *improve* an encoder, by mode (shown next to each anomaly).
ANOMALY_CAUSES = {
    "clean_target": (
        "The clean continuation is scored, so the perturbed prefix made it easier to predict. "
        "Possible causes: the perturbation moves the prefix towards the training text (e.g. "
        "typos that produce frequent letters, or training data holding similar noise); it "
        "removes a misleading context; a model whose output depends little on distant context "
        "responds to noise-level differences; or a few documents drive the effect (check the "
        "number of documents, and per-document tests in the comparisons table)."),
    "full": (
        "The perturbed text itself is scored per clean byte, so a lower value can mean less or "
        "easier text, not robustness: a perturbation that deletes characters, or replaces rare "
        "characters with frequent ones, leaves fewer or more predictable bytes to encode."),
}


def anomaly_table(groups: pd.DataFrame, modes: list[str] | None = None) -> pd.DataFrame:
    """Perturbed groups whose ΔBPB is significantly *negative* (the perturbation improves the
    encoder): ``p_delta_holm`` < ALPHA (Holm over every ΔBPB-vs-zero test of the report), a
    paired CI without zero (``significant``) and ΔBPB < 0. Columns: encoder, mode,
    perturbation_id, severity, delta, delta_lo, delta_hi, p_delta_holm, n_docs, cause."""
    cols = ["encoder", "mode", "perturbation_id", "severity", "delta", "delta_lo", "delta_hi",
            "p_delta_holm", "n_docs"]
    if not len(groups) or "p_delta_holm" not in groups:
        return pd.DataFrame(columns=cols + ["cause"])
    sig = significant(groups.p_delta_holm, groups.delta_lo, groups.delta_hi)
    a = groups[(groups.perturbation_id != CLEAN_ID).to_numpy() & (groups.delta < 0).to_numpy()
               & sig][cols].copy()
    a["cause"] = a["mode"].map(ANOMALY_CAUSES).fillna("")
    rank = {m: i for i, m in enumerate(modes or [])}  # primary mode first
    a = a.assign(_r=a["mode"].map(lambda m: rank.get(m, len(rank))))
    return a.sort_values(["_r", "perturbation_id", "severity"], kind="stable").drop(
        columns="_r").reset_index(drop=True)


def language_tables(data: RunData, idx: _Index, mode: str, delta_mode: str
                    ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Clean BPB per (encoder, eval set) with CI in ``mode``, mean ΔBPB in ``delta_mode``, and
    clean BPB per (encoder, script) from the documents' own scripts in samples.jsonl (a
    mixed-script set splits into its scripts). CIs: ``stats.crossed_test`` (seeds × documents),
    with ``covers``: deterministic, so the same documents always show the same interval."""
    res = data.results
    clean = res[(res.perturbation_id == CLEAN_ID) & (res["mode"] == mode)]
    pert = res[(res.perturbation_id != CLEAN_ID) & (res["mode"] == delta_mode)]
    dclean = res[(res.perturbation_id == CLEAN_ID) & (res["mode"] == delta_mode)]
    rows = []
    for (enc, ds), g in clean.groupby(["encoder", "dataset"], sort=False):
        row = dict(encoder=enc, dataset=ds, language=g.language.iloc[0], script=g.script.iloc[0],
                   bpb=_pooled(g), ci_lo=math.nan, ci_hi=math.nan, mean_delta=math.nan,
                   covers="")
        s = idx.get(enc, CLEAN_ID, 0.0, mode)
        if s is not None:
            s = s.take(s.dataset == ds)
            if len(s.unit):
                r = _crossed_test(s.seed, s.doc, [s.nll, s.nbytes], [0], [])
                row["ci_lo"], row["ci_hi"], row["covers"] = r["lo"], r["hi"], r["covers"]
        p = pert[(pert.encoder == enc) & (pert.dataset == ds)]
        if len(p):
            # mean over perturbations of ΔBPB at each perturbation's highest severity
            top = p[p.severity == p.groupby("perturbation_id").severity.transform("max")]
            base = dclean[(dclean.encoder == enc) & (dclean.dataset == ds)]
            deltas = [_pooled(t) - _pooled(base[base.seed.isin(t.seed)])
                      for _, t in top.groupby("perturbation_id")]
            row["mean_delta"] = float(np.mean(deltas))
        rows.append(row)
    scripts = []
    smp = data.samples
    if len(smp):
        sc = smp[(smp.perturbation_id == CLEAN_ID) & (smp["mode"] == mode) & (smp.script != "")]
        for (enc, script), g in sc.groupby(["encoder", "script"], sort=False):
            r = _crossed_test(g.seed.to_numpy(), g.groupby(DOC, sort=False).ngroup().to_numpy(),
                              [g.nll_nats.to_numpy(), g.metric_bytes.to_numpy()], [0], [])
            scripts.append(dict(encoder=enc, script=script, bpb=_pooled(g), ci_lo=r["lo"],
                                ci_hi=r["hi"], n_docs=int(g.doc_id.nunique()), covers=r["covers"]))
    return pd.DataFrame(rows), pd.DataFrame(scripts)


def language_note(data: RunData) -> str:
    """What a reader may compare across languages: eval sets in different languages that hold
    the same document ids (e.g. chapter-aligned Bibles) are parallel text; every other
    cross-language difference mixes language with genre and source."""
    res = data.results
    langs = {str(x) for x in res.language.dropna().unique() if str(x) not in ("", "nan")}
    if len(langs) < 2:
        return ""
    ids: dict[str, set[str]] = {}
    lang_of = dict(zip(res.dataset, res.language.astype(str)))
    smp = data.samples
    if len(smp) and "doc_id" in smp:
        for ds, g in smp.groupby("dataset", sort=False):
            ids[str(ds)] = set(g.doc_id.astype(str))
    pairs = []
    names = sorted(ids)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            shared = ids[a] & ids[b]
            if (lang_of.get(a) != lang_of.get(b) and shared
                    and len(shared) >= 0.9 * max(len(ids[a]), len(ids[b]))):
                pairs.append(f"{a} ({lang_of.get(a)}) and {b} ({lang_of.get(b)}) share "
                             f"{len(shared)} documents")
    base = ("Genre differs across languages: these eval sets come from different sources (quotes, "
            "manuals, interface strings, …), so a BPB difference between languages mixes language "
            "with genre. Compare encoders within a language")
    if pairs:
        return ("Parallel text: " + "; ".join(pairs) + " — the same content in two languages, "
                "so their difference is one of language. Elsewhere: " + base[0].lower() + base[1:]
                + ".")
    return base + ", or use parallel text (same document ids in two languages)."


def clean_buckets(buckets: pd.DataFrame) -> pd.DataFrame:
    """buckets.csv rows of clean text (full mode when present) pooled over seeds and eval sets:
    one row per (analysis, bucket, encoder) with n_words, n_bytes, nll_nats (nats) and bpb."""
    b = buckets[buckets.perturbation_id == CLEAN_ID]
    if (b["mode"] == "full").any():
        b = b[b["mode"] == "full"]
    b = b.groupby(["analysis", "bucket", "encoder"], sort=False)[
        ["n_words", "n_bytes", "nll_nats"]].sum().reset_index()
    b["bpb"] = bpb(b.nll_nats, b.n_bytes)
    return b


def efficiency_table(data: RunData, encoders: list[str], level_mode: str) -> pd.DataFrame:
    """Per encoder from run.json: parameters (embedding share), FLOPs/byte (train, inference),
    training bytes/s, peak memory, and mean bytes per token/patch on clean text."""
    encs = data.run.get("encoders") or {}
    res = data.results
    rows = []
    for label in encoders:
        e = encs.get(label) or {}
        trains = per_seed(e, "train")
        fits = per_seed(e, "fit")
        tr = {k: _mean([t.get(k) for t in trains]) for k in ("bytes", "seconds", "bytes_per_s")}
        tr["peak_mem_bytes"] = max((_num(t.get("peak_mem_bytes")) for t in trains), default=math.nan)
        tr["final_loss"] = _mean([t.get("final_loss_bpb", t.get("final_loss")) for t in trains])
        fit = {"seconds": _mean([f.get("seconds") for f in fits])}
        mem_kind = next((t.get("peak_mem_kind") for t in trains if t.get("peak_mem_kind")), "")
        clean = res[(res.encoder == label) & (res.perturbation_id == CLEAN_ID)
                    & (res["mode"] == level_mode)]
        # pooled over eval sets and seeds with the one definition (core.segments): Σ bytes / Σ
        # segments of the clean cells — the number the segments figure shows too
        seg = (bytes_per_segment(clean.n_bytes.sum(), clean.n_segments.sum())
               if len(clean) and clean.n_segments.notna().all() else math.nan)
        desc = e.get("describe") if isinstance(e.get("describe"), dict) else {}
        seg_train = _num(desc.get("mean_patch_bytes_train", desc.get("bytes_per_token_train")))
        # the segment the bytes/unit figure counts (token, patch, byte); older runs lack the column
        unit = (clean.segment_unit.iloc[0] or clean.token_unit.iloc[0]) if len(clean) else ""
        total = _num(e.get("params_total"))
        emb = _num(e.get("params_embedding"))
        rows.append(dict(
            encoder=label, name=e.get("name") or (clean.encoder_name.iloc[0] if len(clean) else ""),
            params_total=total, params_embedding=emb,
            embedding_share=emb / total if total and not math.isnan(emb) else math.nan,
            flops_per_byte_train=_num(e.get("flops_per_byte_train")),
            flops_per_byte_infer=_num(e.get("flops_per_byte_infer")),
            train_bytes=_num(tr.get("bytes")), train_seconds=_num(tr.get("seconds")),
            bytes_per_s=_num(tr.get("bytes_per_s")), peak_mem_bytes=_num(tr.get("peak_mem_bytes")),
            fit_seconds=_num(fit.get("seconds")), final_loss=_num(tr.get("final_loss")),
            bytes_per_segment=seg, bytes_per_segment_train=seg_train, token_unit=unit,
            peak_mem_kind=mem_kind,
            n_seeds_trained=len(trains),
            # loaded with its weights (the hf encoder): no training compute to match
            trained_elsewhere=bool(e.get("trained_elsewhere")),
        ))
    return pd.DataFrame(rows)


def per_seed(enc: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """``enc[key]`` for every trained seed: run.json keeps per-seed facts under
    ``encoders.<label>.seeds.<seed>.<key>``; a flat ``encoders.<label>.<key>`` is one seed."""
    seeds = enc.get("seeds")
    if isinstance(seeds, dict) and seeds:
        return [v[key] for _, v in sorted(seeds.items()) if isinstance(v, dict)
                and isinstance(v.get(key), dict)]
    return [enc[key]] if isinstance(enc.get(key), dict) else []


def _mean(xs: list[Any]) -> float:
    vals = [v for v in (_num(x) for x in xs) if not math.isnan(v)]
    return float(np.mean(vals)) if vals else math.nan


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def verdict(groups: pd.DataFrame, rob: pd.DataFrame, eff: pd.DataFrame, encoders: list[str],
            primary: str, level_mode: str) -> pd.DataFrame:
    """The summary table: one row per encoder (clean BPB with CI, mean/worst ΔBPB, cost)."""
    rows = []
    for enc in encoders:
        c = groups[(groups.encoder == enc) & (groups.perturbation_id == CLEAN_ID)
                   & (groups["mode"] == level_mode)]
        r = rob[(rob.encoder == enc) & (rob["mode"] == primary)] if len(rob) else rob
        e = eff[eff.encoder == enc]
        worst = r.loc[r.delta_top.idxmax()] if len(r) and r.delta_top.notna().any() else None
        rows.append(dict(
            encoder=enc,
            clean_bpb=c.bpb.iloc[0] if len(c) else math.nan,
            clean_lo=c.ci_lo.iloc[0] if len(c) else math.nan,
            clean_hi=c.ci_hi.iloc[0] if len(c) else math.nan,
            seed_mean=c.seed_mean.iloc[0] if len(c) else math.nan,
            seed_sd=c.seed_sd.iloc[0] if len(c) else math.nan,
            mean_delta=r.delta_top.mean() if len(r) else math.nan,
            mean_rel=r.rel_top.mean() if len(r) else math.nan,
            mean_slope=r.slope.mean() if len(r) else math.nan,
            worst=(f"{worst.perturbation_id} @ {worst.top_severity:g}"
                   if worst is not None else ""),
            worst_delta=worst.delta_top if worst is not None else math.nan,
            flops_per_byte=e.flops_per_byte_infer.iloc[0] if len(e) else math.nan,
            params=e.params_total.iloc[0] if len(e) else math.nan,
        ))
    return pd.DataFrame(rows)


# Beside every interval of a one-seed run (``stats.COVERS_DOCS``): what it does not cover.
ONE_SEED_NOTE = ("one seed, so each interval covers the documents only, not the variance "
                 "between trained models")
# How every interval and p of the report is computed (docs/report.md, "Unit of every interval").
INTERVAL_NOTE = ("95 % CI and p: a t-interval over seeds × documents (a document's seeds drawn "
                 "together; the variance between seeds on S − 1 degrees of freedom, "
                 "Satterthwaite); with one seed it covers the documents only, not training "
                 "variance.")


def covers_phrase(covers: str) -> str:
    """What an interval with ``covers`` (``stats.COVERS_*``) is about, for a table cell or a
    sentence: "documents and seeds", or "documents only (one seed)"; "" when unknown."""
    return {stats.COVERS_BOTH: "documents and seeds",
            stats.COVERS_DOCS: "documents only (one seed)"}.get(covers, "")


@dataclass
class Finding:
    """One summary sentence and its standing: ``status`` is "significant", "mixed" (significant
    against some encoders, not against others), "not distinguishable", "untested" (no
    per-document samples, or no shared documents) or "anomaly"."""

    text: str
    status: str


def _vs(best: str, others: list[str], tests: pd.DataFrame, lower_is: str) -> tuple[str, str]:
    """(clause, status) saying whether ``best`` differs from every other encoder in ``tests``
    (rows with a, b, diff = a − b, ci_lo, ci_hi, p_holm; lower is better).

    lower_is: the word for "better" in the clause ("lower", "less degradation than")."""
    sig, nsig, worse = [], [], []
    untested: dict[str, list[str]] = {}  # reason -> encoders
    doc_only = False  # an interval of one seed: about documents, not training
    for o in others:
        r = tests[((tests.a == best) & (tests.b == o)) | ((tests.a == o) & (tests.b == best))]
        if not len(r) or not is_num(r.p_holm.iloc[0]):
            # the row's own reason where it has one (no shared documents is not the same
            # thing as no samples: the runs may be from different data or seeds)
            why = r.untested.iloc[0] if len(r) and "untested" in r.columns else ""
            untested.setdefault(why if isinstance(why, str) and why else NO_SAMPLES,
                                []).append(o)
            continue
        r = r.iloc[0]
        doc_only |= getattr(r, "covers", "") == stats.COVERS_DOCS
        flip = -1.0 if r.a != best else 1.0  # orient as best − other
        d, lo, hi = flip * r["diff"], flip * r.ci_lo, flip * r.ci_hi
        lo, hi = min(lo, hi), max(lo, hi)
        detail = f"{o}: {sig3(d)} [95 % CI {sig3(lo)}, {sig3(hi)}], Holm {p_phrase(r.p_holm)}"
        if significant(r.p_holm, lo, hi):
            # pooled over all documents it is best, but on the documents both encoders scored
            # the other one can be significantly better (different coverage): say so
            (sig if d < 0 else worse).append(detail)
        elif r.p_holm < ALPHA:  # the test alone would call it: say why it is a tie
            nsig.append(f"{detail} (the CI holds zero)")
        else:
            nsig.append(detail)
    parts = []
    if sig:
        parts.append(f"significantly {lower_is} {'; '.join(sig)}")
    if nsig:
        parts.append(f"not distinguishable from {'; '.join(nsig)}")
    if worse:
        parts.append(f"but significantly worse on the documents both scored than "
                     f"{'; '.join(worse)}")
    for why, encs in untested.items():
        parts.append(f"not tested against {', '.join(encs)} ({why})")
    if doc_only:
        parts.append(ONE_SEED_NOTE)
    # the badge names what the sentence says: "mixed" where it holds significant and
    # non-significant (or opposite) clauses, so it never heads "significantly lower" with a tie
    status = ("mixed" if sig and (nsig or worse) else "not distinguishable" if nsig or worse
              else "untested" if untested else "significant")
    return "; ".join(parts), status


def comparable_parts(encoders: list[str], datasets: dict[str, set[str]]) -> list[list[str]]:
    """The encoders in groups that scored the same data: two encoders that share no eval set
    (``datasets``: encoder -> its eval sets; ``merge_runs`` renames an eval set per run where the
    runs' fingerprints differ) are apart, others together (connected components, in run order).
    One group when all share data, or when ``datasets`` says nothing."""
    parent = {e: e for e in encoders}

    def root(e: str) -> str:
        while parent[e] != e:
            e = parent[e]
        return e

    for a, b in combinations(encoders, 2):
        if a not in datasets or b not in datasets or datasets[a] & datasets[b]:
            parent[root(b)] = root(a)
    parts: dict[str, list[str]] = {}
    for e in encoders:
        parts.setdefault(root(e), []).append(e)
    return list(parts.values())


def _best_findings(t: pd.DataFrame, c: pd.DataFrame, mean_tests: pd.DataFrame, primary: str,
                   level_mode: str, bounds: Sequence[str], among: list[str] | None
                   ) -> list[Finding]:
    """The "lowest clean BPB" and "smallest mean degradation" sentences over the encoders of
    ``t`` (verdict rows); ``among``: the group's encoders, named in the sentence when the run's
    encoders split into groups that share no documents (``comparable_parts``)."""
    out: list[Finding] = []
    encs = list(t.encoder)
    who = f" among {', '.join(among)}" if among else ""
    bound = [e for e in encs if e in set(bounds)]  # scored by an ELBO (upper bound)
    if len(t) and t.clean_bpb.notna().any():
        best = t.loc[t.clean_bpb.idxmin()]
        head = (f"Lowest clean BPB ({level_mode}){who}: {best.encoder} at {best.clean_bpb:.3f} "
                "bits/byte")
        if len(encs) > 1:
            clause, status = _vs(best.encoder, [e for e in encs if e != best.encoder],
                                 c if len(c) else pd.DataFrame(columns=["a", "b"]), "lower than")
            if bound:
                # An ELBO only bounds the model's NLL from above: "lower" against it compares an
                # exact score with a bound, so the sentence must say which numbers are bounds.
                clause += (f"; {', '.join(bound)} {'is' if len(bound) == 1 else 'are'} scored by the "
                           "masked-diffusion ELBO, an upper bound on the model's own NLL, so a "
                           "difference to it bounds the true difference from one side only")
            out.append(Finding(f"{head} — {clause}.", status))
        else:
            out.append(Finding(f"{head} (one encoder: nothing to compare).", "untested"))
    if len(t) == 1 and among:  # the clean sentence said it: no second one-encoder line
        return out
    if len(t) > 1 and t.mean_delta.notna().any():
        best = t.loc[t.mean_delta.idxmin()]
        ci = (f" [95 % CI {sig3(best.mean_lo)}, {sig3(best.mean_hi)}]"
              if "mean_lo" in t and is_num(best.mean_lo) and is_num(best.mean_hi) else "")
        head = (f"Smallest mean degradation ({primary}, mean ΔBPB over perturbations at their "
                f"highest severity){who}: {best.encoder}, {sig3(best.mean_delta)}{ci}")
        m = mean_tests[mean_tests["mode"] == primary] if len(mean_tests) else mean_tests
        clause, status = _vs(best.encoder, [e for e in encs if e != best.encoder],
                             m if len(m) else pd.DataFrame(columns=["a", "b"]),
                             "less degradation than")
        if bound:
            # perturbed and clean ELBO each bound their NLL from above; their difference bounds
            # nothing, so the sentence must not read as an exact degradation
            clause += (f"; {', '.join(bound)} {'is' if len(bound) == 1 else 'are'} scored by the "
                       f"masked-diffusion ELBO, so {'its' if len(bound) == 1 else 'their'} ΔBPB is "
                       "a difference of two upper bounds, not a bound on the true ΔBPB")
        out.append(Finding(f"{head} — {clause}.", status))
    return out


def summary_findings(verdict_df: pd.DataFrame, cmp: pd.DataFrame, mean_tests: pd.DataFrame,
                     anomalies: pd.DataFrame, primary: str, level_mode: str,
                     bounds: Sequence[str] = (), datasets: dict[str, set[str]] | None = None
                     ) -> list[Finding]:
    """The summary's sentences. Every "lowest"/"smallest" names the test behind it: A − B with
    its 95 % CI and Holm-adjusted p against each other encoder; a difference that is not
    significant at ALPHA is called "not distinguishable". ``bounds``: encoders whose BPB is an
    upper bound (masked diffusion's ELBO): a clean-BPB sentence that compares them says so.
    ``datasets``: encoder -> the eval sets it scored; encoders that share none (runs on
    different data) are ranked apart (``comparable_parts``)."""
    out: list[Finding] = []
    c = cmp[(cmp["mode"] == level_mode) & (cmp.perturbation_id == CLEAN_ID)] if len(cmp) else cmp
    parts = comparable_parts(list(verdict_df.encoder), datasets or {})
    if len(parts) > 1:
        # runs on different data: a ranking across them would compare different documents
        out.append(Finding(
            "The encoders did not all score the same documents (runs on different data): clean "
            "BPB and degradation are ranked only among encoders that share documents — "
            + "; ".join(", ".join(p) for p in parts) + ".", "untested"))
    for part in parts:
        out += _best_findings(verdict_df[verdict_df.encoder.isin(part)], c, mean_tests, primary,
                              level_mode, bounds, among=part if len(parts) > 1 else None)
    if len(anomalies):
        # one line for all of them (details and causes: the Robustness section)
        parts = []
        for (enc, pid), g in anomalies.groupby(["encoder", "perturbation_id"], sort=False):
            worst = g.loc[g.delta.idxmin()]
            parts.append(
                f"{pid} improves {enc} at severity "
                f"{', '.join(f'{x:g}' for x in sorted(set(g.severity)))} "
                f"({', '.join(dict.fromkeys(g['mode']))}; largest: ΔBPB {sig3(worst.delta)} "
                f"[95 % CI {sig3(worst.delta_lo)}, {sig3(worst.delta_hi)}] in {worst['mode']}, Holm "
                f"{p_phrase(worst.p_delta_holm)})")
        out.append(Finding(
            f"Anomal{'y' if len(anomalies) == 1 else 'ies'} — a perturbation makes an encoder "
            f"significantly better: {'; '.join(parts)}. Unexpected under noise: see Robustness "
            "for possible causes.", "anomaly"))
    return out


def compute_tables(data: RunData, n_boot: int = 1000, n_perm: int = 10000, seed: int = 0,
                   processes: int = 1) -> Tables:
    """Compute every table of a report from a loaded run (deterministic for a given ``seed``).

    Every interval and p is ``stats.crossed_test`` (no draws); ``n_perm`` and ``seed`` drive the
    documents-only permutation test (``p_perm``). ``n_boot`` is not used by these tables (the
    report's AR-vs-MDM table and scaling fit resample; ``render_run`` passes one set of options).

    processes: how many forked processes (``reports.pool.fork_map``; 1 = in this one) run the
    resampling of the per-group and the pairwise tables, most of this function's time. Every
    bootstrap and permutation draw comes from a generator keyed by its group or comparison
    (``_rng``), never from one shared stream, so the tables are the same for any ``processes``
    (and in any order of computation: ``tables_before_comparisons`` then ``add_comparisons``,
    which is what this does)."""
    t, idx = tables_before_comparisons(data, n_boot, n_perm, seed, processes)
    return add_comparisons(t, idx, n_boot, n_perm, seed, processes)[0]


def tables_before_comparisons(data: RunData, n_boot: int = 1000, n_perm: int = 10000, seed: int = 0,
                              processes: int = 1) -> tuple[Tables, _Index]:
    """Every table but the pairwise comparisons (``comparisons`` empty, ``verdict_lines`` empty,
    the mean tests' p-values not yet Holm-adjusted with them) — all that the report's figures
    draw from — and the samples' index ``add_comparisons`` needs. ``compute_tables`` is the two."""
    res = data.results
    encoders = list(dict.fromkeys(res.encoder))
    modes = [m for m in MODES if m in set(res["mode"])]
    primary = modes[0]
    level_mode = "full" if "full" in modes else primary
    idx = _Index(data.samples)
    groups = group_table(data, idx, processes)
    # ΔBPB-vs-zero tests are their own Holm family (a different question from A vs B)
    groups["p_delta_holm"] = stats.holm(groups.p_delta.to_numpy(float)) if len(groups) else []
    rob = robustness_table(groups)
    fam = family_table(rob)
    means = mean_degradation_tests(groups, idx, encoders, modes, n_perm, seed)
    langs, scripts = language_tables(data, idx, level_mode, primary)
    eff = efficiency_table(data, encoders, level_mode)
    table = verdict(groups, rob, eff, encoders, primary, level_mode)
    if len(table):
        cis = mean_delta_cis(groups, idx, encoders, primary)
        table["mean_lo"] = [cis[e][0] for e in table.encoder]
        table["mean_hi"] = [cis[e][1] for e in table.encoder]
    anomalies = anomaly_table(groups, modes)
    # seeds behind each encoder's pooled numbers; n_seeds is the most any one encoder has (not
    # the run's distinct seeds: in a comparison of run A, seed 0, and run B, seed 1, every number
    # is from one seed, and "pooled over 2 seeds" would be false)
    per_encoder = {str(k): int(v) for k, v in res.groupby("encoder", sort=False).seed.nunique().items()}
    if len(table):  # what each encoder's intervals cover (one seed: documents only)
        table["covers"] = [stats.covers(per_encoder.get(str(e), 1)) for e in table.encoder]
    return Tables(encoders=encoders, modes=modes, primary_mode=primary, level_mode=level_mode,
                  groups=groups, robustness=rob, families=fam, comparisons=pd.DataFrame(), languages=langs,
                  scripts=scripts, efficiency=eff, verdict=table, verdict_lines=[],
                  n_seeds=max(per_encoder.values(), default=1), mean_tests=means, anomalies=anomalies,
                  encoder_seeds=per_encoder, bounds=mdm_bounds(res)), idx


def mdm_bounds(res: pd.DataFrame) -> list[str]:
    """The encoders of ``res`` (results rows) scored by the masked-diffusion ELBO, in run order:
    their BPB bounds the model's own NLL from above, so every place that shows it says so."""
    return list(dict.fromkeys(res.encoder[res.objective == "mdm"])) if "objective" in res else []


def add_comparisons(t: Tables, idx: _Index, n_boot: int = 1000, n_perm: int = 10000,
                    seed: int = 0, processes: int = 1, beside: Sequence[Callable[[], Any]] = ()
                    ) -> tuple[Tables, list[Any]]:
    """``t`` (from ``tables_before_comparisons``) with the pairwise comparisons, the Holm
    adjustment they share with the mean tests, and the summary findings; and the results of
    ``beside``: tasks run in the comparisons' pool of processes, ahead of them (the report's
    figures, drawn while the comparisons resample: ``reports.render``)."""
    cmp, done = comparison_table(t.groups, idx, t.encoders, n_perm, seed, processes, beside=beside)
    holm_family(cmp, t.mean_tests)
    g = t.groups
    sets = {str(e): set(",".join(x.datasets).split(",")) for e, x in g.groupby("encoder", sort=False)} \
        if len(g) and "datasets" in g else {}
    lines = summary_findings(t.verdict, cmp, t.mean_tests, t.anomalies, t.primary_mode, t.level_mode,
                             t.bounds, sets)
    return dataclasses.replace(t, comparisons=cmp, verdict_lines=lines), done
