"""data pack / unpack: one archive, checked against its manifest, installed atomically."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from harness.data.datapack import pack, unpack


def fake_package(cache: Path, name: str, files: dict[str, bytes]) -> None:
    d = cache / "debian" / name
    (d / "root").mkdir(parents=True)
    (d / "package.json").write_text(json.dumps({"name": name, "version": "1"}))
    for rel, data in files.items():
        p = d / "root" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)


def suite_reading(*packages: str) -> SimpleNamespace:
    src = SimpleNamespace(config=SimpleNamespace(packages=lambda: packages), source="debian", name=None,
                          language=None, max_bytes=None, docs=None, part=None)
    return SimpleNamespace(data=SimpleNamespace(train=src, eval=[]), perturbations=[], analyses=[])


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("harness.data.load.source_key", lambda s: "one")


def test_pack_then_unpack_reproduces_the_cache(tmp_path: Path) -> None:
    src = tmp_path / "src"
    fake_package(src, "python3.11-doc", {"usr/share/doc/python3.11/html/_sources/a.rst.txt": b"text a",
                                         "usr/share/doc/python3.11/html/big.html": b"x" * 1000})
    fake_package(src, "other", {"usr/share/o.txt": b"o"})
    suite = suite_reading("python3.11-doc", "other")
    full, slim = tmp_path / "full.tar.gz", tmp_path / "slim.tar.gz"
    assert pack(suite, src, full)["files"] == 5
    assert pack(suite, src, slim, slim=True)["files"] == 4  # the HTML tree the source never reads is left out
    dst = tmp_path / "dst"
    got = unpack(slim, dst)
    assert got["packages"] == ["python3.11-doc", "other"]
    root = dst / "debian" / "python3.11-doc" / "root" / "usr/share/doc/python3.11/html"
    assert (root / "_sources/a.rst.txt").read_bytes() == b"text a" and not (root / "big.html").exists()
    assert (dst / "debian" / "other" / "package.json").is_file()
    unpack(full, dst)  # again over an existing copy: replaced whole
    assert (root / "big.html").exists()


def test_slim_glob_keeps_only_matching_files(tmp_path: Path) -> None:
    # linux-doc-6.1's entry is a glob: only the gzipped reST under Documentation travels, not the
    # HTML, YAML bindings or images beside it
    src = tmp_path / "src"
    doc = "usr/share/doc/linux-doc-6.1/Documentation/"
    fake_package(src, "linux-doc-6.1", {doc + "index.rst.gz": b"i", doc + "mm/deep/a.rst.gz": b"a",
                                        doc + "devicetree/b.yaml.gz": b"y", doc + "img.svg": b"s",
                                        "usr/share/doc/linux-doc-6.1/html/index.html": b"h"})
    slim = tmp_path / "slim.tar.gz"
    assert pack(suite_reading("linux-doc-6.1"), src, slim, slim=True)["files"] == 3  # package.json + 2
    with tarfile.open(slim) as tar:
        names = sorted(n for n in tar.getnames() if n != "MANIFEST.json")
    root = "debian/linux-doc-6.1/root/" + doc
    assert names == ["debian/linux-doc-6.1/package.json", root + "index.rst.gz", root + "mm/deep/a.rst.gz"]


def test_pack_carries_rendered_man_pages(tmp_path: Path) -> None:
    # man pages are rendered by groff at prepare; the archive carries the text so that the
    # machine that unpacks it needs no groff
    src = tmp_path / "src"
    fake_package(src, "manpages", {"usr/share/man/man1/a.1.gz": b"roff"})
    page = src / "rendered" / "manpages_1" / "usr/share/man/man1/a.1.gz.txt"
    page.parent.mkdir(parents=True)
    page.write_text("NAME\na - b\n")
    (src / "rendered" / "manpages-dev_1").mkdir()  # another package's text stays out
    arc = tmp_path / "a.tar.gz"
    got = pack(suite_reading("manpages"), src, arc)
    assert got["rendered"] == ["manpages_1"] and got["files"] == 3
    dst = tmp_path / "dst"
    assert unpack(arc, dst)["rendered"] == ["manpages_1"]
    assert (dst / "rendered" / "manpages_1" / "usr/share/man/man1/a.1.gz.txt").read_text() == "NAME\na - b\n"
    assert not (dst / "rendered" / "manpages-dev_1").exists()


def test_unpack_refuses_a_tampered_or_escaping_archive(tmp_path: Path) -> None:
    src = tmp_path / "src"
    fake_package(src, "p", {"f.txt": b"good"})
    arc = tmp_path / "a.tar.gz"
    pack(suite_reading("p"), src, arc)
    with tarfile.open(arc) as t:
        members = [(m, t.extractfile(m).read() if m.isfile() else None) for m in t.getmembers()]
    bad = tmp_path / "bad.tar.gz"
    with tarfile.open(bad, "w:gz") as t:
        for m, data in members:
            if m.name.endswith("f.txt"):
                data = b"evil"
                m.size = len(data)
            t.addfile(m, io.BytesIO(data) if data is not None else None)
    with pytest.raises(ValueError, match="sha256"):
        unpack(bad, tmp_path / "dst")
    assert not (tmp_path / "dst" / "debian" / "p").exists()  # nothing installed
    esc = tmp_path / "esc.tar.gz"
    with tarfile.open(esc, "w:gz") as t:
        info = tarfile.TarInfo("../outside.txt")
        info.size = 1
        t.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(ValueError, match=r"'\.\./outside\.txt': the first member must be"):
        unpack(esc, tmp_path / "dst")
    # a manifest naming a rendered directory outside the cache's rendered/ is refused before
    # anything is installed
    sneaky = tmp_path / "sneaky.tar.gz"
    with tarfile.open(sneaky, "w:gz") as t:
        for m, data in members:
            if m.name == "MANIFEST.json":
                man = json.loads(data)
                man["rendered"] = [".."]
                data = json.dumps(man).encode()
                m.size = len(data)
            t.addfile(m, io.BytesIO(data) if data is not None else None)
    with pytest.raises(ValueError, match=r"MANIFEST\.json: rendered\[0\]: not a listed package's rendered"):
        unpack(sneaky, tmp_path / "dst2")
    assert not (tmp_path / "dst2" / "debian" / "p").exists()


def test_pack_names_an_unprepared_package(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not prepared"):
        pack(suite_reading("missing"), tmp_path, tmp_path / "x.tar.gz")


def test_pack_refuses_a_damaged_package(tmp_path: Path) -> None:
    # the cache's integrity checks run before anything is packed: damage never travels
    from sources.fetch import CacheDamagedError

    src = tmp_path / "src"
    fake_package(src, "other", {"usr/share/o.txt": b"o"})
    (src / "debian" / "other" / "package.json").write_text("[1]")
    with pytest.raises(CacheDamagedError, match=r"'other' is damaged: .*package\.json: expected a JSON object"):
        pack(suite_reading("other"), src, tmp_path / "x.tar.gz")
    assert not (tmp_path / "x.tar.gz").exists()
