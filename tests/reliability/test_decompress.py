"""Every decompression stops at its limit (core/decompress.py): a small file that expands
without bound is refused on one line naming it, after reading at most the limit, never whole."""

from __future__ import annotations

import gzip
import io
import zipfile
import zlib
from pathlib import Path

import pytest

from core.decompress import TooLarge, gunzip, inflate, read_at_most


def test_gunzip_and_inflate_stop_at_the_limit() -> None:
    bomb = bytes(1_000_000)
    assert gunzip(gzip.compress(bomb), 1_000_000, "f") == bomb  # at the limit: whole
    with pytest.raises(TooLarge, match=r"^f\.gz: decompresses to more than 999999 bytes"):
        gunzip(gzip.compress(bomb), 999_999, "f.gz")
    assert gunzip(gzip.compress(b"a") + gzip.compress(b"b"), 10, "two members") == b"ab"
    assert inflate(zlib.compress(bomb), 1_000_000, "block") == bomb
    with pytest.raises(TooLarge, match=r"^block 3: decompresses to more than 1000 bytes"):
        inflate(zlib.compress(bomb), 1000, "block 3")
    with pytest.raises(zlib.error, match="truncated"):
        inflate(zlib.compress(b"x" * 100)[:-5], 1000, "block")


def test_reads_are_bounded_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    real = gzip.GzipFile.read

    def spy(self: gzip.GzipFile, n: int = -1) -> bytes:
        sizes.append(n)
        return real(self, n)

    monkeypatch.setattr(gzip.GzipFile, "read", spy)
    with pytest.raises(TooLarge):
        gunzip(gzip.compress(bytes(5 << 20)), 3 << 20, "x")
    assert sizes and max(sizes) <= 1 << 20 and sum(sizes) <= (3 << 20) + 1


def test_a_zip_member_is_read_at_most_its_limit(tmp_path: Path) -> None:
    xpi = tmp_path / "a.xpi"
    with zipfile.ZipFile(xpi, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("a.ftl", bytes(100_000))
    with zipfile.ZipFile(xpi) as z, z.open("a.ftl") as m, pytest.raises(TooLarge, match="a.xpi: a.ftl"):
        read_at_most(m, 50_000, f"{xpi}: a.ftl")
    assert read_at_most(io.BytesIO(b"abc"), 3, "x") == b"abc"


def test_a_gzipped_package_file_over_the_limit_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kernel_docs reads the package's .rst.gz through the cap (man pages and SWORD alike)."""
    from sources.kernel_docs import KernelDocsSource

    doc = tmp_path / "usr/share/doc/linux-doc-6.1/Documentation"
    doc.mkdir(parents=True)
    (doc / "a.rst.gz").write_bytes(gzip.compress(b"title\n\n" + b"x" * 5000))
    src = KernelDocsSource()
    assert next(iter(src.units(tmp_path, None)))[0] == "usr/share/doc/linux-doc-6.1/Documentation/a.rst.gz"  # type: ignore[arg-type]
    monkeypatch.setattr("sources.kernel_docs.MAX_MEMBER_BYTES", 1000)
    with pytest.raises(TooLarge, match=r"a\.rst\.gz: decompresses to more than 1000 bytes"):
        list(src.units(tmp_path, None))  # type: ignore[arg-type]
