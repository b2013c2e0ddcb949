"""``wordnet``: the glosses of WordNet 3.0 (``wordnet-base``), for training."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from sources.base import SourceContext
from sources.debian import DebianSource
from sources.registry import register

_PARTS = ("noun", "verb", "adj", "adv")


def wordnet_gloss(line: str) -> str | None:
    """``"lemma, lemma: gloss"`` from one line of a WordNet ``data.*`` file, None for the licence
    header (lines starting with two spaces) or a line without a gloss. Underscores in lemmas are
    spaces (``ice_cream`` → ``ice cream``)."""
    if line.startswith("  ") or "|" not in line:
        return None
    head, gloss = line.split("|", 1)
    fields = head.split()
    try:
        n_words = int(fields[3], 16)
        words = [fields[4 + 2 * i].replace("_", " ") for i in range(n_words)]
    except (IndexError, ValueError):
        return None
    gloss = gloss.strip()
    return f"{', '.join(words)}: {gloss}" if gloss else None


@register("wordnet")
@dataclass(frozen=True, kw_only=True)
class WordnetSource(DebianSource):
    """English glosses of WordNet 3.0 (``wordnet-base``, WordNet 3.0 licence; 117 k synsets,
    9 MB of text in ``usr/share/wordnet/data.{noun,verb,adj,adv}``): one unit per synset,
    ``"its lemmas: its gloss"`` (definition and usage examples), packed in file order into
    documents grouped by part of speech."""

    package: str = "wordnet-base"
    sep: ClassVar[str] = "\n"

    def default_language(self) -> str | None:
        return "en"

    def units(self, root: Path, ctx: SourceContext) -> Iterator[tuple[str, str]]:
        for part in _PARTS:
            f = root / "usr" / "share" / "wordnet" / f"data.{part}"
            if not f.is_file():
                continue
            rel = f.relative_to(root).as_posix()
            with f.open(encoding="utf-8", errors="replace") as lines:
                for line in lines:
                    g = wordnet_gloss(line)
                    if g is not None:
                        yield rel, g
