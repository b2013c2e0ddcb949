"""``debian_mix``: a training mixture of the single-package Debian sources."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sources.base import Document, Source, SourceContext, check_positive, field_error
from sources.debian import DebianSource
from sources.dedup import MODES, dedup_documents
from sources.doccache import (
    cache_files,
    document_cache_path,
    read_document_cache,
    read_sidecar,
    write_document_cache,
)
from sources.fetch import fetch_packages, package_metadata
from sources.firefox_l10n import FirefoxL10nSource
from sources.fortunes import FortunesSource
from sources.gcide import GcideSource
from sources.html_docs import HtmlDocsSource
from sources.kernel_docs import KernelDocsSource
from sources.manpages import ManpagesSource
from sources.perl_docs import PerlDocsSource
from sources.python_docs import PythonDocsSource
from sources.registry import register
from sources.sword import SwordSource
from sources.wordnet import WordnetSource


@register("debian_mix")
@dataclass(frozen=True, kw_only=True)
class DebianMixSource(Source):
    """A training mixture of Debian-package sources, e.g. English plus other languages.

    members: ``"<source>:<package>"`` entries (``"sword:sword-text-web"``,
    ``"fortunes:fortunes-de"``, ``"firefox_l10n:firefox-esr-l10n-ar"``), each built with its
    defaults. member_bytes: take each member's documents in order until this many UTF-8 bytes
    (> 0; None = all), so one large member does not swamp the rest.

    Document ids are the members' own ids (unique across packages, since they hold the package's
    paths), so the split puts a document in the same part whether it comes from the mixture or
    from its own source: eval sets beside a mixture should say ``part: test`` to stay disjoint
    from the mixture's training part.

    dedup: ``none`` (default), ``exact`` (equal text once white space is normalized) or ``near``
    (exact, plus word 5-gram MinHash similarity ≥ 0.8: ``sources.dedup``) across all members, the
    first occurrence kept; the result is computed once and kept in a sealed cache file
    (``<cache>/documents/``) that records the packages it was built from, and run.json's
    provenance says how much each removal took. A machine given only that file (no packages)
    reads it as it is."""

    members: tuple[str, ...]
    member_bytes: int | None = None
    dedup: str = "none"

    def __post_init__(self) -> None:
        check_positive("debian_mix", self, "member_bytes")
        if self.dedup not in MODES:
            raise field_error("debian_mix", "dedup", f"must be one of {list(MODES)}, got {self.dedup!r}")
        if not self.members:
            raise ValueError("debian_mix source: members is empty")
        for m in self.members:
            kind, _, package = m.partition(":")
            cls = member_classes().get(kind)
            if cls is None or not package:
                raise ValueError(f"debian_mix source: member {m!r} must be '<source>:<package>' "
                                 f"with source one of {sorted(member_classes())}")
        swords = [m for m in self.members if m.startswith("sword:")]
        if len(swords) > 1:
            # Bible chapters have the same id in every translation (so that a split by id keeps
            # translations parallel); two of them in one mixture would collide.
            raise ValueError(f"debian_mix source: at most one sword member, got {swords}: chapter "
                             f"ids (bible/Gen.1) are shared across translations")

    def _sources(self) -> list[DebianSource]:
        out = []
        for m in self.members:
            kind, _, package = m.partition(":")
            out.append(member_classes()[kind](package=package))
        return out

    def packages(self) -> tuple[str, ...]:
        """Debian packages of all members (``tokbench data prepare`` fetches them)."""
        return tuple(dict.fromkeys(p for s in self._sources() for p in s.packages()))

    def prepare(self, ctx: SourceContext) -> None:
        fetch_packages(self.packages(), ctx.cache_dir, source="debian_mix", log=ctx.log)
        for s in self._sources():
            s.prepare(ctx)  # renders man pages; the fetch above made it a no-op otherwise

    def check(self, ctx: SourceContext) -> None:
        """``tokbench validate``: each member's check (damaged package metadata)."""
        for s in self._sources():
            s.check(ctx)

    def provenance(self, ctx: SourceContext) -> dict[str, Any]:
        if self.dedup == "none":
            return {"source": "debian_mix", "members": [s.provenance(ctx) for s in self._sources()]}
        side = read_sidecar(self._cache_path(ctx)) or {}
        return {"source": "debian_mix", "members": side.get("provenance"), "dedup": side.get("stats")}

    def documents(self, ctx: SourceContext) -> Iterator[Document]:
        """The members' documents in order; with ``dedup`` exact/near, without duplicates across
        the whole mixture, computed once and then read from a sealed cache file."""
        if self.dedup == "none":
            yield from self._raw_documents(ctx)
            return
        path = self._cache_path(ctx)
        cached_docs = read_document_cache(path, ctx.log)
        if cached_docs is not None and not self._same_packages(ctx, path):
            ctx.log(f"[data] {path.name}: built from other package versions, rebuilding it")
            cached_docs = None
        if cached_docs is None:
            kept, stats = dedup_documents(self._raw_documents(ctx), self.dedup)
            write_document_cache(path, kept, stats,
                                 lambda: [s.provenance(ctx) for s in self._sources()])
            cached_docs = read_document_cache(path, ctx.log)
            if cached_docs is None:
                raise ValueError(f"debian_mix source: could not read back {path}")
        yield from cached_docs

    def document_files(self, ctx: SourceContext) -> list[Path]:
        """The sealed document file and its sidecar (built or checked now), which ``tokbench data
        pack --slim`` carries in place of the packages; empty with ``dedup: none`` (no file)."""
        if self.dedup == "none":
            return []
        for _ in self.documents(ctx):  # builds a missing file, rebuilds a damaged or stale one
            pass
        return cache_files(self._cache_path(ctx))

    def _cache_path(self, ctx: SourceContext) -> Path:
        return document_cache_path(ctx.cache_dir, "debian_mix", {
            "members": list(self.members), "member_bytes": self.member_bytes, "dedup": self.dedup,
            "language": self.language}, self._modules())

    def _modules(self) -> list[str]:
        """The modules whose code makes this mixture's documents."""
        members = {type(s).__module__ for s in self._sources()}
        return sorted(members | {__name__, "sources.base", "sources.debian", "sources.dedup",
                                 "sources.script"})

    def _same_packages(self, ctx: SourceContext, path: Path) -> bool:
        """Whether the packages the cache holds are those the document file was built from (by
        version and .deb sha256, from their package.json); a package absent from the cache (a
        GPU machine that was given only the document file) is taken as recorded."""
        recorded = {p["package"]: (p["version"], p["sha256"])
                    for m in (read_sidecar(path) or {}).get("provenance") or []
                    for p in m.get("packages", [])}
        for name in self.packages():
            meta = package_metadata(ctx.cache_dir, name)
            if meta is not None and recorded.get(name) != (meta["version"], meta["sha256"]):
                return False
        return True

    def _raw_documents(self, ctx: SourceContext) -> Iterator[Document]:
        for s in self._sources():
            size = 0
            for d in s.documents(ctx):
                if self.member_bytes is not None and size >= self.member_bytes:
                    break
                size += len(d.data)
                yield d


def member_classes() -> dict[str, type[DebianSource]]:
    """The single-package sources of this module by registered name."""
    return {"fortunes": FortunesSource, "manpages": ManpagesSource,
            "firefox_l10n": FirefoxL10nSource, "python_docs": PythonDocsSource,
            "sword": SwordSource, "kernel_docs": KernelDocsSource, "perl_docs": PerlDocsSource,
            "gcide": GcideSource, "wordnet": WordnetSource, "html_docs": HtmlDocsSource}
