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

import math
import zlib
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from core.metrics import LN2, bpb
from core.schema import CLEAN_ID, MODES
from reports import stats
from reports.load import RunData

GROUP = ["encoder", "perturbation_id", "severity", "mode"]
UNIT = ["seed", "dataset", "doc_id"]  # a paired unit: one document under one seed


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
    verdict_lines: list[str] = field(default_factory=list)
    n_seeds: int = 1


def _rng(base_seed: int, *key: Any) -> np.random.Generator:
    """A generator keyed by the group, so a table's numbers do not depend on computation order."""
    return np.random.default_rng([base_seed, zlib.crc32(repr(key).encode("utf-8"))])


def _sev(x: pd.Series) -> pd.Series:
    return x.astype(float).round(10)


@dataclass
class _Cell:
    """Per-document arrays of one group, sorted by unit code (seed, eval set, document).

    unit: (n,) int64 codes; seed: (n,) int; dataset: (n,) object; nll: (n,) nats;
    nbytes: (n,) metric bytes (scored bytes in clean_target, clean bytes in full mode).
    """

    unit: np.ndarray
    seed: np.ndarray
    dataset: np.ndarray
    nll: np.ndarray
    nbytes: np.ndarray

    def take(self, mask_or_idx: np.ndarray) -> _Cell:
        return _Cell(self.unit[mask_or_idx], self.seed[mask_or_idx],
                     self.dataset[mask_or_idx], self.nll[mask_or_idx], self.nbytes[mask_or_idx])


def _seed_groups(seed: np.ndarray, cols: list[np.ndarray]) -> list[np.ndarray]:
    """Split per-document columns into one (n_docs_s, K) matrix per seed (hierarchical level)."""
    m = np.column_stack(cols).astype(float)
    return [m[seed == s] for s in np.unique(seed)]


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
                g["nll_nats"].to_numpy(float), g["metric_bytes"].to_numpy(float))

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


def group_table(data: RunData, idx: _Index, n_boot: int, seed: int) -> pd.DataFrame:
    """One row per group: metric BPB, 95 % CI (hierarchical bootstrap: seeds, then documents),
    mean ± sd over seeds, edit rate, ΔBPB vs clean with a paired CI, relative degradation."""
    res = data.results.copy()
    res["severity"] = _sev(res["severity"])
    clean = {k: g for k, g in res[res.perturbation_id == CLEAN_ID].groupby(
        ["encoder", "mode"], sort=False)}
    out = []
    for key, g in res.groupby(GROUP, sort=False):
        enc, pid, sev, mode = key
        per_seed = g.groupby("seed").apply(_pooled, include_groups=False)
        mean, sd = stats.seed_mean_sd(per_seed.to_numpy())
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
            delta_hi=math.nan, rel=math.nan, bpb_clean_ref=math.nan,
        )
        s = idx.get(enc, pid, sev, mode)
        if s is not None and len(s.unit):
            row["ci_lo"], row["ci_hi"] = stats.bootstrap_ci(
                _seed_groups(s.seed, [s.nll, s.nbytes]), stats.ratio_stat(0, 1), n_boot,
                _rng(seed, "bpb", *key))
        if pid != CLEAN_ID:
            base = _baseline(clean, enc, mode, set(g.dataset), set(g.seed))
            if len(base):
                row["bpb_clean_ref"] = _pooled(base)
                row["delta"] = row["bpb"] - row["bpb_clean_ref"]
                row["rel"] = row["delta"] / row["bpb_clean_ref"]
                c = idx.get(enc, CLEAN_ID, 0.0, mode)
                if s is not None and c is not None:
                    i_s, i_c = _align(s, c)
                    if len(i_s):
                        row["delta_lo"], row["delta_hi"] = stats.bootstrap_ci(
                            _seed_groups(s.seed[i_s], [s.nll[i_s], c.nll[i_c], c.nbytes[i_c]]),
                            stats.diff_stat([0], [1], 2), n_boot, _rng(seed, "delta", *key))
        else:
            row["bpb_clean_ref"] = row["bpb"]
        out.append(row)
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
            curve="; ".join(f"{s:g}: {d:+.3f}" for s, d in zip(g.severity, g.delta)),
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
    """Per paired unit: A, B (nll nats), bytes, seed; for perturbed cells also the clean
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
    out.update(bytes=sa.nbytes[ia], seed=sa.seed[ia])
    return out


def comparison_table(groups: pd.DataFrame, idx: _Index, encoders: list[str], n_boot: int,
                     n_perm: int, seed: int) -> pd.DataFrame:
    """Every encoder pair on every shared group: on clean cells the BPB difference, on perturbed
    cells the ΔBPB difference (difference in degradation: negative = A degrades less). Paired
    bootstrap CI, byte-weighted paired permutation p, Wilcoxon p; Holm over all rows."""
    out = []
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
                p_wilcoxon=math.nan)
            j = _paired_units(idx, a, b, pid, sev, mode)
            if j is not None:
                if clean:
                    cols, plus, minus = ["A", "B", "bytes"], [0], [1]
                    d_nats = j["A"] - j["B"]
                else:
                    cols, plus, minus = ["A", "Ac", "B", "Bc", "bytes"], [0, 3], [1, 2]
                    d_nats = (j["A"] - j["Ac"]) - (j["B"] - j["Bc"])
                d_bits = d_nats / (LN2 * j["bytes"])
                key = (a, b, pid, sev, mode)
                row["ci_lo"], row["ci_hi"] = stats.bootstrap_ci(
                    _seed_groups(j["seed"], [j[c] for c in cols]),
                    stats.diff_stat(plus, minus, len(cols) - 1), n_boot, _rng(seed, "cmp", *key))
                row["n_units"] = len(d_bits)
                row["diff_paired"] = float(d_nats.sum() / (LN2 * j["bytes"].sum()))
                row["p_perm"] = stats.paired_permutation_test(
                    d_bits, j["bytes"], n_perm, _rng(seed, "perm", *key))
                row["p_wilcoxon"] = stats.wilcoxon_p(d_bits)
            out.append(row)
    df = pd.DataFrame(out)
    if len(df):
        df["p_holm"] = stats.holm(df.p_perm.to_numpy())
        sig_p = df.p_perm < 0.05
        sig_w = df.p_wilcoxon < 0.05
        df["wilcoxon_agrees"] = np.where(df.p_wilcoxon.isna(), None, sig_p == sig_w)
    return df


def language_tables(data: RunData, idx: _Index, mode: str, delta_mode: str, n_boot: int,
                    seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Clean BPB per (encoder, eval set) with CI in ``mode``, mean ΔBPB in ``delta_mode``, and
    clean BPB per (encoder, script) from the documents' own scripts in samples.jsonl (a
    mixed-script set splits into its scripts)."""
    res = data.results
    clean = res[(res.perturbation_id == CLEAN_ID) & (res["mode"] == mode)]
    pert = res[(res.perturbation_id != CLEAN_ID) & (res["mode"] == delta_mode)]
    dclean = res[(res.perturbation_id == CLEAN_ID) & (res["mode"] == delta_mode)]
    rows = []
    for (enc, ds), g in clean.groupby(["encoder", "dataset"], sort=False):
        row = dict(encoder=enc, dataset=ds, language=g.language.iloc[0], script=g.script.iloc[0],
                   bpb=_pooled(g), ci_lo=math.nan, ci_hi=math.nan, mean_delta=math.nan)
        s = idx.get(enc, CLEAN_ID, 0.0, mode)
        if s is not None:
            s = s.take(s.dataset == ds)
            if len(s.unit):
                row["ci_lo"], row["ci_hi"] = stats.bootstrap_ci(
                    _seed_groups(s.seed, [s.nll, s.nbytes]), stats.ratio_stat(), n_boot,
                    _rng(seed, "lang", enc, ds, mode))
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
            lo, hi = stats.bootstrap_ci(_seed_groups(g.seed.to_numpy(),
                                                     [g.nll_nats.to_numpy(), g.metric_bytes]),
                                        stats.ratio_stat(), n_boot,
                                        _rng(seed, "script", enc, script, mode))
            scripts.append(dict(encoder=enc, script=script, bpb=_pooled(g), ci_lo=lo, ci_hi=hi,
                                n_docs=int(g.doc_id.nunique())))
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
        seg = (float(clean.n_bytes.sum() / clean.n_segments.sum())
               if len(clean) and clean.n_segments.notna().all() and clean.n_segments.sum() > 0
               else math.nan)
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
            bytes_per_segment=seg, token_unit=unit, peak_mem_kind=mem_kind,
            n_seeds_trained=len(trains),
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


def verdict(groups: pd.DataFrame, rob: pd.DataFrame, cmp: pd.DataFrame, eff: pd.DataFrame,
            encoders: list[str], primary: str, level_mode: str) -> tuple[pd.DataFrame, list[str]]:
    """The summary table (one row per encoder) and plain-language lines from the Holm-corrected
    comparisons."""
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
    table = pd.DataFrame(rows)
    lines: list[str] = []
    if len(table) and table.clean_bpb.notna().any():
        best = table.loc[table.clean_bpb.idxmin()]
        lines.append(f"Lowest clean BPB ({level_mode}): {best.encoder} at {best.clean_bpb:.3f} "
                     "bits/byte.")
    if len(table) > 1 and table.mean_delta.notna().any():
        best = table.loc[table.mean_delta.idxmin()]
        lines.append(f"Smallest mean degradation ({primary}, highest severity of each "
                     f"perturbation): {best.encoder}, ΔBPB {best.mean_delta:+.3f}.")
    if len(cmp):
        for (a, b), g in cmp[cmp["mode"] == primary].groupby(["a", "b"], sort=False):
            p = g[g.quantity == "ΔBPB"]
            if not len(p):
                continue
            sig = p[p.p_holm < 0.05]
            lines.append(
                f"{a} vs {b}: {a} degrades significantly less in {int((sig['diff'] < 0).sum())} "
                f"and more in {int((sig['diff'] > 0).sum())} of {len(p)} perturbed cells "
                f"(Holm-adjusted p < 0.05; {int(p.p_perm.notna().sum())} tested).")
    return table, lines


def compute_tables(data: RunData, n_boot: int = 1000, n_perm: int = 10000, seed: int = 0
                   ) -> Tables:
    """Compute every table of a report from a loaded run (deterministic for a given ``seed``)."""
    res = data.results
    encoders = list(dict.fromkeys(res.encoder))
    modes = [m for m in MODES if m in set(res["mode"])]
    primary = modes[0]
    level_mode = "full" if "full" in modes else primary
    idx = _Index(data.samples)
    groups = group_table(data, idx, n_boot, seed)
    rob = robustness_table(groups)
    fam = family_table(rob)
    cmp = comparison_table(groups, idx, encoders, n_boot, n_perm, seed)
    langs, scripts = language_tables(data, idx, level_mode, primary, n_boot, seed)
    eff = efficiency_table(data, encoders, level_mode)
    table, lines = verdict(groups, rob, cmp, eff, encoders, primary, level_mode)
    return Tables(encoders=encoders, modes=modes, primary_mode=primary, level_mode=level_mode,
                  groups=groups, robustness=rob, families=fam, comparisons=cmp, languages=langs,
                  scripts=scripts, efficiency=eff, verdict=table, verdict_lines=lines,
                  n_seeds=int(res.seed.nunique()))
