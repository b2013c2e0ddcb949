"""Real multilingual text from Debian packages, fetched without root into the user cache.

Each source names one Debian bookworm package; ``prepare`` fetches and unpacks it with
``sources.fetch`` (``apt-get download`` + ``dpkg -x`` into ``$TOKBENCH_CACHE``), and
``documents`` reads only the cache, so a run never touches the network. The sources, one module each
(``sources.<name>``):

* ``fortunes``      ``fortunes-*`` quote files (strfile ``%``-separated; de es it cs pl ru bg zh …)
* ``manpages``      localized ``manpages-*`` rendered with ``groff -k -Tutf8`` (ja zh de fr es pl ru uk)
* ``firefox_l10n``  ``firefox-esr-l10n-*`` UI strings (.ftl/.properties in the langpack .xpi):
                    the only offline source of Arabic, Hebrew, Thai and Devanagari sentences
* ``python_docs``   ``python3.11-doc`` reST sources (English, for training)
* ``kernel_docs``   ``linux-doc-6.1`` reST sources of the kernel documentation (English, for training)
* ``perl_docs``     ``perl-doc`` POD sources of the Perl documentation (English, for training)
* ``sword``         SWORD Bible modules (``sword-text-web`` English, ``sword-text-sparv`` Spanish,
                    ``sword-text-kjv``): one document per chapter with id ``bible/Gen.1``, the same
                    id in every translation, so en/es evaluation sets are chapter-aligned parallel text

Short units (a quote, a UI string, a paragraph) are packed in order into documents of about
``doc_bytes`` UTF-8 bytes; a unit seen before in the same package (boilerplate such as a man page
translator's credit) is dropped, so it cannot sit in both the training and the test part. Document
ids are ``<path in package>#<k>``: stable across runs and machines. Every document carries its
``language`` (ISO 639, from the YAML entry or derived from the package name) and its ``script``
(ISO 15924, detected from its code points by ``sources.script``).
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from sources.base import Document, Source, SourceContext, check_positive
from sources.fetch import check_metadata, fetch_packages, require
from sources.script import detect_script

# Package-name suffixes whose ISO 639 code is not their first part (``hi-in`` → hi needs no entry).
# ``manpages-dev`` is not a language: it holds the English man pages of sections 2 and 3.
_LANG_ALIASES = {"br": "pt", "min": "en", "dev": "en"}


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
    max_docs: stop after this many documents (> 0; None = all), in the package's sorted order.
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
        check_positive(self.registry_name, self, "max_docs")

    # --- the Source interface -------------------------------------------------------------
    def packages(self) -> tuple[str, ...]:
        """Debian packages this source reads (``tokbench data prepare`` fetches them)."""
        return (self.package,)

    def prepare(self, ctx: SourceContext) -> None:
        fetch_packages(self.packages(), ctx.cache_dir, source=self.registry_name, log=ctx.log)

    def check(self, ctx: SourceContext) -> None:
        """``tokbench validate``: refuse a cached package whose metadata is damaged beyond the
        run's own repair (sources/fetch.py); the tree is hashed only when a run reads it."""
        for p in self.packages():
            check_metadata(ctx.cache_dir, p, self.registry_name)

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
