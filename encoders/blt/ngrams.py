"""Hash n-gram ids for BLT's local encoder: one id per position for the n symbols ending there.

    ids = hash_ngram_ids(stream, n, table_size)    # stream (B, S) long in [0, 256] -> (B, S) long
    ids = hash_ngram_ids_multi(stream, (3, 4, 5), table_size)   # -> (B, S, 3), one pass

The hash is a polynomial (Rabin-Karp style rolling) hash over the n symbols
``stream[t-n+1 .. t]`` in exact int64 arithmetic, so ids are the same on every machine and device
(no Python ``hash`` salt). Positions before the start of the stream read as the symbol ``PAD``.
In BLT the stream is BOS + window bytes, so the n-gram at stream position t holds bytes < t of the
window: feeding these ids to the byte predictor never shows it the byte it predicts.
"""

from __future__ import annotations

import torch

HASH_BASE = 1_000_003  # odd prime multiplier
HASH_MOD = 2_147_483_647  # 2^31 - 1, prime; (symbol+1)·base^j mod p stays far below 2^63
PAD = 257  # symbol for positions before the stream (byte values are 0..255, BOS is 256)


def hash_ngram(symbols: list[int], table_size: int) -> int:
    """Reference (pure Python) hash of one n-gram, oldest symbol first -> id in [0, table_size)."""
    h = 0
    for s in symbols:  # Horner form of Σ_j (s_{t-j} + 1) · base^j
        h = (h * HASH_BASE + s + 1) % HASH_MOD
    return h % table_size


def hash_ngram_ids(stream: torch.Tensor, n: int, table_size: int) -> torch.Tensor:
    """(B, S) long symbols -> (B, S) long ids in [0, table_size) of the n-gram ending at each position.

    Equal to ``hash_ngram(stream[b, t-n+1 : t+1], table_size)`` with ``PAD`` before position 0.
    """
    return hash_ngram_ids_multi(stream, (n,), table_size)[..., 0]


def hash_ngram_ids_multi(stream: torch.Tensor, sizes: tuple[int, ...], table_size: int) -> torch.Tensor:
    """(B, S) long symbols -> (B, S, len(sizes)) ids, column k for n-grams of ``sizes[k]`` symbols.

    One pass over offsets j = 0 .. max(sizes)-1 (newest symbol first): after adding the symbol
    j steps back, the running hash is that of the (j+1)-gram, so every size is read off the
    same loop. Vectorized over positions; no loop over bytes.
    """
    if not sizes or min(sizes) < 1 or table_size < 1:
        raise ValueError(f"n-gram sizes and table size must be >= 1, got sizes={sizes}, table_size={table_size}")
    n_max = max(sizes)
    padded = torch.nn.functional.pad(stream.long(), (n_max - 1, 0), value=PAD)  # (B, S + n_max - 1)
    S = stream.shape[1]
    h = torch.zeros_like(stream, dtype=torch.long)
    by_size: dict[int, torch.Tensor] = {}
    weight = 1
    for j in range(n_max):  # j = age of the symbol: 0 is the newest (position t)
        sym = padded[:, n_max - 1 - j : n_max - 1 - j + S]
        h = (h + (sym + 1) * weight) % HASH_MOD
        weight = weight * HASH_BASE % HASH_MOD
        if j + 1 in sizes:
            by_size[j + 1] = h % table_size
    return torch.stack([by_size[n] for n in sizes], dim=-1)
