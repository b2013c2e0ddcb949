"""Debian-package sources on small fake package trees made here (no apt, no network), plus one
integration test that really fetches a small package where apt works (marked ``network``)."""

from __future__ import annotations

import gzip
import json
import shutil
import struct
import subprocess
import zipfile
import zlib
from pathlib import Path

import pytest

from sources.base import SourceContext
from sources.debian import language_of_package, pack_units
from sources.debian_mix import DebianMixSource
from sources.fetch import (
    SourceUnavailableError,
    cached,
    copyright_licences,
    fetch_packages,
    require,
)
from sources.firefox_l10n import (
    FirefoxL10nSource,
    parse_ftl,
    parse_properties,
    resolve_placeables,
)
from sources.fortunes import FortunesSource, clean_fortune_file
from sources.kernel_docs import KernelDocsSource
from sources.manpages import ManpagesSource, clean_rendered_man
from sources.perl_docs import PerlDocsSource
from sources.sword import SwordSource, clean_osis

COPYRIGHT = """Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Files: *
Copyright: someone
License: GPL-2+

Files: debian/*
License: public-domain
"""


def fake_package(cache: Path, name: str, files: dict[str, bytes], version: str = "1.0-1") -> Path:
    """A package as fetch.py leaves it in the cache: root/ tree + package.json."""
    d = cache / "debian" / name
    root = d / "root"
    for rel, data in {**files, f"usr/share/doc/{name}/copyright": COPYRIGHT.encode()}.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    meta = {
        "name": name,
        "version": version,
        "licences": list(copyright_licences(COPYRIGHT)),
        "deb": f"{name}_{version}_all.deb",
        "sha256": "0" * 64,
    }
    (d / "package.json").write_text(json.dumps(meta))
    return root


@pytest.fixture
def ctx(tmp_path: Path) -> SourceContext:
    return SourceContext(base_dir=tmp_path, cache_dir=tmp_path / "cache", log=lambda s: None)


# ------------------------------------------------------------------------------- helpers
def test_language_of_package() -> None:
    assert language_of_package("fortunes-de", "fortunes-") == "de"
    assert language_of_package("fortunes-br", "fortunes-") == "pt"
    assert language_of_package("fortunes", "fortunes-") == "en"
    assert language_of_package("manpages-dev", "manpages-") == "en"  # English sections 2 and 3
    assert language_of_package("firefox-esr-l10n-hi-in", "firefox-esr-l10n-") == "hi"
    assert language_of_package("firefox-esr-l10n-zh-cn", "firefox-esr-l10n-") == "zh"


def test_copyright_licences_dep5_and_free_form() -> None:
    assert copyright_licences(COPYRIGHT) == ("GPL-2+", "public-domain")
    free = "This package is under the GNU General Public License, see /usr/share/common-licenses"
    assert copyright_licences(free) == ("GPL",)


def test_pack_units_sizes_groups_and_dedup() -> None:
    units = [("a", "x" * 10), ("a", "y" * 10), ("a", "z" * 10), ("a", "x" * 10), ("b", "w")]
    docs = list(pack_units(units, doc_bytes=20, sep="\n"))
    # "x"+"y" reach 22 >= 20 bytes and close a document; the repeated "x" is dropped; a new
    # group starts a new document
    assert docs == [("a#0", "x" * 10 + "\n" + "y" * 10), ("a#1", "z" * 10), ("b#0", "w")]


# ------------------------------------------------------------------------------ fortunes
def test_clean_fortune_file() -> None:
    text = "First\nquote  \n%\n\x1b[1mBold\x1b[0m and _\bu_\bn_\bd_\be_\br\n%\n\n%\nLast"
    assert clean_fortune_file(text) == ["First\nquote", "Bold and under", "Last"]


def test_fortunes_source(ctx: SourceContext) -> None:
    base = "usr/share/games/fortunes/de/"
    root = fake_package(
        ctx.cache_dir,
        "fortunes-de",
        {
            base + "zitate": "Ein Zitat über Bäume.\n%\nNoch eines.\n%\n".encode(),
            base + "zitate.dat": b"\x00\x00\x00\x02binary index",
            base + "off/rot": b"Fbzr bssrafvir grkg\n%\n",
            base + "latin1": "Gr\xfc\xdfe".encode("latin-1"),
            "usr/games/wrapper": b"#!/bin/sh\nexec fortune de\n",
        },
    )
    (root / base / "zitate.u8").symlink_to("zitate")
    src = FortunesSource(package="fortunes-de", doc_bytes=10_000)
    docs = list(src.documents(ctx))
    assert [d.id for d in docs] == [f"{base}zitate#0"]
    assert docs[0].data.decode() == "Ein Zitat über Bäume.\n\nNoch eines."
    assert (docs[0].language, docs[0].script) == ("de", "Latn")
    prov = src.provenance(ctx)
    assert prov["packages"][0]["package"] == "fortunes-de"
    assert prov["packages"][0]["licences"] == ["GPL-2+", "public-domain"]
    # the YAML language wins over the package name; max_docs caps the count
    assert (
        next(iter(FortunesSource(package="fortunes-de", language="gsw").documents(ctx))).language
        == "gsw"
    )
    small = FortunesSource(package="fortunes-de", doc_bytes=16, max_docs=1)
    assert [d.data.decode() for d in small.documents(ctx)] == ["Ein Zitat über Bäume."]


def test_missing_package_error_names_source_and_fix(ctx: SourceContext) -> None:
    with pytest.raises(SourceUnavailableError, match=r"source 'fortunes'.*fortunes-xx.*files"):
        list(FortunesSource(package="fortunes-xx").documents(ctx))


def test_fetch_without_apt_says_how_to_use_own_text(
    ctx: SourceContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(SourceUnavailableError) as e:
        fetch_packages(["fortunes-de"], ctx.cache_dir, source="fortunes", progress=False)
    msg = str(e.value)
    assert "\n" not in msg and "fortunes-de" in msg and "apt-get" in msg and "source: files" in msg


def test_fetch_is_a_no_op_when_cached(ctx: SourceContext, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_package(ctx.cache_dir, "fortunes-it", {"usr/share/games/fortunes/it/x": b"Ciao\n%\n"})

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("apt must not run for a cached package")

    monkeypatch.setattr(subprocess, "run", boom)
    got = fetch_packages(["fortunes-it"], ctx.cache_dir, progress=False)
    assert got["fortunes-it"].version == "1.0-1"


# ------------------------------------------------------------------------------ manpages
MAN_PAGE = r""".\" -*- coding: UTF-8 -*-
.TH LS 1 "2022" "GNU coreutils" "Benutzerbefehle"
.SH BEZEICHNUNG
ls \- Verzeichnisinhalte auflisten
.SH BESCHREIBUNG
Auflistung von Informationen über die DATEIen, alphabetisch sortiert, mit
einer sehr langen Zeile, die nicht getrennt werden darf: Donaudampfschifffahrtsgesellschaft.
.SH ÜBERSETZUNG
Übersetzt von Jemandem.
"""


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")
def test_manpages_source_renders_utf8_without_hyphenation(ctx: SourceContext) -> None:
    fake_package(
        ctx.cache_dir,
        "manpages-de",
        {
            "usr/share/man/de/man1/ls.1.gz": gzip.compress(MAN_PAGE.encode()),
            "usr/share/man/de/man1/dir.1.gz": gzip.compress(b".so man1/ls.1\n"),
            "usr/share/man/de/man5/x.5.gz": gzip.compress(
                MAN_PAGE.replace("LS 1", "X 5").replace("ls \\-", "x \\-").encode()
            ),
        },
    )
    src = ManpagesSource(package="manpages-de", doc_bytes=100_000)
    docs = list(src.documents(ctx))
    assert [d.id for d in docs] == [
        "usr/share/man/de/man1/ls.1.gz#0",
        "usr/share/man/de/man5/x.5.gz#0",
    ]
    text = docs[0].data.decode()
    assert text.startswith("BEZEICHNUNG\nls - Verzeichnisinhalte auflisten")
    assert "Donaudampfschifffahrtsgesellschaft." in text  # not hyphenated, not mojibake
    assert "  " not in text and "LS(1)" not in text  # no justification, no header/footer
    # the credit paragraph repeated on every page is kept once only
    assert "Übersetzt von Jemandem." in text
    assert "Übersetzt von Jemandem." not in docs[1].data.decode()
    assert docs[0].language == "de"
    # rendering is cached: a second read does not need groff
    assert list((ctx.cache_dir / "rendered").rglob("ls.1.gz.txt"))


@pytest.mark.skipif(shutil.which("groff") is None, reason="groff is not installed")
def test_a_damaged_rendered_page_is_rendered_again_or_refused(ctx: SourceContext,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from sources.fetch import CacheDamagedError
    from sources.manpages import CHECKED_MARK, SUM_PREFIX

    fake_package(ctx.cache_dir, "manpages-de",
                 {"usr/share/man/de/man1/ls.1.gz": gzip.compress(MAN_PAGE.encode())})
    src = ManpagesSource(package="manpages-de", doc_bytes=100_000)
    want = [d.data for d in src.documents(ctx)]
    (page,) = (ctx.cache_dir / "rendered").rglob("ls.1.gz.txt")
    assert page.read_bytes().startswith(SUM_PREFIX)
    assert (ctx.cache_dir / "rendered" / "manpages-de_1.0-1" / CHECKED_MARK).is_file()
    whole = page.read_bytes()
    for damage in (whole[: len(whole) // 2], b"", whole.replace(b"Donau", b"Rhein")):
        page.write_bytes(damage)  # truncated, emptied (no checksum line at all), edited
        assert [d.data for d in src.documents(ctx)] == want  # rendered again from the page
        assert page.read_bytes() == whole
    page.write_bytes(whole[:40])
    monkeypatch.setattr(shutil, "which", lambda name: None)  # a GPU box: carried text, no groff
    with pytest.raises(CacheDamagedError, match=r"ls\.1\.gz\.txt: damaged rendered page"):
        list(src.documents(ctx))


def test_a_rendered_directory_from_before_checksums_is_read_as_it_is(ctx: SourceContext,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # an older cache or data pack: no mark, no checksum lines; read without groff
    fake_package(ctx.cache_dir, "manpages-de",
                 {"usr/share/man/de/man1/ls.1.gz": gzip.compress(MAN_PAGE.encode())})
    src = ManpagesSource(package="manpages-de", doc_bytes=100_000)
    out = ctx.cache_dir / "rendered" / "manpages-de_1.0-1" / "usr/share/man/de/man1/ls.1.gz.txt"
    out.parent.mkdir(parents=True)
    out.write_text("NAME\n       ls - list\n")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert [d.data.decode() for d in src.documents(ctx)] == ["NAME\nls - list"]


def test_manpage_cleaning_drops_table_rules() -> None:
    # tbl's boxes at the 2000-column render width: the rules go, the cell rows stay
    rule = "─" * 1990
    rendered = ("NAME\n       f - g\n\nATTRIBUTES\n       ┌" + rule + "┐\n       │Interface   │ Value   │\n"
                "       ├" + rule + "┤\n       │f()   │ MT-Safe   │\n       └" + rule + "┘\n")
    assert clean_rendered_man(rendered) == ["NAME\nf - g", "ATTRIBUTES\n│Interface │ Value │\n│f() │ MT-Safe │"]


def test_manpage_paragraph_cleaning_joins_cjk() -> None:

    rendered = "LS(1)      ユーザーコマンド      LS(1)\n\n名前\n       ls - 一覧 表示する\n\n\nGNU 9.1     2022     LS(1)\n"
    assert clean_rendered_man(rendered) == ["名前\nls - 一覧表示する"]


# -------------------------------------------------------------------------- firefox l10n
FTL = """# comment
-brand-short-name = Firefox
tabs-title = { $count ->
    [one] تبويب واحد
   *[other] { $count } تبويبات
}
save-button = احفظ { -brand-short-name } الآن
    .accesskey = ح
    .tooltiptext = احفظ الصفحة
style-only =
    .style = width: 30em
literal = قوس { "{" } مفتوح
english-fallback = Learn more
"""

PROPERTIES = """# comment
dialogTitle = خصائص ”%S“
tabs.label = #1 تبويب;#1 تبويبات
menu.accesskey = م
long = سطر \\
    ثان
"""


def test_fluent_and_properties_parsing() -> None:
    assert resolve_placeables("a { $x } b") == "a  b"
    assert parse_ftl(FTL) == ["تبويبات", "احفظ الآن", "احفظ الصفحة", "قوس { مفتوح", "Learn more"]
    assert parse_properties(PROPERTIES) == ["خصائص ”“", "تبويب", "سطر ثان"]


def test_firefox_l10n_source_drops_english_fallbacks(ctx: SourceContext, tmp_path: Path) -> None:
    xpi = tmp_path / "langpack.xpi"
    with zipfile.ZipFile(xpi, "w") as z:
        z.writestr("browser/localization/ar/browser/a.ftl", FTL)
        z.writestr("chrome/ar/locale/b.properties", PROPERTIES)
        z.writestr("manifest.json", "{}")
    fake_package(
        ctx.cache_dir,
        "firefox-esr-l10n-ar",
        {
            "usr/lib/firefox-esr/browser/extensions/langpack-ar@firefox-esr.mozilla.org.xpi": xpi.read_bytes()
        },
    )
    docs = list(FirefoxL10nSource(package="firefox-esr-l10n-ar").documents(ctx))
    assert [d.id for d in docs] == [
        "browser/localization/ar/browser/a.ftl#0",
        "chrome/ar/locale/b.properties#0",
    ]
    assert "Learn more" not in docs[0].data.decode()
    assert docs[0].data.decode().split("\n")[0] == "تبويبات"
    assert {(d.language, d.script) for d in docs} == {("ar", "Arab")}
    keep = list(
        FirefoxL10nSource(package="firefox-esr-l10n-ar", drop_fallback=False).documents(ctx)
    )
    assert "Learn more" in keep[0].data.decode()


# --------------------------------------------------------------------------------- sword
def ztext_module(entries: list[str]) -> dict[str, bytes]:
    """A one-testament zText module (nt.*) with all verses in one zlib block."""
    blob = b"".join(e.encode() for e in entries)
    comp = zlib.compress(blob)
    bzs = struct.pack("<III", 0, len(comp), len(blob))
    bzv, off = b"", 0
    for e in entries:
        n = len(e.encode())
        bzv += struct.pack("<IIH", 0, off, n)
        off += n
    return {"nt.bzs": bzs, "nt.bzv": bzv, "nt.bzz": comp}


def sword_package(cache: Path, name: str, lang: str, verses: list[str]) -> None:
    mod = f"usr/share/sword/modules/texts/ztext/{name}/"
    conf = f"[{name}]\nDataPath=./modules/texts/ztext/{name}/\nModDrv=zText\nLang={lang}\n"
    files = {mod + k: v for k, v in ztext_module(verses).items()}
    files[f"usr/share/sword/mods.d/{name}.conf"] = conf.encode()
    fake_package(cache, f"sword-text-{name}", files)


def test_clean_osis() -> None:
    v = (
        '<w lemma="x">In</w> <w>the</w> beginning<note type="x">a footnote</note>, '
        '<title>Heading</title><w>Jehová</w><transChange type="added">es</transChange><w>santo</w> '
        '<title canonical="true" type="psalm">A Psalm.</title> &amp; more'
    )
    assert clean_osis(v) == "In the beginning, Jehová es santo A Psalm. & more"
    # a footnote that held the only space between two words leaves a space
    assert clean_osis("<w>knew</w><note>or, lay with</note><w>Eve</w>") == "knew Eve"


def test_sword_chapters_are_aligned_across_translations(ctx: SourceContext) -> None:
    en = [
        "",
        '<div osisID="Matt" type="book"/>',
        '<chapter osisID="Matt.1"/>',
        "<w>Verse</w> one.",
        "Verse two.",
        '<chapter osisID="Matt.2"/>',
        "Next chapter.",
        '<div osisID="Tob" type="book"/>',
        '<chapter osisID="Tob.1"/>',
        "Deuterocanon.",
    ]
    es = [
        "",
        '<div osisID="Matt" type="book"/>',
        '<chapter osisID="Matt.1"/>',
        "Versículo uno.",
        "Versículo dos.",
        '<chapter osisID="Matt.2"/>',
        "Capítulo siguiente.",
    ]
    sword_package(ctx.cache_dir, "en1", "en", en)
    sword_package(ctx.cache_dir, "es1", "es", es)
    d_en = list(SwordSource(package="sword-text-en1").documents(ctx))
    d_es = list(SwordSource(package="sword-text-es1").documents(ctx))
    assert [d.id for d in d_en] == [d.id for d in d_es] == ["bible/Matt.1", "bible/Matt.2"]
    assert (
        d_en[0].data == b"Verse one. Verse two." and d_es[1].data == "Capítulo siguiente.".encode()
    )
    assert (d_en[0].language, d_es[0].language) == ("en", "es")
    every = list(SwordSource(package="sword-text-en1", canon="all").documents(ctx))
    assert [d.id for d in every][-1] == "bible/Tob.1"


def test_mixture_keeps_member_ids_and_caps_bytes(ctx: SourceContext) -> None:
    fake_package(
        ctx.cache_dir,
        "fortunes-de",
        {"usr/share/games/fortunes/de/a": "Äpfel\n%\nBirnen\n%\n".encode()},
    )
    fake_package(
        ctx.cache_dir,
        "fortunes-ru",
        {"usr/share/games/fortunes/ru/b": "Яблоки\n%\nГруши\n%\n".encode()},
    )
    mix = DebianMixSource(members=("fortunes:fortunes-de", "fortunes:fortunes-ru"))
    assert mix.packages() == ("fortunes-de", "fortunes-ru")
    docs = list(mix.documents(ctx))
    assert [(d.id, d.language, d.script) for d in docs] == [
        ("usr/share/games/fortunes/de/a#0", "de", "Latn"),
        ("usr/share/games/fortunes/ru/b#0", "ru", "Cyrl"),
    ]
    with pytest.raises(ValueError, match="debian_mix source: member 'nope'"):
        DebianMixSource(members=("nope",))
    with pytest.raises(ValueError, match="at most one sword member"):
        DebianMixSource(members=("sword:sword-text-web", "sword:sword-text-sparv"))


def test_kernel_docs_reads_gzipped_english_rst(ctx: SourceContext) -> None:
    doc = "usr/share/doc/linux-doc-6.1/Documentation/"
    fake_package(ctx.cache_dir, "linux-doc-6.1", {
        doc + "process/howto.rst.gz": gzip.compress(
            b"HOWTO\n=====\n\nFirst  paragraph,\nsecond line.\n   \n.. note:: keep markup\n\n\n"),
        doc + "index.rst": b"Top index.\n",
        doc + "translations/zh_CN/index.rst.gz": gzip.compress("\u5185\u6838\u6587\u6863\n".encode()),
        doc + "devicetree/bindings/x.yaml.gz": gzip.compress(b"compatible: foo\n"),
        doc + "memory-barriers.txt.gz": gzip.compress(b"not reST\n"),
        "usr/share/doc/linux-doc-6.1/html/index.html": b"<p>html</p>",
    })
    docs = list(KernelDocsSource(doc_bytes=10_000).documents(ctx))
    # sorted paths, one document per file here; paragraphs joined by a blank line, markup kept;
    # translations, YAML, .txt and HTML not read
    assert [(d.id, d.data.decode()) for d in docs] == [
        (doc + "index.rst#0", "Top index."),
        (doc + "process/howto.rst.gz#0", "HOWTO\n=====\n\nFirst  paragraph,\nsecond line.\n\n.. note:: keep markup"),
    ]
    assert {(d.language, d.script, d.meta["package"]) for d in docs} == {("en", "Latn", "linux-doc-6.1")}


def test_perl_docs_reads_pod_not_man_pages(ctx: SourceContext) -> None:
    fake_package(ctx.cache_dir, "perl-doc", {
        "usr/share/perl/5.36.0/pod/perlre.pod": b"=head1 NAME\n\nperlre - regexes\n\n=cut\n",
        "usr/share/perl/5.36.0/pod/perlfaq.pod": b"=head1 FAQ\n\nC<perldoc> answers.\n\n=head1 FAQ\n",
        "usr/share/man/man1/perlre.1.gz": gzip.compress(b".TH PERLRE 1\n"),
        "usr/share/doc/perl/pumpkin.pod.gz": gzip.compress(b"=head1 P\n"),
    })
    docs = list(PerlDocsSource(doc_bytes=16).documents(ctx))
    pod = "usr/share/perl/5.36.0/pod/"
    # 16-byte documents: "=head1 FAQ" + separator is 12 bytes, so the next paragraph joins it
    # and closes the document; the repeated "=head1 FAQ" is dropped; sorted file order
    assert [(d.id, d.data.decode()) for d in docs] == [
        (pod + "perlfaq.pod#0", "=head1 FAQ\n\nC<perldoc> answers."),
        (pod + "perlre.pod#0", "=head1 NAME\n\nperlre - regexes"), (pod + "perlre.pod#1", "=cut"),
    ]
    assert docs[0].language == "en"


def test_mixture_takes_kernel_and_perl_docs(ctx: SourceContext) -> None:
    mix = DebianMixSource(members=("kernel_docs:linux-doc-6.1", "perl_docs:perl-doc"))
    assert mix.packages() == ("linux-doc-6.1", "perl-doc")


# -------------------------------------------------------------------- real apt (network)
@pytest.mark.network
def test_fetch_and_build_a_real_package(tmp_path: Path) -> None:
    """Fetch fortunes-bg (a 33 KB .deb) with apt-get download + dpkg -x, then build documents."""
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        pytest.skip("apt-get/dpkg-deb not available")
    ctx = SourceContext(base_dir=tmp_path, cache_dir=tmp_path / "cache", log=lambda s: None)
    src = FortunesSource(package="fortunes-bg")
    try:
        src.prepare(ctx)
    except SourceUnavailableError as e:
        pytest.skip(f"apt could not fetch the package (offline or no package lists): {e}")
    pkg = require(ctx.cache_dir, "fortunes-bg", "fortunes")
    assert pkg.version and pkg.licences and cached(ctx.cache_dir, "fortunes-bg") == pkg
    docs = list(src.documents(ctx))
    assert len(docs) > 5 and all(d.language == "bg" for d in docs)
    assert sum(d.script == "Cyrl" for d in docs) > 0.8 * len(docs)
    src.prepare(ctx)  # idempotent: cached, no second download
