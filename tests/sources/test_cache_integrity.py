"""Integrity of the Debian-package cache (sources/fetch.py): package.json is validated and
checksummed, root/ carries a manifest of sizes + sha256, a damaged copy is rebuilt from the kept
.deb, or refused on one line naming the damaged file and `tokbench data prepare`.

Packages are real .deb files built here with ``dpkg-deb --build`` (no apt, no network); apt is
replaced by a copy of them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import sources.fetch as fetch
from sources.fetch import (
    DEB,
    DEB_SUM,
    META,
    CacheDamagedError,
    SourceUnavailableError,
    cached,
    check_package,
    fetch_packages,
    require,
)

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb")

REPO = Path(__file__).resolve().parents[2]
PKG = "python3.11-doc"  # the python_docs source's package, so the CLI test can read it
SOURCES = "usr/share/doc/python3.11/html/_sources"
FILES = {
    f"{SOURCES}/a.rst.txt": b"Alpha paragraph one.\n\nAlpha paragraph two is here.\n" * 20,
    f"{SOURCES}/b.rst.txt": b"Beta text.\n\nMore beta text follows here.\n" * 20,
    f"usr/share/doc/{PKG}/copyright": b"Format: x\nLicense: PSF\n",
}


def build_deb(tmp: Path, name: str = PKG, files: dict[str, bytes] | None = None) -> Path:
    """A small real .deb holding ``files`` plus one symlink."""
    tree = tmp / f"build-{name}"
    for rel, data in (files or FILES).items():
        p = tree / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    (tree / SOURCES / "link.rst.txt").symlink_to("a.rst.txt")
    (tree / "DEBIAN").mkdir()
    (tree / "DEBIAN" / "control").write_text(
        f"Package: {name}\nVersion: 1.0-1\nArchitecture: all\nMaintainer: t <t@t>\n"
        "Description: test package\n")
    out = tmp / f"{name}_1.0-1_all.deb"
    subprocess.run(["dpkg-deb", "-Zgzip", "--root-owner-group", "--build", str(tree), str(out)],
                   check=True, capture_output=True)
    return out


@pytest.fixture
def fake_apt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """apt-get download replaced by a copy of a .deb built here; returns the calls made."""
    deb = build_deb(tmp_path)
    calls: list[list[str]] = []

    def download(packages: list[str], workdir: Path, source: str) -> None:
        calls.append(list(packages))
        for p in packages:
            shutil.copy(deb, workdir / deb.name.replace(PKG, p, 1))

    monkeypatch.setattr(fetch, "_apt_download", download)
    return calls


@pytest.fixture
def cache(tmp_path: Path, fake_apt: list[list[str]]) -> Path:
    c = tmp_path / "cache"
    fetch_packages([PKG], c, progress=False)
    fetch._VERIFIED.clear()  # each check below is a new "process"
    return c


def pkg_dir(cache: Path) -> Path:
    return cache / "debian" / PKG


def test_fetch_writes_manifest_checksum_and_keeps_the_deb(cache: Path) -> None:
    d = pkg_dir(cache)
    meta = json.loads((d / META).read_text())
    assert set(meta["files"]) == set(FILES)
    size, sha = meta["files"][f"{SOURCES}/a.rst.txt"]
    assert size == len(FILES[f"{SOURCES}/a.rst.txt"]) and len(sha) == 64
    assert meta["links"] == {f"{SOURCES}/link.rst.txt": "a.rst.txt"}
    assert meta["deb"] == f"{PKG}_1.0-1_all.deb" and meta["checksum"]
    assert (d / DEB).is_file()
    assert (d / DEB_SUM).read_text().split() == [meta["sha256"], meta["deb"]]
    assert not list(d.glob("*.tmp")) and not list(d.glob("*.part"))
    pkg = require(cache, PKG, "python_docs")
    assert pkg.version == "1.0-1" and pkg.licences == ("PSF",)


@pytest.mark.parametrize("damage", ["truncate", "same_size_edit", "added_file", "retarget_link",
                                    "missing_root"])
def test_damaged_tree_is_rebuilt_from_the_kept_deb(cache: Path, damage: str) -> None:
    d = pkg_dir(cache)
    doc = d / "root" / SOURCES / "a.rst.txt"
    if damage == "truncate":
        doc.write_bytes(doc.read_bytes()[:10])
    elif damage == "same_size_edit":
        doc.write_bytes(doc.read_bytes().replace(b"Alpha", b"Omega"))
    elif damage == "added_file":
        (doc.parent / "extra.rst.txt").write_bytes(b"not from the package")
    elif damage == "retarget_link":
        (doc.parent / "link.rst.txt").unlink()
        (doc.parent / "link.rst.txt").symlink_to("b.rst.txt")
    else:
        shutil.rmtree(d / "root")
    logs: list[str] = []
    pkg = require(cache, PKG, "python_docs", log=logs.append)
    assert doc.read_bytes() == FILES[f"{SOURCES}/a.rst.txt"]
    assert not (doc.parent / "extra.rst.txt").exists()
    assert os.readlink(doc.parent / "link.rst.txt") == "a.rst.txt"
    assert pkg.root == d / "root"
    assert len(logs) == 1 and "rebuilding python3.11-doc" in logs[0]


@pytest.mark.parametrize("text", ['{"name": "python3.11-doc", "vers', "{}", "[1]", "", "\x00\xff"])
def test_damaged_package_json_is_rebuilt_from_the_kept_deb(cache: Path, text: str) -> None:
    d = pkg_dir(cache)
    good = json.loads((d / META).read_text())
    (d / META).write_text(text, encoding="latin-1")
    logs: list[str] = []
    assert require(cache, PKG, "python_docs", log=logs.append).version == "1.0-1"
    assert json.loads((d / META).read_text()) == good
    assert logs and str(d / META) in logs[0]


def test_edited_package_json_fails_its_checksum(cache: Path) -> None:
    d = pkg_dir(cache)
    meta = json.loads((d / META).read_text())
    meta["version"] = "9.9"
    (d / META).write_text(json.dumps(meta))
    (d / DEB).unlink()  # no way to rebuild: refused
    with pytest.raises(CacheDamagedError, match="checksum does not match"):
        require(cache, PKG, "python_docs")


@pytest.mark.parametrize("deb_damage", ["missing", "corrupt", "sum_missing"])
def test_damage_without_an_intact_deb_is_refused_on_one_line(cache: Path, deb_damage: str) -> None:
    d = pkg_dir(cache)
    doc = d / "root" / SOURCES / "b.rst.txt"
    doc.write_bytes(b"short")
    if deb_damage == "missing":
        (d / DEB).unlink()
    elif deb_damage == "corrupt":
        (d / DEB).write_bytes((d / DEB).read_bytes()[:-7] + b"garbage")
    else:
        (d / DEB_SUM).unlink()
    with pytest.raises(CacheDamagedError) as e:
        require(cache, PKG, "python_docs")
    msg = str(e.value)
    assert "\n" not in msg
    assert str(doc) in msg and "5 bytes" in msg
    assert "tokbench data prepare" in msg and "python_docs" in msg
    assert doc.read_bytes() == b"short"  # refused, not silently "repaired" from a bad .deb
    assert cached(cache, PKG) is None  # fetch_packages then downloads it again


def test_prepare_downloads_again_when_the_deb_cannot_help(cache: Path, fake_apt: list[list[str]]) -> None:
    d = pkg_dir(cache)
    (d / DEB).unlink()
    (d / META).write_text("{}")
    fake_apt.clear()
    got = fetch_packages([PKG], cache, progress=False)
    assert fake_apt == [[PKG]] and got[PKG].version == "1.0-1"
    fetch._VERIFIED.clear()
    assert check_package(cache, PKG) == got[PKG]


def test_intact_cache_never_calls_apt_and_hashes_once_per_process(
        cache: Path, fake_apt: list[list[str]], monkeypatch: pytest.MonkeyPatch) -> None:
    fake_apt.clear()
    hashed: list[Path] = []
    real = fetch._sha256_file
    monkeypatch.setattr(fetch, "_sha256_file", lambda p, sync=False: hashed.append(p) or real(p, sync))
    for _ in range(3):
        require(cache, PKG, "python_docs")
    fetch_packages([PKG], cache, progress=False)
    assert fake_apt == []
    assert len(hashed) == len(FILES)  # the first call hashed each file once; later ones none


def test_legacy_entry_without_manifest_is_validated_but_not_hashed(tmp_path: Path) -> None:
    """Caches written before manifests: metadata checked, tree accepted as it is."""
    d = tmp_path / "cache" / "debian" / PKG
    (d / "root").mkdir(parents=True)
    (d / META).write_text(json.dumps({"name": PKG, "version": "1", "sha256": "0" * 64}))
    assert require(tmp_path / "cache", PKG, "python_docs").version == "1"
    for bad, why in (("[1]", "expected a JSON object"), ('{"name": "x", "version": "1"}', "'name' is 'x'"),
                     (f'{{"name": "{PKG}", "version": 3}}', "'version' must be a JSON string"),
                     (f'{{"name": "{PKG}"', "not valid JSON")):
        (d / META).write_text(bad)
        with pytest.raises(CacheDamagedError, match=why) as e:
            require(tmp_path / "cache", PKG, "python_docs")
        assert str(d / META) in str(e.value) and "\n" not in str(e.value)


def test_absent_package_still_says_how_to_get_it(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailableError, match="not in the cache") as e:
        require(tmp_path, PKG, "python_docs")
    assert not isinstance(e.value, CacheDamagedError)


SUITE = """name: cache-damage
seeds: [0]
data:
  train: {source: python_docs, max_docs: 20}
  eval:
    - {name: py, source: python_docs, max_docs: 20}
budget: {train_bytes: 4096, context_bytes: 64, batch_bytes: 1024, warmup_bytes: 0}
backbone: {layers: 1, dim: 16, heads: 2}
encoders: [bytes]
eval: {modes: [full], max_docs: 2}
"""


def test_cli_run_refuses_a_damaged_cache_on_one_line(cache: Path, tmp_path: Path) -> None:
    d = pkg_dir(cache)
    (d / DEB).unlink()
    (d / META).write_text("[1]")
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    env = {**os.environ, "TOKBENCH_CACHE": str(cache)}
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(suite), "--no-prepare",
                           "--quiet", "--no-report", "--out", str(tmp_path / "run")],
                          capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert len(errors) == 1, proc.stderr
    assert str(d / META) in errors[0] and "expected a JSON object" in errors[0]
    assert "tokbench data prepare" in errors[0]


def test_validate_check_refuses_damaged_metadata_only_when_a_run_could_not_repair_it(
        cache: Path, tmp_path: Path) -> None:
    """``Source.check`` (``tokbench validate``): read-only, no hashing of the tree."""
    from sources.base import SourceContext
    from sources.python_docs import PythonDocsSource

    ctx = SourceContext(base_dir=tmp_path, cache_dir=cache, log=lambda s: None)
    src = PythonDocsSource()
    d = pkg_dir(cache)
    src.check(ctx)
    (d / META).write_text("{}")
    src.check(ctx)  # the kept .deb is intact: the run rebuilds it, validate does not write
    assert (d / META).read_text() == "{}"
    (d / DEB).unlink()
    with pytest.raises(CacheDamagedError, match="missing key 'name'.*tokbench data prepare"):
        src.check(ctx)
    src_absent = PythonDocsSource(package="python3.11-doc")
    shutil.rmtree(d)
    src_absent.check(ctx)  # not fetched yet: a run prepares it
