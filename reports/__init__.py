"""Reports: statistics, figures and one self-contained HTML file from a run's results files.

Reads only results.csv, samples.jsonl, buckets.csv and run.json (never torch or harness), so
``tokbench report RUN_DIR`` works on a laptop without the models.

    from reports import render_run
    html_path = render_run(Path("runs/smoke"))          # writes report.html, report.md, figures/
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["render_run", "render_compare"]


def render_run(run_dir: Path, out_dir: Path | None = None, **kwargs: Any) -> Path:
    """See ``reports.render.render_run`` (imported lazily: matplotlib loads only when rendering)."""
    from reports.render import render_run as _render_run

    return _render_run(run_dir, out_dir, **kwargs)


def render_compare(run_dirs: list[Path], out_dir: Path, **kwargs: Any) -> Path:
    """See ``reports.render.render_compare``."""
    from reports.render import render_compare as _render_compare

    return _render_compare(run_dirs, out_dir, **kwargs)
