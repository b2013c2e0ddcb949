"""The results store: a run directory with atomic writes, a model cache and per-cell files.

    runs/<suite>/
      run.json          schema version, resolved suite, versions, hardware, data, encoders, timings
      results.csv       one row per cell (assembled from cells/)
      samples.jsonl     one row per (cell, document)
      buckets.csv       per-word analysis buckets (if any analysis ran)
      cells/<key>.json  one finished cell each — the unit of resume
      models/<key>.pt   trained models (state_dict), loaded with weights_only=True
      report.html       the report
      .lock             the one-writer lock (harness/lock.py)

Every write goes to a temporary file in the same directory and is renamed into place, so a
killed run never leaves a half-written file that a later run would trust. Cells, models and
partial checkpoints are sealed with an HMAC-SHA256 (harness/cache.py) and recomputed if they fail it;
``<key>`` is always a hash, never user text.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
import sys
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


class RunDir:
    """Paths and helpers of one run directory. Cells and models are sealed with an HMAC-SHA256
    (``harness.cache``); a damaged one is reported through ``log``, removed and recomputed."""

    def __init__(self, root: Path, log: Any = None) -> None:
        self.root = Path(root)
        self.cells = self.root / "cells"
        self.models = self.root / "models"
        self.log = log or (lambda s: print(s, file=sys.stderr))

    def model_path(self, key: str) -> Path:
        return self.models / f"{key}.pt"

    def model_meta_path(self, key: str) -> Path:
        return self.models / f"{key}.json"

    def partial_path(self, key: str) -> Path:
        return self.models / f"{key}.partial.pt"

    def load_model(self, key: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(state_dict, meta) of a cached model, or None when absent or damaged. The meta JSON
        is written last and holds the sha256 of the .pt file, so it is the commit mark: a .pt
        without a valid meta (killed in between) or a .pt whose bytes changed is recomputed."""
        from harness.cache import CacheDamaged, discard, read_sealed_json, read_sealed_torch

        path, meta_path = self.model_path(key), self.model_meta_path(key)
        if not meta_path.exists():
            return None
        try:
            meta = read_sealed_json(meta_path)
            if not isinstance(meta, dict):
                raise CacheDamaged("not a model description")
        except CacheDamaged as e:
            discard(meta_path, str(e), self.log)
            return None
        if not path.exists():
            discard(meta_path, f"its model file {path.name} is missing", self.log)
            return None
        try:
            state = read_sealed_torch(path, "cpu")
            if not isinstance(state, dict):
                raise CacheDamaged("not a state_dict")
        except CacheDamaged as e:
            discard(path, str(e), self.log)
            discard(meta_path, f"its model file {path.name} was damaged", self.log)
            return None
        return state, meta

    def save_model(self, key: str, state: dict[str, Any], meta: dict[str, Any]) -> None:
        """Model first, then its meta (the commit mark), each sealed and atomic."""
        from harness.cache import write_sealed_json, write_sealed_torch

        write_sealed_torch(self.model_path(key), state)
        write_sealed_json(self.model_meta_path(key), meta)

    def cell_path(self, key: str) -> Path:
        return self.cells / f"{key}.json"

    def load_cell(self, key: str) -> dict[str, Any] | None:
        """The cell, or None when it is absent or fails its checksum (then it is removed, with a
        one-line warning, and recomputed: never trusted)."""
        from harness.cache import CacheDamaged, discard, read_sealed_json

        p = self.cell_path(key)
        if not p.exists():
            return None
        try:
            cell = read_sealed_json(p)
        except CacheDamaged as e:
            discard(p, str(e), self.log)
            return None
        if not isinstance(cell, dict) or not isinstance(cell.get("row"), dict):
            discard(p, "not a cell (no 'row')", self.log)
            return None
        return cell

    def save_cell(self, key: str, cell: dict[str, Any]) -> None:
        from harness.cache import write_sealed_json

        write_sealed_json(self.cell_path(key), cell)
