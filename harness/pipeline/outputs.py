"""A run's outputs: results.csv, samples.jsonl and buckets.csv put together from the cells
(docs/results.md), and the report rendered from them.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.files import part_file, write_parts_atomic
from core.forkpool import usable_cpus
from core.schema import BUCKET_COLUMNS, RESULT_COLUMNS
from harness.data.batchscore import perturb_many
from harness.infra.results import RunDir
from harness.infra.writes import dumps, write_csv
from harness.overlap import reportproc

if TYPE_CHECKING:
    from harness.pipeline.run import Runner


def assemble_processes(n_cells: int) -> int:
    """Forked processes that read the cells back for the results files: up to 8 (each reads a
    contiguous run of cells), none for a handful of cells (forking costs more than it saves)."""
    return min(8, usable_cpus()) if n_cells >= 64 else 1


def assemble(rd: RunDir, cell_keys: list[str]) -> tuple[list[dict[str, Any]], int]:
    """results.csv / samples.jsonl / buckets.csv in ``rd`` from the cells ``cell_keys``, in a
    stable order; returns (results.csv's rows, samples whose edit rate is windowed).
    The cells are read back (checksums, JSON) and their sample rows turned into JSON lines in
    forked processes (``assemble_processes``), a contiguous run of cells each, put together
    here in cell order: the files are the same bytes as one process makes."""
    keys = list(dict.fromkeys(cell_keys))  # first occurrence of each, in order
    procs = assemble_processes(len(keys))
    size = max(1, -(-len(keys) // (4 * procs)))  # a few tasks a process: uneven cells even out
    chunks = [keys[i : i + size] for i in range(0, len(keys), size)]
    samples_path = rd.root / "samples.jsonl"

    def load(chunk: list[str]) -> tuple[list[dict[str, Any]], str, list[dict[str, Any]], int]:
        """A chunk's rows, buckets and windowed count; its samples.jsonl lines go to a part
        file (``core.files.part_file``), whose name is returned: not through the pipe."""
        rows, lines, buckets, windowed = [], [], [], 0
        for k in chunk:
            cell = rd.load_cell(k)
            if cell is None:
                raise RuntimeError(f"cell {k} is missing after scoring")
            rows.append(cell["row"])
            lines.extend(dumps(r) + "\n" for r in cell["samples"])
            windowed += sum(1 for r in cell["samples"] if r.get("edit_rate_method") == "windowed")
            buckets.extend(cell.get("buckets", []))
        fd, name = part_file(samples_path)
        with os.fdopen(fd, "wb") as f:  # the bytes atomic_write_text writes for this text
            f.write("".join(lines).encode("utf-8", "surrogateescape"))
        return rows, name, buckets, windowed

    parts = perturb_many(chunks, load, procs, stage="results files")  # type: ignore[arg-type]
    rows = [r for part in parts for r in part[0]]
    buckets = [b for part in parts for b in part[2]]
    write_csv(rd.root / "results.csv", rows, RESULT_COLUMNS)
    write_parts_atomic(samples_path, [part[1] for part in parts])
    if buckets:
        write_csv(rd.root / "buckets.csv", buckets, BUCKET_COLUMNS)
    return rows, sum(part[3] for part in parts)


def render_report(runner: Runner, rp: reportproc.ReportProcess | None = None) -> None:
    """The report of ``runner``'s run directory (in ``rp`` if given), its timings into
    ``runner.timings``; ``runner.report_path`` is set once it is written in full. A failure
    other than a full disk is logged, not raised: the results are complete and kept."""
    root = runner.rd.root
    try:
        path, t = _render(runner, rp)
        runner.timings.update({f"report_{k}_seconds": float(t[k]) for k in ("load", "tables", "figures", "page")
                               if k in t})
        runner.report_figure_seconds = dict(t.get("figure_seconds", {}))
    except OSError as e:
        if e.errno == errno.ENOSPC:
            raise  # disk full is the user's to fix: one line from the CLI, then resume
        runner.log(f"[report] failed ({type(e).__name__}: {e}); results are complete — "
                   f"re-render with: tokbench report {root}")
        return
    except Exception as e:  # the results are complete and kept; a report bug must not lose them
        runner.log(f"[report] failed ({type(e).__name__}: {e}); results are complete — "
                   f"re-render with: tokbench report {root}")
        return
    runner.report_path = path
    runner.log(f"[report] {path}")


def _render(runner: Runner, rp: reportproc.ReportProcess | None) -> tuple[Path, dict[str, Any]]:
    """Render the report in ``rp`` (``harness.overlap.reportproc``), or here when there is none or it
    failed: (report.html's path, the report's ``LAST_TIMINGS``)."""
    if rp is not None:
        try:
            return rp.render(runner.rd.root)
        except reportproc.ReportProcessFailed as e:
            runner.log(f"[report] {e}; rendering it in this process")
    from reports import render_run
    from reports.render import LAST_TIMINGS

    path = render_run(runner.rd.root)
    return path, LAST_TIMINGS

