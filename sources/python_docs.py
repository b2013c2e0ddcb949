"""``python_docs``: the English reST sources of the Python documentation (``python3.11-doc``),
for training."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sources.base import SourceContext
from sources.debian import DebianSource
from sources.registry import register


@register("python_docs")
@dataclass(frozen=True, kw_only=True)
class PythonDocsSource(DebianSource):
    """English reST sources of the Python documentation (``python3.11-doc``: about 11 MB in 497
    files under ``html/_sources``), split at blank lines and packed into documents."""

    package: str = "python3.11-doc"

    def default_language(self) -> str | None:
        return "en"

    def units(self, root: Path, ctx: SourceContext) -> Iterator[tuple[str, str]]:
        files = sorted(p for p in (root / "usr" / "share" / "doc").rglob("_sources/**/*.rst.txt")
                       if p.is_file())
        for f in files:
            rel = f.relative_to(root).as_posix()
            for para in re.split(r"\n[ \t]*\n", f.read_text(encoding="utf-8", errors="replace")):
                yield rel, para.rstrip()
