"""``kernel_docs``: the English reST sources of the Linux kernel documentation
(``linux-doc-6.1``), for training."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from core.decompress import MAX_MEMBER_BYTES, gunzip
from sources.base import SourceContext
from sources.debian import DebianSource
from sources.registry import register

_PARAGRAPH = re.compile(r"\n[ \t]*\n")


def kernel_rst_files(root: Path) -> list[Path]:
    """The package's ``Documentation/**/*.rst[.gz]`` files in sorted path order, without
    ``Documentation/translations/`` (Chinese, Japanese, Korean, Italian and Spanish copies of
    English pages: the source is English)."""
    out = []
    for doc in sorted((root / "usr" / "share" / "doc").glob("*/Documentation")):
        for p in doc.rglob("*"):
            rel = p.relative_to(doc).parts
            if p.is_file() and not p.is_symlink() and p.name.endswith((".rst", ".rst.gz")) \
                    and rel[0] != "translations":
                out.append(p)
    return sorted(out)


@register("kernel_docs")
@dataclass(frozen=True, kw_only=True)
class KernelDocsSource(DebianSource):
    """English reST sources of the Linux kernel documentation (``linux-doc-6.1``: 3,000 gzipped
    ``.rst`` files, 21.4 MB of text once unpacked, under ``usr/share/doc/linux-doc-6.1/
    Documentation``; its ``translations/`` are left out), kept as written (markup included, as
    ``python_docs`` keeps Python's reST), split at blank lines and packed into documents."""

    package: str = "linux-doc-6.1"

    def default_language(self) -> str | None:
        return "en"

    def units(self, root: Path, ctx: SourceContext) -> Iterator[tuple[str, str]]:
        for f in kernel_rst_files(root):
            raw = f.read_bytes()
            if raw[:2] == b"\x1f\x8b":
                raw = gunzip(raw, MAX_MEMBER_BYTES, str(f))
            rel = f.relative_to(root).as_posix()
            for para in _PARAGRAPH.split(raw.decode("utf-8", errors="replace")):
                yield rel, para.rstrip()
