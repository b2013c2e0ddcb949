"""core.files: the one atomic writer — whole file or the old one, usual permissions, no
temporary file left, an error that names the file, and the two policies for unencodable text."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

import core.files
from core.files import write_bytes_atomic, write_text_atomic


def test_writes_whole_with_the_usual_permissions(tmp_path: Path) -> None:
    p = tmp_path / "a.bin"
    write_bytes_atomic(p, b"\x00\x01abc")
    assert p.read_bytes() == b"\x00\x01abc"
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask  # not mkstemp's 0600
    write_bytes_atomic(p, b"new")  # replaces
    assert p.read_bytes() == b"new" and os.listdir(tmp_path) == ["a.bin"]


def test_make_parents(tmp_path: Path) -> None:
    p = tmp_path / "x" / "y" / "f.txt"
    with pytest.raises(FileNotFoundError):
        write_bytes_atomic(p, b"1")  # reports write into folders they made: no silent mkdir
    write_bytes_atomic(p, b"1", make_parents=True)
    assert p.read_bytes() == b"1"


def test_a_failed_write_keeps_the_old_file_names_the_path_and_leaves_no_tmp(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    p = tmp_path / "f.json"
    write_bytes_atomic(p, b"old")

    def full(_fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")  # as fsync on a full disk: no file name

    monkeypatch.setattr(core.files.os, "fsync", full)
    with pytest.raises(OSError) as e:
        write_bytes_atomic(p, b"new" * 1000)
    assert e.value.errno == errno.ENOSPC and e.value.filename == str(p)
    assert p.read_bytes() == b"old" and os.listdir(tmp_path) == ["f.json"]


def test_text_policies_for_lone_surrogates(tmp_path: Path) -> None:
    text = "caf\udce9 ok"  # byte 0xE9 of a Latin-1 file read with surrogateescape
    write_text_atomic(tmp_path / "r.md", text)
    assert (tmp_path / "r.md").read_bytes() == b"caf\\udce9 ok"  # valid UTF-8 for a report
    write_text_atomic(tmp_path / "r.csv", text, errors="surrogateescape")
    assert (tmp_path / "r.csv").read_bytes() == b"caf\xe9 ok"  # the corpus's own byte back
    write_text_atomic(tmp_path / "u.txt", "naïve")
    assert (tmp_path / "u.txt").read_bytes() == "naïve".encode()


def test_parts_put_together_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``write_parts_atomic``: the parts' bytes in order, usual permissions, the parts gone; a
    failure midway leaves the old file whole, no temporary file of its own, and the parts."""
    from core.files import part_file, write_parts_atomic

    p = tmp_path / "samples.jsonl"
    names = []
    for data in (b'{"a": 1}\n', b"", "caf\u00e9\n".encode()):
        fd, name = part_file(p)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        names.append(name)
    assert all(Path(n).name.startswith(".samples.jsonl.part.") and n.endswith(".tmp") for n in names)
    write_parts_atomic(p, names)
    assert p.read_bytes() == '{"a": 1}\ncafé\n'.encode() and os.listdir(tmp_path) == ["samples.jsonl"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(p.stat().st_mode) == 0o666 & ~umask
    fd, name = part_file(p)
    os.close(fd)
    with pytest.raises(FileNotFoundError):
        write_parts_atomic(p, [name, str(tmp_path / "missing")])
    assert p.read_bytes() == '{"a": 1}\ncafé\n'.encode()
    assert sorted(os.listdir(tmp_path)) == sorted(["samples.jsonl", Path(name).name])
