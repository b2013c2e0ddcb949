"""The results store: a run directory with atomic writes, a model cache and per-cell files.

    runs/<suite>/
      run.json          schema version, resolved suite, versions, hardware, data, encoders, timings
      results.csv       one row per cell (assembled from cells/)
      samples.jsonl     one row per (cell, document)
      buckets.csv       per-word analysis buckets (if any analysis ran)
      cells/<key>.json  one finished cell each — the unit of resume
      models/<key>.pt   trained models (state_dict), loaded with weights_only=True
      report.html       the report
      .lock             the one-writer lock (harness/infra/lock.py)

Every write goes to a temporary file in the same directory and is renamed into place, so a
killed run never leaves a half-written file that a later run would trust. Cells, models and
partial checkpoints are sealed with an HMAC-SHA256 (harness/infra/cache.py) and recomputed if they fail it;
``<key>`` is always a hash, never user text.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


class RunDir:
    """Paths and helpers of one run directory. Cells and models are sealed with an HMAC-SHA256
    (``harness.infra.cache``); a damaged one is reported through ``log``, removed and recomputed."""

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
        from harness.infra.cache import CacheDamaged, discard, read_sealed_json, read_sealed_torch

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
        from harness.infra.cache import write_sealed_json, write_sealed_torch

        write_sealed_torch(self.model_path(key), state)
        write_sealed_json(self.model_meta_path(key), meta)

    def cell_path(self, key: str) -> Path:
        return self.cells / f"{key}.json"

    def load_cell(self, key: str) -> dict[str, Any] | None:
        """The cell, or None when it is absent or fails its checksum (then it is removed, with a
        one-line warning, and recomputed: never trusted)."""
        from harness.infra.cache import CacheDamaged, discard, read_sealed_json

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
        from harness.infra.cache import write_sealed_json

        write_sealed_json(self.cell_path(key), cell)
