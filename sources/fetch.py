"""Fetch Debian packages into the user cache without root: ``apt-get download`` + ``dpkg -x``.

Layout (one directory per package; nothing is installed on the system)::

    $TOKBENCH_CACHE (default ~/.cache/tokbench)/debian/<package>/
        package.json          name, version, architecture, .deb file name, sha256, licences,
                              ``files`` (manifest of root/), ``checksum`` (of package.json itself)
        package.deb           the downloaded .deb, kept so a damaged root/ is rebuilt offline
        package.deb.sha256    its sha256 (``sha256sum -c`` format), readable without package.json
        root/                 the unpacked package tree (usr/share/...)

``package.json`` is written last (atomically, fsynced), after ``root/`` is complete, so its
presence means "done": fetching is idempotent and a run never touches apt or the network once
the cache holds the package. Command line: ``python -m sources.fetch fortunes-de manpages-ja``.

Integrity (nothing in the cache is trusted blindly; see docs/sources.md):

* ``package.json`` is validated (a JSON object with the expected fields and types, ``name`` equal
  to the package) and carries ``checksum``, a sha256 of its other fields.
* ``files`` maps every regular file of ``root/`` to ``[size, sha256]`` and ``links`` every
  symlink to its target. ``check_package`` walks the tree and compares: a file whose size or
  hash differs, a symlink pointing elsewhere, or a file the manifest does not list is damage.
  A listed file that is absent is not: ``tokbench data pack --slim`` leaves out on purpose the
  files no source reads (the data fingerprints in run.json record what a run did read).
* Cost: hashing is done once per process and package (``_VERIFIED``, keyed by package.json's
  stat): python3.11-doc's 71 MB / 1,076 files hash in about 0.1 s from the page cache, less
  than importing torch, and far less than the run that reads them. A per-file lazy check would
  have to route every reader (groff, zipfile, Hunspell in ``perturbations``) through this
  module; a stat-only check would miss an edit that keeps the size.
* Damage found at run time (``require``) is repaired from ``package.deb`` when it is present and
  matches ``package.deb.sha256`` (``dpkg-deb -x`` again, no network); otherwise the run stops
  with one line naming the damaged file and the command that restores it. ``fetch_packages``
  (``tokbench data prepare``) repairs the same way, and downloads the package again when the
  kept .deb cannot help.
* Entries written before manifests existed (no ``files`` key) get their metadata validated but
  no tree check; deleting ``debian/<package>/`` and running ``tokbench data prepare SUITE``
  rewrites them with one.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from core.files import write_text_atomic

OWN_TEXT_HINT = (
    "fetch it on a machine with apt and copy the cache directory, or replace this entry with "
    "`source: files` pointing at your own UTF-8 text (see docs/multilingual.md)"
)

META = "package.json"
DEB = "package.deb"
DEB_SUM = "package.deb.sha256"
_HEX64 = re.compile(r"[0-9a-f]{64}")

# package dir -> stat signature of its package.json when its tree last passed a full check in
# this process: ``require`` runs several times per source (documents, provenance, each member of
# a mixture), and the tree is hashed only the first time.
_VERIFIED: dict[str, tuple[int, int, int]] = {}


class SourceUnavailableError(ValueError):
    """A package a source needs is neither in the cache nor fetchable (one-line message)."""


class CacheDamagedError(SourceUnavailableError):
    """A cached package's metadata or unpacked tree fails its checks and could not be rebuilt
    from the kept .deb (one-line message naming the damaged file and how to restore it)."""


@dataclass(frozen=True)
class FetchedPackage:
    """A package unpacked in the cache. root: the ``dpkg -x`` tree."""

    name: str
    version: str
    root: Path
    licences: tuple[str, ...]
    deb: str
    sha256: str

    def provenance(self) -> dict[str, object]:
        return {"package": self.name, "version": self.version, "licences": list(self.licences),
                "deb": self.deb, "sha256": self.sha256}


def default_cache_dir() -> Path:
    """``$TOKBENCH_CACHE`` or ``~/.cache/tokbench``."""
    env = os.environ.get("TOKBENCH_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "tokbench"


def package_dir(cache_dir: Path, package: str) -> Path:
    if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]*", package):
        raise ValueError(f"invalid Debian package name {package!r}")
    return cache_dir / "debian" / package


# --------------------------------------------------------------------------------- integrity
class _Damage(Exception):
    """A check failed; the message names the file (``<path>: <problem>``)."""


def _meta_checksum(meta: dict[str, Any]) -> str:
    """sha256 of every field but ``checksum``, in a canonical JSON form."""
    body = {k: v for k, v in meta.items() if k != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _read_meta(d: Path, package: str) -> dict[str, Any]:
    """package.json of ``d``, validated; raises _Damage naming the file."""
    path = d / META
    try:
        m = json.loads(path.read_bytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise _Damage(f"{path}: not valid JSON ({' '.join(str(e).split())})") from None
    except OSError as e:
        raise _Damage(f"{path}: cannot be read ({e.strerror or e})") from None
    if not isinstance(m, dict):
        raise _Damage(f"{path}: expected a JSON object, got {type(m).__name__}")
    for key, kind in (("name", str), ("version", str), ("licences", list), ("deb", str),
                      ("sha256", str), ("files", dict), ("links", dict), ("checksum", str)):
        if key in ("name", "version") and key not in m:
            raise _Damage(f"{path}: missing key {key!r}")
        if key in m and not isinstance(m[key], kind):
            raise _Damage(f"{path}: {key!r} must be a JSON {'string' if kind is str else kind.__name__}, "
                          f"got {type(m[key]).__name__}")
    if m["name"] != package:
        raise _Damage(f"{path}: 'name' is {m['name']!r}, expected {package!r}")
    if not all(isinstance(x, str) for x in m.get("licences", ())):
        raise _Damage(f"{path}: 'licences' must be a list of strings")
    for rel, entry in m.get("files", {}).items():
        if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], int)
                and entry[0] >= 0 and isinstance(entry[1], str) and _HEX64.fullmatch(entry[1])):
            raise _Damage(f"{path}: manifest entry {rel!r} must be [size, sha256], got {entry!r}")
    if not all(isinstance(v, str) for v in m.get("links", {}).values()):
        raise _Damage(f"{path}: 'links' must map paths to symlink targets (strings)")
    if "checksum" in m and m["checksum"] != _meta_checksum(m):
        raise _Damage(f"{path}: its checksum does not match its contents (edited or damaged)")
    if "files" in m and "checksum" not in m:
        raise _Damage(f"{path}: a manifest without its checksum")
    return m


def _sha256_file(path: Path, sync: bool = False) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        # chunks, not hashlib.file_digest: that is Python 3.11+, and the project supports 3.10
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
        digest = h.hexdigest()
        if sync:  # dpkg-deb -x does not fsync; the manifest must describe what is on disk
            os.fsync(f.fileno())
    return digest


def _walk(root: Path) -> Iterable[tuple[str, Path]]:
    """(posix path relative to root, path) of every non-directory entry, sorted."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames + [n for n in dirnames if os.path.islink(os.path.join(dirpath, n))]):
            p = Path(dirpath, name)
            yield p.relative_to(root).as_posix(), p


def tree_manifest(root: Path, sync: bool = False) -> tuple[dict[str, list[Any]], dict[str, str]]:
    """(files: {relative path: [size, sha256]}, links: {relative path: symlink target}) of an
    unpacked tree. ``sync``: fsync every file while hashing it (at unpack time)."""
    files: dict[str, list[Any]] = {}
    links: dict[str, str] = {}
    for rel, p in _walk(root):
        if p.is_symlink():
            links[rel] = os.readlink(p)
        elif p.is_file():
            files[rel] = [p.stat().st_size, _sha256_file(p, sync)]
    return files, links


def _check_tree(d: Path, meta: dict[str, Any]) -> None:
    """Compare root/ with the manifest of package.json; raises _Damage naming the first bad file.
    Sizes are compared before any hashing, so a truncated file is found without reading others."""
    if "files" not in meta:
        return  # an entry from before manifests: metadata checked, tree not (module docstring)
    root = d / "root"
    files, links = meta["files"], meta.get("links", {})
    regular: list[tuple[str, Path]] = []
    for rel, p in _walk(root):
        if p.is_symlink():
            if links.get(rel) != os.readlink(p):
                raise _Damage(f"{p}: symlink not as unpacked from the .deb")
        elif not p.is_file():
            raise _Damage(f"{p}: not a regular file")
        elif rel not in files:
            raise _Damage(f"{p}: not in the manifest of {d / META} (added after unpacking)")
        elif p.stat().st_size != files[rel][0]:
            raise _Damage(f"{p}: {p.stat().st_size} bytes, the manifest says {files[rel][0]}")
        else:
            regular.append((rel, p))
    for rel, p in regular:
        if _sha256_file(p) != files[rel][1]:
            raise _Damage(f"{p}: sha256 differs from the manifest (edited or damaged)")


def _stat_key(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_ino, st.st_size, st.st_mtime_ns


def _load(d: Path, package: str) -> FetchedPackage | None:
    """The package in ``d`` after its checks (None when absent); raises _Damage."""
    meta_path = d / META
    if not meta_path.exists():
        return None
    if not (d / "root").is_dir():
        raise _Damage(f"{d / 'root'}: missing (package.json is there, the unpacked tree is not)")
    m = _read_meta(d, package)
    key = _stat_key(meta_path)
    if _VERIFIED.get(str(d)) != key:
        _check_tree(d, m)
        _VERIFIED[str(d)] = key
    return FetchedPackage(name=m["name"], version=m["version"], root=d / "root",
                          licences=tuple(m.get("licences", ())), deb=m.get("deb", ""),
                          sha256=m.get("sha256", ""))


def _kept_deb(d: Path) -> Path | None:
    """The kept .deb if it matches its recorded sha256 (read from package.deb.sha256, which
    survives a damaged package.json), else None."""
    deb, sums = d / DEB, d / DEB_SUM
    if not deb.is_file() or not sums.is_file():
        return None
    try:
        want = sums.read_text(encoding="utf-8").split()[0]
    except (OSError, UnicodeDecodeError, IndexError):
        return None
    if not _HEX64.fullmatch(want) or _sha256_file(deb) != want:
        return None
    return deb


def _repair(d: Path, package: str, problem: str, log: Callable[[str], None] | None) -> FetchedPackage | None:
    """Rebuild root/ and package.json from the kept, intact .deb; None when that is impossible
    (no kept .deb, it fails its checksum, or dpkg-deb is missing)."""
    deb = _kept_deb(d)
    if deb is None or shutil.which("dpkg-deb") is None:
        return None
    if log:
        log(f"[data] {problem}; rebuilding {package} from {deb}")
    try:
        _unpack(deb, d, package)
    except (OSError, subprocess.CalledProcessError):
        return None
    try:
        return _load(d, package)
    except _Damage:
        return None


def check_package(cache_dir: Path, package: str, source: str = "debian",
                  log: Callable[[str], None] | None = None) -> FetchedPackage | None:
    """The cached package after its integrity checks, rebuilt from the kept .deb when damaged;
    None when the cache does not hold it. Raises CacheDamagedError (one line: the damaged file
    and the command that restores it) when it is damaged and cannot be rebuilt offline."""
    d = package_dir(cache_dir, package)
    try:
        return _load(d, package)
    except _Damage as e:
        problem = str(e)
    _VERIFIED.pop(str(d), None)
    pkg = _repair(d, package, problem, log)
    if pkg is not None:
        return pkg
    raise CacheDamagedError(
        f"source {source!r}: cached Debian package {package!r} is damaged: {problem}; run "
        f"`tokbench data prepare SUITE` (or `python -m sources.fetch {package}`) where apt works "
        f"to fetch it again")


def check_metadata(cache_dir: Path, package: str, source: str = "debian") -> None:
    """For ``tokbench validate`` (cheap, read-only: no tree hashing, no repair): raise
    CacheDamagedError when the package's package.json is damaged and no intact kept .deb can
    rebuild it (a run would stop there); an absent package is fine (a run prepares it)."""
    d = package_dir(cache_dir, package)
    if not (d / META).exists():
        return
    try:
        _read_meta(d, package)
    except _Damage as e:
        if _kept_deb(d) is None:
            raise CacheDamagedError(
                f"source {source!r}: cached Debian package {package!r} is damaged: {e}; run "
                f"`tokbench data prepare SUITE` (or `python -m sources.fetch {package}`) where "
                "apt works to fetch it again") from None


def package_metadata(cache_dir: Path, package: str) -> dict[str, Any] | None:
    """The package's validated package.json (no tree hashing), or None when the cache lacks it or
    it is damaged."""
    d = package_dir(cache_dir, package)
    if not (d / META).exists():
        return None
    try:
        return _read_meta(d, package)
    except _Damage:
        return None


def cached(cache_dir: Path, package: str, log: Callable[[str], None] | None = None) -> FetchedPackage | None:
    """The package if the cache holds a complete, intact copy (rebuilt from the kept .deb when
    damaged), else None (never touches apt or the network)."""
    try:
        return check_package(cache_dir, package, log=log)
    except CacheDamagedError as e:
        if log:
            log(f"[data] {e}")
        return None


def _stderr(msg: str) -> None:
    """Default log of ``require``: a repair is news worth a line even without a progress log."""
    print(msg, file=sys.stderr)


def require(cache_dir: Path, package: str, source: str,
            log: Callable[[str], None] | None = _stderr) -> FetchedPackage:
    """The cached package, or a SourceUnavailableError telling how to get it (used at run time,
    where the network must not be touched). A damaged copy is rebuilt from the kept .deb or
    refused (CacheDamagedError, see ``check_package``)."""
    pkg = check_package(cache_dir, package, source, log)
    if pkg is None:
        raise SourceUnavailableError(
            f"source {source!r}: Debian package {package!r} is not in the cache {cache_dir}; "
            f"run `tokbench data prepare SUITE` (or `python -m sources.fetch {package}`) "
            f"where apt works, or {OWN_TEXT_HINT}")
    return pkg


def copyright_licences(text: str) -> tuple[str, ...]:
    """Licence names from a Debian copyright file: the ``License:`` fields of a DEP-5 file; for a
    free-form file, the well-known licence names it mentions."""
    if text.lstrip().startswith("Format:"):  # machine-readable (DEP-5)
        found = [m.group(1).strip() for m in re.finditer(r"^License:[ \t]*(\S.*)$", text, re.M)]
    else:
        names = {"GPL-3": "GPL-3", "GPL-2": "GPL-2", "GNU General Public License": "GPL",
                 "LGPL": "LGPL", "BSD": "BSD", "MIT": "MIT", "MPL-2.0": "MPL-2.0",
                 "Mozilla Public License": "MPL", "Apache": "Apache", "Artistic": "Artistic",
                 "Python Software Foundation": "PSF", "PSF": "PSF", "CC-BY-SA": "CC-BY-SA",
                 "public domain": "public-domain"}
        low = text.lower()
        found = [v for k, v in names.items() if k.lower() in low]
    return tuple(dict.fromkeys(found))  # first occurrence order, duplicates dropped


def _read_licences(root: Path, package: str) -> tuple[str, ...]:
    cp = root / "usr" / "share" / "doc" / package / "copyright"
    if not cp.is_file():  # some packages symlink their doc dir to another package's
        return ()
    return copyright_licences(cp.read_text(encoding="utf-8", errors="replace"))


def _apt_download(packages: list[str], workdir: Path, source: str) -> None:
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise SourceUnavailableError(
            f"source {source!r}: cannot fetch Debian package(s) {', '.join(packages)}: apt-get/"
            f"dpkg-deb not found on this system; {OWN_TEXT_HINT}")
    cmd = ["apt-get", "download", "-q"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        # As root apt drops privileges to _apt, which cannot write to a user's temp dir.
        cmd += ["-o", "APT::Sandbox::User=root"]
    proc = subprocess.run(cmd + packages, cwd=workdir, capture_output=True, text=True)
    if proc.returncode != 0:
        err = " ".join(line.strip() for line in proc.stderr.splitlines() if line.startswith("E:"))
        hint = ("(run `apt-get update` as root first if the package lists are empty) "
                if "Unable to locate" in err or "no installation candidate" in err else "")
        raise SourceUnavailableError(
            f"source {source!r}: `apt-get download {' '.join(packages)}` failed: "
            f"{err or proc.stderr.strip()[-300:]} {hint}— {OWN_TEXT_HINT}")


def _fsync_dir(path: Path) -> None:
    """Make a rename inside ``path`` durable (best effort: some filesystems refuse it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _unpack(deb: Path, dest: Path, package: str) -> None:
    """Unpack one .deb into ``dest/root``, keep the .deb as ``dest/package.deb`` (with its
    sha256 beside it), and write ``dest/package.json`` last, atomically and fsynced, with the
    manifest of the tree. ``deb`` may already be ``dest/package.deb`` (a rebuild)."""
    fields = subprocess.run(["dpkg-deb", "-f", str(deb), "Package", "Version", "Architecture"],
                            capture_output=True, text=True, check=True).stdout
    info = dict(line.split(": ", 1) for line in fields.splitlines() if ": " in line)
    dest.mkdir(parents=True, exist_ok=True)
    deb_sha = _sha256_file(deb, sync=True)
    deb_name = deb.name
    kept = dest / DEB
    if deb.resolve() != kept.resolve():
        # same filesystem (the download dir is under the cache): a rename, no copy
        os.replace(deb, kept)
        write_text_atomic(dest / DEB_SUM, f"{deb_sha}  {deb_name}\n")
    elif (dest / DEB_SUM).is_file():
        deb_name = (dest / DEB_SUM).read_text(encoding="utf-8").split(maxsplit=1)[-1].strip() or deb_name
    tmp = Path(tempfile.mkdtemp(prefix="root.", dir=dest))
    try:
        subprocess.run(["dpkg-deb", "-x", str(kept), str(tmp)], check=True, capture_output=True)
        files, links = tree_manifest(tmp, sync=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    root = dest / "root"
    if root.exists():
        shutil.rmtree(root)
    tmp.rename(root)
    _fsync_dir(dest)
    meta: dict[str, Any] = {
        "name": info.get("Package", package), "version": info.get("Version", ""),
        "architecture": info.get("Architecture", ""), "deb": deb_name, "sha256": deb_sha,
        "licences": list(_read_licences(root, package)), "files": files, "links": links}
    meta["checksum"] = _meta_checksum(meta)
    write_text_atomic(dest / META, json.dumps(meta, indent=1, ensure_ascii=False))
    _fsync_dir(dest)
    # the manifest was just made from these files: the next check need not hash them again
    _VERIFIED[str(dest)] = _stat_key(dest / META)


def fetch_packages(packages: Iterable[str], cache_dir: Path | None = None, source: str = "debian",
                   log: Callable[[str], None] | None = None,
                   progress: bool = True) -> dict[str, FetchedPackage]:
    """Make sure every package is unpacked in the cache; fetch the missing ones with one
    ``apt-get download`` call and a progress bar over unpacking. Returns {name: FetchedPackage}.

    Raises SourceUnavailableError (one line, naming the source and package) when apt is missing
    or cannot download a package."""
    cache_dir = cache_dir or default_cache_dir()
    names = list(dict.fromkeys(packages))
    # a damaged copy is rebuilt from its kept .deb here, or fetched again below
    out = {n: p for n in names if (p := cached(cache_dir, n, log)) is not None}
    missing = [n for n in names if n not in out]
    if not missing:
        return out
    for n in missing:
        package_dir(cache_dir, n)  # validates the name before running apt
    (cache_dir / "debian").mkdir(parents=True, exist_ok=True)
    if log:
        log(f"fetching {len(missing)} Debian package(s) into {cache_dir / 'debian'}")
    with tempfile.TemporaryDirectory(prefix="download.", dir=cache_dir / "debian") as td:
        work = Path(td)
        _apt_download(missing, work, source)
        debs = {p.name.split("_", 1)[0]: p for p in work.glob("*.deb")}
        for n in tqdm(missing, desc="unpacking", unit="pkg", disable=not progress, file=sys.stderr):
            if n not in debs:
                raise SourceUnavailableError(
                    f"source {source!r}: apt-get did not download {n!r}; {OWN_TEXT_HINT}")
            _unpack(debs[n], package_dir(cache_dir, n), n)
            got = check_package(cache_dir, n, source, log)
            assert got is not None
            out[n] = got
    return {n: out[n] for n in names}


def main(argv: list[str] | None = None) -> int:
    """``python -m sources.fetch PKG...``: fetch packages into the cache."""
    args = sys.argv[1:] if argv is None else argv
    if not args:
        print("usage: python -m sources.fetch PACKAGE...", file=sys.stderr)
        return 2
    try:
        got = fetch_packages(args, log=print)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for p in got.values():
        print(f"{p.name} {p.version} {', '.join(p.licences) or '?'} -> {p.root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
