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
with the sha256 of every file. ``unpack`` checks every file against it before
anything is moved into the cache, writes each package directory atomically (a temporary
directory renamed into place), and refuses archive paths that leave the cache.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath
from typing import Any

from sources.fetch import FetchedPackage, check_package

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


def pack(suite: Any, cache_dir: Path, out: Path, slim: bool = False) -> dict[str, Any]:
    """Write the suite's prepared data to ``out`` (tar.gz). Returns {packages, files, bytes}."""
    manifest: dict[str, str] = {}
    files: list[tuple[Path, str]] = []
    required, optional = suite_packages(suite)
    # an optional dictionary that was never fetched is left out (the run works without it)
    packages = required + [p for p in optional if (cache_dir / "debian" / p / "package.json").is_file()]
    rendered: list[str] = []
    for pkg in packages:
        pkg_files, rendered_dir = _files(cache_dir, pkg, slim)
        if rendered_dir.is_dir():
            rendered.append(rendered_dir.name)
        for f in pkg_files:
            name = f.relative_to(cache_dir).as_posix()
            manifest[name] = hashlib.sha256(f.read_bytes()).hexdigest()
            files.append((f, name))
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
        body = json.dumps({"packages": packages, "rendered": rendered, "files": manifest}, indent=1,
                          sort_keys=True).encode()
        info = tarfile.TarInfo(MANIFEST)
        info.size = len(body)
        tar.addfile(info, io.BytesIO(body))
        for f, name in files:
            tar.add(f, arcname=name, recursive=False)
    tmp.replace(out)
    return {"packages": packages, "rendered": rendered, "files": len(files), "bytes": out.stat().st_size}


def unpack(archive: Path, cache_dir: Path) -> dict[str, Any]:
    """Check ``archive`` against its manifest, then install each package directory into
    ``cache_dir/debian`` (replacing an older copy). Returns {packages, files}."""
    with tempfile.TemporaryDirectory(prefix="unpack.", dir=_mkdir(cache_dir)) as td:
        work = Path(td)
        try:
            tar = tarfile.open(archive, "r:gz")
        except (OSError, tarfile.TarError) as e:
            raise ValueError(f"data unpack: {archive} is not a tokbench data archive ({e})") from None
        with tar:
            members = tar.getmembers()
            for m in members:
                p = PurePosixPath(m.name)
                if p.is_absolute() or ".." in p.parts or not (m.isfile() or m.isdir()):
                    raise ValueError(f"data unpack: {archive}: refusing member {m.name!r}")
            tar.extractall(work, filter="data")
        mpath = work / MANIFEST
        if not mpath.is_file():
            raise ValueError(f"data unpack: {archive} has no {MANIFEST}")
        man = json.loads(mpath.read_text())
        for name, digest in man["files"].items():
            f = work / name
            if not f.is_file() or hashlib.sha256(f.read_bytes()).hexdigest() != digest:
                raise ValueError(f"data unpack: {archive}: {name} is missing or fails its sha256")
        (cache_dir / "debian").mkdir(parents=True, exist_ok=True)
        (cache_dir / "rendered").mkdir(parents=True, exist_ok=True)
        dirs = [("debian", pkg) for pkg in man["packages"]] + [("rendered", r) for r in man.get("rendered", [])]
        for _, pkg in dirs:  # every name checked before anything is installed
            if not pkg or "/" in pkg or "\\" in pkg or pkg.startswith("."):
                raise ValueError(f"data unpack: {archive}: refusing directory name {pkg!r}")
        for kind, pkg in dirs:
            src, dst = work / kind / pkg, cache_dir / kind / pkg
            old = dst.with_name(f".{pkg}.old")
            shutil.rmtree(old, ignore_errors=True)
            if dst.exists():
                dst.rename(old)
            src.rename(dst)  # same file system: atomic
            shutil.rmtree(old, ignore_errors=True)
    return {"packages": man["packages"], "rendered": man.get("rendered", []), "files": len(man["files"])}


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True, exist_ok=True)
    return p
