"""The sources of the large scaling corpus (gcide, wordnet, html_docs), duplicate removal and the
sealed document cache, on small fake package trees made here (no apt, no network)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from test_debian import fake_package

from sources.base import Document, SourceContext
from sources.debian_mix import DebianMixSource
from sources.dedup import dedup_documents, minhash
from sources.doccache import document_cache_path, read_document_cache, write_document_cache
from sources.gcide import GcideSource, dictd_number, read_dictzip
from sources.html_docs import HtmlDocsSource, html_paragraphs
from sources.wordnet import WordnetSource, wordnet_gloss


@pytest.fixture
def ctx(tmp_path: Path) -> SourceContext:
    return SourceContext(base_dir=tmp_path, cache_dir=tmp_path / "cache", log=lambda s: None)


def _b64(n: int) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    out = ""
    while True:
        out = alphabet[n % 64] + out
        n //= 64
        if n == 0:
            return out


def _gcide_files(entries: list[tuple[str, str]], alias: tuple[str, int] | None = None) -> dict[str, bytes]:
    data, index = b"", ["00-database-short\tA\tA"]
    spans = []
    for head, text in entries:
        raw = text.encode()
        spans.append((len(data), len(raw)))
        index.append(f"{head}\t{_b64(len(data))}\t{_b64(len(raw))}")
        data += raw
    if alias:
        off, size = spans[alias[1]]
        index.append(f"{alias[0]}\t{_b64(off)}\t{_b64(size)}")
    return {"usr/share/dictd/gcide.index": "\n".join(index).encode(),
            "usr/share/dictd/gcide.dict.dz": gzip.compress(data)}


def test_dictd_numbers() -> None:
    assert dictd_number("A") == 0 and dictd_number("CF") == 2 * 64 + 5 and dictd_number("/") == 63
    with pytest.raises(ValueError):
        dictd_number("a-b")


def test_gcide_entries_drop_tags_and_repeats(ctx: SourceContext) -> None:
    entries = [("1st", "First."),
               ("Abuse", "Abuse \\A*buse\"\\, v. t.\n   1. To misuse.\n   [1913 Webster]\n"),
               ("2nd", "Second."),
               ("Zebra", "Zebra, n. A striped horse.\n      [PJC]\n   Syn: quagga.\n")]
    fake_package(ctx.cache_dir, "dict-gcide", _gcide_files(entries, alias=("abuse", 1)))
    docs = list(GcideSource(doc_bytes=16).documents(ctx))
    # grouped by initial (non-letters in "_", gathered although the database interleaves them);
    # the alias "abuse" points at entry 1 and is not repeated
    assert [(d.id, d.data.decode()) for d in docs] == [
        ("usr/share/dictd/gcide/A#0", "Abuse \\A*buse\"\\, v. t.\n   1. To misuse."),
        ("usr/share/dictd/gcide/Z#0", "Zebra, n. A striped horse.\n   Syn: quagga."),
        ("usr/share/dictd/gcide/_#0", "First.\n\nSecond.")]
    assert {d.language for d in docs} == {"en"}


def test_read_dictzip_refuses_a_bomb(tmp_path: Path) -> None:
    p = tmp_path / "x.dz"
    p.write_bytes(gzip.compress(b"0" * 10_000))
    assert read_dictzip(p) == b"0" * 10_000
    with pytest.raises(ValueError, match="more than 1000 bytes"):
        read_dictzip(p, limit=1000)


def test_wordnet_gloss_lines(ctx: SourceContext) -> None:
    line = "00006024 03 n 02 heterotroph 0 ice_cream 0 001 @ 00004475 n 0000 | an organism; \"eats\"  \n"
    assert wordnet_gloss(line) == 'heterotroph, ice cream: an organism; "eats"'
    assert wordnet_gloss("  1 This software and database is being provided\n") is None
    fake_package(ctx.cache_dir, "wordnet-base", {
        "usr/share/wordnet/data.noun": ("  1 licence header\n" + line).encode(),
        "usr/share/wordnet/data.verb": b"00001740 29 v 01 breathe 0 000 | draw air\n"})
    docs = list(WordnetSource().documents(ctx))
    assert [d.data.decode() for d in docs] == ['heterotroph, ice cream: an organism; "eats"',
                                               "breathe: draw air"]


def test_html_paragraphs() -> None:
    page = ("<html><head><title>T</title><style>p {}</style></head><body><nav>menu</nav>"
            "<h1>Title &amp; more</h1><p>One\nline <a href=x>link</a>.</p><script>x()</script>"
            "<pre>code 1\n  indented\n\nblock 2</pre><ul><li>item</li></ul></body></html>")
    assert html_paragraphs(page) == ["Title & more", "One line link.", "code 1\n  indented",
                                     "block 2", "item"]


def test_html_docs_language_from_locale_folder(ctx: SourceContext) -> None:
    fake_package(ctx.cache_dir, "debian-handbook", {
        "usr/share/debian-handbook/html/de-DE/a.html": b"<p>Hallo Welt</p>",
        "usr/share/debian-handbook/html/en-US/a.html": b"<p>Hello world</p>",
        "usr/share/debian-handbook/html/en-US/big.png": b"\x89PNG"})
    docs = list(HtmlDocsSource(package="debian-handbook").documents(ctx))
    assert [(d.language, d.data.decode()) for d in docs] == [("de", "Hallo Welt"), ("en", "Hello world")]
    fake_package(ctx.cache_dir, "libreoffice-help-fr", {"usr/share/libreoffice/help/fr/t.html": b"<p>Bonjour</p>"})
    assert [d.language for d in HtmlDocsSource(package="libreoffice-help-fr").documents(ctx)] == ["fr"]


def _doc(i: str, text: str) -> Document:
    return Document(id=i, data=text.encode(), language="en")


WORDS = [f"word{i}" for i in range(60)]  # 56 distinct 5-grams


def test_dedup_exact_and_near() -> None:
    a = " ".join(WORDS)
    near = " ".join(WORDS[:-1] + ["cat"])     # 1 of 56 5-grams differs: Jaccard 55/57
    other = " ".join(reversed(WORDS)) + " entirely different tail words here now"
    docs = [_doc("a", a), _doc("b", "  " + a.replace(" ", "\n")), _doc("c", near), _doc("d", other),
            _doc("e", "tiny")]
    kept, stats = dedup_documents(docs, "near")
    assert [d.id for d in kept] == ["a", "d", "e"]
    assert (stats.docs, stats.exact_docs, stats.near_docs) == (5, 1, 1)
    assert stats.examples == [("c", "a")]
    kept, stats = dedup_documents(docs, "exact")
    assert [d.id for d in kept] == ["a", "c", "d", "e"] and stats.near_docs == 0
    kept, stats = dedup_documents(docs, "none")
    assert len(list(kept)) == 5 and stats.exact_docs == 0


def test_minhash_estimates_jaccard() -> None:
    rng = np.random.default_rng(0)
    vocab = [f"w{i}" for i in range(5000)]
    base = list(rng.choice(vocab, 400))
    sig = minhash(" ".join(base))
    # change the last 40 words: 40 + 4 of 396 5-grams differ on each side, Jaccard ≈ 0.80
    changed = minhash(" ".join(base[:360] + list(rng.choice(vocab, 40))))
    assert sig is not None and changed is not None
    assert 0.68 <= float(np.mean(sig == changed)) <= 0.92
    assert minhash("four words only here") is None


def test_document_cache_roundtrip_and_damage(tmp_path: Path) -> None:
    docs = [Document(id="x#0", data="héllo".encode() + b"\xff", language="fr", script="Latn",
                     meta={"package": "p"})]
    kept, stats = dedup_documents(docs, "exact")
    path = document_cache_path(tmp_path, "mix", {"k": 1}, ["sources.dedup"])
    assert path != document_cache_path(tmp_path, "mix", {"k": 2}, ["sources.dedup"])
    assert path != document_cache_path(tmp_path, "mix", {"k": 1}, ["sources.gcide"])
    write_document_cache(path, kept, stats)
    back = list(read_document_cache(path) or [])
    assert back == docs and back[0].data.endswith(b"\xff") and back[0].meta == {"package": "p"}
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))
    logs: list[str] = []
    assert read_document_cache(path, logs.append) is None and not path.exists()
    assert "damaged" in logs[0]


def test_mixture_dedups_once_and_reports_it(ctx: SourceContext) -> None:
    a = " ".join(WORDS)
    fake_package(ctx.cache_dir, "libreoffice-help-en-us", {"usr/share/h/en-US/x.html": f"<p>{a}</p>".encode()})
    fake_package(ctx.cache_dir, "libreoffice-help-en-gb",
                 {"usr/share/h/en-GB/x.html": f"<p>{a.replace('word59', 'colour')}</p><p>colour</p>".encode()})
    mix = DebianMixSource(members=("html_docs:libreoffice-help-en-us", "html_docs:libreoffice-help-en-gb"),
                          dedup="near")
    first = list(mix.documents(ctx))
    assert [d.id for d in first] == ["usr/share/h/en-US/x.html#0"]  # en-GB's page is a near copy
    stats = mix.provenance(ctx)["dedup"]
    assert stats["near_removed_docs"] == 1 and stats["docs_in"] == 2
    files = list((ctx.cache_dir / "documents").glob("*.jsonl.xz"))
    assert len(files) == 1
    assert list(mix.documents(ctx)) == first  # read back from the cache
    assert json.loads(files[0].with_name(files[0].name + ".json").read_text())["stats"]["mode"] == "near"
    with pytest.raises(ValueError, match="dedup"):
        DebianMixSource(members=("gcide:dict-gcide",), dedup="fuzzy")


def test_the_document_file_alone_travels_and_a_new_package_version_rebuilds(ctx: SourceContext, tmp_path: Path) -> None:
    import shutil

    a = " ".join(WORDS)
    fake_package(ctx.cache_dir, "wordnet-base", {"usr/share/wordnet/data.noun": f"0 03 n 01 w 0 | {a}\n".encode()})
    mix = DebianMixSource(members=("wordnet:wordnet-base",), dedup="exact")
    docs, prov = list(mix.documents(ctx)), mix.provenance(ctx)
    assert prov["members"][0]["packages"][0]["version"] == "1.0-1"
    # a machine that has only the document file (no package): the same documents and provenance
    other = SourceContext(base_dir=tmp_path, cache_dir=tmp_path / "gpu", log=lambda s: None)
    shutil.copytree(ctx.cache_dir / "documents", other.cache_dir / "documents")
    assert list(mix.documents(other)) == docs and mix.provenance(other) == prov
    # a newer package in the cache rebuilds the file from it
    fake_package(ctx.cache_dir, "wordnet-base", {"usr/share/wordnet/data.noun": b"0 03 n 01 w 0 | changed gloss\n"},
                 version="2.0-1")
    logs: list[str] = []
    ctx.log = logs.append
    assert [d.data for d in mix.documents(ctx)] == [b"w: changed gloss"]
    assert any("other package versions" in m for m in logs)
    assert mix.provenance(ctx)["members"][0]["packages"][0]["version"] == "2.0-1"


def test_slim_pack_carries_the_document_file_instead_of_the_packages(ctx: SourceContext, tmp_path: Path) -> None:
    import io
    import tarfile
    from types import SimpleNamespace

    from harness.data.datapack import pack, unpack

    a = " ".join(WORDS)
    fake_package(ctx.cache_dir, "wordnet-base", {"usr/share/wordnet/data.noun": f"0 03 n 01 w 0 | {a}\n".encode()})
    fake_package(ctx.cache_dir, "fortunes", {"usr/share/games/fortunes/f": b"a fortune\n%\n"})
    mix = DebianMixSource(members=("wordnet:wordnet-base",), dedup="exact")
    plain = SimpleNamespace(packages=lambda: ("fortunes",))
    spec = SimpleNamespace(config=mix, source="debian_mix", name=None, language=None, max_bytes=None,
                           docs=None, part=None)
    other = SimpleNamespace(config=plain, source="fortunes", name="f", language=None, max_bytes=None,
                            docs=None, part="test")
    suite = SimpleNamespace(data=SimpleNamespace(train=spec, eval=[other]), perturbations=[], analyses=[])
    arc = tmp_path / "slim.tar.gz"
    got = pack(suite, ctx.cache_dir, arc, slim=True, ctx=ctx)
    # the mixture's package stays home; the plain source's package travels as before
    assert got["packages"] == ["fortunes"] and len(got["documents"]) == 1
    gpu = tmp_path / "gpu"
    assert unpack(arc, gpu)["documents"] == got["documents"]
    assert not (gpu / "debian" / "wordnet-base").exists()
    away = SourceContext(base_dir=tmp_path, cache_dir=gpu, log=lambda s: None)
    assert list(mix.documents(away)) == list(mix.documents(ctx))
    assert mix.provenance(away) == mix.provenance(ctx)
    # a document file changed in transit is refused before anything is installed
    with tarfile.open(arc) as t:
        members = [(m, t.extractfile(m).read() if m.isfile() else None) for m in t.getmembers()]
    bad = tmp_path / "bad.tar.gz"
    with tarfile.open(bad, "w:gz") as t:
        for m, data in members:
            if m.name.endswith(".jsonl.xz"):
                data = data[:-1] + bytes([data[-1] ^ 1])
            t.addfile(m, io.BytesIO(data) if data is not None else None)
    with pytest.raises(ValueError, match=r"jsonl\.xz'.*sha256"):
        unpack(bad, tmp_path / "gpu2")
    assert not (tmp_path / "gpu2" / "documents").exists()
