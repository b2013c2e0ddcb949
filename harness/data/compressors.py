"""Model-free baselines: bits a general-purpose compressor spends on scored bytes given context.

    bits = conditional_bits("lzma", context=b"the window's context", x=b"its scored bytes")

The cost of ``x`` after ``context`` is C(d ‖ context ‖ x) − C(d ‖ context), in bits, where C is
the size of a complete compressed stream and ``d`` an optional dictionary (training text, to warm
the compressor up). Streams are raw — DEFLATE with ``wbits=-15`` (no zlib header or checksum),
LZMA2 with ``FORMAT_RAW`` (no .xz container) — and the difference cancels what is left of fixed
overhead (bz2 has no raw mode; its 4-byte header and stream trailer cancel), so headers and cold
starts do not dominate windows of ~1 KB. Sizes are whole bytes, so one window's cost is a
multiple of 8 bits (it can even be 0 or negative); sums over many windows are what is reported.

Settings are fixed (they are part of the baseline's definition): DEFLATE level 9, memLevel 9;
bz2 level 9; LZMA2 preset 9 with a dictionary just large enough for the input (at least 4 KiB),
so memory does not grow with the preset and the result does not depend on the host.
Pure standard library (zlib, bz2, lzma); no torch.
"""

from __future__ import annotations

import bz2
import functools
import lzma
import zlib
from collections.abc import Callable, Iterable

COMPRESSORS = ("deflate", "bz2", "lzma")


def _deflate(data: bytes) -> int:
    c = zlib.compressobj(9, zlib.DEFLATED, -15, 9)
    return len(c.compress(data)) + len(c.flush())


def _bz2(data: bytes) -> int:
    return len(bz2.compress(data, 9))


def _lzma(data: bytes) -> int:
    filters = [{"id": lzma.FILTER_LZMA2, "preset": 9, "dict_size": max(4096, len(data))}]
    return len(lzma.compress(data, format=lzma.FORMAT_RAW, filters=filters))


_SIZE: dict[str, Callable[[bytes], int]] = {"deflate": _deflate, "bz2": _bz2, "lzma": _lzma}


def compressed_size(name: str, data: bytes) -> int:
    """Bytes of the complete raw stream ``name`` makes of ``data``."""
    if name not in _SIZE:
        raise ValueError(f"compressor {name!r} is not one of {', '.join(COMPRESSORS)}")
    return _cached_size(name, data)


@functools.lru_cache(maxsize=64)
def _cached_size(name: str, data: bytes) -> int:
    # C(dictionary ‖ context) recurs for every context-free window: compress it once
    return _SIZE[name](data)


def conditional_bits(name: str, context: bytes, x: bytes, dictionary: bytes = b"") -> int:
    """Bits to code ``x`` after ``dictionary ‖ context``: 8 · (C(d‖context‖x) − C(d‖context))."""
    prefix = dictionary + context
    return 8 * (compressed_size(name, prefix + x) - compressed_size(name, prefix))


def dictionary_from(chunks: Iterable[bytes], n_bytes: int) -> bytes:
    """The first ``n_bytes`` bytes of a stream given in chunks (the training windows, as the
    models are fed them); b"" when ``n_bytes`` is 0. DEFLATE only sees the last 32 KiB before
    the scored bytes, so larger dictionaries help bz2 and lzma only."""
    out: list[bytes] = []
    n = 0
    for c in chunks:
        if n >= n_bytes:
            break
        out.append(c)
        n += len(c)
    return b"".join(out)[: max(0, n_bytes)]
