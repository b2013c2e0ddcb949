"""Fetch Debian packages into the user cache without root: ``apt-get download`` + ``dpkg -x``.

Layout (one directory per package; nothing is installed on the system)::

    $TOKBENCH_CACHE (default ~/.cache/tokbench)/debian/<package>/
        package.json   name, version, architecture, .deb file name, sha256, licences
        root/          the unpacked package tree (usr/share/...)

``package.json`` is written last, after ``root/`` is complete, so its presence means "done":
fetching is idempotent and a run never touches apt or the network once the cache holds the
package. Command line: ``python -m sources.fetch fortunes-de manpages-ja``.
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

from tqdm import tqdm

OWN_TEXT_HINT = (
    "fetch it on a machine with apt and copy the cache directory, or replace this entry with "
    "`source: files` pointing at your own UTF-8 text (see docs/multilingual.md)"
)


class SourceUnavailableError(ValueError):
    """A package a source needs is neither in the cache nor fetchable (one-line message)."""


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


def cached(cache_dir: Path, package: str) -> FetchedPackage | None:
    """The package if the cache holds a complete copy, else None (never touches apt)."""
    d = package_dir(cache_dir, package)
    meta = d / "package.json"
    if not meta.is_file() or not (d / "root").is_dir():
        return None
    m = json.loads(meta.read_text(encoding="utf-8"))
    return FetchedPackage(name=m["name"], version=m["version"], root=d / "root",
                          licences=tuple(m.get("licences", ())), deb=m.get("deb", ""),
                          sha256=m.get("sha256", ""))


def require(cache_dir: Path, package: str, source: str) -> FetchedPackage:
    """The cached package, or a SourceUnavailableError telling how to get it (used at run time,
    where the network must not be touched)."""
    pkg = cached(cache_dir, package)
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


def _unpack(deb: Path, dest: Path, package: str) -> None:
    """Unpack one .deb into ``dest/root`` and write ``dest/package.json`` last (atomically)."""
    fields = subprocess.run(["dpkg-deb", "-f", str(deb), "Package", "Version", "Architecture"],
                            capture_output=True, text=True, check=True).stdout
    info = dict(line.split(": ", 1) for line in fields.splitlines() if ": " in line)
    dest.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="root.", dir=dest))
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp)], check=True, capture_output=True)
    root = dest / "root"
    if root.exists():
        shutil.rmtree(root)
    tmp.rename(root)
    meta = {"name": info.get("Package", package), "version": info.get("Version", ""),
            "architecture": info.get("Architecture", ""), "deb": deb.name,
            "sha256": hashlib.sha256(deb.read_bytes()).hexdigest(),
            "licences": list(_read_licences(root, package))}
    part = dest / "package.json.part"
    part.write_text(json.dumps(meta, indent=1, ensure_ascii=False), encoding="utf-8")
    part.replace(dest / "package.json")


def fetch_packages(packages: Iterable[str], cache_dir: Path | None = None, source: str = "debian",
                   log: Callable[[str], None] | None = None,
                   progress: bool = True) -> dict[str, FetchedPackage]:
    """Make sure every package is unpacked in the cache; fetch the missing ones with one
    ``apt-get download`` call and a progress bar over unpacking. Returns {name: FetchedPackage}.

    Raises SourceUnavailableError (one line, naming the source and package) when apt is missing
    or cannot download a package."""
    cache_dir = cache_dir or default_cache_dir()
    names = list(dict.fromkeys(packages))
    out = {n: p for n in names if (p := cached(cache_dir, n)) is not None}
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
            got = cached(cache_dir, n)
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
