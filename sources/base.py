"""Data sources: where documents come from. A source yields ``Document``s; the harness splits them.

A source is a frozen config dataclass (its YAML parameters) registered under a name, with
``documents()`` yielding raw bytes. Sources never crash on undecodable bytes: documents are bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import field_error as core_field_error


def field_error(source: str, field: str, problem: str) -> ValueError:
    """``core.errors.field_error`` with a source's wording: ``<source> source: <field> <problem>``
    (the suite loader reports it at ``data.train.<field>`` / ``data.eval[i].<field>``)."""
    return core_field_error(source, field, problem, f"{source} source: {field} {problem}")


def check_positive(source: str, obj: Any, *names: str) -> None:
    """Refuse a size field of ``obj`` that is not > 0 (None, where allowed, means no limit):
    ``max_bytes: -1`` used to stop after the first document, ``max_pages: -1`` to drop the last
    page through a negative slice."""
    for name in names:
        v = getattr(obj, name)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise field_error(source, name, f"must be > 0 (or null: no limit), got {v!r}")


@dataclass(frozen=True)
class Document:
    """One document. ``id`` is stable across runs (it seeds the split and perturbations).

    language: ISO 639-1/3 code or None; script: ISO 15924 code or None (detected when missing).
    """

    id: str
    data: bytes
    language: str | None = None
    script: str | None = None
    meta: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, kw_only=True)
class Source:
    """Base class of source configs. ``language`` applies to every document lacking one."""

    language: str | None = None

    def documents(self, ctx: SourceContext) -> Iterator[Document]:
        raise NotImplementedError

    def prepare(self, ctx: SourceContext) -> None:  # noqa: B027 - optional
        """Fetch / build whatever the source needs into ``ctx.cache_dir`` (idempotent)."""

    def provenance(self, ctx: SourceContext) -> dict[str, Any]:
        """Facts for run.json: package names, versions, licences, paths."""
        return {}

    def check(self, ctx: SourceContext) -> None:  # noqa: B027 - optional
        """Raise ValueError when a local input the source needs is missing (``tokbench
        validate``): cheap, no network, no reading of file contents."""


@dataclass
class SourceContext:
    """Run-time facts a source may use: where the suite file lives (relative paths resolve from
    there), the cache directory, and a progress callback."""

    base_dir: Path
    cache_dir: Path
    log: Callable[[str], None] = print
