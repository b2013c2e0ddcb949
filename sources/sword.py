"""``sword``: SWORD Bible modules (``sword-text-web`` English, ``sword-text-sparv`` Spanish,
``sword-text-kjv``): one document per chapter with id ``bible/Gen.1``, the same id in every
translation, so en/es evaluation sets are chapter-aligned parallel text."""

from __future__ import annotations

import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from core.decompress import MAX_MEMBER_BYTES, inflate
from sources.base import SourceContext
from sources.debian import DebianSource
from sources.registry import register

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
                cache[b] = inflate(bzz[start : start + csize], MAX_MEMBER_BYTES, f"{paths[2]} block {b}")
            yield cache[b][off : off + size].decode("utf-8", errors="replace")


@register("sword")
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
