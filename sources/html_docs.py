"""``html_docs``: the text of a Debian package's HTML documentation (LibreOffice help in many
languages, the PostgreSQL manual, …), for training."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from html.parser import HTMLParser
from pathlib import Path

from sources.base import Document, SourceContext
from sources.debian import DebianSource, language_of_package
from sources.registry import register

# Elements whose end closes a paragraph of text; others (a, span, code, em …) flow inline.
_BLOCK = frozenset("p div br li dt dd tr td th h1 h2 h3 h4 h5 h6 pre table ul ol dl title "
                   "blockquote section article header footer caption figcaption".split())
_SKIP = frozenset(("script", "style", "head", "nav", "noscript"))
# An HTML file larger than this is not documentation prose (a generated index): skipped.
MAX_HTML_BYTES = 4 << 20
_SPACE = re.compile(r"[ \t\r\f\v\u00a0]+")
_BLANK = re.compile(r"\n[ \t]*\n")
# A locale folder in a page's path (``html/de-DE/``, ``help/pt-BR/``) names its language.
_LOCALE = re.compile(r"/([a-z]{2,3})-[A-Z]{2}/")


class _TextParser(HTMLParser):
    """Collects the visible text of a page as paragraphs (block elements end a paragraph)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._buf: list[str] = []
        self._skip = 0
        self._pre = 0

    def _flush(self, pre: bool = False) -> None:
        raw = "".join(self._buf)
        self._buf = []
        if not pre:
            text = _SPACE.sub(" ", raw).strip()
            if text:
                self.paragraphs.append(text)
            return
        # Preformatted text keeps its lines and indentation; blank lines separate paragraphs.
        for part in _BLANK.split(raw):
            text = "\n".join(x.rstrip() for x in part.split("\n") if x.strip()).replace("\u00a0", " ")
            if text:
                self.paragraphs.append(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self._skip += 1
        elif tag in _BLOCK:
            self._flush(pre=self._pre > 0)
            self._pre += tag == "pre"

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self._skip = max(0, self._skip - 1)
        elif tag in _BLOCK:
            self._flush(pre=self._pre > 0)
            self._pre = max(0, self._pre - (tag == "pre"))

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self._buf.append(data if self._pre else data.replace("\n", " "))


def html_paragraphs(text: str) -> list[str]:
    """The visible paragraphs of an HTML page (scripts, styles, the head and navigation left out;
    entities decoded; runs of white space one space)."""
    p = _TextParser()
    p.feed(text)
    p.close()
    p._flush()
    return [html.unescape(x) if "&" in x else x for x in p.paragraphs]


@register("html_docs")
@dataclass(frozen=True, kw_only=True)
class HtmlDocsSource(DebianSource):
    """The visible text of the ``*.html`` pages a Debian package installs under ``usr/share``
    (``libreoffice-help-de``: 2.5 k pages of German help, 5 MB of text; ``postgresql-doc-15``:
    the PostgreSQL manual, 7 MB), tags removed, one unit per paragraph, packed per page. The
    language comes from the YAML entry, else from a locale folder in the page's path (``de-DE``),
    else from a ``libreoffice-help-<lang>`` name, else English.
    A page over 4 MB (a generated index) is skipped."""

    def default_language(self) -> str | None:
        lang = language_of_package(self.package, "libreoffice-help-")
        return lang if self.package.startswith("libreoffice-help-") else "en"

    def documents(self, ctx: SourceContext) -> Iterator[Document]:
        """The base class's documents, each with the language of its page's locale folder when
        the YAML entry names none (one package may hold a manual in 26 languages)."""
        for d in super().documents(ctx):
            m = None if self.language else _LOCALE.search("/" + d.id)
            yield replace(d, language=m.group(1)) if m else d

    def units(self, root: Path, ctx: SourceContext) -> Iterator[tuple[str, str]]:
        files = sorted(p for p in (root / "usr" / "share").rglob("*.html")
                       if p.is_file() and not p.is_symlink())
        for f in files:
            if f.stat().st_size > MAX_HTML_BYTES:
                continue
            rel = f.relative_to(root).as_posix()
            for para in html_paragraphs(f.read_text(encoding="utf-8", errors="replace")):
                yield rel, para
