"""Scaling sweeps' rows as the fit reads them: sweep labels, IsoFLOP groups per encoder and
budget, the run.json facts a point needs, and which rows may be pooled into one fit
(``pool_points``). Units: N in parameters, D in training bytes, C in training FLOPs, BPB in
bits per UTF-8 byte (see ``reports.scaling``)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from core.metrics import bpb
from reports.fmt import num

CONVENTIONS = {"half": "train_flops", "full": "train_flops_full_attn"}
HEADLINE = "half"
SWEEP_COLUMNS = ["flop_budget", "model_size", "params_non_embedding", "train_bytes", "train_flops",
                 "train_flops_full_attn"]


# ---------------------------------------------------------------------------------------------
# Labels: a sweep model's encoder label is "<encoder>@<budget>:<size>" (unique per results row).


def budget_tag(budget: float) -> str:
    """A short, exact-enough label of a FLOP budget: 3e+14 → "3e14", 1.25e15 → "1.25e15"."""
    mant, exp = f"{budget:.3e}".split("e")
    mant = mant.rstrip("0").rstrip(".")
    return f"{mant}e{int(exp)}"


def sweep_label(base: str, budget: float, size: str) -> str:
    """Encoder label of one sweep model: ``bytes@3e14:s2``."""
    return f"{base}@{budget_tag(budget)}:{size}"


def base_label(label: str) -> str:
    """The encoder a sweep label belongs to (``bytes@3e14:s2`` → ``bytes``; ``run/bytes@…`` →
    ``run/bytes``, so the same encoder in two compared runs stays two encoders)."""
    return re.sub(r"@[^@/]*$", "", label)


# ---------------------------------------------------------------------------------------------
# Data


@dataclass
class Group:
    """One encoder at one FLOP budget: the ladder points of its IsoFLOP profile.

    ln_n, loss, ln_d: (P,) ln non-embedding params, BPB, ln training bytes.
    ln_c: convention → (P,) ln training FLOPs of each run. delta: perturbation → (P,) ΔBPB (NaN if
    that model was not scored under it).
    """

    encoder: str
    budget: float
    ln_n: np.ndarray
    loss: np.ndarray
    ln_d: np.ndarray
    ln_c: dict[str, np.ndarray]
    delta: dict[str, np.ndarray] = field(default_factory=dict)
    sizes: list[str] = field(default_factory=list)
    part_bytes: float = math.nan  # bytes of the training text the points read (NaN: not known)


def sweep_rows(results: pd.DataFrame) -> pd.DataFrame:
    """The rows of a results table that come from a scaling sweep (``flop_budget`` set), with
    numeric sweep columns and a ``base`` column (the encoder the row's model belongs to). Older
    results files without the sweep columns give an empty frame."""
    if "flop_budget" not in results.columns or not len(results):
        return results.iloc[0:0].assign(base=pd.Series(dtype=str))
    df = results.copy()
    for col in SWEEP_COLUMNS:
        if col == "model_size":
            df[col] = df[col].astype(str) if col in df.columns else ""
            continue
        df[col] = pd.to_numeric(df[col].replace("", np.nan), errors="coerce") if col in df.columns \
            else np.nan
    df = df[np.isfinite(df["flop_budget"].to_numpy(dtype=float))].copy()
    if "train_flops_full_attn" in df.columns:
        df["train_flops_full_attn"] = df["train_flops_full_attn"].fillna(df["train_flops"])
    labels = df["encoder"].astype(str)
    if "run" in df.columns:  # tokbench compare prefixes "<run>/": pieces of one grid merge back
        labels = [lb[len(r) + 1:] if lb.startswith(f"{r}/") else lb for lb, r in zip(labels, df["run"])]
    df["base"] = [base_label(lb) for lb in labels]
    if "bpb" not in df.columns:
        df["bpb"] = bpb(df["nll_nats"], df["n_bytes"])
    return df


def build_groups(rows: pd.DataFrame, dataset: str) -> dict[str, list[Group]]:
    """encoder → its IsoFLOP groups (ascending budget) for one eval set.

    Loss: clean BPB in ``full`` mode if the run scored it (whole documents), else clean_target.
    ΔBPB per perturbation (``<id>@<severity>``): clean_target rows minus the same model's clean
    clean_target row (identical scored bytes; the robustness metric of docs/report.md)."""
    d = rows[rows["dataset"] == dataset]
    clean = d[d["perturbation_id"] == "clean"]
    mode = "full" if (clean["mode"] == "full").any() else "clean_target"
    clean = clean[clean["mode"] == mode]
    ct = d[d["mode"] == "clean_target"]
    ct_clean = ct[ct["perturbation_id"] == "clean"].set_index(["encoder", "seed"])["bpb"]
    perts = ct[ct["perturbation_id"] != "clean"]
    deltas: dict[str, dict[tuple[str, int], float]] = {}
    for r in perts.itertuples():
        key = (r.encoder, r.seed)
        if key in ct_clean.index:
            name = f"{r.perturbation_id}@{float(r.severity):g}"
            deltas.setdefault(name, {})[key] = float(r.bpb) - float(ct_clean.loc[key])
    out: dict[str, list[Group]] = {}
    for (enc, budget), g in clean.groupby(["base", "flop_budget"], sort=True):
        g = g.sort_values(["params_non_embedding", "seed"])
        keys = list(zip(g["encoder"], g["seed"]))
        grp = Group(
            encoder=str(enc), budget=float(budget),
            ln_n=np.log(g["params_non_embedding"].to_numpy(float)),
            loss=g["bpb"].to_numpy(float),
            ln_d=np.log(g["train_bytes"].to_numpy(float)),
            ln_c={c: np.log(g[col].to_numpy(float)) for c, col in CONVENTIONS.items()},
            delta={p: np.array([v.get(k, np.nan) for k in keys]) for p, v in sorted(deltas.items())},
            sizes=[str(s) for s in g["model_size"]],
            part_bytes=_part_bytes(g),
        )
        out.setdefault(str(enc), []).append(grp)
    return out


def _part_bytes(g: pd.DataFrame) -> float:
    """The training text's size in bytes for one IsoFLOP group, from the optional
    ``train_part_bytes`` column (``with_train_part_bytes``); NaN when absent."""
    if "train_part_bytes" not in g.columns:
        return math.nan
    v = pd.to_numeric(g["train_part_bytes"], errors="coerce").to_numpy(float)
    v = v[np.isfinite(v) & (v > 0)]
    return float(np.median(v)) if len(v) else math.nan


def with_train_part_bytes(results: pd.DataFrame, encoders: dict[str, Any]) -> pd.DataFrame:
    """``results`` with the run.json facts the scaling fit needs per sweep row (``encoders``:
    label → entry, as ``reports.load`` gives them, merged runs' labels prefixed alike):

    - ``train_part_bytes``: the training text's size, ``scaling.train_part_bytes`` where run.json
      has it, else (older runs) the point's ``train_bytes`` ÷ its ``scaling.passes``. Older runs
      stored the *planned* passes next to the bytes actually read, so their derived size is high
      by actual/planned (up to ~1.1×); newer ones store both sizes consistently.
    - ``train_fingerprint``: ``scaling.train_fingerprint`` (which text the point trained on).
    - ``model_key``: the model's cache key for the row's seed (the same point trained twice has
      the same key).

    NaN / None where run.json lacks a fact; the fit then skips the checks that need it."""
    def facts(label: Any) -> dict[str, Any]:
        return (encoders.get(str(label)) or {}).get("scaling") or {}

    def part(label: Any, train_bytes: Any) -> float:
        f = facts(label)
        stored = _positive(f.get("train_part_bytes"))
        if math.isfinite(stored):
            return stored
        tb, ps = _positive(train_bytes), _positive(f.get("passes"))
        return tb / ps if math.isfinite(tb) and math.isfinite(ps) else math.nan

    def key(label: Any, seed: Any) -> str | None:
        try:
            seeds = (encoders.get(str(label)) or {}).get("seeds") or {}
            k = (seeds.get(str(int(float(seed)))) or {}).get("key")
        except (TypeError, ValueError):
            return None
        return str(k) if k else None

    if not len(results):
        return results.assign(train_part_bytes=np.nan, train_fingerprint=None, model_key=None)
    labels = results["encoder"] if "encoder" in results.columns else pd.Series([""] * len(results))
    tbs = results["train_bytes"] if "train_bytes" in results.columns else [math.nan] * len(results)
    seeds = results["seed"] if "seed" in results.columns else [None] * len(results)
    return results.assign(
        train_part_bytes=[part(e, t) for e, t in zip(labels, tbs)],
        train_fingerprint=[(str(facts(e).get("train_fingerprint") or "") or None) for e in labels],
        model_key=[key(e, sd) for e, sd in zip(labels, seeds)],
    )


def _positive(x: Any) -> float:
    """float(x) if it is a finite positive number, else NaN."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) and v > 0 else math.nan


# ---------------------------------------------------------------------------------------------
# Pooling: which sweep rows may be fitted together


class PoolingError(ValueError):
    """Sweep rows that must not be fitted together: the same grid point twice with different
    results, or points measured on different eval text or trained on different training text."""


# One grid point (of one eval set, under one perturbation and mode) is this key; the run it came
# from is not part of it, so pieces of a grid run budget by budget merge back into one grid.
POINT_KEY = ["dataset", "base", "flop_budget", "model_size", "seed"]
ROW_KEY = POINT_KEY + ["perturbation_id", "severity", "mode"]
PROVENANCE = {"fingerprint": "eval-set fingerprint",
              "train_fingerprint": "training-text fingerprint", "model_key": "model key"}
MAX_LISTED = 4  # points named in a message; the rest are counted


def _text_values(col: pd.Series) -> set[str]:
    """The non-empty text values of a provenance column (NaN, None and "" are "not known")."""
    return {str(v) for v in col if isinstance(v, str) and v}


def _point_name(r: Any) -> str:
    return (f"{r['base']} at {fmt_flops(float(r['flop_budget']))} FLOPs, size {r['model_size']}, "
            f"seed {r['seed']}" + (f" ({r['dataset']})" if "dataset" in r else ""))


def _runs_of(g: pd.DataFrame) -> str:
    runs = sorted({str(r) for r in g["run"]}) if "run" in g.columns else []
    return f"runs {', '.join(runs)}" if runs else "the same results table"


def pool_points(rows: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """Check that the sweep rows (``sweep_rows``) may be pooled into one set of fits.

    Distinct seeds and distinct budgets from several runs pool: that is how a grid is run piece by
    piece. What does not:

    - rows of one eval set with different eval-set ``fingerprint`` s, or sweep rows with different
      ``train_fingerprint`` s (``with_train_part_bytes``): the points measure different text, and
      one shared E across them would be meaningless — PoolingError;
    - the same (dataset, encoder, budget, size, seed, perturbation, mode) more than once with
      different BPB or different provenance: the same label names two different measurements
      (another text, a re-run that came out differently), and averaging them would blend
      incomparable points — PoolingError;
    - the same point more than once with identical BPB and no contrary provenance (the same
      directory given twice, a re-run served from the model cache): kept once, with a note, since
      counting it twice would shrink every interval for no new information.

    Returns (rows, notes)."""
    if not len(rows):
        return rows, []
    problems: list[str] = []
    if "train_fingerprint" in rows.columns:
        fps = _text_values(rows["train_fingerprint"])
        if len(fps) > 1:
            short = ", ".join(sorted(f[:12] for f in fps))
            problems.append(f"the sweep points were trained on {len(fps)} different training texts "
                            f"(training-text fingerprints {short})")
    if "fingerprint" in rows.columns:
        for ds, g in rows.groupby("dataset", sort=True):
            fps = _text_values(g["fingerprint"])
            if len(fps) > 1:
                problems.append(f"eval set {ds} has {len(fps)} different fingerprints across the "
                                "sweep points (the runs scored different text under one name)")
    key = [c for c in ROW_KEY if c in rows.columns]
    kstr = rows[key].astype(str).agg("\x1f".join, axis=1)
    dup = kstr.duplicated(keep=False).to_numpy()
    notes: list[str] = []
    if dup.any():
        same_pts, diff_pts = [], []
        pkey = [c for c in POINT_KEY if c in rows.columns]
        for _, g in rows[dup].groupby(kstr[dup], sort=True):
            vals = g["bpb"].to_numpy(float)
            same = bool(np.allclose(vals, vals[0], rtol=1e-9, atol=1e-12, equal_nan=True))
            same &= all(len(_text_values(g[c])) <= 1 for c in PROVENANCE if c in g.columns)
            rec = (tuple(str(g.iloc[0][c]) for c in pkey), g, vals)
            (same_pts if same else diff_pts).append(rec)
        if diff_pts:
            seen: dict[tuple[str, ...], str] = {}
            for pk, g, vals in diff_pts:
                if pk not in seen:
                    seen[pk] = (f"{_point_name(g.iloc[0])} in {_runs_of(g)} (BPB "
                                f"{' vs '.join(f'{v:.4g}' for v in vals[:3])})")
            listed = list(seen.values())
            more = f" and {len(listed) - MAX_LISTED} more" if len(listed) > MAX_LISTED else ""
            problems.append(f"{len(listed)} grid point(s) appear more than once with different "
                            f"results: {'; '.join(listed[:MAX_LISTED])}{more}")
        if same_pts and not diff_pts:
            pts = {pk: g for pk, g, _ in same_pts}
            first = next(iter(pts.values()))
            notes.append(f"{len(pts)} grid point(s) appear more than once with identical results "
                         f"(e.g. {_point_name(first.iloc[0])} in {_runs_of(first)}): each is "
                         "counted once. Give each grid point's run directory once.")
            rows = rows[~kstr.duplicated(keep="first").to_numpy()]
    if problems:
        raise PoolingError(
            "Scaling fits refused: " + "; ".join(problems) + ". Pooling these would fit one "
            "frontier through incomparable points. Merge only run directories of one grid on the "
            "same data: a point re-run into a second directory is the same point — give one of the "
            "directories, not both. Distinct seeds and distinct budgets of one grid may be merged.")
    return rows, notes



def encoder_kinds(rows: pd.DataFrame) -> dict[str, str]:
    """base encoder → "byte" (one prediction per byte: token_unit byte) or "bpe" (registry name
    bpe, or token_unit token) or "other"."""
    out = {}
    for base, g in rows.groupby("base"):
        unit = str(g["token_unit"].iloc[0]) if "token_unit" in g.columns else ""
        name = str(g["encoder_name"].iloc[0]) if "encoder_name" in g.columns else ""
        out[str(base)] = "bpe" if name == "bpe" or unit == "token" else "byte" if unit == "byte" else "other"
    return out


def fmt_flops(c: float) -> str:
    """A FLOP count with two significant digits ("1.2e+15"); "—" where there is none."""
    return num(c, ".2g")


