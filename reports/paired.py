"""The paired units the report's tests resample: cells of per-document rows (seed, eval set,
document) indexed by group, aligned across encoders or against the clean baseline, and the
crossed seed × document tests over them. BPB in bits per byte, NLL in nats.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from core.metrics import LN2
from reports import stats

GROUP = ["encoder", "perturbation_id", "severity", "mode"]
UNIT = ["seed", "dataset", "doc_id"]  # a paired unit: one document under one seed
DOC = ["dataset", "doc_id"]  # a sampling unit: one document, all its seeds together


def group_rng(base_seed: int, *key: Any) -> np.random.Generator:
    """A generator keyed by the group, so a table's numbers do not depend on computation order."""
    return np.random.default_rng([base_seed, zlib.crc32(repr(key).encode("utf-8"))])


def sev_key(x: pd.Series) -> pd.Series:
    return x.astype(float).round(10)


@dataclass
class Cell:
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

    def take(self, mask_or_idx: np.ndarray) -> Cell:
        return Cell(self.unit[mask_or_idx], self.seed[mask_or_idx],
                     self.dataset[mask_or_idx], self.nll[mask_or_idx], self.nbytes[mask_or_idx],
                     self.doc[mask_or_idx])


def crossed_test(seed: np.ndarray, doc: np.ndarray, cols: list[np.ndarray], plus: list[int],
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


def doc_pooled(seed: np.ndarray, doc: np.ndarray, d_nats: np.ndarray, w: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """Per document (all its seeds pooled): the BPB difference Σ_s d / (ln 2 · Σ_s w) and its
    bytes Σ_s w — the units of the permutation and Wilcoxon tests, so that a document's effect
    counts once however many seeds scored it."""
    x = stats.crossed(seed, doc, [d_nats, w]).sum(0)  # (n, 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return x[:, 0] / (LN2 * x[:, 1]), x[:, 1]


def align(*cells: Cell) -> tuple[np.ndarray, ...]:
    """Indices into each cell of the units present in all of them (paired documents)."""
    common = cells[0].unit
    for c in cells[1:]:
        common = np.intersect1d(common, c.unit, assume_unique=True)
    return tuple(np.searchsorted(c.unit, common) for c in cells)


class Index:
    """Samples split by group once into numpy arrays (cheap lookups and pairing)."""

    def __init__(self, samples: pd.DataFrame) -> None:
        self.by_group: dict[tuple, Cell] = {}
        if not len(samples):
            return
        s = samples.copy()
        s["severity"] = sev_key(s["severity"])
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
            self.by_group[tuple(key)] = Cell(
                g["_unit"].to_numpy(), g["seed"].to_numpy(), g["dataset"].to_numpy(object),
                g["nll_nats"].to_numpy(float), g["metric_bytes"].to_numpy(float),
                g["_doc"].to_numpy())

    def get(self, encoder: str, pid: str, sev: float, mode: str) -> Cell | None:
        return self.by_group.get((encoder, pid, round(float(sev), 10), mode))


def baseline_rows(clean: dict[tuple, pd.DataFrame], encoder: str, mode: str, datasets: set,
              seeds: set) -> pd.DataFrame:
    """Clean rows of the same encoder and mode, restricted to the group's eval sets and seeds."""
    b = clean.get((encoder, mode))
    if b is None:
        return pd.DataFrame()
    return b[b.dataset.isin(datasets) & b.seed.isin(seeds)]


def pooled_bpb(rows: pd.DataFrame) -> float:
    """Pooled metric BPB of results/samples rows (NaN for none)."""
    return stats.ratio_bpb(rows.nll_nats, rows.metric_bytes)
