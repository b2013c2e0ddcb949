"""Sealed cache files: every model, partial checkpoint and cell carries an HMAC-SHA256 of its
payload under a secret key of its directory, verified on load. A file that fails (empty,
truncated, edited, re-sealed without the key, from an older format) is reported on one line
naming it, removed, and recomputed — never trusted, never a crash.

    write_sealed_json(path, {"row": ...})      # {"hmac": "<hex>", "payload": {...}}
    cell = read_sealed_json(path)              # raises CacheDamaged(reason)
    write_sealed_torch(path, state_dict)       # torch file {"hmac", "payload": <torch bytes>}
    state = read_sealed_torch(path, "cpu")     # weights_only=True on both layers

What the seal protects against (docs/reliability.md, section 3): accidental damage, and a
writer who can change the files but cannot read the key — another user or process with write
access to the directory, or a script that edits a cell and re-seals it with a plain sha256 or
with ``sealed_json_text`` and a key of its own. The key is ``<directory>/.seal.key``: 32 random
bytes, created on first use with mode 0600; a key file that is not a private regular file of the
user running tokbench (a symlink, another owner, readable or writable by others, the wrong
size) is not trusted and is replaced, which makes every file it sealed fail and be recomputed.
Not protected: anyone who can read the key (the same Unix user, root) can forge any file, and a
writer may delete files or the key (which costs recomputation, never a wrong number).

JSON: the MAC covers ``results.dumps(payload)`` (compact), which is recomputed from the parsed
payload on load; JSON floats round-trip exactly, so an edited digit changes it.
Torch: the payload is the ``torch.save`` bytes of the object, stored as ``bytes`` inside an outer
``torch.save`` dict (both loaded with ``weights_only=True``).

Files are written with ``results.atomic_write_bytes`` (temporary file + fsync + rename); a kill
between the write and the rename leaves a ``.<name>.<random>.tmp`` file, which
``remove_stale_tmp`` deletes at the start of the next run (under the run-directory lock).
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import io
import json
import os
import secrets
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from harness.infra.writes import atomic_write_bytes, dumps, torch_bytes

SEAL_KEYS = ("hmac", "payload")
KEY_NAME = ".seal.key"
_KEY_BYTES = 32
_KEYS: dict[str, bytes] = {}  # directory -> its key, read once per process
_UNKEYED = "sealed with a plain sha256, not with this cache's key (written by an older tokbench, or forged)"


class CacheDamaged(Exception):
    """A cache file that cannot be trusted; ``str(e)`` says why (one line)."""


def _read_key(path: Path) -> bytes | None:
    """The key in ``path`` if it is a private regular file of this user holding 32 bytes, else
    None (absent, or not to be trusted)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as e:
        if e.errno == errno.ELOOP:
            return None  # a symlink: not trusted
        raise
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if (not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077
                or st.st_size != _KEY_BYTES):
            return None
        key = f.read(_KEY_BYTES + 1)
    return key if len(key) == _KEY_BYTES else None


def _new_key(path: Path, replace: bool) -> None:
    """Write a fresh key at ``path`` (mode 0600, fsynced): linked into place when absent (a
    concurrent creator's key wins), or renamed over an untrusted one."""
    tmp = path.with_name(f"{KEY_NAME}.{secrets.token_hex(8)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(_KEY_BYTES))
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass
    finally:
        if tmp.exists():
            tmp.unlink()


def seal_key(directory: Path) -> bytes:
    """The secret key that seals the files of ``directory`` (``<directory>/.seal.key``, created on
    first use; one that is not to be trusted is replaced, with a warning line)."""
    directory = Path(directory).absolute()
    name = str(directory)
    if name not in _KEYS:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / KEY_NAME
        key = _read_key(path)
        if key is None:
            untrusted = path.exists() or path.is_symlink()
            if untrusted:
                print(f"[cache] warning: {path}: not a private 32-byte key file of this user; replaced, "
                      "files it sealed are recomputed", file=sys.stderr)
            _new_key(path, replace=untrusted)
            key = _read_key(path)
            if key is None:
                raise CacheDamaged(f"{path}: the seal key cannot be created as a private file")
        _KEYS[name] = key
    return _KEYS[name]


def _digest(data: bytes, key: bytes) -> str:
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def _same(a: Any, b: str) -> bool:
    return isinstance(a, str) and hmac.compare_digest(a.encode("ascii", "replace"), b.encode("ascii"))


def _payload_bytes(payload: Any) -> bytes:
    return dumps(payload).encode("utf-8", "surrogatepass")


def sealed_json_text(payload: Any, key: bytes) -> str:
    """The file text of a sealed JSON: ``{"hmac": <HMAC-SHA256 of dumps(payload)>, "payload": ...}``."""
    text = dumps(payload)
    return f'{{"hmac": "{_digest(text.encode("utf-8", "surrogatepass"), key)}", "payload": {text}}}\n'


def write_sealed_json(path: Path, payload: Any) -> None:
    key = seal_key(Path(path).parent)
    atomic_write_bytes(path, sealed_json_text(payload, key).encode("utf-8", "surrogatepass"))


# A sealed file as ``sealed_json_text`` writes it: this prefix, 64 hex digits, the separator,
# the payload's text (the bytes the digest covers), then the closing brace and newline.
_SEAL_HEAD = b'{"hmac": "'
_SEAL_SEP = b'", "payload": '
_SEAL_TEXT = len(_SEAL_HEAD) + 64 + len(_SEAL_SEP)


def _as_written(raw: bytes, key: bytes) -> Any:
    """The payload of a file exactly as ``sealed_json_text`` writes it whose digest matches
    the payload's text as it lies in the file, else None (the caller then checks the parsed
    payload). Why: checking the text in place skips re-encoding the parsed payload, and the run's
    results files read every cell (a 1.3 MB cell on the VM: 23.6 → 8.8 ms,
    ``benchmarks/bench_assemble.py``, ``benchmarks/results/assemble_cpu_s26.log``). A file whose payload text was changed
    fails here and is checked in full (where only a change of formatting passes, as before)."""
    if not (raw.startswith(_SEAL_HEAD) and raw[_SEAL_TEXT - len(_SEAL_SEP) : _SEAL_TEXT] == _SEAL_SEP
            and raw.endswith(b"}\n")):
        return None
    text = raw[_SEAL_TEXT:-2]
    if not hmac.compare_digest(_digest(text, key).encode("ascii"), raw[len(_SEAL_HEAD) : len(_SEAL_HEAD) + 64]):
        return None
    try:
        return json.loads(text.decode("utf-8", "surrogateescape"))
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def read_sealed_json(path: Path) -> Any:
    """The payload of a sealed JSON file; CacheDamaged if it is missing a seal or fails it."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise CacheDamaged(f"unreadable ({e.strerror or e})") from None
    if not raw.strip():
        raise CacheDamaged("empty file")
    key = seal_key(Path(path).parent)
    payload = _as_written(raw, key)
    if payload is not None:
        return payload
    try:
        obj = json.loads(raw.decode("utf-8", "surrogateescape"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CacheDamaged(f"not valid JSON (truncated?): {e.msg if hasattr(e, 'msg') else e}") from None
    if isinstance(obj, dict) and set(obj) == {"sha256", "payload"}:
        raise CacheDamaged(_UNKEYED)
    if not isinstance(obj, dict) or set(obj) != set(SEAL_KEYS) or not isinstance(obj["hmac"], str):
        raise CacheDamaged("no checksum (damaged, or written by an older tokbench)")
    if not _same(obj["hmac"], _digest(_payload_bytes(obj["payload"]), key)):
        raise CacheDamaged("checksum mismatch (the file was changed after it was written, or sealed without this cache's key)")
    return obj["payload"]


def write_sealed_torch(path: Path, obj: Any) -> None:
    data = torch_bytes(obj)
    atomic_write_bytes(path, torch_bytes({"hmac": _digest(data, seal_key(Path(path).parent)), "payload": data}))


def read_sealed_torch(path: Path, map_location: Any = "cpu") -> Any:
    """The object saved by ``write_sealed_torch``; CacheDamaged if empty, truncated or changed."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise CacheDamaged(f"unreadable ({e.strerror or e})") from None
    if not raw:
        raise CacheDamaged("empty file")
    try:
        outer = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises RuntimeError / UnpicklingError / EOFError on torn files
        raise CacheDamaged(f"not a readable torch file (truncated?): {type(e).__name__}") from None
    if isinstance(outer, dict) and set(outer) == {"sha256", "payload"}:
        raise CacheDamaged(_UNKEYED)
    if not isinstance(outer, dict) or set(outer) != set(SEAL_KEYS) or not isinstance(outer["payload"], bytes):
        raise CacheDamaged("no checksum (damaged, or written by an older tokbench)")
    if not _same(outer["hmac"], _digest(outer["payload"], seal_key(Path(path).parent))):
        raise CacheDamaged("checksum mismatch (the file was changed after it was written, or sealed without this cache's key)")
    try:
        return torch.load(io.BytesIO(outer["payload"]), map_location=map_location, weights_only=True)
    except Exception as e:
        raise CacheDamaged(f"payload does not load: {type(e).__name__}") from None


def discard(path: Path, reason: str, log: Callable[[str], None]) -> None:
    """Report a damaged cache file on one line and remove it so it is recomputed."""
    log(f"[cache] warning: {path}: {reason}; removed, recomputing")
    try:
        Path(path).unlink()
    except FileNotFoundError:
        pass


def remove_stale_tmp(root: Path) -> list[Path]:
    """Delete temporary files a killed writer left (``.<name>.*.tmp``, see ``atomic_write_bytes``)
    under ``root`` and one level of subfolders; call only while holding the run-directory lock."""
    root = Path(root)
    if not root.is_dir():
        return []
    found = list(root.glob(".*.tmp")) + list(root.glob("*/.*.tmp"))
    for p in found:
        try:
            p.unlink()
        except FileNotFoundError:
            pass
    return found
