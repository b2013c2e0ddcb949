"""``data unpack`` of damaged and hostile archives: each case is one line naming the archive and
the member or manifest key (exit 2), the cache exactly as before, no temporary directory left."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import multiprocessing
import os
import re
import signal
import tarfile
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from harness.cli import main
from harness.data.datapack import UnpackLimits, unpack

PKG_JSON = json.dumps({"name": "p", "version": "1"}).encode()


def sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def build(path: Path, files: dict[str, bytes], manifest: Any = None, extra: list[tarfile.TarInfo] = (),
          packages: list[str] | None = None) -> Path:
    """A tar.gz as ``pack`` writes it: MANIFEST.json first (default: every file with its sha256),
    then ``files``, then ``extra`` members (header only)."""
    if manifest is None:
        manifest = {"packages": packages or ["p"], "files": {n: sha(b) for n, b in files.items()}}
    body = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    with tarfile.open(path, "w:gz") as t:
        for name, data in [("MANIFEST.json", body), *files.items()]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        for info in extra:
            t.addfile(info)
    return path


def good(path: Path, text: bytes = b"alpha\n", pkg: str = "p") -> Path:
    meta = json.dumps({"name": pkg, "version": "1"}).encode()
    return build(path, {f"debian/{pkg}/package.json": meta, f"debian/{pkg}/root/a.txt": text}, packages=[pkg])


def snapshot(cache: Path) -> dict[str, bytes | None]:
    """Every path under the cache with its bytes (None for a directory), the unpack lock aside."""
    return {p.relative_to(cache).as_posix(): (p.read_bytes() if p.is_file() else None)
            for p in sorted(cache.rglob("*")) if p.name != ".unpack.lock"}


@pytest.fixture
def cache(tmp_path: Path) -> Path:
    """A cache holding package p (a.txt = "alpha") from a good archive."""
    c = tmp_path / "cache"
    unpack(good(tmp_path / "good.tar.gz"), c)
    assert (c / "debian/p/root/a.txt").read_bytes() == b"alpha\n"
    return c


def refused(archive: Path, cache: Path, match: str, limits: UnpackLimits | None = None) -> str:
    """Unpack must fail with one line naming the archive and matching ``match``; the cache is
    unchanged and holds no temporary directory."""
    before = snapshot(cache)
    with pytest.raises(ValueError) as e:
        unpack(archive, cache, limits or UnpackLimits())
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"data unpack: {archive}: "), msg
    assert re.search(match, msg), msg
    assert snapshot(cache) == before
    return msg


def test_a_package_listed_twice_is_refused_and_the_cache_kept(tmp_path: Path, cache: Path) -> None:
    a = build(tmp_path / "a.tar.gz", {"debian/p/package.json": PKG_JSON, "debian/p/root/a.txt": b"new"},
              packages=["p", "p"])
    refused(a, cache, r"MANIFEST\.json: packages\[1\]: 'p' is listed twice")


def test_a_package_the_archive_lacks_is_refused_before_anything_is_installed(tmp_path: Path, cache: Path) -> None:
    files = {"debian/p/package.json": PKG_JSON, "debian/p/root/a.txt": b"new"}
    man = {"packages": ["p", "q"], "files": {**{n: sha(b) for n, b in files.items()},
                                             "debian/q/package.json": "0" * 64}}
    refused(build(tmp_path / "a.tar.gz", files, man), cache,
            r"'debian/q/package\.json': listed in MANIFEST\.json but missing from the archive")
    # a package without its package.json in the manifest
    man = {"packages": ["p", "q"], "files": {n: sha(b) for n, b in files.items()}}
    refused(build(tmp_path / "b.tar.gz", files, man), cache, r"packages: 'q': no debian/q/package\.json")


def test_a_failed_install_is_rolled_back(tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # two packages: the second rename into place fails; the first is put back as it was
    q = json.dumps({"name": "q", "version": "1"}).encode()
    files = {"debian/p/package.json": PKG_JSON, "debian/p/root/a.txt": b"new",
             "debian/q/package.json": q, "debian/q/root/b.txt": b"b"}
    a = build(tmp_path / "a.tar.gz", files, packages=["p", "q"])
    real = os.rename

    def rename(src: Any, dst: Any) -> None:
        if str(dst).endswith("debian/q"):
            raise OSError(28, "No space left on device", str(dst))
        real(src, dst)

    monkeypatch.setattr("harness.data.datapack.os.rename", rename)
    refused(a, cache, r"installing into .* failed, nothing changed \(No space left on device")


@pytest.mark.parametrize("key", ["/etc/hostname", "../" * 20 + "etc/hostname", "debian/p/../../../x",
                                 "debian/p/root/./a.txt", "debian/p//root/a.txt", "elsewhere/a.txt",
                                 "debian/other/root/a.txt", "debian/p/package.deb"])
def test_manifest_keys_are_confined(tmp_path: Path, cache: Path, key: str) -> None:
    files = {"debian/p/package.json": PKG_JSON}
    man = {"packages": ["p"], "files": {"debian/p/package.json": sha(PKG_JSON), key: sha(b"")}}
    msg = refused(build(tmp_path / "a.tar.gz", files, man), cache, r"MANIFEST\.json: files\[")
    assert repr(key) in msg


def test_the_cli_says_it_on_one_line_with_exit_code_2(tmp_path: Path, cache: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    man = {"packages": ["p"], "files": {"debian/p/package.json": sha(PKG_JSON), "/etc/hostname": sha(b"")}}
    a = build(tmp_path / "a.tar.gz", {"debian/p/package.json": PKG_JSON}, man)
    before = snapshot(cache)
    assert main(["data", "unpack", str(a), "--cache", str(cache)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and f"{a}: MANIFEST.json: files['/etc/hostname']" in err
    assert snapshot(cache) == before


def test_an_unlisted_member_or_a_package_that_is_a_file_is_refused(tmp_path: Path, cache: Path) -> None:
    files = {"debian/p/package.json": PKG_JSON, "debian/p/root/a.txt": b"new"}
    man = {"packages": ["p"], "files": {n: sha(b) for n, b in files.items()}}
    extra = {**files, "debian/p/root/sneaked.txt": b"x"}
    refused(build(tmp_path / "a.tar.gz", extra, man), cache, r"'debian/p/root/sneaked\.txt': not listed in MANIFEST")
    # the package itself a regular file
    man = {"packages": ["p"], "files": {"debian/p": sha(b"x"), "debian/p/package.json": sha(PKG_JSON)}}
    refused(build(tmp_path / "b.tar.gz", {"debian/p": b"x"}, man), cache, r"files\['debian/p'\]: not under")
    # a symlink or FIFO member, and a member listed twice
    link = tarfile.TarInfo("debian/p/root/l")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    refused(build(tmp_path / "c.tar.gz", files, None, [link]), cache, r"'debian/p/root/l': not a regular file")
    with tarfile.open(tmp_path / "d.tar.gz", "w:gz") as t:
        for name, data in [("MANIFEST.json", json.dumps(man := {"packages": ["p"], "files": {
                n: sha(b) for n, b in files.items()}}).encode()), *files.items(), ("debian/p/root/a.txt", b"new")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    refused(tmp_path / "d.tar.gz", cache, r"'debian/p/root/a\.txt': appears twice")


def test_package_json_is_checked_as_the_cache_checks_it(tmp_path: Path, cache: Path) -> None:
    files = {"debian/p/package.json": b'{"name": "q", "version": "1"}', "debian/p/root/a.txt": b"new"}
    refused(build(tmp_path / "a.tar.gz", files), cache, r"'debian/p/package\.json': 'name' is 'q', expected 'p'")


def test_size_limits_refuse_a_tar_bomb(tmp_path: Path, cache: Path) -> None:
    zeros = bytes(50_000)  # stands for 1.5 GiB: the limit is lowered, not the bomb raised
    files = {"debian/p/package.json": PKG_JSON, "debian/p/root/zeros": zeros}
    a = build(tmp_path / "a.tar.gz", files)
    assert a.stat().st_size < 1000
    refused(a, cache, r"'debian/p/root/zeros': 50000 bytes, more than the limit of 40000 bytes per file",
            UnpackLimits(member_bytes=40_000))
    files = {"debian/p/package.json": PKG_JSON, "debian/p/root/a": bytes(30_000), "debian/p/root/b": bytes(30_000)}
    refused(build(tmp_path / "b.tar.gz", files), cache, r"'debian/p/root/b': the files add up to more than the limit",
            UnpackLimits(total_bytes=40_000))
    refused(build(tmp_path / "b.tar.gz", files), cache, r"3 files, more than the limit of 2", UnpackLimits(members=2))
    refused(build(tmp_path / "b.tar.gz", files), cache, r"MANIFEST\.json: .*more than the limit of 10 bytes",
            UnpackLimits(manifest_bytes=10))


def raw_tar_gz(path: Path, blocks: bytes) -> Path:
    path.write_bytes(gzip.compress(blocks, 1))
    return path


def test_a_header_declaring_more_than_it_holds_is_one_line(tmp_path: Path, cache: Path) -> None:
    man = json.dumps({"packages": ["p"], "files": {"debian/p/package.json": sha(PKG_JSON),
                                                   "debian/p/root/big": "0" * 64}}).encode()

    def header(name: str, size: int, kind: bytes = tarfile.REGTYPE) -> bytes:
        info = tarfile.TarInfo(name)
        info.size, info.type = size, kind
        return info.tobuf(tarfile.GNU_FORMAT)

    def padded(b: bytes) -> bytes:
        return b + bytes(-len(b) % 512)

    head = header("MANIFEST.json", len(man)) + padded(man) + header("debian/p/package.json", len(PKG_JSON)) + padded(PKG_JSON)
    # 50 GiB declared over 1 MiB of data: over the per-file limit, refused from the header alone
    a = raw_tar_gz(tmp_path / "a.tar.gz", head + header("debian/p/root/big", 50 << 30) + bytes(1 << 20))
    refused(a, cache, r"'debian/p/root/big': 50\.0 GiB, more than the limit of 1\.0 GiB per file")
    # within the limits but more than the stream holds: truncated
    b = raw_tar_gz(tmp_path / "b.tar.gz", head + header("debian/p/root/big", 1 << 21) + bytes(1 << 20))
    refused(b, cache, r"'debian/p/root/big': truncated or corrupt archive")
    # a pax record of 8 MiB (tarfile reads one whole): refused, not allocated
    c = raw_tar_gz(tmp_path / "c.tar.gz", head + header("pax", 8 << 20, tarfile.XHDTYPE) + bytes(8 << 20))
    refused(c, cache, r"a tar header record of 8388608 bytes")
    # a gzip cut short, and a file that is not gzip at all
    d = tmp_path / "d.tar.gz"
    d.write_bytes(good(tmp_path / "x.tar.gz").read_bytes()[:-30])
    refused(d, cache, r"truncated or corrupt archive")
    e = tmp_path / "e.tar.gz"
    e.write_bytes(b"not a gzip")
    refused(e, cache, r"archive: truncated or corrupt archive \(Not a gzipped file")


def test_members_are_hashed_as_a_stream(tmp_path: Path) -> None:
    # 20 MB in one member: hashed and written in 1 MiB pieces, never held whole
    data = bytes(20 << 20)
    a = build(tmp_path / "a.tar.gz", {"debian/p/package.json": PKG_JSON, "debian/p/root/z": data})
    tracemalloc.start()
    try:
        unpack(a, tmp_path / "cache")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, peak
    assert (tmp_path / "cache/debian/p/root/z").stat().st_size == len(data)


def test_a_fifo_or_directory_as_the_archive_is_refused(tmp_path: Path, cache: Path) -> None:
    fifo = tmp_path / "fifo.tar.gz"
    os.mkfifo(fifo)
    refused(fifo, cache, r"not a regular file \(a FIFO\)")
    refused(tmp_path, cache, r"not a regular file \(a directory\)")


def _die_during(archive: Path, cache: Path, where: str) -> None:
    """In a forked child: unpack, killed by SIGKILL mid-extraction or mid-install."""
    import harness.data.datapack as dp

    if where == "extract":
        real = dp._copy_member

        def copy(src: Any, dst: Path, size: int) -> str:
            digest = real(src, dst, size)
            os.kill(os.getpid(), signal.SIGKILL)
            return digest
        dp._copy_member = copy  # type: ignore[assignment]
    else:
        real_rename, n = os.rename, [0]

        def rename(a: Any, b: Any) -> None:
            real_rename(a, b)
            n[0] += 1
            if n[0] == 1:  # the old copy is aside, the new one not yet in place
                os.kill(os.getpid(), signal.SIGKILL)
        dp.os.rename = rename  # type: ignore[assignment]
    unpack(archive, cache)


@pytest.mark.parametrize("where", ["extract", "install"])
def test_a_killed_unpack_is_cleaned_up_by_the_next(tmp_path: Path, cache: Path, where: str) -> None:
    a = good(tmp_path / "new.tar.gz", b"beta\n")
    child = multiprocessing.get_context("fork").Process(target=_die_during, args=(a, cache, where))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    assert [p.name for p in cache.glob(".unpack.*") if p.is_dir()]  # what the kill left
    if where == "install":
        assert not (cache / "debian/p").exists()  # moved aside, not yet replaced
    # the next unpack (any archive) puts the old copy back, removes the leftovers, then installs
    logs: list[str] = []
    unpack(good(tmp_path / "q.tar.gz", b"q\n", pkg="q"), cache, log=logs.append)
    assert (cache / "debian/p/root/a.txt").read_bytes() == b"alpha\n"
    assert not [p for p in cache.iterdir() if p.name.startswith((".unpack.", "unpack."))
                and p.name != ".unpack.lock"]
    assert any("interrupted unpack" in s for s in logs)
    unpack(a, cache)
    assert (cache / "debian/p/root/a.txt").read_bytes() == b"beta\n"


def test_leftovers_of_older_versions_are_recovered(tmp_path: Path, cache: Path) -> None:
    # ``.p.old`` without ``p`` (a failed install of an older tokbench) and its ``unpack.XXXXXXXX``
    os.rename(cache / "debian/p", cache / "debian/.p.old")
    (cache / "unpack.abcd1234" / "debian").mkdir(parents=True)
    (cache / "unpack-mine").mkdir()  # not a temporary name: left alone
    unpack(good(tmp_path / "q.tar.gz", pkg="q"), cache)
    assert (cache / "debian/p/root/a.txt").read_bytes() == b"alpha\n"
    assert not (cache / "debian/.p.old").exists() and not (cache / "unpack.abcd1234").exists()
    assert (cache / "unpack-mine").is_dir()


def _unpack_n(archive: Path, cache: Path, n: int) -> None:
    for _ in range(n):
        unpack(archive, cache)


def test_concurrent_unpacks_into_one_cache_all_succeed(tmp_path: Path, cache: Path) -> None:
    a = good(tmp_path / "new.tar.gz", b"beta\n")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_unpack_n, args=(a, cache, 5)) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    assert (cache / "debian/p/root/a.txt").read_bytes() == b"beta\n"
    assert sorted(p.name for p in cache.iterdir()) == [".unpack.lock", "debian"]


@pytest.mark.parametrize(("manifest", "match"), [
    (b"[1,2,3]", r"MANIFEST\.json: expected a JSON object, got list"),
    ({"packages": [123], "files": {}}, r"MANIFEST\.json: packages\[0\]: not a Debian package name, got 123"),
    ({"packages": ["p"], "files": ["a"]}, r"MANIFEST\.json: key 'files': expected an object"),
    ({"packages": "p", "files": {}}, r"MANIFEST\.json: key 'packages': expected a list of names, got str"),
    ({"packages": ["p"]}, r"MANIFEST\.json: key 'files': missing"),
    ({"packages": ["p"], "files": {}, "extra": 1}, r"MANIFEST\.json: key 'extra': unknown"),
    ({"packages": ["P/../x"], "files": {}}, r"packages\[0\]: not a Debian package name"),
    ({"packages": ["p"], "rendered": ["../x"], "files": {}}, r"rendered\[0\]: not a listed package's"),
    ({"packages": ["p"], "files": {"debian/p/package.json": 5}}, r"files\['debian/p/package\.json'\]: expected a sha256"),
    ({"packages": ["p"], "files": {"debian/p/root/a\x00b": "0" * 64}}, r"files\['debian/p/root/a\\x00b'\]: not a relative path"),
    (b"[" * 100_000, r"MANIFEST\.json: nested too deeply"),
    (b"{not json", r"MANIFEST\.json: not valid JSON \(Expecting property name"),
    (b"\xff\xfe", r"MANIFEST\.json: not UTF-8"),
])
def test_a_malformed_manifest_is_one_located_line(tmp_path: Path, cache: Path, manifest: Any, match: str) -> None:
    refused(build(tmp_path / "a.tar.gz", {"debian/p/package.json": PKG_JSON}, manifest), cache, match)
