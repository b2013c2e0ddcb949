"""Exact- and near-duplicate removal over a stream of documents (MinHash with banded LSH).

    kept, stats = dedup_documents(docs, mode="near")

Exact duplicates: equal text once white space is normalized. Near duplicates: documents whose
word 5-gram sets have an estimated Jaccard similarity ≥ ``threshold`` (64 MinHash values; 16 bands
of 4 find candidate pairs with similarity ≈ 0.5 or more, then the full signature decides). The
first document of a group is kept, in stream order, so the result is deterministic.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

import numpy as np

from sources.base import Document

MODES = ("none", "exact", "near")
N_HASHES = 64
BANDS = 16
SHINGLE = 5
# Seeds of the 64 hash functions (splitmix64 of x + seed): fixed, the same on every machine.
_SEEDS = (np.arange(1, N_HASHES + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))


@dataclass
class DedupStats:
    """What removal did: documents and UTF-8 bytes seen, and removed as exact / near duplicates."""

    mode: str
    docs: int = 0
    bytes: int = 0
    exact_docs: int = 0
    exact_bytes: int = 0
    near_docs: int = 0
    near_bytes: int = 0
    examples: list[tuple[str, str]] = field(default_factory=list)  # (removed id, kept id), first 5

    def as_dict(self) -> dict[str, object]:
        return {"mode": self.mode, "docs_in": self.docs, "bytes_in": self.bytes,
                "exact_removed_docs": self.exact_docs, "exact_removed_bytes": self.exact_bytes,
                "near_removed_docs": self.near_docs, "near_removed_bytes": self.near_bytes,
                "near_threshold": NEAR_THRESHOLD, "examples": [list(e) for e in self.examples]}


NEAR_THRESHOLD = 0.8


def minhash(text: str) -> np.ndarray | None:
    """The (64,) uint64 MinHash signature of a text's lower-cased word 5-grams (CRC-32 of each
    5-gram, then 64 seeded splitmix64 hashes); None when the text has fewer than 5 words."""
    words = text.lower().split()
    if len(words) < SHINGLE:
        return None
    grams = {" ".join(words[i:i + SHINGLE]) for i in range(len(words) - SHINGLE + 1)}
    x = np.fromiter((zlib.crc32(g.encode("utf-8", "surrogatepass")) for g in grams),
                    dtype=np.uint64, count=len(grams))
    return splitmix64(x[None, :] + _SEEDS[:, None]).min(axis=1)


def splitmix64(z: np.ndarray) -> np.ndarray:
    """The splitmix64 finalizer, element-wise on uint64 (arithmetic wraps modulo 2^64): a
    well-mixed hash, so the minimum over a set is a fair sample for each seed."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def dedup_documents(docs: Iterable[Document], mode: str,
                    threshold: float = NEAR_THRESHOLD) -> tuple[Iterator[Document], DedupStats]:
    """The documents without duplicates (a generator: consume it before reading the stats)."""
    if mode not in MODES:
        raise ValueError(f"dedup must be one of {MODES}, got {mode!r}")
    stats = DedupStats(mode=mode)

    def gen() -> Iterator[Document]:
        exact: dict[bytes, str] = {}
        bands: list[dict[bytes, int]] = [{} for _ in range(BANDS)]
        sigs: list[np.ndarray] = []
        ids: list[str] = []
        rows = N_HASHES // BANDS
        for d in docs:
            stats.docs += 1
            stats.bytes += len(d.data)
            if mode == "none":
                yield d
                continue
            text = d.data.decode("utf-8", errors="replace")
            key = hashlib.sha1(" ".join(text.split()).encode("utf-8", "surrogatepass")).digest()
            if key in exact:
                stats.exact_docs += 1
                stats.exact_bytes += len(d.data)
                continue
            exact[key] = d.id
            if mode == "near":
                sig = minhash(text)
                if sig is not None:
                    keys = [sig[b * rows:(b + 1) * rows].tobytes() for b in range(BANDS)]
                    hit = _near_match(sig, keys, bands, sigs, threshold)
                    if hit is not None:
                        stats.near_docs += 1
                        stats.near_bytes += len(d.data)
                        if len(stats.examples) < 5:
                            stats.examples.append((d.id, ids[hit]))
                        continue
                    for b, k in enumerate(keys):
                        bands[b].setdefault(k, len(sigs))
                    sigs.append(sig)
                    ids.append(d.id)
            yield d

    return gen(), stats


def _near_match(sig: np.ndarray, keys: list[bytes], bands: list[dict[bytes, int]],
                sigs: list[np.ndarray], threshold: float) -> int | None:
    """Index of a kept document whose signature agrees with ``sig`` on ≥ ``threshold`` of its
    values, among those sharing a band with it; None if there is none."""
    for b, k in enumerate(keys):
        j = bands[b].get(k)
        if j is not None and float(np.mean(sigs[j] == sig)) >= threshold:
            return j
    return None
