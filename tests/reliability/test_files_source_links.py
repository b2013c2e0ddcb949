"""The ``files`` source follows no symbolic link inside a folder or below a glob's fixed part —
one rule for ``paths: [d]`` and ``paths: ["d/**/*.txt"]`` — so a link loop (``d/self -> .``) is read
once and a link out of the tree (``d/etc -> /etc``) not at all; a path named whole may be a link.
Its provenance summarises the file list (count, bytes, a sha256 of the list, the first names)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from sources.base import SourceContext
from sources.files import LISTED_FILES, FilesSource


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    d = tmp_path / "d"
    (d / "sub").mkdir(parents=True)
    (d / ".hidden").mkdir()
    (d / "a.txt").write_text("alpha text")
    (d / "sub" / "b.txt").write_text("beta text")
    (d / ".hidden" / "h.txt").write_text("hidden")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside the tree")
    os.symlink(".", d / "self")  # a loop
    os.symlink(outside, d / "out")  # a folder out of the tree
    os.symlink(outside / "secret.txt", d / "leak.txt")  # a file out of the tree
    return tmp_path


def _ids(tree: Path, path: str) -> list[str]:
    ctx = SourceContext(base_dir=tree, cache_dir=tree / "cache", log=lambda s: None)
    return [rel for _, rel in FilesSource(paths=(path,), docs="file")._files(ctx)]


@pytest.mark.parametrize("path,expect", [
    ("d", [".hidden/h.txt", "a.txt", "sub/b.txt"]),
    ("d/**/*.txt", ["d/a.txt", "d/sub/b.txt"]),  # glob's rule: '*' and '**' skip dot names
    ("d/**", ["d/a.txt", "d/sub/b.txt"]),
    ("d/*.txt", ["d/a.txt"]),
    ("d/*/*.txt", ["d/sub/b.txt"]),
    ("d/.*/*.txt", ["d/.hidden/h.txt"]),
])
def test_no_link_is_followed(tree: Path, path: str, expect: list[str]) -> None:
    # before: the glob read a.txt 45 times through d/self/self/..., and secret.txt through both links
    assert _ids(tree, path) == expect


def test_a_link_named_whole_is_read(tree: Path) -> None:
    assert _ids(tree, "d/leak.txt") == ["leak.txt"]
    assert _ids(tree, "d/out") == ["secret.txt"]


def test_provenance_summarises_the_list(tmp_path: Path) -> None:
    d = tmp_path / "many"
    d.mkdir()
    for i in range(LISTED_FILES + 30):
        (d / f"f{i:03d}.txt").write_text("x" * (i + 1))
    ctx = SourceContext(base_dir=tmp_path, cache_dir=tmp_path / "cache", log=lambda s: None)
    prov = FilesSource(paths=("many",)).provenance(ctx)
    names = [f"f{i:03d}.txt" for i in range(LISTED_FILES + 30)]
    assert prov["n_files"] == LISTED_FILES + 30
    assert prov["bytes"] == sum(range(1, LISTED_FILES + 31))
    assert prov["files_sha256"] == hashlib.sha256("\n".join(names).encode()).hexdigest()
    assert prov["files"] == names[:LISTED_FILES]
