"""The report's opening answer: is tokenizer-free more robust than BPE, and how sure are we?

Each tokenizer-free encoder (every encoder whose registry name is not a BPE kind: bytes,
fuzzytok, blt, plugins) is set against each BPE encoder of the same objective (an MDM encoder
against an MDM BPE where there is one) on three quantities, one sentence each:

- clean BPB (the verdict table's mode), from the clean cell of ``Tables.comparisons``;
- mean degradation over perturbations at their highest severity (the primary mode), from
  ``Tables.mean_tests``;
- degradation per perturbation family, from the perturbed cells of ``Tables.comparisons`` at each
  perturbation's highest severity (one cell per perturbation of the family).

Nothing is recomputed here: every difference, CI and Holm p is the comparison tables' own, and a
difference is called only where ``reports.tables.significant`` calls it; anything else is a tie.
Beside the sentences, ``certainty`` lists what the numbers rest on (seeds, documents, model size,
the suite's description) and the caveats that follow from them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from core.schema import CLEAN_ID
from reports import stats
from reports.fmt import is_num, p_phrase, sig3
from reports.tables import ALPHA, NO_SAME_CELLS, NO_SAMPLES, Tables, covers_phrase, significant

BPE_KINDS = frozenset({"bpe"})  # registry names of subword (BPE) encoders
QUESTION = "Is tokenizer-free more robust than BPE, and how sure are we?"


@dataclass
class Claim:
    """One sentence of the headline and its verdict: ``status`` is "better" (the tokenizer-free
    encoder is significantly better), "worse", "tie" (tested, not significant) or "untested";
    ``badge`` is the words the page shows for it."""

    quantity: str  # "clean BPB", "degradation", "degradation: <family>"
    text: str
    status: str

    @property
    def badge(self) -> str:
        return {"better": "tokenizer-free better", "worse": "BPE better",
                "tie": "tie", "untested": "untested"}[self.status]


@dataclass
class Matchup:
    """A tokenizer-free encoder against one BPE encoder: its claims in order (clean BPB, overall
    degradation, then one per family)."""

    tf: str
    bpe: str
    claims: list[Claim] = field(default_factory=list)


@dataclass
class Headline:
    question: str
    matchups: list[Matchup]
    fallback: str  # why there is no matchup (no BPE or no tokenizer-free encoder), else ""
    certainty: list[tuple[str, str]]  # (label, text): what the numbers rest on
    caveats: list[str]
    reading: str = ""  # what each quantity is (modes, severities), said once above the sentences


def encoder_kinds(results: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """label -> (registry name, objective) from results rows (``encoder_name``, ``objective``;
    a run without them: the label is the name, the objective "ar")."""
    out: dict[str, tuple[str, str]] = {}
    if not len(results):
        return out
    names = results["encoder_name"] if "encoder_name" in results else results["encoder"]
    objs = results["objective"] if "objective" in results else pd.Series("ar", index=results.index)
    for label, name, obj in zip(results["encoder"], names, objs):
        out.setdefault(str(label), (str(name or label), str(obj or "ar")))
    return out


def _row(tests: pd.DataFrame, x: str, y: str) -> tuple[Any, float] | None:
    """The row of ``tests`` comparing x with y (either order) and the sign that orients its
    difference as x − y; None when the pair was not compared."""
    if not len(tests):
        return None
    r = tests[((tests.a == x) & (tests.b == y)) | ((tests.a == y) & (tests.b == x))]
    if not len(r):
        return None
    r = r.iloc[0]
    return r, (1.0 if r.a == x else -1.0)


def _judge(row: tuple[Any, float] | None, missing: str = NO_SAMPLES) -> tuple[str, str]:
    """(status, "d bits/byte [95 % CI lo, hi], Holm p") of a comparison row oriented as
    tf − bpe; ``missing``: why there is no row at all."""
    if row is None:
        return "untested", f"not compared ({missing})"
    r, s = row
    why = r.get("untested", "")
    if (isinstance(why, str) and why) or not is_num(r.get("p_holm")) or not is_num(r["diff"]):
        return "untested", f"not tested ({why or NO_SAMPLES})"
    d = s * float(r["diff"])
    lo, hi = sorted((s * float(r.ci_lo), s * float(r.ci_hi)))
    detail = f"{sig3(d)} bits/byte [95 % CI {sig3(lo)}, {sig3(hi)}], Holm {p_phrase(r.p_holm)}"
    if not bool(significant(r.p_holm, lo, hi)):
        return "tie", detail
    return ("better" if d < 0 else "worse"), detail


_VERDICT = {
    "clean": {"better": "{tf} has significantly lower clean BPB",
              "worse": "{tf} has significantly higher clean BPB",
              "tie": "not significant: a tie", "untested": "no verdict"},
    "delta": {"better": "{tf} degrades significantly less",
              "worse": "{tf} degrades significantly more",
              "tie": "not significant: a tie", "untested": "no verdict"},
}


def _clean_claim(t: Tables, tf: str, bpe: str) -> Claim:
    c = t.comparisons
    c = c[(c["mode"] == t.level_mode) & (c.perturbation_id == CLEAN_ID)] if len(c) else c
    status, detail = _judge(_row(c, tf, bpe))
    verdict = _VERDICT["clean"][status].format(tf=tf)
    return Claim("clean BPB", f"Clean BPB, {tf} − {bpe}: {detail} — {verdict}.", status)


def _overall_claim(t: Tables, tf: str, bpe: str) -> Claim:
    m = t.mean_tests
    m = m[m["mode"] == t.primary_mode] if len(m) else m
    status, detail = _judge(_row(m, tf, bpe))
    verdict = _VERDICT["delta"][status].format(tf=tf)
    return Claim("degradation", f"Mean degradation, {tf} − {bpe}: {detail} — {verdict}.", status)


def _family_claims(t: Tables, tf: str, bpe: str) -> list[Claim]:
    rob = t.robustness
    if not len(rob):
        return []
    rob = rob[(rob["mode"] == t.primary_mode) & (rob.encoder == tf)]
    c = t.comparisons
    c = c[(c["mode"] == t.primary_mode) & (c.quantity == "ΔBPB")] if len(c) else c
    g = t.groups
    scored = set(zip(g.encoder, g.perturbation_id, g.severity, g["mode"])) if len(g) else set()
    out = []
    for fam, g in rob.groupby("family", sort=False):
        parts = []
        statuses = []
        for r in g.itertuples(index=False):
            cell = c[(c.perturbation_id == r.perturbation_id)
                     & (c.severity == r.top_severity)] if len(c) else c
            # runs merged by compare may not share a perturbation: that, not missing samples
            lacks = (bpe, r.perturbation_id, r.top_severity, t.primary_mode) not in scored
            status, detail = _judge(_row(cell, tf, bpe), NO_SAME_CELLS if lacks else NO_SAMPLES)
            statuses.append(status)
            parts.append((f"{r.perturbation_id} @ {r.top_severity:g}", status, detail))
        tested = [s for s in statuses if s != "untested"]
        # a family is called only when its perturbations agree; a split family is a tie
        status = (tested[0] if tested and len(set(tested)) == 1 else
                  "tie" if tested else "untested")
        if len(parts) == 1:
            cell, _, detail = parts[0]
            body = f"({cell}), {tf} − {bpe}: {detail}"
        else:
            word = {"better": f"{tf} less", "worse": f"{tf} more", "tie": "a tie",
                    "untested": "untested"}
            body = f", {tf} − {bpe}: " + "; ".join(
                f"{cell}: {detail} ({word[s]})" for cell, s, detail in parts)
            if status == "tie" and len(set(tested)) > 1:
                body += "; the perturbations disagree"
        verdict = _VERDICT["delta"][status].format(tf=tf)
        out.append(Claim(f"degradation: {fam}", f"Under {fam} {body} — {verdict}.", status))
    return out


def _certainty(t: Tables, suites: Sequence[dict[str, Any]], kinds: dict[str, tuple[str, str]],
               interval_scope: str) -> tuple[list[tuple[str, str]], list[str]]:
    rows: list[tuple[str, str]] = []
    caveats: list[str] = []
    seeds = t.encoder_seeds or {e: t.n_seeds for e in t.encoders}
    counts = sorted(set(seeds.values()))
    rows.append(("seeds", f"{counts[0]} per encoder" if len(counts) == 1 else
                 ", ".join(f"{e}: {n}" for e, n in seeds.items())))
    g = t.groups
    clean = g[(g.perturbation_id == CLEAN_ID) & (g["mode"] == t.level_mode)] if len(g) else g
    if len(clean) and "n_docs" in clean and "n_seeds" in clean:
        # n_docs counts (seed, document) units: per seed, a document is one unit
        n = (clean.n_docs / clean.n_seeds.clip(lower=1)).dropna()
        if len(n):
            lo, hi = int(round(n.min())), int(round(n.max()))
            span = f"{lo}" if lo == hi else f"{lo}–{hi}"
            rows.append(("documents", f"{span} per encoder" + (" and seed" if t.n_seeds > 1
                                                              else "")))
    e = t.efficiency
    if len(e) and "params_total" in e and e.params_total.notna().any():
        p = e.params_total.dropna()
        rows.append(("model size", f"{_si(p.min())} parameters" if p.min() == p.max() else
                     f"{_si(p.min())}–{_si(p.max())} parameters"))
    if len(e) and "train_bytes" in e and e.train_bytes.notna().any():
        rows.append(("training", f"{_si(e.train_bytes.dropna().max(), 'B')} of text per model"))
    for s in suites:
        desc = str(s.get("description") or "").strip()
        if desc:
            rows.append((f"suite {s.get('name', '')}".strip(), desc))
    rows.append(("intervals", interval_scope))
    if max(counts) <= 1:
        caveats.append("With one seed the interval covers documents only, not training "
                       "variance: another seed can move a difference by more than its CI.")
    mdm = [x for x, (_, obj) in kinds.items() if obj == "mdm" and x in t.encoders]
    if mdm:
        caveats.append(f"{', '.join(mdm)} {'is' if len(mdm) == 1 else 'are'} scored by the "
                       "masked-diffusion ELBO (†): an upper bound on the model's NLL, so its "
                       "clean BPB bounds the truth from above and its ΔBPB is a difference of "
                       "two bounds.")
    return rows, caveats


def _si(x: float, unit: str = "") -> str:
    """3 significant digits and a decimal prefix: "968 k", "600 kB", "512 B"."""
    for div, pre in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= div:
            return f"{x / div:.3g} {pre}{unit}"
    return f"{x:.3g} {unit}".rstrip()


def interval_scope(t: Tables) -> str:
    """What the comparisons' intervals cover: the tables' own word where they carry one (their
    ``covers`` column, ``stats.COVERS_*``), else derived from the seeds behind the numbers."""
    c = t.comparisons
    found = (dict.fromkeys(covers_phrase(str(x)) for x in c.covers.dropna())
             if len(c) and "covers" in c else {})
    scope = [x for x in found if x]
    if not scope:
        scope = [covers_phrase(stats.covers(max((t.encoder_seeds or {"": t.n_seeds}).values())))]
    return (f"95 % CIs (a t over seeds × documents) cover {'; '.join(scope)}; Holm-adjusted "
            "over every comparison in the report")


def headline(t: Tables, results: pd.DataFrame, suites: Sequence[dict[str, Any]] = ()) -> Headline:
    """The report's answer to ``QUESTION`` from computed tables (``compute_tables``) and the
    results rows they came from (for each encoder's registry name and objective). ``suites``:
    the run.json suites (their ``name`` and ``description``)."""
    kinds = encoder_kinds(results)
    encs = [e for e in t.encoders if e in kinds] or list(t.encoders)
    bpe = [e for e in encs if kinds.get(e, (e, "ar"))[0] in BPE_KINDS]
    tf = [e for e in encs if e not in bpe]
    certainty, caveats = _certainty(t, suites, kinds, interval_scope(t))
    if not bpe or not tf:
        missing = "no BPE encoder" if not bpe else "no tokenizer-free encoder"
        fallback = (f"This run has {missing} ({', '.join(encs) or 'no encoders'}), so it cannot "
                    "answer tokenizer-free against BPE; the per-encoder findings below compare "
                    "the encoders it has.")
        return Headline(QUESTION, [], fallback, certainty, caveats)
    matchups = []
    for x in tf:
        obj = kinds.get(x, (x, "ar"))[1]
        same = [b for b in bpe if kinds.get(b, (b, "ar"))[1] == obj] or bpe
        for b in same:
            claims = [_clean_claim(t, x, b), _overall_claim(t, x, b), *_family_claims(t, x, b)]
            matchups.append(Matchup(x, b, claims))
    reading = (f"Clean BPB in {t.level_mode} mode; degradation = ΔBPB in {t.primary_mode} mode "
               "at each perturbation's highest severity (mean degradation: averaged over the "
               "perturbations). A − B < 0: A is lower / degrades less. Significant = Holm-adjusted "
               f"p < {ALPHA} and a 95 % CI without zero; anything else is a tie.")
    return Headline(QUESTION, matchups, "", certainty, caveats, reading)


__all__ = ["BPE_KINDS", "Claim", "Headline", "Matchup", "QUESTION", "encoder_kinds", "headline",
           "interval_scope"]

