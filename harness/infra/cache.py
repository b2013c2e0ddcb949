"""Checksummed cache files: every model, partial checkpoint and cell carries a sha256 of its
payload, verified on load. A file that fails (empty, truncated, edited, from an older format) is
reported on one line naming it, removed, and recomputed — never trusted, never a crash.

    write_sealed_json(path, {"row": ...})      # {"sha256": "<hex>", "payload": {...}}
    cell = read_sealed_json(path)              # raises CacheDamaged(reason)
    write_sealed_torch(path, state_dict)       # torch file {"sha256", "payload": <torch bytes>}
    state = read_sealed_torch(path, "cpu")     # weights_only=True on both layers

JSON: the checksum covers ``results.dumps(payload)`` (compact), which is recomputed from the
parsed payload on load; JSON floats round-trip exactly, so an edited digit changes it.
Torch: the payload is the ``torch.save`` bytes of the object, stored as ``bytes`` inside an outer
``torch.save`` dict (both loaded with ``weights_only=True``).

Files are written with ``results.atomic_write_bytes`` (temporary file + fsync + rename); a kill
between the write and the rename leaves a ``.<name>.<random>.tmp`` file, which
``remove_stale_tmp`` deletes at the start of the next run (under the run-directory lock).
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from harness.infra.writes import atomic_write_bytes, dumps, torch_bytes

SEAL_KEYS = ("sha256", "payload")


class CacheDamaged(Exception):
    """A cache file that cannot be trusted; ``str(e)`` says why (one line)."""


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _payload_bytes(payload: Any) -> bytes:
    return dumps(payload).encode("utf-8", "surrogatepass")


def sealed_json_text(payload: Any) -> str:
    """The file text of a sealed JSON: ``{"sha256": <hex of dumps(payload)>, "payload": ...}``."""
    text = dumps(payload)
    return f'{{"sha256": "{_digest(text.encode("utf-8", "surrogatepass"))}", "payload": {text}}}\n'


def write_sealed_json(path: Path, payload: Any) -> None:
    atomic_write_bytes(path, sealed_json_text(payload).encode("utf-8", "surrogatepass"))


# A sealed file as ``sealed_json_text`` writes it: this prefix, 64 hex digits, the separator,
# the payload's text (the bytes the digest covers), then the closing brace and newline.
_SEAL_HEAD = b'{"sha256": "'
_SEAL_SEP = b'", "payload": '
_SEAL_TEXT = len(_SEAL_HEAD) + 64 + len(_SEAL_SEP)


def _as_written(raw: bytes) -> Any:
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
    if _digest(text).encode("ascii") != raw[len(_SEAL_HEAD) : len(_SEAL_HEAD) + 64]:
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
    payload = _as_written(raw)
    if payload is not None:
        return payload
    try:
        obj = json.loads(raw.decode("utf-8", "surrogateescape"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise CacheDamaged(f"not valid JSON (truncated?): {e.msg if hasattr(e, 'msg') else e}") from None
    if not isinstance(obj, dict) or set(obj) != set(SEAL_KEYS) or not isinstance(obj["sha256"], str):
        raise CacheDamaged("no checksum (damaged, or written by an older tokbench)")
    if _digest(_payload_bytes(obj["payload"])) != obj["sha256"]:
        raise CacheDamaged("checksum mismatch (the file was changed after it was written)")
    return obj["payload"]


def write_sealed_torch(path: Path, obj: Any) -> None:
    data = torch_bytes(obj)
    atomic_write_bytes(path, torch_bytes({"sha256": _digest(data), "payload": data}))


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
    if not isinstance(outer, dict) or set(outer) != set(SEAL_KEYS) or not isinstance(outer["payload"], bytes):
        raise CacheDamaged("no checksum (damaged, or written by an older tokbench)")
    if _digest(outer["payload"]) != outer["sha256"]:
        raise CacheDamaged("checksum mismatch (the file was changed after it was written)")
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
