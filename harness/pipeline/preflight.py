"""Checks ``tokbench validate`` runs beyond the schema: that the data a suite names exists, and
whether the machine is too busy for the timings the docs state ("on an idle machine").

No network and no reading of file contents: validate stays instant.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from core.switches import switch


def check_data(suite: Any, cache_dir: Path | None = None) -> None:
    """Raise ValueError naming the suite key (``data.train`` / ``data.eval[i] (name)``) of the
    first source whose local inputs are missing (``Source.check``)."""
    from harness.data.load import source_context

    ctx = source_context(suite, cache_dir, log=lambda _msg: None)
    specs = [("data.train", suite.data.train)] + [
        (f"data.eval[{i}] ({s.name})", s) for i, s in enumerate(suite.data.eval)]
    for key, spec in specs:
        check = getattr(spec.config, "check", None)
        if check is None:
            continue
        try:
            check(ctx)
        except ValueError as e:
            where = f"{suite.path}: " if getattr(suite, "path", None) else ""
            raise ValueError(f"{where}{key}: {e}") from e


def load_warning(load: tuple[float, float, float] | None = None, cores: int | None = None
                 ) -> str:
    """A one-line warning when the 1-minute load average exceeds the CPU cores available to
    this process (other work competes for them, so runs take longer than the documented times,
    which hold on an idle machine); "" otherwise or where the load is unknown.
    ``TOKBENCH_LOAD_WARNING=0`` turns the live reading off (``load`` None): the test suite sets
    it, so a test that counts a command's stderr lines does not depend on the machine's load."""
    if load is None and switch("TOKBENCH_LOAD_WARNING") is False:
        return ""
    try:
        load = load if load is not None else os.getloadavg()
    except (AttributeError, OSError):  # not on this platform
        return ""
    if cores is None:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:
            cores = os.cpu_count() or 1
    if load[0] <= cores:
        return ""
    return (f"warning: this machine is oversubscribed (load average {load[0]:.1f} on {cores} "
            f"core{'s' if cores != 1 else ''}); runs will take longer than the times in the docs, "
            "which hold on an idle machine")
