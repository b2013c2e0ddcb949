"""Checks the CLI runs before a run starts, and the one-line text of an OSError: everything that
would otherwise surface as a traceback after minutes of training.

    check_limit(args.limit)              # --limit must be >= 1
    check_out_dir(Path("runs/x"))        # --out: not a file, writable
    check_memory(suite, "auto")          # analytic training memory vs the device (harness.infra.memory)
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Any

from core.errors import UsageError


def check_limit(limit: int | None) -> None:
    if limit is not None and limit < 1:
        raise UsageError(f"--limit {limit}: must be >= 1 (documents per eval set)")


def check_out_dir(out: Path) -> None:
    """``out`` must be a directory or not exist yet, below a writable existing directory."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a directory")
    probe = out
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise UsageError(f"--out {out}: {probe} is a file, not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out}: {probe} is not writable")


def check_memory(suite: Any, device: str) -> list[str]:
    """Refuse a suite whose models cannot train on the device (MemoryTooLarge, one line)."""
    from harness.infra.device import pick_device
    from harness.infra.memory import check_suite_memory

    return check_suite_memory(suite, pick_device(device))


def disk_need_estimate(suite: Any, eval_bytes: int, params: dict[str, int], root: Path) -> int:
    """Bytes a whole run of ``suite`` writes, minus what ``root`` holds already (a rough upper
    estimate): per model 16 B/parameter (final weights 4 B + a partial checkpoint with AdamW's
    moments 12 B, briefly together), per cell 6 B per eval byte (texts and per-byte NLL of the
    sampled documents as JSON, in the cell and again in samples.jsonl), 5 MB for the report."""
    models = sum(16 * n for n in params.values()) * len(suite.seeds)
    cells_per_eval = (1 + len(suite.perturbations)) * len(suite.eval.modes) * len(suite.seeds)
    total = models + 6 * eval_bytes * cells_per_eval + 5_000_000
    have = sum(f.stat().st_size for f in Path(root).rglob("*") if f.is_file()) if Path(root).is_dir() else 0
    return max(0, total - have)


def os_error_line(e: OSError, args: Any = None) -> str:
    """One line for an OSError that reached the CLI: the file, the reason, and for a full disk
    how much space the run still needs (an estimate) and that it resumes."""
    where = e.filename or ""
    reason = e.strerror or str(e)
    if e.errno == errno.ENOSPC:
        need = getattr(e, "tokbench_need_bytes", None)
        run_root = getattr(e, "tokbench_root", None)  # set by Runner.run: a run can resume
        root = run_root or where or "."
        free = _free_bytes(Path(root))
        need_text = f"about {_mb(need)} more needed (estimate)" if need is not None else "more space needed"
        then = ("finished models and cells are kept and the run resumes" if run_root
                else "nothing half-written was left")
        return (f"disk full writing {where or root}: {need_text}, {_mb(free)} free; free some space and "
                f"run the same command again: {then}")
    if isinstance(e, PermissionError):
        return f"permission denied: {where or reason}"
    return f"{where + ': ' if where else ''}{reason}"


def _free_bytes(p: Path) -> int:
    while not p.exists() and p.parent != p:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return 0


def _mb(n: float | None) -> str:
    return f"{(n or 0) / 1e6:.1f} MB"
