"""Decompression with a cap: every gzip, zlib and zip member tokbench reads goes through here,
read in chunks and refused once it exceeds its limit, so a small file that expands without bound
(a gzip of zeros: about 1000:1) costs at most ``limit`` bytes of memory, never all of it.

    text = gunzip(raw, MAX_MEMBER_BYTES, "usr/share/man/man1/ls.1.gz")   # TooLarge past the cap
    data = read_at_most(zipfile.ZipFile(x).open(name), MAX_MEMBER_BYTES, name)

A cache that meets ``TooLarge`` treats the file as damaged and recomputes it; user input and
package data are refused on one line naming the file.
"""

from __future__ import annotations

import gzip
import io
import zlib
from typing import BinaryIO

# One decompressed file of package data (a man page, a reST file, a SWORD block, a langpack
# string file): all are well under a megabyte; 256 MiB leaves room for any text while bounding
# what a damaged file can make a run allocate.
MAX_MEMBER_BYTES = 256 << 20
_CHUNK = 1 << 20


class TooLarge(ValueError):
    """Decompressed data over its limit (one line naming the file)."""


def _refuse(name: str, limit: int) -> TooLarge:
    return TooLarge(f"{name}: decompresses to more than {limit} bytes (the limit for one file; damaged?)")


def read_at_most(f: BinaryIO, limit: int, name: str) -> bytes:
    """All of ``f`` (a decompressing reader), read in chunks; TooLarge once it passes ``limit``."""
    parts: list[bytes] = []
    n = 0
    while chunk := f.read(min(_CHUNK, limit + 1 - n)):
        parts.append(chunk)
        n += len(chunk)
        if n > limit:
            raise _refuse(name, limit)
    return b"".join(parts)


def gunzip(data: bytes, limit: int, name: str) -> bytes:
    """``gzip.decompress(data)`` (every member), at most ``limit`` bytes."""
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as f:
        return read_at_most(f, limit, name)


def inflate(data: bytes, limit: int, name: str) -> bytes:
    """``zlib.decompress(data)``, at most ``limit`` bytes (a stream that does not end is an error,
    as in ``zlib.decompress``)."""
    d = zlib.decompressobj()
    out = d.decompress(data, limit + 1)
    if len(out) > limit:
        raise _refuse(name, limit)
    if not d.eof:
        raise zlib.error(f"{name}: incomplete or truncated zlib stream")
    return out
