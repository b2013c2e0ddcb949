"""Compressor baselines: sizes of raw streams and conditional bits, checked by hand against the
standard-library compressors."""

from __future__ import annotations

import bz2
import lzma
import zlib

import pytest

from harness.data.compressors import COMPRESSORS, compressed_size, conditional_bits, dictionary_from

CTX = b"The quick brown fox jumps over the lazy dog. " * 20
X = b"The quick brown fox jumps over the lazy cat, then naps."


def by_hand(name: str, data: bytes) -> int:
    if name == "deflate":
        c = zlib.compressobj(level=9, method=zlib.DEFLATED, wbits=-15, memLevel=9)
        raw = c.compress(data) + c.flush()
        assert zlib.decompress(raw, wbits=-15) == data  # a raw stream: no header, no checksum
        return len(raw)
    if name == "bz2":
        return len(bz2.compress(data, compresslevel=9))
    f = [{"id": lzma.FILTER_LZMA2, "preset": 9, "dict_size": max(4096, len(data))}]
    raw = lzma.compress(data, format=lzma.FORMAT_RAW, filters=f)
    assert lzma.decompress(raw, format=lzma.FORMAT_RAW, filters=f) == data
    return len(raw)


@pytest.mark.parametrize("name", COMPRESSORS)
def test_matches_the_stdlib_by_hand(name: str) -> None:
    for data in (b"", X, CTX + X):
        assert compressed_size(name, data) == by_hand(name, data)
    assert conditional_bits(name, CTX, X) == 8 * (by_hand(name, CTX + X) - by_hand(name, CTX))
    d = b"lazy dog naps " * 10
    assert conditional_bits(name, CTX, X, d) == 8 * (by_hand(name, d + CTX + X) - by_hand(name, d + CTX))
    assert conditional_bits(name, b"", X) == 8 * (by_hand(name, X) - by_hand(name, b""))


@pytest.mark.parametrize("name", COMPRESSORS)
def test_context_helps(name: str) -> None:
    # repeated text is nearly free after context that contains it
    assert conditional_bits(name, CTX, CTX[:200]) < conditional_bits(name, b"", CTX[:200]) / 2


def test_deflate_raw_stream_has_no_zlib_header() -> None:
    assert compressed_size("deflate", X) == len(zlib.compress(X, 9)) - 6  # 2-byte header + adler32


def test_unknown_compressor_and_dictionary() -> None:
    with pytest.raises(ValueError, match="is not one of deflate, bz2, lzma"):
        compressed_size("zstd", X)
    assert dictionary_from([b"abc", b"def"], 0) == b""
    assert dictionary_from([b"abc", b"def"], 5) == b"abcde"
    assert dictionary_from(iter([b"abc"]), 100) == b"abc"
