"""AR vs MDM per encoder: the report block for runs that train an encoder both autoregressively
(``objective: ar``) and as a masked diffusion model (``objective: mdm``, docs/mdm.md).

An MDM's BPB is its NELBO — an UPPER BOUND on the model's own NLL, estimated by Monte Carlo —
while an AR encoder's BPB is its exact NLL; every table this module makes says so.

    df = ar_vs_mdm(load_run(run_dir))        # one row per (AR, MDM) pair and mode
    # reports.render shows it with TABLE_SPEC / TITLE / NOTE (section "AR vs MDM", when not empty)

Pairs: an MDM encoder and an AR encoder of the same run (in a merged report, ``<run>/`` labels
of one run directory: never across runs, whose data may differ) with the same registry name and
the same config apart from the MDM keys (``objective``, ``mdm_*``), from run.json; without
run.json, the one AR and one MDM label of an encoder name in that run. Columns (BPB in bits per UTF-8 byte; clean cells):

    ar, mdm, mode, n_docs,
    bpb_ar [lo, hi]         AR BPB, 95 % CI over seeds × documents (``stats.crossed_test``)
    bpb_mdm [lo, hi], bpb_se  MDM NELBO BPB; its Monte Carlo standard error (pooled from results.csv
                            ``bpb_se``); the CI is that CI widened by 1.96 · bpb_se in
                            quadrature (conservative: the per-document NLLs already carry part of
                            the MC noise)
    gap [lo, hi]            bpb_mdm − bpb_ar, paired (same documents and seeds), widened likewise
    delta_ar, delta_mdm     robustness: mean over perturbations (each at its highest severity) of
                            ΔBPB = BPB(perturbed) − BPB(clean)
    delta_diff [lo, hi]     delta_mdm − delta_ar, paired over seeds × documents. Not widened: a
                            clean and a perturbed MDM cell share t and masks, so most MC noise
                            cancels, and what remains is in the per-document values
    n_perturbations, covers  what the CIs cover (``stats.COVERS_*``: one seed, documents only)
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

from core.metrics import LN2, bpb
from reports.fmt import ci, num
from reports.load import CLEAN_ID, RunData
from reports.stats import covers, crossed, crossed_test

Z95 = 1.959963984540054
MDM_KEYS = ("objective", "mdm_schedule", "mdm_span")
BOUND_NOTE = ("MDM BPB is the NELBO, an upper bound on the MDM's own NLL (Monte Carlo estimate, "
              "standard error in ± and in results.csv bpb_se); AR BPB is exact. A gap is therefore "
              "'MDM bound minus AR', and the true NLL gap may be smaller.")


def _objectives(res: pd.DataFrame) -> pd.Series:
    obj = res["objective"] if "objective" in res.columns else pd.Series("", index=res.index)
    return obj.fillna("").replace("", "ar")


def pairs(data: RunData) -> list[tuple[str, str]]:
    """(AR label, MDM label) pairs present in the results (see module docstring)."""
    res = data.results
    obj = dict(zip(res["encoder"], _objectives(res)))
    names = dict(zip(res["encoder"], res["encoder_name"]))
    # merged runs (``merge_runs``): the run is part of the key, so AR and MDM pair within one run
    # (same data, same budget), never across runs, and two runs with the same pair keep both
    runs = dict(zip(res["encoder"], res["run"])) if "run" in res.columns else {}
    encs = (data.run or {}).get("encoders") or {}

    def key(label: str) -> str:
        e = encs.get(label)
        if not isinstance(e, dict) or not isinstance(e.get("config"), dict):
            ident: list[Any] = [names[label]]
        else:
            cfg = {k: v for k, v in e["config"].items() if k not in MDM_KEYS}
            ident = [e.get("name", names[label]), cfg]
        return json.dumps([str(runs.get(label, "")), *ident], sort_keys=True, default=str)

    by_key: dict[str, dict[str, list[str]]] = {}
    for label in dict.fromkeys(res["encoder"]):
        by_key.setdefault(key(label), {"ar": [], "mdm": []}).setdefault(obj[label], []).append(label)
    out = []
    for g in by_key.values():
        if len(g["ar"]) == 1:
            out += [(g["ar"][0], m) for m in g["mdm"]]
    return out


def _pooled_se(rows: pd.DataFrame) -> float:
    """MC standard error (bits/byte) of the BPB pooled over cells: √Σ(se·ln2·bytes)² / (ln2·Σbytes)."""
    if "bpb_se" not in rows.columns or not len(rows):
        return 0.0
    se = rows["bpb_se"].fillna(0.0).to_numpy(float)
    b = rows["metric_bytes"].to_numpy(float)
    return float(math.sqrt(np.sum((se * LN2 * b) ** 2)) / (LN2 * b.sum())) if b.sum() > 0 else math.nan


def _widen(point: float, lo: float, hi: float, se: float) -> tuple[float, float]:
    if not (math.isfinite(lo) and math.isfinite(hi)) or not se:
        return lo, hi
    m = Z95 * se
    return point - math.hypot(point - lo, m), point + math.hypot(hi - point, m)


def _doc_table(samples: pd.DataFrame, enc: str, mode: str, pert: str, sev: float | None) -> pd.DataFrame:
    s = samples[(samples["encoder"] == enc) & (samples["mode"] == mode)
                & (samples["perturbation_id"] == pert)]
    if sev is not None:
        s = s[np.isclose(s["severity"].astype(float), sev)]
    return s[["seed", "dataset", "doc_id", "nll_nats", "metric_bytes"]]


def _crossed(joined: pd.DataFrame, cols: list[str]) -> np.ndarray:
    """``(S, n, K)`` of ``cols`` for ``crossed_test``: a document is (dataset, doc_id), the same
    under every seed."""
    doc = joined.groupby(["dataset", "doc_id"], sort=False).ngroup().to_numpy()
    return crossed(joined["seed"].to_numpy(), doc, [joined[c].to_numpy(float) for c in cols])


def _interval(x: np.ndarray, plus: list[int], minus: list[int], den: int) -> tuple[float, float]:
    r = crossed_test(x, plus, minus, den)
    return float(r["lo"]), float(r["hi"])


def ar_vs_mdm(data: RunData) -> pd.DataFrame:
    """One row per (AR, MDM) pair and mode; see the module docstring for the columns."""
    res = data.results
    rows: list[dict[str, Any]] = []
    key = ["seed", "dataset", "doc_id"]
    for ar, mdm in pairs(data):
        for mode in [m for m in ("full", "clean_target") if m in set(res["mode"])]:
            cells = {e: res[(res["encoder"] == e) & (res["mode"] == mode)] for e in (ar, mdm)}
            clean = {e: c[c["perturbation_id"] == CLEAN_ID] for e, c in cells.items()}
            if not all(len(c) for c in clean.values()):
                continue

            def pooled(c: pd.DataFrame) -> float:
                return float(bpb(c["nll_nats"].sum(), c["metric_bytes"].sum()))

            b_ar, b_mdm = pooled(clean[ar]), pooled(clean[mdm])
            se = _pooled_se(clean[mdm])
            row: dict[str, Any] = {"ar": ar, "mdm": mdm, "mode": mode, "bpb_ar": b_ar,
                                   "bpb_mdm": b_mdm, "bpb_se": se, "gap": b_mdm - b_ar}
            ci = {k: (math.nan, math.nan) for k in ("bpb_ar", "bpb_mdm", "gap", "delta_diff")}
            n_docs, n_seeds = 0, 0
            if len(data.samples):
                da = _doc_table(data.samples, ar, mode, CLEAN_ID, None)
                dm = _doc_table(data.samples, mdm, mode, CLEAN_ID, None)
                j = da.merge(dm, on=key, suffixes=("_a", "_m"))
                n_docs = len(j)
                if n_docs:
                    x = _crossed(j, ["nll_nats_a", "nll_nats_m", "metric_bytes_a"])
                    n_seeds = x.shape[0]
                    ci["bpb_ar"] = _interval(x, [0], [], 2)
                    ci["bpb_mdm"] = _widen(b_mdm, *_interval(x, [1], [], 2), se)
                    ci["gap"] = _widen(b_mdm - b_ar, *_interval(x, [1], [0], 2), se)
            # Robustness: each perturbation at its highest severity, present for both encoders.
            pert = cells[ar][cells[ar]["perturbation_id"] != CLEAN_ID]
            tops = pert.groupby("perturbation_id")["severity"].max()
            d_ar, d_mdm, per_doc = [], [], []
            for pid, sev in tops.items():
                ca = cells[ar][(cells[ar]["perturbation_id"] == pid) & np.isclose(cells[ar]["severity"], sev)]
                cm = cells[mdm][(cells[mdm]["perturbation_id"] == pid) & np.isclose(cells[mdm]["severity"], sev)]
                if not (len(ca) and len(cm)):
                    continue
                d_ar.append(pooled(ca) - b_ar)
                d_mdm.append(pooled(cm) - b_mdm)
                if len(data.samples):
                    parts = [_doc_table(data.samples, e, mode, p, s).rename(
                        columns={"nll_nats": f"n{i}", "metric_bytes": f"b{i}"})
                        for i, (e, p, s) in enumerate([(ar, pid, sev), (ar, CLEAN_ID, None),
                                                       (mdm, pid, sev), (mdm, CLEAN_ID, None)])]
                    j = parts[0]
                    for p in parts[1:]:
                        j = j.merge(p, on=key)
                    per_doc.append(j.set_index(key)[["n0", "n1", "n2", "n3", "b1"]])
            row.update(delta_ar=float(np.mean(d_ar)) if d_ar else math.nan,
                       delta_mdm=float(np.mean(d_mdm)) if d_mdm else math.nan,
                       n_perturbations=len(d_ar))
            row["delta_diff"] = row["delta_mdm"] - row["delta_ar"]
            if per_doc and all(len(p) for p in per_doc):
                common = per_doc[0].index
                for p in per_doc[1:]:
                    common = common.intersection(p.index)
                if len(common):
                    # per document, the mean over perturbations k of (mdm pert − mdm clean) −
                    # (ar pert − ar clean), nats; every k scores the same clean bytes b1
                    d = sum((p.loc[common, "n2"] - p.loc[common, "n3"])
                            - (p.loc[common, "n0"] - p.loc[common, "n1"]) for p in per_doc) / len(per_doc)
                    m = pd.DataFrame({"seed": [c[key.index("seed")] for c in common],
                                      "dataset": [c[key.index("dataset")] for c in common],
                                      "doc_id": [c[key.index("doc_id")] for c in common],
                                      "d": d.to_numpy(float), "b": per_doc[0].loc[common, "b1"].to_numpy(float)})
                    ci["delta_diff"] = _interval(_crossed(m, ["d", "b"]), [0], [], 1)
            for k2, (lo, hi) in ci.items():
                row[f"{k2}_lo"], row[f"{k2}_hi"] = lo, hi
            row["n_docs"] = n_docs
            row["covers"] = covers(n_seeds) if n_seeds else ""
            rows.append(row)
    return pd.DataFrame(rows)


def _band(lo: Any, hi: Any, spec: str = ".3f") -> str:
    """The CI to follow a value (" [lo, hi]"), or nothing where an end of it is missing."""
    band = ci(lo, hi, spec, missing="")
    return f" {band}" if band else ""


_SIGNED = "+.3f"  # differences: always with their sign


# (heading, row -> display string, numeric) for ``reports.render``'s one table renderer, which
# escapes every cell for HTML and Markdown.
TABLE_SPEC: list[tuple[str, Callable[[Any], str], bool]] = [
    ("AR", lambda r: str(r.ar), False),
    ("MDM", lambda r: str(r.mdm), False),
    ("mode", lambda r: str(r.mode), False),
    ("AR BPB (exact) [95 % CI]", lambda r: num(r.bpb_ar) + _band(r.bpb_ar_lo, r.bpb_ar_hi), True),
    ("MDM BPB (NELBO ≥ NLL) ± MC se [95 % CI]",
     lambda r: f"{num(r.bpb_mdm)} ± {num(r.bpb_se)}" + _band(r.bpb_mdm_lo, r.bpb_mdm_hi), True),
    ("gap MDM − AR [95 % CI]", lambda r: num(r.gap, _SIGNED) + _band(r.gap_lo, r.gap_hi, _SIGNED), True),
    ("mean ΔBPB AR", lambda r: num(r.delta_ar, _SIGNED), True),
    ("mean ΔBPB MDM", lambda r: num(r.delta_mdm, _SIGNED), True),
    ("ΔBPB MDM − AR [95 % CI]",
     lambda r: num(r.delta_diff, _SIGNED) + _band(r.delta_diff_lo, r.delta_diff_hi, _SIGNED), True),
    ("docs", lambda r: str(int(r.n_docs)), True),
]
TITLE = "AR vs MDM per encoder"
NOTE = (BOUND_NOTE + " ΔBPB = BPB(perturbed) − BPB(clean), mean over perturbations at their "
        "highest severity (> 0 is degradation). CIs: paired t over seeds × documents (with one seed "
        "they cover the documents only, not training variance); the MDM "
        "level and gap CIs are widened by the Monte Carlo standard error in quadrature.")


__all__ = ["BOUND_NOTE", "NOTE", "TABLE_SPEC", "TITLE", "ar_vs_mdm", "pairs"]
