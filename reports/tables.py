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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from core.metrics import bpb
from core.schema import CLEAN_ID, MODES
from core.segments import bytes_per_segment
from reports import stats
from reports.comparisons import (  # noqa: F401 - ALPHA, NO_*, significant: the report's rule, read from here too
    ALPHA,
    NO_SAME_CELLS,
    NO_SAMPLES,
    comparison_table,
    holm_family,
    mean_degradation_tests,
    mean_delta_cis,
    pair_matrix,
    significant,
)
from reports.findings import (  # noqa: F401 - covers_phrase and INTERVAL_NOTE are read from here too
    INTERVAL_NOTE,
    Finding,
    as_num,
    covers_phrase,
    mean_of,
    per_seed,
    summary_findings,
    verdict,
)
from reports.fmt import sig3
from reports.load import RunData
from reports.paired import (
    DOC,
    GROUP,
    Index,
    align,
    baseline_rows,
    crossed_test,
    pooled_bpb,
    sev_key,
)
from reports.pool import fork_map


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


def _group_stats(idx: Index, key: tuple, with_delta: bool) -> dict[str, Any]:
    """The interval numbers of one group (``group_table``'s unit of work in a worker): its BPB
    CI and what it covers and, when ``with_delta`` (a perturbed group with a clean reference),
    the paired ΔBPB CI and ``p_delta`` (``stats.crossed_test``: seeds × documents). Only the keys
    computed are returned (the row keeps NaN for the others)."""
    enc, pid, sev, mode = key
    out: dict[str, Any] = {}
    s = idx.get(enc, pid, sev, mode)
    if s is not None and len(s.unit):
        r = crossed_test(s.seed, s.doc, [s.nll, s.nbytes], [0], [])
        out["ci_lo"], out["ci_hi"], out["covers"] = r["lo"], r["hi"], r["covers"]
    if with_delta:
        c = idx.get(enc, CLEAN_ID, 0.0, mode)
        if s is not None and c is not None:
            i_s, i_c = align(s, c)
            if len(i_s):
                r = crossed_test(s.seed[i_s], s.doc[i_s], [s.nll[i_s], c.nll[i_c], c.nbytes[i_c]],
                                  [0], [1])
                out["delta_lo"], out["delta_hi"], out["p_delta"] = r["lo"], r["hi"], r["p"]
    return out


def group_table(data: RunData, idx: Index, processes: int = 1) -> pd.DataFrame:
    """One row per group: metric BPB, 95 % CI (``stats.crossed_test``: seeds × documents) and
    ``covers`` (what it covers: ``stats.COVERS_*``), mean ± sd over seeds, edit rate, ΔBPB vs
    clean with a paired CI, relative degradation, and ``p_delta``: the paired p of "ΔBPB = 0"
    (perturbed vs clean NLL of the same document and seed, the same test), which flags a
    perturbation that significantly *improves* an encoder (see ``anomaly_table``).

    processes: how many forked processes run the groups' intervals (``_group_stats``, one
    group a task; 1 = in this one); the table is the same either way."""
    res = data.results.copy()
    res["severity"] = sev_key(res["severity"])
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
        # the ones groupby("seed").apply(pooled_bpb) gave, without its per-group overhead
        seeds = g.seed.to_numpy()
        per_seed = [pooled_bpb(g[seeds == s]) for s in np.unique(seeds)]
        mean, sd = stats.seed_mean_sd(per_seed)
        row: dict[str, Any] = dict(
            encoder=enc, perturbation_id=pid, perturbation=g.perturbation.iloc[0],
            family=g.family.iloc[0], severity=sev, mode=mode, bpb=pooled_bpb(g),
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
                base = baseline_rows(clean, enc, mode, datasets, seed_set)
                refs[ref_key] = pooled_bpb(base) if len(base) else None
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


def language_tables(data: RunData, idx: Index, mode: str, delta_mode: str
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
                   bpb=pooled_bpb(g), ci_lo=math.nan, ci_hi=math.nan, mean_delta=math.nan,
                   covers="")
        s = idx.get(enc, CLEAN_ID, 0.0, mode)
        if s is not None:
            s = s.take(s.dataset == ds)
            if len(s.unit):
                r = crossed_test(s.seed, s.doc, [s.nll, s.nbytes], [0], [])
                row["ci_lo"], row["ci_hi"], row["covers"] = r["lo"], r["hi"], r["covers"]
        p = pert[(pert.encoder == enc) & (pert.dataset == ds)]
        if len(p):
            # mean over perturbations of ΔBPB at each perturbation's highest severity
            top = p[p.severity == p.groupby("perturbation_id").severity.transform("max")]
            base = dclean[(dclean.encoder == enc) & (dclean.dataset == ds)]
            deltas = [pooled_bpb(t) - pooled_bpb(base[base.seed.isin(t.seed)])
                      for _, t in top.groupby("perturbation_id")]
            row["mean_delta"] = float(np.mean(deltas))
        rows.append(row)
    scripts = []
    smp = data.samples
    if len(smp):
        sc = smp[(smp.perturbation_id == CLEAN_ID) & (smp["mode"] == mode) & (smp.script != "")]
        for (enc, script), g in sc.groupby(["encoder", "script"], sort=False):
            r = crossed_test(g.seed.to_numpy(), g.groupby(DOC, sort=False).ngroup().to_numpy(),
                              [g.nll_nats.to_numpy(), g.metric_bytes.to_numpy()], [0], [])
            scripts.append(dict(encoder=enc, script=script, bpb=pooled_bpb(g), ci_lo=r["lo"],
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
        tr = {k: mean_of([t.get(k) for t in trains]) for k in ("bytes", "seconds", "bytes_per_s")}
        tr["peak_mem_bytes"] = max((as_num(t.get("peak_mem_bytes")) for t in trains), default=math.nan)
        tr["final_loss"] = mean_of([t.get("final_loss_bpb", t.get("final_loss")) for t in trains])
        fit = {"seconds": mean_of([f.get("seconds") for f in fits])}
        mem_kind = next((t.get("peak_mem_kind") for t in trains if t.get("peak_mem_kind")), "")
        clean = res[(res.encoder == label) & (res.perturbation_id == CLEAN_ID)
                    & (res["mode"] == level_mode)]
        # pooled over eval sets and seeds with the one definition (core.segments): Σ bytes / Σ
        # segments of the clean cells — the number the segments figure shows too
        seg = (bytes_per_segment(clean.n_bytes.sum(), clean.n_segments.sum())
               if len(clean) and clean.n_segments.notna().all() else math.nan)
        desc = e.get("describe") if isinstance(e.get("describe"), dict) else {}
        seg_train = as_num(desc.get("mean_patch_bytes_train", desc.get("bytes_per_token_train")))
        # the segment the bytes/unit figure counts (token, patch, byte); older runs lack the column
        unit = (clean.segment_unit.iloc[0] or clean.token_unit.iloc[0]) if len(clean) else ""
        total = as_num(e.get("params_total"))
        emb = as_num(e.get("params_embedding"))
        rows.append(dict(
            encoder=label, name=e.get("name") or (clean.encoder_name.iloc[0] if len(clean) else ""),
            params_total=total, params_embedding=emb,
            embedding_share=emb / total if total and not math.isnan(emb) else math.nan,
            flops_per_byte_train=as_num(e.get("flops_per_byte_train")),
            flops_per_byte_infer=as_num(e.get("flops_per_byte_infer")),
            train_bytes=as_num(tr.get("bytes")), train_seconds=as_num(tr.get("seconds")),
            bytes_per_s=as_num(tr.get("bytes_per_s")), peak_mem_bytes=as_num(tr.get("peak_mem_bytes")),
            fit_seconds=as_num(fit.get("seconds")), final_loss=as_num(tr.get("final_loss")),
            bytes_per_segment=seg, bytes_per_segment_train=seg_train, token_unit=unit,
            peak_mem_kind=mem_kind,
            n_seeds_trained=len(trains),
            # loaded with its weights (the hf encoder): no training compute to match
            trained_elsewhere=bool(e.get("trained_elsewhere")),
        ))
    return pd.DataFrame(rows)


def compute_tables(data: RunData, n_boot: int = 1000, n_perm: int = 10000, seed: int = 0,
                   processes: int = 1) -> Tables:
    """Compute every table of a report from a loaded run (deterministic for a given ``seed``).

    Every interval and p is ``stats.crossed_test`` (no draws); ``n_perm`` and ``seed`` drive the
    documents-only permutation test (``p_perm``). ``n_boot`` is not used by these tables (the
    report's AR-vs-MDM table and scaling fit resample; ``render_run`` passes one set of options).

    processes: how many forked processes (``reports.pool.fork_map``; 1 = in this one) run the
    resampling of the per-group and the pairwise tables, most of this function's time. Every
    bootstrap and permutation draw comes from a generator keyed by its group or comparison
    (``group_rng``), never from one shared stream, so the tables are the same for any ``processes``
    (and in any order of computation: ``tables_before_comparisons`` then ``add_comparisons``,
    which is what this does)."""
    t, idx = tables_before_comparisons(data, n_boot, n_perm, seed, processes)
    return add_comparisons(t, idx, n_boot, n_perm, seed, processes)[0]


def tables_before_comparisons(data: RunData, n_boot: int = 1000, n_perm: int = 10000, seed: int = 0,
                              processes: int = 1) -> tuple[Tables, Index]:
    """Every table but the pairwise comparisons (``comparisons`` empty, ``verdict_lines`` empty,
    the mean tests' p-values not yet Holm-adjusted with them) — all that the report's figures
    draw from — and the samples' index ``add_comparisons`` needs. ``compute_tables`` is the two."""
    res = data.results
    encoders = list(dict.fromkeys(res.encoder))
    modes = [m for m in MODES if m in set(res["mode"])]
    primary = modes[0]
    level_mode = "full" if "full" in modes else primary
    idx = Index(data.samples)
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


def add_comparisons(t: Tables, idx: Index, n_boot: int = 1000, n_perm: int = 10000,
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
