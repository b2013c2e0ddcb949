"""``manpages``: localized ``manpages-*`` Debian packages (ja zh de fr es pl ru uk), rendered to
plain text with ``groff -k -Tutf8`` and split into paragraphs."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from tqdm import tqdm

from core.decompress import MAX_MEMBER_BYTES, gunzip
from core.files import write_bytes_atomic
from sources.base import SourceContext, check_positive
from sources.debian import DebianSource
from sources.fetch import OWN_TEXT_HINT, CacheDamagedError, SourceUnavailableError, require
from sources.registry import register

_HEADER = re.compile(r"^\S+\([0-9A-Za-z]+\)\s.*\S\([0-9A-Za-z]+\)$")
_SPACES = re.compile(r"[ \t]{2,}")
# A space groff put between two CJK characters (from a line break in the page source): CJK text
# has no spaces between words.
_CJK = "\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff01-\uff60"
_CJK_SPACE = re.compile(f"(?<=[{_CJK}]) (?=[{_CJK}])")
# A table's rule line (tbl boxes: ┌───┐ ├───┤ └───┘). Rendered at the 2000-column line length
# that keeps paragraphs unbroken, each one is ~2000 box-drawing characters (6 KB of UTF-8): the
# ATTRIBUTES tables alone made ~70 % of manpages-dev's bytes such rules. The cell rows stay.
_RULE = re.compile(r"^[\u2500-\u257f\s]+$")

# A rendered page's first line is the sha256 of the text below it, and a directory rendered by
# this code holds CHECKED_MARK: there a page without a matching line (truncated, edited, torn) is
# damaged and rendered again, or refused where groff is missing (a GPU box with carried data).
# A directory rendered before checksums (no mark: an older cache or data pack) is read as it is.
SUM_PREFIX = b"tokbench-rendered sha256="
CHECKED_MARK = ".checksummed"


def read_rendered(path: Path, strict: bool) -> str | None:
    """The text of a rendered page file, or None when it is damaged: its checksum line does not
    match, or (``strict``, a directory with ``CHECKED_MARK``) it has none."""
    raw = path.read_bytes()
    if raw.startswith(SUM_PREFIX):
        head, _, body = raw.partition(b"\n")
        if hashlib.sha256(body).hexdigest().encode() != head[len(SUM_PREFIX):]:
            return None
    elif strict:
        return None
    else:
        body = raw
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return None


def clean_rendered_man(text: str) -> list[str]:
    """Paragraphs of a page rendered by groff -Tutf8: without the running header/footer lines,
    indentation and justification spaces, and table rule lines."""
    lines = [line.rstrip() for line in text.splitlines() if not _RULE.match(line)]
    non_empty = [i for i, line in enumerate(lines) if line.strip()]
    if non_empty and _HEADER.match(lines[non_empty[0]].strip()):
        lines[non_empty[0]] = ""
    if len(non_empty) > 1 and re.search(r"\([0-9A-Za-z]+\)$", lines[non_empty[-1]]):
        lines[non_empty[-1]] = ""
    paras, cur = [], []
    for line in lines:
        if line.strip():
            cur.append(_CJK_SPACE.sub("", _SPACES.sub(" ", line.strip())))
        elif cur:
            paras.append("\n".join(cur))
            cur = []
    if cur:
        paras.append("\n".join(cur))
    return paras


def render_man(source: bytes) -> str:
    """Render man-page source to plain UTF-8 text with groff.

    ``-k`` runs preconv (without it non-ASCII pages come out as mojibake); ``-rHY=0`` turns
    hyphenation off and ``-dAD=l`` justification, so words are never cut or padded with spaces
    (both would corrupt word-level analyses); ``-P-c -P-b -P-u`` drop SGR, bold and underline."""
    if shutil.which("groff") is None:
        raise SourceUnavailableError(f"manpages source: `groff` is not installed (apt-get install "
                                     f"groff-base); {OWN_TEXT_HINT}")
    proc = subprocess.run(
        ["groff", "-k", "-t", "-Tutf8", "-man", "-rHY=0", "-dAD=l", "-rLL=2000n", "-P-c", "-P-b", "-P-u"],
        input=source, capture_output=True)
    return proc.stdout.decode("utf-8", errors="replace")


@register("manpages")
@dataclass(frozen=True, kw_only=True)
class ManpagesSource(DebianSource):
    """Localized man pages of a ``manpages-*`` package (``manpages-ja``, ``manpages-de`` …),
    rendered with groff (cached under ``<cache>/rendered/``; ``prepare`` renders them once, one
    groff call a page, with a progress bar). Pages that only include another page (``.so``) are skipped.

    max_pages: render only the first pages in sorted path order (> 0; None = all)."""

    prefix: ClassVar[str] = "manpages-"
    max_pages: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self.registry_name, self, "max_pages")

    def _pages(self, root: Path) -> list[Path]:
        man = root / "usr" / "share" / "man"
        pages = sorted(p for p in man.rglob("*") if p.is_file() and not p.is_symlink())
        return pages[: self.max_pages] if self.max_pages is not None else pages

    def _render_dir(self, ctx: SourceContext) -> Path:
        version = require(ctx.cache_dir, self.package, self.registry_name).version
        return ctx.cache_dir / "rendered" / f"{self.package}_{version.replace(':', '%3a')}"

    @staticmethod
    def _rendered(root: Path, page: Path, render_dir: Path) -> str:
        """The page's rendered text, from its file under ``render_dir`` when that is whole, else
        rendered (again) and stored with its checksum line (module comment at ``SUM_PREFIX``)."""
        out = render_dir / (page.relative_to(root).as_posix() + ".txt")
        marked = (render_dir / CHECKED_MARK).is_file()
        if out.is_file():
            text = read_rendered(out, strict=marked)
            if text is not None:
                return text
            if shutil.which("groff") is None:
                raise CacheDamagedError(
                    f"{out}: damaged rendered page (its checksum does not match); run `tokbench "
                    "data prepare SUITE` where groff is installed, or carry the data again")
        raw = page.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gunzip(raw, MAX_MEMBER_BYTES, str(page))
        body = [ln for ln in raw.splitlines() if ln.strip() and not ln.startswith((b".\\\"", b"'\\\""))]
        text = "" if body and body[0].startswith(b".so ") else render_man(raw)
        if not marked:
            write_bytes_atomic(render_dir / CHECKED_MARK, b"", make_parents=True)
        data = text.encode("utf-8")
        write_bytes_atomic(out, SUM_PREFIX + hashlib.sha256(data).hexdigest().encode() + b"\n" + data,
                           make_parents=True)
        return text

    def prepare(self, ctx: SourceContext) -> None:
        super().prepare(ctx)
        root = require(ctx.cache_dir, self.package, self.registry_name).root
        render_dir = self._render_dir(ctx)
        for page in tqdm(self._pages(root), desc=f"rendering {self.package}", unit="page",
                         file=sys.stderr):
            self._rendered(root, page, render_dir)

    def units(self, root: Path, ctx: SourceContext) -> Iterator[tuple[str, str]]:
        render_dir = self._render_dir(ctx)
        for page in self._pages(root):
            rel = page.relative_to(root).as_posix()
            text = self._rendered(root, page, render_dir)
            for para in clean_rendered_man(text):
                yield rel, para
