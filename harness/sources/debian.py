"""Real multilingual text from Debian packages, fetched without root into the user cache.

Each source names one Debian bookworm package; ``prepare`` fetches and unpacks it with
``harness.sources.fetch`` (``apt-get download`` + ``dpkg -x`` into ``$TOKBENCH_CACHE``), and
``documents`` reads only the cache, so a run never touches the network. Registered names:

* ``fortunes``      ``fortunes-*`` quote files (strfile ``%``-separated; de es it cs pl ru bg zh …)
* ``manpages``      localized ``manpages-*`` rendered with ``groff -k -Tutf8`` (ja zh de fr es pl ru uk)
* ``firefox_l10n``  ``firefox-esr-l10n-*`` UI strings (.ftl/.properties in the langpack .xpi):
                    the only offline source of Arabic, Hebrew, Thai and Devanagari sentences
* ``python_docs``   ``python3.11-doc`` reST sources (English, for training)
* ``sword``         SWORD Bible modules (``sword-text-web`` English, ``sword-text-sparv`` Spanish,
                    ``sword-text-kjv``): one document per chapter with id ``bible/Gen.1``, the same
                    id in every translation, so en/es evaluation sets are chapter-aligned parallel text

Short units (a quote, a UI string, a paragraph) are packed in order into documents of about
``doc_bytes`` UTF-8 bytes; a unit seen before in the same package (boilerplate such as a man page
translator's credit) is dropped, so it cannot sit in both the training and the test part. Document
ids are ``<path in package>#<k>``: stable across runs and machines. Every document carries its
``language`` (ISO 639, from the YAML entry or derived from the package name) and its ``script``
(ISO 15924, detected from its code points by ``harness.sources.script``).
"""

from __future__ import annotations

import gzip
import hashlib
import itertools
import re
import shutil
import struct
import subprocess
import sys
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from tqdm import tqdm

from harness.sources.base import Document, Source, SourceContext, register_source
from harness.sources.fetch import OWN_TEXT_HINT, SourceUnavailableError, fetch_packages, require
from harness.sources.script import detect_script, script_counts

# Package-name suffixes whose ISO 639 code is not their first part (``hi-in`` → hi needs no entry).
_LANG_ALIASES = {"br": "pt", "min": "en"}


def language_of_package(package: str, prefix: str) -> str | None:
    """ISO 639 code from a package name: ``fortunes-de`` → de, ``firefox-esr-l10n-hi-in`` → hi,
    ``fortunes-br`` → pt (Brazilian), ``manpages`` → en. None if the name has no suffix code."""
    if package == prefix.rstrip("-"):
        return "en"
    if not package.startswith(prefix):
        return None
    suffix = package[len(prefix):]
    return _LANG_ALIASES.get(suffix, suffix.split("-")[0] or None)


def pack_units(units: Iterable[tuple[str, str]], doc_bytes: int, sep: str) -> Iterator[tuple[str, str]]:
    """Pack consecutive ``(group, text)`` units into ``(id, text)`` documents of about
    ``doc_bytes`` UTF-8 bytes (a document closes once it reaches the size; a longer unit is a
    document of its own). Documents never span two groups; ids are ``<group>#<k>``. Units whose
    text was already seen (whitespace-normalized) are dropped."""
    seen: set[bytes] = set()
    group: str | None = None
    buf: list[str] = []
    size, k = 0, 0
    for g, text in units:
        text = text.strip()
        key = hashlib.sha1(" ".join(text.split()).encode("utf-8")).digest()
        if not text or key in seen:
            continue
        seen.add(key)
        if g != group:
            if buf:
                yield f"{group}#{k}", sep.join(buf)
            group, buf, size, k = g, [], 0, 0
        buf.append(text)
        size += len(text.encode("utf-8")) + len(sep)
        if size >= doc_bytes:
            yield f"{group}#{k}", sep.join(buf)
            buf, size, k = [], 0, k + 1
    if buf:
        yield f"{group}#{k}", sep.join(buf)


@dataclass(frozen=True, kw_only=True)
class DebianSource(Source):
    """Base of the Debian-package sources.

    package: the Debian package name (e.g. ``fortunes-de``).
    doc_bytes: documents are packed to about this many UTF-8 bytes (ignored by ``sword``).
    max_docs: stop after this many documents (None = all), in the package's sorted order.
    """

    package: str
    doc_bytes: int = 2048
    max_docs: int | None = None

    prefix: ClassVar[str] = ""  # package-name prefix before the language code
    sep: ClassVar[str] = "\n\n"  # between units packed into one document

    def __post_init__(self) -> None:
        if self.prefix and not self.package.startswith(self.prefix.rstrip("-")):
            raise ValueError(f"{self.registry_name} source: package {self.package!r} should start "
                             f"with {self.prefix.rstrip('-')!r}")
        if self.doc_bytes < 16:
            raise ValueError(f"{self.registry_name} source: doc_bytes={self.doc_bytes} must be >= 16")
        if self.max_docs is not None and self.max_docs < 0:
            raise ValueError(f"{self.registry_name} source: max_docs={self.max_docs} must be >= 0")

    # --- the Source interface -------------------------------------------------------------
    def packages(self) -> tuple[str, ...]:
        """Debian packages this source reads (``tokbench data prepare`` fetches them)."""
        return (self.package,)

    def prepare(self, ctx: SourceContext) -> None:
        fetch_packages(self.packages(), ctx.cache_dir, source=self.registry_name, log=ctx.log)

    def provenance(self, ctx: SourceContext) -> dict[str, Any]:
        pkgs = [require(ctx.cache_dir, p, self.registry_name).provenance() for p in self.packages()]
        return {"source": self.registry_name, "packages": pkgs}

    def documents(self, ctx: SourceContext) -> Iterator[Document]:
        root = require(ctx.cache_dir, self.package, self.registry_name).root
        lang = self.language or self.package_language(root)
        for doc_id, text in itertools.islice(self.texts(root, ctx), self.max_docs):
            yield Document(id=doc_id, data=text.encode("utf-8"), language=lang,
                           script=detect_script(text), meta={"package": self.package})

    # --- what subclasses define -----------------------------------------------------------
    def default_language(self) -> str | None:
        return language_of_package(self.package, self.prefix) if self.prefix else None

    def package_language(self, root: Path) -> str | None:
        """Language of the documents when the YAML entry gives none; may read the unpacked tree."""
        return self.default_language()

    def texts(self, root: Path, ctx: SourceContext) -> Iterator[tuple[str, str]]:
        """(id, clean text) documents from the unpacked package tree."""
        return pack_units(self.units(root, ctx), self.doc_bytes, self.sep)

    def units(self, root: Path, ctx: SourceContext) -> Iterator[tuple[str, str]]:
        raise NotImplementedError


# ---------------------------------------------------------------------------------- fortunes
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_OVERSTRIKE = re.compile(r"[^\n]\x08")  # "_\bX" underline and "X\bX" bold of old terminals
_FORTUNE_SEP = re.compile(r"^%[ \t]*$", re.M)


def clean_fortune_file(text: str) -> list[str]:
    """Split one strfile text into quotes, removing terminal escapes and overstrike."""
    text = _OVERSTRIKE.sub("", _ANSI.sub("", text.replace("\r\n", "\n")))
    out = []
    for q in _FORTUNE_SEP.split(text):
        q = "\n".join(line.rstrip() for line in q.strip("\n").splitlines())
        if q.strip():
            out.append(q)
    return out


@register_source("fortunes")
@dataclass(frozen=True, kw_only=True)
class FortunesSource(DebianSource):
    """Quotes of a ``fortunes-*`` package (e.g. ``fortunes-de``, ``fortunes-ru``, ``fortunes-zh``,
    ``fortunes`` for English). Reads every plain text file under ``usr/share/games`` except the
    strfile ``.dat`` indexes, symlinks (``.u8`` aliases), offensive (``off/``) collections and
    files that are not valid UTF-8."""

    prefix: ClassVar[str] = "fortunes-"

    def units(self, root: Path, ctx: SourceContext) -> Iterator[tuple[str, str]]:
        base = root / "usr" / "share" / "games"
        files = sorted(p for p in base.rglob("*") if p.is_file() and not p.is_symlink()
                       and p.suffix != ".dat" and "off" not in p.relative_to(base).parts[:-1])
        for f in files:
            data = f.read_bytes()
            if data.startswith(b"#!"):
                continue  # a wrapper script
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                ctx.log(f"fortunes: skipping {f.relative_to(root)} (not UTF-8)")
                continue
            rel = f.relative_to(root).as_posix()
            for q in clean_fortune_file(text):
                yield rel, q


# ---------------------------------------------------------------------------------- manpages
_HEADER = re.compile(r"^\S+\([0-9A-Za-z]+\)\s.*\S\([0-9A-Za-z]+\)$")
_SPACES = re.compile(r"[ \t]{2,}")
# A space groff put between two CJK characters (from a line break in the page source): CJK text
# has no spaces between words.
_CJK = "\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff01-\uff60"
_CJK_SPACE = re.compile(f"(?<=[{_CJK}]) (?=[{_CJK}])")


def clean_rendered_man(text: str) -> list[str]:
    """Paragraphs of a page rendered by groff -Tutf8: without the running header/footer lines,
    indentation and justification spaces."""
    lines = [line.rstrip() for line in text.splitlines()]
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


@register_source("manpages")
@dataclass(frozen=True, kw_only=True)
class ManpagesSource(DebianSource):
    """Localized man pages of a ``manpages-*`` package (``manpages-ja``, ``manpages-de`` …),
    rendered with groff (cached under ``<cache>/rendered/``; ``prepare`` renders them once, one
    groff call a page, with a progress bar). Pages that only include another page (``.so``) are skipped.

    max_pages: render only the first pages in sorted path order (None = all)."""

    prefix: ClassVar[str] = "manpages-"
    max_pages: int | None = None

    def _pages(self, root: Path) -> list[Path]:
        man = root / "usr" / "share" / "man"
        pages = sorted(p for p in man.rglob("*") if p.is_file() and not p.is_symlink())
        return pages[: self.max_pages] if self.max_pages is not None else pages

    def _render_dir(self, ctx: SourceContext) -> Path:
        version = require(ctx.cache_dir, self.package, self.registry_name).version
        return ctx.cache_dir / "rendered" / f"{self.package}_{version.replace(':', '%3a')}"

    @staticmethod
    def _rendered(root: Path, page: Path, render_dir: Path) -> Path:
        """The page's rendered text file under ``render_dir``, rendering it if missing."""
        out = render_dir / (page.relative_to(root).as_posix() + ".txt")
        if out.is_file():
            return out
        raw = page.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        body = [ln for ln in raw.splitlines() if ln.strip() and not ln.startswith((b".\\\"", b"'\\\""))]
        text = "" if body and body[0].startswith(b".so ") else render_man(raw)
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_suffix(".part")
        part.write_text(text, encoding="utf-8")
        part.replace(out)
        return out

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
            text = self._rendered(root, page, render_dir).read_text(encoding="utf-8")
            for para in clean_rendered_man(text):
                yield rel, para


# ------------------------------------------------------------------------------ firefox l10n
# Attributes holding keyboard shortcuts or CSS, not language.
_SKIP_ATTRS = {"accesskey", "commandkey", "key", "keycode", "modifiers", "style", "width",
               "height", "size"}
_FTL_MESSAGE = re.compile(r"^(-?[A-Za-z][\w-]*)[ \t]*=[ \t]*(.*)$")
_FTL_ATTR = re.compile(r"^[ \t]+\.([\w-]+)[ \t]*=[ \t]*(.*)$")
_PRINTF = re.compile(r"%(?:\d+\$)?(?:l?[Ssd]|[0-9.]*[fu])|#\d")


def _matching_brace(s: str, i: int) -> int:
    """Index of the ``}`` closing the ``{`` at ``s[i]`` (len(s) if unbalanced); braces inside a
    string literal (``{ "{" }``) do not count."""
    depth, j = 0, i
    while j < len(s):
        c = s[j]
        if c == '"' and depth > 0:
            j += 1
            while j < len(s) and s[j] != '"':
                j += 2 if s[j] == "\\" else 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return len(s)


def resolve_placeables(s: str) -> str:
    """Fluent pattern → plain text: a select expression becomes its default (``*[...]``)
    variant, a string literal ``{ "x" }`` its text; variables, terms and functions are dropped."""
    out, i = [], 0
    while i < len(s):
        if s[i] != "{":
            out.append(s[i])
            i += 1
            continue
        j = _matching_brace(s, i)
        inner = s[i + 1 : j]
        arrow = inner.find("->")
        if arrow >= 0 and "{" not in inner[:arrow]:  # a select expression
            variants = inner[arrow + 2 :]
            m = re.search(r"\*\[[^\]]*\]", variants)
            if m:
                rest = variants[m.end():]
                nxt = re.search(r"\n\s*\*?\[[^\]]*\]", rest)
                out.append(resolve_placeables(rest[: nxt.start()] if nxt else rest))
        else:
            lit = re.fullmatch(r'\s*"((?:[^"\\]|\\.)*)"\s*', inner)
            if lit:
                out.append(lit.group(1))
        i = j + 1
    return "".join(out)


def _clean_string(s: str) -> str:
    return " ".join(_PRINTF.sub("", s).split())


def parse_ftl(text: str) -> list[str]:
    """User-visible strings of a Fluent (.ftl) file: message values and attributes (without
    shortcut keys and CSS), placeables resolved, whitespace normalized. Terms (``-brand-name``)
    and their attributes are skipped: they are product names."""
    entries: list[tuple[bool, list[str]]] = []  # (keep, pattern lines)
    cur: list[str] | None = None
    in_term = False
    for line in text.splitlines():
        if line.startswith("#"):
            cur = None
            continue
        if not line.strip():
            continue
        m = _FTL_MESSAGE.match(line)
        if m:
            in_term = m.group(1).startswith("-")
            cur = [m.group(2)]
            entries.append((not in_term, cur))
            continue
        a = _FTL_ATTR.match(line)
        if a and cur is not None:
            cur = [a.group(2)]
            entries.append((not in_term and a.group(1) not in _SKIP_ATTRS, cur))
            continue
        if cur is not None and line[:1] in (" ", "\t"):
            cur.append(line)
    out = []
    for keep, lines in entries:
        if keep:
            s = _clean_string(resolve_placeables("\n".join(lines)))
            if s:
                out.append(s)
    return out


def parse_properties(text: str) -> list[str]:
    """Values of a Java .properties file without shortcut keys; printf placeholders (``%S``,
    ``%1$S``, ``#1``) removed; of ``a;b`` plural forms only the first is kept."""
    out = []
    # A value continues on the next line after a trailing backslash.
    for line in re.sub(r"\\\r?\n[ \t]*", "", text).splitlines():
        line = line.strip()
        if not line or line[0] in "#!" or "=" not in line:
            continue
        key, value = (x.strip() for x in line.split("=", 1))
        if key.rsplit(".", 1)[-1].lower() in _SKIP_ATTRS or key.lower().endswith("accesskey"):
            continue
        value = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), value)
        value = re.sub(r"\\(.)", lambda m: " " if m.group(1) in "nt" else m.group(1), value)
        s = _clean_string(value.split(";")[0])
        if s:
            out.append(s)
    return out


@register_source("firefox_l10n")
@dataclass(frozen=True, kw_only=True)
class FirefoxL10nSource(DebianSource):
    """UI strings of a Firefox ESR language pack (``firefox-esr-l10n-ar``, ``-he``, ``-th``,
    ``-hi-in``, ``-el`` …), one unit per string, packed one string a line.

    drop_fallback: for a language whose script is not Latin, drop strings with no letter of a
    non-Latin script — untranslated English fallbacks, product names and identifiers."""

    prefix: ClassVar[str] = "firefox-esr-l10n-"
    sep: ClassVar[str] = "\n"
    drop_fallback: bool = True

    def _strings(self, root: Path) -> list[tuple[str, str]]:
        xpis = sorted((root / "usr" / "lib").rglob("*.xpi"))
        if not xpis:
            raise SourceUnavailableError(f"firefox_l10n source: no langpack .xpi in {self.package}")
        out = []
        for xpi in xpis:
            with zipfile.ZipFile(xpi) as z:
                for name in sorted(z.namelist()):
                    if name.endswith(".ftl"):
                        parse = parse_ftl
                    elif name.endswith(".properties"):
                        parse = parse_properties
                    else:
                        continue
                    text = z.read(name).decode("utf-8", errors="replace")
                    out.extend((name, s) for s in parse(text))
        return out

    def units(self, root: Path, ctx: SourceContext) -> Iterator[tuple[str, str]]:
        strings = self._strings(root)
        non_latin = detect_script("\n".join(s for _, s in strings)) not in ("Latn", "Zyyy")
        for name, s in strings:
            if self.drop_fallback and non_latin:
                if not any(k != "Latn" for k in script_counts(s)):
                    continue
            yield name, s


# ------------------------------------------------------------------------------- python docs
@register_source("python_docs")
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


# ------------------------------------------------------------------------------------- sword
# The 66 books of the Protestant canon (OSIS ids), shared by every SWORD versification.
PROTESTANT_BOOKS = frozenset(
    "Gen Exod Lev Num Deut Josh Judg Ruth 1Sam 2Sam 1Kgs 2Kgs 1Chr 2Chr Ezra Neh Esth Job Ps "
    "Prov Eccl Song Isa Jer Lam Ezek Dan Hos Joel Amos Obad Jonah Mic Nah Hab Zeph Hag Zech Mal "
    "Matt Mark Luke John Acts Rom 1Cor 2Cor Gal Eph Phil Col 1Thess 2Thess 1Tim 2Tim Titus Phlm "
    "Heb Jas 1Pet 2Pet 1John 2John 3John Jude Rev".split())
_CHAPTER = re.compile(r'<chapter\b[^>]*\bosisID="([^"]+)"')
# Footnotes and editors' section titles; canonical titles (psalm headings) are scripture and stay.
_DROP_ELEMENTS = re.compile(
    r'<(note|title)\b(?![^>]*canonical="true")[^>]*?(?<!/)>.*?</\1>', re.S)
# An added-word tag glued to a neighbouring word (the Reina-Valera module has "Jehová<transChange
# type="added">es</transChange><w>para" with no spaces): the tag becomes a space there.
_GLUED_TAG = re.compile(r"(?<=[\w>])<transChange\b[^>]*>|</transChange>(?=[\w<])")
_TAG = re.compile(r"<[^>]*>")


def clean_osis(markup: str) -> str:
    """Plain text of one OSIS verse, on one line: footnotes, cross-references and section titles
    removed (they differ between translations), other tags vanish (``<w>`` word tags wrap words,
    so removing them never joins two words), whitespace (paragraph and poetry-line breaks, which
    translations place differently) becomes single spaces."""
    # A footnote between two word tags often held the only space between the words
    # ("knew<note>…</note><w>Eve"): there it becomes a space, elsewhere nothing.
    s = _DROP_ELEMENTS.sub("\x00", markup)
    s = re.sub(r"(</w>)\x00+(?=<w\b)", r"\1 ", s).replace("\x00", "")
    s = _GLUED_TAG.sub(" ", s)
    s = _TAG.sub("", s)
    s = s.replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"').replace("&apos;", "'")
    s = s.replace("&amp;", "&")
    return " ".join(s.split())


def read_ztext(module_dir: Path) -> Iterator[str]:
    """Verse entries (raw markup, index order) of a SWORD zText module: ``*.bzs`` holds (offset,
    size, uncompressed size) of each zlib block in ``*.bzz``; ``*.bzv`` holds (block, offset,
    size) of each verse, little-endian u32/u32/u16. Old Testament first."""
    for testament in ("ot", "nt"):
        paths = [module_dir / f"{testament}.{ext}" for ext in ("bzs", "bzv", "bzz")]
        if not all(p.is_file() for p in paths):
            continue
        bzs, bzv, bzz = (p.read_bytes() for p in paths)
        blocks = [struct.unpack_from("<III", bzs, i) for i in range(0, len(bzs) - 11, 12)]
        cache: dict[int, bytes] = {}
        for i in range(0, len(bzv) - 9, 10):
            b, off, size = struct.unpack_from("<IIH", bzv, i)
            if size == 0 or b >= len(blocks):
                yield ""
                continue
            if b not in cache:
                cache.clear()  # blocks are read in order; keep one
                start, csize, _ = blocks[b]
                cache[b] = zlib.decompress(bzz[start : start + csize])
            yield cache[b][off : off + size].decode("utf-8", errors="replace")


@register_source("sword")
@dataclass(frozen=True, kw_only=True)
class SwordSource(DebianSource):
    """A SWORD Bible module: one document per chapter, id ``bible/<OSIS chapter>`` (``bible/Gen.1``)
    — identical across translations, so two eval sets from ``sword-text-web`` (English, World
    English Bible) and ``sword-text-sparv`` (Spanish, Reina-Valera 1909) hold the same chapters in
    two languages, and a split by id puts the same chapters in the same part.

    module: the module's conf name (``engWEB2015eb``); None = the package's only module.
    canon: ``protestant`` keeps the 66 books every module shares (the WEB adds deuterocanon books
    the Spanish module lacks); ``all`` keeps every book."""

    package: str = "sword-text-web"
    module: str | None = None
    canon: Literal["protestant", "all"] = "protestant"

    def _conf(self, root: Path) -> dict[str, str]:
        all_confs = sorted((root / "usr" / "share" / "sword" / "mods.d").glob("*.conf"))
        confs = all_confs
        if self.module is not None:
            confs = [c for c in confs if c.stem.lower() == self.module.lower()]
        if len(confs) != 1:
            names = [c.stem for c in all_confs]
            raise ValueError(f"sword source: package {self.package!r} has modules {names}; "
                             f"set `module:` to one of them")
        conf: dict[str, str] = {}
        for line in confs[0].read_text(encoding="utf-8", errors="replace").splitlines():
            if "=" in line and not line.startswith("["):
                k, v = line.split("=", 1)
                conf.setdefault(k.strip(), v.strip())
        if conf.get("ModDrv", "").lower() != "ztext":
            raise ValueError(f"sword source: module {confs[0].stem} uses driver "
                             f"{conf.get('ModDrv')!r}; only zText modules are supported")
        return conf

    def default_language(self) -> str | None:
        return None  # known only from the module's conf: see package_language

    def package_language(self, root: Path) -> str | None:
        return self._conf(root).get("Lang") or None

    def texts(self, root: Path, ctx: SourceContext) -> Iterator[tuple[str, str]]:
        conf = self._conf(root)
        mod_dir = root / "usr" / "share" / "sword" / conf.get("DataPath", "").lstrip("./")
        chapter: str | None = None
        verses: list[str] = []
        for markup in read_ztext(mod_dir):
            m = _CHAPTER.search(markup)
            if m:
                if chapter is not None and verses:
                    yield f"bible/{chapter}", _join_verses(verses)
                chapter, verses = m.group(1), []
                book = chapter.split(".")[0]
                if self.canon == "protestant" and book not in PROTESTANT_BOOKS:
                    chapter = None
                continue
            if "<div" in markup and 'type="book"' in markup:
                if chapter is not None and verses:
                    yield f"bible/{chapter}", _join_verses(verses)
                chapter, verses = None, []
                continue
            if chapter is not None:
                verses.append(clean_osis(markup))
        if chapter is not None and verses:
            yield f"bible/{chapter}", _join_verses(verses)


def _join_verses(verses: list[str]) -> str:
    return " ".join(v for v in verses if v)


# ------------------------------------------------------------------------------------ mixture
@register_source("debian_mix")
@dataclass(frozen=True, kw_only=True)
class DebianMixSource(Source):
    """A training mixture of Debian-package sources, e.g. English plus other languages.

    members: ``"<source>:<package>"`` entries (``"sword:sword-text-web"``,
    ``"fortunes:fortunes-de"``, ``"firefox_l10n:firefox-esr-l10n-ar"``), each built with its
    defaults. member_bytes: take each member's documents in order until this many UTF-8 bytes
    (None = all), so one large member does not swamp the rest.

    Document ids are the members' own ids (unique across packages, since they hold the package's
    paths), so the split puts a document in the same part whether it comes from the mixture or
    from its own source: eval sets beside a mixture should say ``part: test`` to stay disjoint
    from the mixture's training part."""

    members: tuple[str, ...]
    member_bytes: int | None = None

    def __post_init__(self) -> None:
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

    def provenance(self, ctx: SourceContext) -> dict[str, Any]:
        return {"source": "debian_mix", "members": [s.provenance(ctx) for s in self._sources()]}

    def documents(self, ctx: SourceContext) -> Iterator[Document]:
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
            "sword": SwordSource}


# Debian packages of the Hunspell dictionaries the morphology analysis and ``morph.affix_swap``
# use (looked up under <cache>/debian/hunspell-*/ or /usr/share/hunspell).
HUNSPELL_PACKAGES: dict[str, str] = {
    "en": "hunspell-en-us", "de": "hunspell-de-de", "es": "hunspell-es", "ru": "hunspell-ru",
    "tr": "hunspell-tr", "fr": "hunspell-fr", "it": "hunspell-it", "pt": "hunspell-pt-br",
    "pl": "hunspell-pl", "cs": "hunspell-cs", "uk": "hunspell-uk", "bg": "hunspell-bg",
    "el": "hunspell-el", "ar": "hunspell-ar", "he": "hunspell-he", "hu": "hunspell-hu",
    "nl": "hunspell-nl", "sv": "hunspell-sv",
}


def hunspell_packages(languages: Iterable[str]) -> list[str]:
    """Debian packages holding the Hunspell dictionaries of these ISO 639 languages (those known)."""
    return [HUNSPELL_PACKAGES[lang] for lang in dict.fromkeys(languages) if lang in HUNSPELL_PACKAGES]
