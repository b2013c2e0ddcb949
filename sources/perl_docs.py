"""``perl_docs``: the English POD sources of the Perl documentation (``perl-doc``), for
training."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sources.base import SourceContext
from sources.debian import DebianSource
from sources.registry import register

_PARAGRAPH = re.compile(r"\n[ \t]*\n")


@register("perl_docs")
@dataclass(frozen=True, kw_only=True)
class PerlDocsSource(DebianSource):
    """English POD sources of the Perl documentation (``perl-doc``: 206 ``.pod`` files, 8.8 MB,
    under ``usr/share/perl/<version>/pod``: perlfunc, perlre, the FAQ, the release notes …),
    kept as written (POD commands such as ``=head2`` and ``C<...>`` included, as ``python_docs``
    keeps reST), split at blank lines — POD's own paragraph separator — and packed into
    documents. The same pages rendered as man pages (``usr/share/man``) are not read."""

    package: str = "perl-doc"

    def default_language(self) -> str | None:
        return "en"

    def units(self, root: Path, ctx: SourceContext) -> Iterator[tuple[str, str]]:
        files = sorted(p for p in (root / "usr" / "share" / "perl").glob("*/pod/*.pod")
                       if p.is_file() and not p.is_symlink())
        for f in files:
            rel = f.relative_to(root).as_posix()
            for para in _PARAGRAPH.split(f.read_text(encoding="utf-8", errors="replace")):
                yield rel, para.rstrip()
