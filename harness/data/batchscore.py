"""Scoring as a batch job: perturb once, score many cells per forward.

* ``PlanCache`` — the perturbed texts of one (eval set, perturbation, seed, mode), with their
  edit rates and word counts, stored once on disk under a key made of their content (the eval
  documents' fingerprint, the perturbation's name/id/params, the seed, the mode and the cut, and
  a hash of the code that made them: ``code_hash``), so every encoder, and every later run,
  reuses them. Each file carries an HMAC-SHA256 of its payload under the cache's key
  (``harness.infra.cache.seal_key``) and is decompressed in chunks up to ``max_bytes``; a file that
  fails either is recomputed.
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
import hmac
import inspect
import json
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from core.decompress import read_at_most
from harness.infra.accel import pool_map, usable_cpus
from harness.infra.cache import seal_key
from harness.infra.writes import atomic_write_bytes, stable_hash

# A plan row: (perturbed text — whole document for mode full, prefix for clean_target —,
# edit rate, word count), or None where the document gives no scored window.
CachedRow = tuple[str, float, int] | None


# The largest plan a cache file may decompress to: a plan holds one eval set's perturbed texts
# (JSON), far below this for any eval set a suite can hold in memory; a file over it is damage (a
# gzip of zeros decompresses 1000:1), recomputed after reading at most this much.
MAX_PLAN_BYTES = 1 << 30


class PlanCache:
    """Directory of gzip-JSON plan files, ``<dir>/<key[:2]>/<key>.json.gz``; first line of the
    decompressed file is the HMAC-SHA256 hex (key ``<dir>/.seal.key``) of the rest. ``max_bytes``:
    the most a file may decompress to (a plan over it is not cached)."""

    def __init__(self, root: Path | None, max_bytes: int = MAX_PLAN_BYTES) -> None:
        self.root = root
        self.max_bytes = max_bytes

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
            with gzip.open(p, "rb") as f:
                raw = read_at_most(f, self.max_bytes + 65, str(p))  # + the MAC line
            digest, _, body = raw.partition(b"\n")
            if not hmac.compare_digest(self._mac(body).encode(), digest):
                return None
            rows = json.loads(body)
            return [None if r is None else (r[0], float(r[1]), int(r[2])) for r in rows]
        except (OSError, EOFError, ValueError, zlib.error, TypeError, IndexError, RecursionError):
            return None  # unreadable, over the limit, forged or corrupt: recompute

    def put(self, key: str, rows: Sequence[CachedRow]) -> None:
        p = self.path(key)
        if p is None:
            return
        # ensure_ascii: lone surrogates (undecodable bytes under surrogateescape) survive as \\udcXX
        body = json.dumps([None if r is None else list(r) for r in rows], ensure_ascii=True).encode()
        if len(body) > self.max_bytes:
            return  # get() would take it for damage
        atomic_write_bytes(p, gzip.compress(self._mac(body).encode() + b"\n" + body, 5))

    def _mac(self, body: bytes) -> str:
        assert self.root is not None
        return hmac.new(seal_key(self.root), body, hashlib.sha256).hexdigest()


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
