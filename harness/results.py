"""The results store: a run directory with atomic writes, a model cache and per-cell files.

    runs/<suite>/
      run.json          schema version, resolved suite, versions, hardware, data, encoders, timings
      results.csv       one row per cell (assembled from cells/)
      samples.jsonl     one row per (cell, document)
      buckets.csv       per-word analysis buckets (if any analysis ran)
      cells/<key>.json  one finished cell each — the unit of resume
      models/<key>.pt   trained models (state_dict), loaded with weights_only=True
      report.html       the report

Every write goes to a temporary file in the same directory and is renamed into place, so a
killed run never leaves a half-written file that a later run would trust.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import torch


def stable_hash(obj: Any) -> str:
    """sha256 of the canonical JSON of ``obj`` (sorted keys): cache keys for models and cells."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:20]


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8", "surrogateescape"))  # CSV cells may carry raw bytes


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
        return [_clean_floats(v) for v in o]
    return o


_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(obj: Any, indent: int | None = None) -> str:
    """JSON text that is always valid UTF-8: lone surrogates (invalid input bytes carried by
    ``surrogateescape``) are written as ``\\udcXX`` escapes, which json.loads gives back."""
    text = json.dumps(_clean_floats(obj), default=_json_default, ensure_ascii=False, indent=indent, allow_nan=False)
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def atomic_write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, dumps(obj, indent=2) + "\n")


def atomic_torch_save(obj: Any, path: Path) -> None:
    buf = io.BytesIO()
    torch.save(obj, buf)
    atomic_write_bytes(path, buf.getvalue())


def write_csv(path: Path, rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> None:
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: ("" if isinstance(v, float) and not math.isfinite(v) else v) for k, v in r.items()})
    atomic_write_text(path, out.getvalue())


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> None:
    atomic_write_text(path, "".join(dumps(r) + "\n" for r in rows))


class RunDir:
    """Paths and helpers of one run directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.cells = self.root / "cells"
        self.models = self.root / "models"

    def model_path(self, key: str) -> Path:
        return self.models / f"{key}.pt"

    def model_meta_path(self, key: str) -> Path:
        return self.models / f"{key}.json"

    def partial_path(self, key: str) -> Path:
        return self.models / f"{key}.partial.pt"

    def cell_path(self, key: str) -> Path:
        return self.cells / f"{key}.json"

    def load_cell(self, key: str) -> dict[str, Any] | None:
        p = self.cell_path(key)
        if not p.exists():
            return None
        try:
            return json.loads(p.read_text(encoding="utf-8", errors="surrogateescape"))
        except json.JSONDecodeError:
            return None  # an unreadable cell is recomputed, never trusted

    def save_cell(self, key: str, cell: dict[str, Any]) -> None:
        atomic_write_json(self.cell_path(key), cell)
