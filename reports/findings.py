"""The report's verdict: one row per encoder (clean BPB, robustness, cost) and the findings
stated in words, each backed by a test of ``reports.comparisons``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd

from core.schema import CLEAN_ID
from reports import stats
from reports.comparisons import ALPHA, NO_SAMPLES, significant
from reports.fmt import is_num, p_phrase, sig3


def per_seed(enc: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """``enc[key]`` for every trained seed: run.json keeps per-seed facts under
    ``encoders.<label>.seeds.<seed>.<key>``; a flat ``encoders.<label>.<key>`` is one seed."""
    seeds = enc.get("seeds")
    if isinstance(seeds, dict) and seeds:
        return [v[key] for _, v in sorted(seeds.items()) if isinstance(v, dict)
                and isinstance(v.get(key), dict)]
    return [enc[key]] if isinstance(enc.get(key), dict) else []


def mean_of(xs: list[Any]) -> float:
    """The mean of the numbers among ``xs`` (NaN and non-numbers left out; NaN if none)."""
    vals = [v for v in (as_num(x) for x in xs) if not math.isnan(v)]
    return float(np.mean(vals)) if vals else math.nan


def as_num(x: Any) -> float:
    """``x`` as a float, NaN where it is not a number."""
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
