"""``tokbench data pack`` / ``unpack``: carry a suite's prepared data to a machine without network
(a GPU box) in one file, one command each side.

    tokbench data pack standard --out standard-data.tar.gz       # where apt works: prepares, then packs
    tokbench data unpack standard-data.tar.gz                    # on the GPU machine, into $TOKBENCH_CACHE

The archive holds, for every Debian package the suite reads (its sources' packages and, when it
uses morphology, the Hunspell dictionaries), ``debian/<package>/package.json`` and the files
under ``root/`` — only those under the directories the sources read when ``--slim`` is given
(``SLIM_KEEP``: the Python docs' ``html/_sources`` instead of the whole 71 MB HTML tree) — the
package's rendered text under ``rendered/<package>_<version>/`` when the cache has it (man pages,
rendered by groff at ``prepare``: the GPU machine then needs no groff), plus ``MANIFEST.json``
with the sha256 of every file.

``unpack`` reads the archive once, as a stream: MANIFEST.json first (its schema checked: names
confined to ``debian/<package>/`` and ``rendered/<directory>/`` of the packages it lists), then
each member, refused unless the manifest lists it, written in chunks and hashed as it is written,
within ``UnpackLimits`` (per file, in all, members, manifest size). Each package's package.json
must pass the cache's own checks and list its files as the archive gave them. Only then is
anything installed: each directory renamed into place, the old copy moved aside, every rename
undone if one fails. One unpack at a time per cache (``<cache>/.unpack.lock``); what a killed one
left (its temporary directory, a package it had moved aside) is put back or removed by the next.
Every problem is one line naming the archive and the member or manifest key.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from core.files import NotRegularFile, open_regular
from harness.infra.lock import RunLock, RunLocked, describe_holder
from sources.fetch import FetchedPackage, _sha256_file, check_package

MANIFEST = "MANIFEST.json"
# --slim: per package, the subtrees of root/ its source reads; other packages are kept whole. An
# entry with a glob in it keeps only the matching files under the directory before the glob
# (linux-doc-6.1: its 3,000 gzipped .rst files, 8 MB of the 226 MB tree of HTML, YAML and .txt).
SLIM_KEEP: dict[str, tuple[str, ...]] = {
    "python3.11-doc": ("usr/share/doc/python3.11/html/_sources",),
    "linux-doc-6.1": ("usr/share/doc/linux-doc-6.1/Documentation/**/*.rst.gz",),
    "perl-doc": ("usr/share/perl",),
}


def suite_packages(suite: Any) -> tuple[list[str], list[str]]:
    """Debian packages a suite reads: (its sources' packages, the Hunspell dictionaries of its
    languages when it uses morphology — optional, as in ``prepare_sources``, which only warns
    when they cannot be fetched)."""
    from harness.data.load import source_key

    specs = list({source_key(s): s for s in (suite.data.train, *suite.data.eval)}.values())
    packages = list(dict.fromkeys(p for s in specs if hasattr(s.config, "packages") for p in s.config.packages()))
    optional: list[str] = []
    morph = any(p.name.startswith("morph.") for p in suite.perturbations) or any(
        a.name == "morphology" for a in suite.analyses)
    if morph:
        from sources.debian import hunspell_packages

        langs = [s.language or getattr(s.config, "language", None)
                 or (s.config.default_language() if hasattr(s.config, "default_language") else None) for s in specs]
        optional = [p for p in dict.fromkeys(hunspell_packages(lang for lang in langs if lang)) if p not in packages]
    return packages, optional


def _rendered_dir(cache_dir: Path, package: str, version: str) -> Path:
    """Where sources keep a package's rendered text (``sources.manpages``: one .txt per page),
    for its version (``_checked``'s)."""
    return cache_dir / "rendered" / f"{package}_{version.replace(':', '%3a')}"


def _checked(cache_dir: Path, package: str) -> FetchedPackage:
    """The cached package after its integrity checks (``sources.fetch.check_package``: a damaged
    one is rebuilt from its kept .deb or refused on one line), so a pack never ships damage."""
    pkg = check_package(cache_dir, package, source="data pack")
    if pkg is None:
        raise ValueError(f"data pack: Debian package {package!r} is not prepared in {cache_dir}; "
                         "run `tokbench data prepare SUITE` first")
    return pkg


def _files(cache_dir: Path, package: str, slim: bool) -> tuple[list[Path], Path]:
    """(the files of ``package`` to pack, its rendered-text directory), after its checks."""
    d = cache_dir / "debian" / package
    version = _checked(cache_dir, package).version
    keep = SLIM_KEEP.get(package, ()) if slim and package in SLIM_KEEP else ("",)
    out = [d / "package.json"]
    for k in keep:
        parts = PurePosixPath(k).parts
        cut = next((i for i, x in enumerate(parts) if any(c in x for c in "*?[")), len(parts))
        base = d / "root" / PurePosixPath(*parts[:cut]) if cut else d / "root"
        pattern = PurePosixPath(*parts[cut:]).as_posix() if cut < len(parts) else "**/*"
        out += sorted(p for p in base.glob(pattern) if p.is_file() and not p.is_symlink())
    rendered = _rendered_dir(cache_dir, package, version)  # absent for packages nothing renders
    out += sorted(p for p in rendered.rglob("*") if p.is_file() and not p.is_symlink())
    return out, rendered


def document_files(suite: Any, ctx: Any) -> tuple[list[Path], set[str]]:
    """(the sealed document-cache files of the suite's sources that keep one, the packages that
    only those sources read): with ``--slim`` the files travel in place of the packages, since a
    machine given only them reads the same documents (``sources.doccache``)."""
    from harness.data.load import source_key

    specs = list({source_key(s): s for s in (suite.data.train, *suite.data.eval)}.values())
    files: list[Path] = []
    covered: set[str] = set()
    needed: set[str] = set()
    for s in specs:
        docs = s.config.document_files(ctx) if hasattr(s.config, "document_files") else []
        pkgs = set(s.config.packages()) if hasattr(s.config, "packages") else set()
        if docs:
            files += [f for f in docs if f not in files]
            covered |= pkgs
        else:
            needed |= pkgs
    return files, covered - needed


def pack(suite: Any, cache_dir: Path, out: Path, slim: bool = False, ctx: Any = None) -> dict[str, Any]:
    """Write the suite's prepared data to ``out`` (tar.gz). With ``slim`` and a SourceContext
    ``ctx``, a source that keeps a document cache travels as that file instead of its packages.
    Returns {packages, documents, files, bytes}."""
    manifest: dict[str, str] = {}
    files: list[tuple[Path, str]] = []
    required, optional = suite_packages(suite)
    doc_files, covered = document_files(suite, ctx) if slim and ctx is not None else ([], set())
    required = [p for p in required if p not in covered]
    # an optional dictionary that was never fetched is left out (the run works without it)
    packages = required + [p for p in optional if (cache_dir / "debian" / p / "package.json").is_file()]
    rendered: list[str] = []
    for pkg in packages:
        pkg_files, rendered_dir = _files(cache_dir, pkg, slim)
        if rendered_dir.is_dir():
            rendered.append(rendered_dir.name)
        for f in pkg_files:
            name = f.relative_to(cache_dir).as_posix()
            manifest[name] = _sha256_file(f)
            files.append((f, name))
    documents = [f.name for f in doc_files if f.name.endswith(".jsonl.xz")]
    for f in doc_files:
        name = f"documents/{f.name}"
        manifest[name] = _sha256_file(f)
        files.append((f, name))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
        body = json.dumps({"packages": packages, "rendered": rendered, "documents": documents,
                           "files": manifest}, indent=1,
                          sort_keys=True).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
        for f, name in files:
            tar.add(f, arcname=name, recursive=False)
    tmp.replace(out)
    return {"packages": packages, "rendered": rendered, "documents": documents, "files": len(files),
            "bytes": out.stat().st_size}


@dataclass(frozen=True)
class UnpackLimits:
    """What ``unpack`` accepts from an archive. The packages a source reads are documentation, far
    below every limit (the largest, linux-doc-6.1, is a 226 MB tree in all, see ``SLIM_KEEP``);
    the limits bound what a damaged or hostile archive can make unpack write or hold (a tar bomb:
    1.5 GiB of zeros in 1.5 MB). An archive over a limit is refused on one line naming the member,
    before anything is installed."""

    member_bytes: int = 1 << 30  # one file
    total_bytes: int = 16 << 30  # all files together
    members: int = 500_000  # tar entries (tarfile keeps a record of each in memory)
    manifest_bytes: int = 64 << 20  # MANIFEST.json (read whole, parsed)


_CHUNK = 1 << 20
# The largest single read tarfile may make of the decompressed stream: a tar header and its pax /
# GNU long-name record, which tarfile reads whole (a header declaring a 1 GiB record over a
# stream of zeros would otherwise allocate 1 GiB); member data is read in _CHUNK pieces.
_MAX_READ = 4 * _CHUNK
_PACKAGE = re.compile(r"[a-z0-9][a-z0-9+.-]*")
_DOCUMENTS = re.compile(r"[a-z0-9_]+-[0-9a-f]{24}\.jsonl\.xz")  # sources.doccache.document_cache_path
_LOCK = ".unpack.lock"
_WORK_PREFIX = ".unpack."
# temporary directories of an unpack: ``.unpack.XXXXXXXX``, and ``unpack.XXXXXXXX`` of older
# tokbench versions (tempfile's 8 random characters), removed by the next unpack under the lock
_STALE_WORK = re.compile(r"\.?unpack\.[a-z0-9_]{8}")
_WAIT_S = 1800.0  # how long an unpack waits for another one into the same cache


class _Refused(ValueError):
    """A problem with the archive: ``where`` (a member or manifest key) and what is wrong."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")


class _BoundedStream:
    """The decompressed archive as tarfile reads it (``r:`` mode): refuses a single read over
    ``_MAX_READ`` and any position beyond ``limit``, so no header makes tarfile allocate or
    decompress without bound."""

    def __init__(self, f: Any, limit: int) -> None:
        self.f, self.limit = f, limit

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0 or n > _MAX_READ:
            raise _Refused("archive", f"a tar header record of {n} bytes (at most {_MAX_READ} accepted)")
        if self.f.tell() + n > self.limit:
            raise _Refused("archive", f"more than {_size(self.limit)} once decompressed")
        return self.f.read(n)

    def seek(self, pos: int, whence: int = 0) -> int:
        target = pos if whence == 0 else self.f.tell() + pos if whence == 1 else None
        if target is None or target > self.limit:
            raise _Refused("archive", f"more than {_size(self.limit)} once decompressed")
        return self.f.seek(target)

    def tell(self) -> int:
        return self.f.tell()


def _size(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{int(n)} bytes"


def _open_regular(archive: Path) -> BinaryIO:
    """``archive`` opened for reading, refused unless it is a regular file (a FIFO would block,
    a device never end). O_NONBLOCK: opening a FIFO does not wait for a writer."""
    try:
        return open_regular(archive)
    except NotRegularFile as e:
        raise ValueError(f"data unpack: {archive}: not a regular file ({e.kind})") from None
    except OSError as e:
        raise ValueError(f"data unpack: {archive}: cannot be read ({e.strerror or e})") from None


def _manifest(raw: bytes, limits: UnpackLimits) -> tuple[list[str], list[str], list[str], dict[str, str]]:
    """(packages, rendered directories, document files, {member: sha256}) of MANIFEST.json, every
    key and value checked: names confined to ``debian/<package>/`` (its package.json or
    ``root/``), ``rendered/<directory>/`` and ``documents/<file>[.json]`` of what it lists."""
    try:
        man = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise _Refused(MANIFEST, f"not UTF-8 (byte {e.start})") from None
    except RecursionError:
        raise _Refused(MANIFEST, "nested too deeply") from None
    except ValueError as e:
        raise _Refused(MANIFEST, f"not valid JSON ({' '.join(str(e).split())})") from None
    if not isinstance(man, dict):
        raise _Refused(MANIFEST, f"expected a JSON object, got {type(man).__name__}")
    extra = sorted(set(man) - {"packages", "rendered", "documents", "files"})
    if extra:
        raise _Refused(f"{MANIFEST}: key {extra[0]!r}", "unknown (expected packages, rendered, documents, files)")
    for key in ("packages", "files"):
        if key not in man:
            raise _Refused(f"{MANIFEST}: key {key!r}", "missing")

    def names(key: str, ok: Callable[[str], bool], what: str) -> list[str]:
        v = man.get(key, [])
        if not isinstance(v, list):
            raise _Refused(f"{MANIFEST}: key {key!r}", f"expected a list of names, got {type(v).__name__}")
        for i, x in enumerate(v):
            if not isinstance(x, str) or not ok(x):
                raise _Refused(f"{MANIFEST}: {key}[{i}]", f"not {what}, got {x!r}")
            if x in v[:i]:
                raise _Refused(f"{MANIFEST}: {key}[{i}]", f"{x!r} is listed twice")
        return v

    packages = names("packages", lambda x: bool(_PACKAGE.fullmatch(x)), "a Debian package name")
    documents = names("documents", lambda x: bool(_DOCUMENTS.fullmatch(x)), "a document-cache file name")
    if not packages and not documents:
        raise _Refused(f"{MANIFEST}: key 'packages'", "empty (and no documents)")
    # rendered/<package>_<version>: the text of a listed package (version as in _rendered_dir)
    rendered = names("rendered", lambda x: x.partition("_")[0] in packages
                     and bool(re.fullmatch(r"[A-Za-z0-9.+~%-]+", x.partition("_")[2])),
                     "a listed package's rendered directory (<package>_<version>)")
    files = man["files"]
    if not isinstance(files, dict):
        raise _Refused(f"{MANIFEST}: key 'files'", f"expected an object {{member: sha256}}, got {type(files).__name__}")
    if len(files) > limits.members:
        raise _Refused(f"{MANIFEST}: key 'files'", f"{len(files)} files, more than the limit of {limits.members}")
    for name, digest in files.items():
        where = f"{MANIFEST}: files[{name!r}]"
        parts = name.split("/")
        if "\0" in name or any(p in ("", ".", "..") for p in parts):
            raise _Refused(where, "not a relative path inside the archive")
        inside = (len(parts) >= 3 and (
            (parts[0] == "debian" and parts[1] in packages
             and (parts[2:] == ["package.json"] or (parts[2] == "root" and len(parts) >= 4)))
            or (parts[0] == "rendered" and parts[1] in rendered))) or (
            len(parts) == 2 and parts[0] == "documents" and parts[1].removesuffix(".json") in documents)
        if not inside:
            raise _Refused(where, "not under debian/<package>/package.json, debian/<package>/root/, "
                           "rendered/<directory>/ or documents/<file> of what it lists")
        if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
            raise _Refused(where, f"expected a sha256 (64 hex digits), got {digest!r}")
    for p in packages:
        if f"debian/{p}/package.json" not in files:
            raise _Refused(f"{MANIFEST}: packages: {p!r}", f"no debian/{p}/package.json in files")
    for d in documents:
        for n in (f"documents/{d}", f"documents/{d}.json"):
            if n not in files:
                raise _Refused(f"{MANIFEST}: documents: {d!r}", f"no {n} in files")
    return packages, rendered, documents, files


def _read_all(src: BinaryIO) -> bytes:
    """All of ``src``, read in chunks (tarfile's stream refuses a single read over _MAX_READ)."""
    return b"".join(iter(lambda: src.read(_CHUNK), b""))


def _copy_member(src: BinaryIO, dst: Path, size: int) -> str:
    """Write ``size`` bytes of ``src`` to the new file ``dst`` in chunks; returns their sha256."""
    h = hashlib.sha256()
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    with os.fdopen(fd, "wb") as out:
        left = size
        while left:
            chunk = src.read(min(_CHUNK, left))
            if not chunk:
                raise tarfile.ReadError("unexpected end of data")
            h.update(chunk)
            out.write(chunk)
            left -= len(chunk)
    return h.hexdigest()


def _extract(f: BinaryIO, new: Path, limits: UnpackLimits) -> tuple[list[str], list[str], list[str], dict[str, str], dict[str, tuple[int, str]]]:
    """Stream the archive into ``new``: MANIFEST.json first (as ``pack`` writes it), then only the
    files it lists, each once, hashed while written, within ``limits``. Returns the manifest and
    {member: (size, sha256)} of what was written. Raises _Refused."""
    stream = _BoundedStream(gzip.GzipFile(fileobj=f, mode="rb"), limits.total_bytes + limits.manifest_bytes
                            + 2048 * (limits.members + 2))
    got: dict[str, tuple[int, str]] = {}
    packages: list[str] = []
    rendered: list[str] = []
    documents: list[str] = []
    files: dict[str, str] = {}
    ancestors: set[str] = set()
    total = 0
    where = "archive"
    try:
        tar = tarfile.open(fileobj=stream, mode="r:")  # type: ignore[call-overload]
        count = 0
        for m in tar:
            count += 1
            where = repr(m.name)
            if count > limits.members + 1:
                raise _Refused(where, f"more than {limits.members} members (the limit)")
            if count == 1:
                if m.name != MANIFEST or not m.isreg():
                    raise _Refused(where, f"the first member must be the regular file {MANIFEST}")
                if m.size > limits.manifest_bytes:
                    raise _Refused(MANIFEST, f"{_size(m.size)}, more than the limit of {_size(limits.manifest_bytes)}")
                head = tar.extractfile(m)
                assert head is not None
                packages, rendered, documents, files = _manifest(_read_all(head), limits)
                ancestors = {"/".join(n.split("/")[:i]) for n in files for i in range(1, n.count("/") + 1)}
                continue
            if m.isdir() and m.name in ancestors:
                (new / m.name).mkdir(parents=True, exist_ok=True)
                continue
            if not m.isreg() or m.issparse():
                raise _Refused(where, "not a regular file (links, devices, FIFOs and sparse files are refused)")
            if m.name not in files:
                raise _Refused(where, f"not listed in {MANIFEST}")
            if m.name in got:
                raise _Refused(where, "appears twice in the archive")
            if m.size > limits.member_bytes:
                raise _Refused(where, f"{_size(m.size)}, more than the limit of {_size(limits.member_bytes)} per file")
            total += m.size
            if total > limits.total_bytes:
                raise _Refused(where, f"the files add up to more than the limit of {_size(limits.total_bytes)}")
            dst = new / m.name
            dst.parent.mkdir(parents=True, exist_ok=True)
            src = tar.extractfile(m)
            assert src is not None
            got[m.name] = (m.size, _copy_member(src, dst, m.size))
            if got[m.name][1] != files[m.name]:
                raise _Refused(where, f"fails its sha256 in {MANIFEST}")
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile, UnicodeError) as e:
        problem = " ".join(str(e).split()) or type(e).__name__
        raise _Refused(where if where != "archive" else "archive",
                       f"truncated or corrupt archive ({problem})") from None
    if not files and not got:
        raise _Refused("archive", f"no {MANIFEST} (not a tokbench data archive)")
    missing = [n for n in files if n not in got]
    if missing:
        raise _Refused(repr(missing[0]), f"listed in {MANIFEST} but missing from the archive ({len(missing)} missing)")
    return packages, rendered, documents, files, got


def _check_packages(new: Path, packages: list[str], got: dict[str, tuple[int, str]]) -> None:
    """Each package's package.json passes the cache's own checks (``sources.fetch``) and lists
    every file of its root/ with the size and sha256 the archive gave, as a run will check them."""
    from sources.fetch import _Damage, _read_meta

    for p in packages:
        d = new / "debian" / p
        (d / "root").mkdir(exist_ok=True)  # --slim may leave a package no files
        try:
            meta = _read_meta(d, p)
        except _Damage as e:
            raise _Refused(f"'debian/{p}/package.json'", str(e).replace(f"{d / 'package.json'}: ", "")) from None
        listed = meta.get("files")
        if listed is None:
            continue
        prefix = f"debian/{p}/root/"
        for name, (size, digest) in got.items():
            if name.startswith(prefix) and listed.get(name[len(prefix):]) != [size, digest]:
                raise _Refused(repr(name), f"not as debian/{p}/package.json lists it (size and sha256)")


def _recover(cache_dir: Path, log: Callable[[str], None]) -> list[Path]:
    """Under the unpack lock: put back package directories a killed unpack had moved aside and
    remove its temporary directory (and ``.<name>.old`` of older tokbench versions)."""
    found: list[Path] = []
    aside: list[tuple[Path, Path]] = []  # (moved-aside copy, where it belongs)
    for work in cache_dir.iterdir():
        if _STALE_WORK.fullmatch(work.name) and work.is_dir() and not work.is_symlink():
            found.append(work)
            for kind in ("debian", "rendered", "documents"):
                old = work / "old" / kind
                if old.is_dir():
                    aside += [(o, cache_dir / kind / o.name) for o in old.iterdir()]
    for kind in ("debian", "rendered"):
        d = cache_dir / kind
        if d.is_dir():
            for o in d.iterdir():
                if o.name.startswith(".") and o.name.endswith(".old") and o.is_dir() and not o.is_symlink():
                    found.append(o)
                    aside.append((o, d / o.name[1:-4]))
    for old, dst in aside:
        if not dst.exists() and not dst.is_symlink():
            os.rename(old, dst)
            log(f"[data] {dst}: put back the copy an interrupted unpack had moved aside")
    for p in found:
        if p.exists():
            shutil.rmtree(p)
            log(f"[data] removed {p}, left by an interrupted unpack")
    return found


def _install(cache_dir: Path, work: Path, dirs: list[tuple[str, str]]) -> None:
    """Move each new directory into place, the old copy aside into ``work/old`` (renames on one
    file system); on any failure every step is undone in reverse, so the cache is as before."""
    done: list[tuple[Path, Path]] = []  # (from, to) of each rename made
    try:
        for kind, name in dirs:
            src, dst, old = work / "new" / kind / name, cache_dir / kind / name, work / "old" / kind / name
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst.exists() or dst.is_symlink():
                old.parent.mkdir(parents=True, exist_ok=True)
                os.rename(dst, old)
                done.append((dst, old))
            os.rename(src, dst)
            done.append((src, dst))
    except BaseException:
        for a, b in reversed(done):
            os.rename(b, a)
        raise


def unpack(archive: Path, cache_dir: Path, limits: UnpackLimits = UnpackLimits(),
           log: Callable[[str], None] | None = None, wait_s: float = _WAIT_S) -> dict[str, Any]:
    """Check ``archive`` whole against its manifest, then install each of its package (and
    rendered-text) directories into ``cache_dir``, replacing older copies; returns {packages,
    rendered, files}. Any problem is one ValueError line naming the archive and the member or
    manifest key, with the cache unchanged and no temporary directory left.

    One unpack at a time per cache (a POSIX lock on ``<cache>/.unpack.lock``; another waits up to
    ``wait_s`` seconds); under it, what a killed unpack left is put back or removed first."""
    log = log or (lambda s: None)
    archive = Path(archive)
    with _open_regular(archive) as f:
        lock = _UnpackLock(_mkdir(cache_dir), log)
        deadline, told = time.monotonic() + wait_s, False
        while True:
            try:
                lock.acquire()
                break
            except RunLocked as e:
                if time.monotonic() > deadline:
                    raise
                if not told:
                    log(f"[data] waiting: {e}")
                    told = True
                time.sleep(0.1)
        try:
            _recover(cache_dir, log)
            work = Path(tempfile.mkdtemp(prefix=_WORK_PREFIX, dir=cache_dir))
            try:
                new = work / "new"
                new.mkdir()
                try:
                    packages, rendered, documents, files, got = _extract(f, new, limits)
                    _check_packages(new, packages, got)
                except _Refused as e:
                    raise ValueError(f"data unpack: {archive}: {e}") from None
                except OSError as e:  # reading the archive, or writing below the cache (disk full)
                    raise ValueError(f"data unpack: {archive}: {e.strerror or e}"
                                     f"{': ' + str(e.filename) if e.filename else ''}; nothing changed") from None
                dirs = [("debian", p) for p in packages] + [("rendered", r) for r in rendered]
                for _kind, name in dirs:
                    (new / _kind / name).mkdir(parents=True, exist_ok=True)
                # each document file before its sidecar, which seals it (``sources.doccache``)
                dirs += [("documents", n) for d in documents for n in (d, f"{d}.json")]
                try:
                    _install(cache_dir, work, dirs)
                except OSError as e:
                    raise ValueError(f"data unpack: {archive}: installing into {cache_dir} failed, "
                                     f"nothing changed ({e.strerror or e}: {e.filename})") from None
            finally:
                shutil.rmtree(work, ignore_errors=True)
        finally:
            lock.release()
    return {"packages": packages, "rendered": rendered, "documents": documents, "files": len(files)}


class _UnpackLock(RunLock):
    """``RunLock`` on ``<cache>/.unpack.lock``: one unpack per cache directory."""

    def __init__(self, cache_dir: Path, log: Callable[[str], None]) -> None:
        super().__init__(cache_dir, log)
        self.path = self.root / _LOCK

    def _refuse(self, holder: dict[str, Any]) -> RunLocked:
        return RunLocked(f"data unpack: {self.root} is being unpacked into by {describe_holder(holder)}")


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p
