"""``gcide``: the Collaborative International Dictionary of English (``dict-gcide``), for training.

Webster's 1913 dictionary with later additions: definitions, etymologies and quotations in
English prose, read from the dictd database (``gcide.dict.dz``, a gzip-compatible dictzip file,
40 MB once decompressed) in the order of its index, one unit per entry.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sources.base import SourceContext
from sources.debian import DebianSource
from sources.registry import register

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
# A line holding only an attribution tag ("[1913 Webster]", "[PJC]", "[WordNet 1.5]"): 200k of
# them, boilerplate that would teach the model a repeated string rather than English.
_TAG_LINE = re.compile(r"^[ \t]*\[[^\]\n]{1,40}\][ \t]*\n", re.M)
# The decompressed database is 40 MB; a damaged or hostile file may not expand past this.
MAX_DICT_BYTES = 256 << 20


def dictd_number(text: str) -> int:
    """A dictd index number (base 64, most significant digit first: ``"CF"`` → 2·64 + 5 = 133)."""
    n = 0
    for ch in text:
        k = _B64.find(ch)
        if k < 0:
            raise ValueError(f"not a dictd base-64 number: {text!r}")
        n = n * 64 + k
    return n


def read_dictzip(path: Path, limit: int = MAX_DICT_BYTES) -> bytes:
    """The decompressed bytes of a gzip/dictzip file, refusing more than ``limit`` bytes."""
    d = zlib.decompressobj(wbits=31)
    out = bytearray()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            out += d.decompress(chunk, limit + 1 - len(out))
            if len(out) > limit or d.unconsumed_tail:
                raise ValueError(f"{path}: decompresses to more than {limit} bytes")
    return bytes(out)


def gcide_entries(index: str, data: bytes) -> Iterator[tuple[str, str]]:
    """(headword, entry text) in the database's order; an entry that several headwords point to
    comes once; the ``00-database-*`` header entries and attribution-tag lines are left out."""
    seen: set[tuple[int, int]] = set()
    spans = []
    for line in index.splitlines():
        parts = line.split("\t")
        if len(parts) != 3 or parts[0].startswith("00-database"):
            continue
        span = (dictd_number(parts[1]), dictd_number(parts[2]))
        if span not in seen:
            seen.add(span)
            spans.append((span, parts[0]))
    for (off, size), head in sorted(spans):
        text = data[off:off + size].decode("utf-8", errors="replace")
        yield head, _TAG_LINE.sub("", text).strip()


@register("gcide")
@dataclass(frozen=True, kw_only=True)
class GcideSource(DebianSource):
    """English definitions, etymologies and quotations of GCIDE (``dict-gcide``: Webster's
    Revised Unabridged Dictionary of 1913 with WordNet additions, GPL-3+; 40 MB of text in 0.2 M
    entries under ``usr/share/dictd``), one unit per entry with its attribution-tag lines
    (``[1913 Webster]``) removed, packed in index order into documents grouped by the headword's
    first letter."""

    package: str = "dict-gcide"

    def default_language(self) -> str | None:
        return "en"

    def units(self, root: Path, ctx: SourceContext) -> Iterator[tuple[str, str]]:
        base = root / "usr" / "share" / "dictd"
        index = (base / "gcide.index").read_text(encoding="utf-8", errors="replace")
        data = read_dictzip(base / "gcide.dict.dz")
        rel = "usr/share/dictd/gcide"
        # Grouped by initial (stable ids that say where a document comes from); the database's
        # order interleaves initials (headwords with digits or accents), so each group is gathered
        # first: a group must be contiguous for its document numbers to be unique.
        groups: dict[str, list[str]] = {}
        for head, text in gcide_entries(index, data):
            letter = head[:1].upper()
            groups.setdefault(letter if letter.isalpha() and letter.isascii() else "_", []).append(text)
        for letter in sorted(groups):
            for text in groups[letter]:
                yield f"{rel}/{letter}", text
