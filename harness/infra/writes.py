"""Atomic writes and the JSON the run writes: every file goes to a temporary file beside it and is
renamed into place (``core.files``), so a killed run never leaves a half-written file. JSON keeps
floats finite (NaN and inf become null) and text valid UTF-8.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from core.files import write_bytes_atomic, write_text_atomic


def stable_hash(obj: Any) -> str:
    """sha256 of the canonical JSON of ``obj`` (sorted keys): cache keys for models and cells."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:20]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file, fsync, rename), creating its folder; a
    failed write leaves no temp file and names ``path`` (``core.files``, the one writer)."""
    write_bytes_atomic(path, data, make_parents=True)


def atomic_write_text(path: Path, text: str) -> None:
    """UTF-8, atomically, creating the folder; lone surrogates become the raw bytes they carry
    (``surrogateescape``: CSV cells and JSON may hold a corpus's undecodable bytes)."""
    write_text_atomic(path, text, errors="surrogateescape", make_parents=True)


def _json_default(o: Any) -> Any:
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, (set, frozenset, tuple)):
        return list(o)
    if hasattr(o, "item"):
        return o.item()
    return str(o)


def _clean_floats(o: Any) -> Any:
    """JSON has no NaN: write null instead (readers treat it as missing)."""
    if isinstance(o, float):
        return None if not math.isfinite(o) else o
    if isinstance(o, dict):
        return {k: _clean_floats(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        if o and all(type(v) is float for v in o):  # a per-byte NLL list: no call per element
            return [v if math.isfinite(v) else None for v in o]
        return [_clean_floats(v) for v in o]
    return o


_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(obj: Any, indent: int | None = None) -> str:
    """JSON text that is always valid UTF-8: lone surrogates (invalid input bytes carried by
    ``surrogateescape``) are written as ``\\udcXX`` escapes, which json.loads gives back."""
    try:  # most objects hold no NaN or inf: one pass, no copy (a cell's rows are thousands of values)
        text = json.dumps(obj, default=_json_default, ensure_ascii=False, indent=indent, allow_nan=False)
    except ValueError:  # one does: the copy with null in their place
        text = json.dumps(_clean_floats(obj), default=_json_default, ensure_ascii=False, indent=indent,
                          allow_nan=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, dumps(obj, indent=2) + "\n")


def torch_bytes(obj: Any) -> bytes:
    """What ``torch.save`` writes for ``obj``, as bytes (written atomically, or sealed)."""
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def atomic_torch_save(obj: Any, path: Path) -> None:
    atomic_write_bytes(path, torch_bytes(obj))


CSV_FORMULA_STARTS = "=+-@\t\r"  # a spreadsheet runs a cell starting with one of these


def csv_text(v: Any) -> Any:
    """A CSV cell: non-finite floats empty; a string a spreadsheet would run as a formula (it
    starts with = + - @ tab or CR and is not a number) gets OWASP's prefix, a single quote, which
    ``reports.load`` removes again. Numbers are written as numbers, so ``-0.5`` stays a number."""
    if isinstance(v, float) and not math.isfinite(v):
        return ""
    if isinstance(v, str) and v and v[0] in CSV_FORMULA_STARTS:
        try:
            float(v)
        except ValueError:
            return "'" + v
    return v


def write_csv(path: Path, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: csv_text(v) for k, v in r.items()})
    atomic_write_text(path, out.getvalue())
