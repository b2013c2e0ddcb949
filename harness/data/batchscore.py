"""Scoring as a batch job: perturb once, score many cells per forward.

* ``PlanCache`` — the perturbed texts of one (eval set, perturbation, seed, mode), with their
  edit rates and word counts, stored once on disk under a key made of their content (the eval
  documents' fingerprint, the perturbation's name/id/params, the seed, the mode and the cut, and
  a hash of the code that made them: ``code_hash``), so every encoder, and every later run,
  reuses them. Each file carries a sha256 of its payload;
  a file that fails it is recomputed.
* ``perturb_many`` — computes missing plans in several forked CPU processes (a document's
  perturbed text depends only on (seed, perturbation, params, document id), so the order and
  the process that computes it never change the result); a process that dies is a one-line
  error, never a hang.

The harness then hands the windows of many cells to ``score_items`` at once (one model, all its
cells of an eval set), and splits the per-document scores back into cells.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import inspect
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.infra.accel import pool_map, usable_cpus
from harness.infra.writes import atomic_write_bytes, stable_hash

# A plan row: (perturbed text — whole document for mode full, prefix for clean_target —,
# edit rate, word count), or None where the document gives no scored window.
CachedRow = tuple[str, float, int] | None


class PlanCache:
    """Directory of gzip-JSON plan files, ``<dir>/<key[:2]>/<key>.json.gz``; first line of the
    decompressed file is the sha256 hex of the rest."""

    def __init__(self, root: Path | None) -> None:
        self.root = root

    @staticmethod
    def key(**parts: Any) -> str:
        return stable_hash(parts)

    def path(self, key: str) -> Path | None:
        return None if self.root is None else self.root / key[:2] / f"{key}.json.gz"

    def get(self, key: str) -> list[CachedRow] | None:
        p = self.path(key)
        if p is None or not p.exists():
            return None
        try:
            raw = gzip.decompress(p.read_bytes())
            digest, _, body = raw.partition(b"\n")
            if hashlib.sha256(body).hexdigest().encode() != digest:
                return None
            rows = json.loads(body)
        except (OSError, EOFError, ValueError):
            return None  # unreadable or corrupt: recompute
        return [None if r is None else (r[0], float(r[1]), int(r[2])) for r in rows]

    def put(self, key: str, rows: Sequence[CachedRow]) -> None:
        p = self.path(key)
        if p is None:
            return
        # ensure_ascii: lone surrogates (undecodable bytes under surrogateescape) survive as \\udcXX
        body = json.dumps([None if r is None else list(r) for r in rows], ensure_ascii=True).encode()
        atomic_write_bytes(p, gzip.compress(hashlib.sha256(body).hexdigest().encode() + b"\n" + body, 5))


_SHARED_CODE = ("harness/data/perturb.py", "harness/score/items.py", "harness/score/metrics.py", "core/metrics.py", "perturbations/base.py",
                "perturbations/measure.py")


@functools.cache
def code_hash(cls: type | None) -> str:
    """sha256 over the source files that decide a plan: the shared planning code (perturb, cut,
    edit rate, word count) and the perturbation's code. Part of the plan cache key, so editing a
    perturbation never serves stale perturbed texts.

    The perturbation's code is every module beside the class's, not only its own: a class often
    delegates (``case.random``'s ``perturb`` is in ``perturbations/chartable.py``, word choice in
    ``wordsel.py``), and a module the class imports is not known from the class. For the
    built-in ones that is all of ``perturbations/``; for a plugin, the ``.py`` files of its
    module's directory (not below it: a plugin beside a project's ``.venv`` must not hash it)."""
    root = Path(__file__).resolve().parents[2]  # the checkout (harness/data/ is two below)
    parts = [_files_hash(tuple(root / f for f in _SHARED_CODE), root)]
    if cls is not None:
        try:
            own = Path(inspect.getfile(cls)).resolve()
        except (TypeError, OSError):
            own = None
        if own is not None:
            builtin = root / "perturbations"
            files = sorted(builtin.rglob("*.py")) if own.is_relative_to(builtin) else sorted(own.parent.glob("*.py"))
            parts.append(_files_hash(tuple(files), root))
    return hashlib.sha256("".join(parts).encode()).hexdigest()[:16]


@functools.cache
def _files_hash(files: tuple[Path, ...], root: Path) -> str:
    """sha256 of files' names (relative to ``root`` where they are under it) and contents; cached
    per process, so every built-in perturbation reads ``perturbations/`` once."""
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(root) if f.is_relative_to(root) else f).encode() + b"\0")
        h.update(f.read_bytes() if f.is_file() else b"")
    return h.hexdigest()


def perturb_many(tasks: Sequence[Any], work: Callable[[Any], list[CachedRow]], processes: int | None = None,
                 stage: str = "perturbation") -> list[list[CachedRow]]:
    """``[work(t) for t in tasks]``, spread over ``processes`` forked CPU processes (default:
    the CPUs this process may use, at most one per task; ``harness.infra.accel.pool_map``). Runs in
    this process where fork is unavailable or only one process would run. ``work`` must be
    deterministic per task.

    The children inherit the fitted perturbation instances and the texts through fork; they
    only run Python string code (never CUDA), which is safe after the parent initialised CUDA.
    A child that dies (killed, out of memory) fails the call at once with a one-line
    ``WorkerDied`` naming ``stage``, its pid and exit code; ``ProcessPoolExecutor``, used
    before, could wait for ever on a child killed mid-send."""
    n = processes if processes is not None else usable_cpus()
    return pool_map(work, tasks, n, stage=stage)
