"""The dry run's sums (``harness.pipeline.estimate``): the scoring work of a model (``CellWork``),
a seed's cost phase by phase as the models are measured (``SeedCost``), and from them the
closing lines and estimate.json."""

from __future__ import annotations

import dataclasses
import resource
import time
from pathlib import Path
from typing import Any

from harness.config.suite import Suite
from harness.data.evalsets import CLEAN
from harness.infra.writes import atomic_write_json
from harness.pipeline.facts import ESTIMATE_FILE, estimate_key
from harness.train.measure import _fmt


@dataclasses.dataclass
class CellWork:
    """What scoring does per model and seed, counted from the eval sets (windows, rows, bytes,
    cells), and how the run spreads it (cell processes; cells made behind the next model)."""

    n_cells_p: int  # perturbation cells, the clean one included
    n_evals: int  # eval sets
    n_docs: int  # documents of all eval sets
    score_windows: int  # windows of one cell set (clean text; perturbations move lengths a little)
    doc_cells: int  # (cell, document) rows per model
    cell_bytes: int  # bytes those rows score (the analyses' buckets cost per byte)
    n_cells_model: int  # cells per model
    cell_procs: int  # processes that make the cells from the scores (``cell_processes``)
    cells_behind: bool  # cells made while the next model scores (``overlap.cells_behind``)


@dataclasses.dataclass
class SeedCost:
    """A seed's seconds phase by phase as the dry run adds them up (``*_s``, ``t_pert*``: seconds
    per seed; ``an_byte``, ``an_tables``: seconds per scored byte), and what it measured on the way."""

    data_s: float = 0.0  # loading the prepared sources
    fit_s: float = 0.0  # fits on the critical path
    fit_ahead_s: float = 0.0  # host fits made in the fit-ahead process while other models train
    compile_s: float = 0.0  # training compile
    train_s: float = 0.0
    score_s: float = 0.0  # its compile included
    score_compile_s: float = 0.0
    window_s: float = 0.0  # the models' per-window forward time over every window of every cell
    results_s: float = 0.0  # results.csv, samples.jsonl, buckets.csv from every cell
    n_models: int = 0
    an_fit: float = 0.0  # the analyses' fit (their phase)
    an_first: float = 0.0  # their first rows' extra
    an_byte: float = 0.0  # a cell's buckets
    an_tables: float = 0.0  # word tables
    an_text: float = 0.0  # their text work, in perturbation
    movable: bool = False  # the first seed's analyses' text work done in the plan-ahead process
    t_pert: float = 0.0  # perturbation on the critical path
    t_pert_all: float = 0.0  # the perturbation's own seconds, overlapped or not
    pert_fit: float = 0.0  # fitting the perturbations, once per run
    kept: float = 1.0  # the fraction of windows that are distinct (each forwarded once)
    dup_s: float = 0.0  # the repeated windows' forward time, taken off scoring
    measuring: dict[str, float] = dataclasses.field(default_factory=dict)  # the dry run's own seconds
    tokenizers: dict[str, Any] = dataclasses.field(default_factory=dict)  # label -> BPE tokenizer or None
    per_model: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)  # estimate.json "models"

    def phases(self) -> dict[str, float]:
        """Seconds per seed by phase, and their sum (``per_seed``)."""
        per_seed = (self.data_s + self.fit_s + self.compile_s + self.train_s + self.t_pert + self.an_fit
                    + self.score_s + self.results_s)
        return {"data": self.data_s, "fits": self.fit_s, "compile": self.compile_s, "training": self.train_s,
                "perturbation": self.t_pert, "analyses": self.an_fit, "scoring": self.score_s,
                "results": self.results_s, "per_seed": per_seed}


def summary_lines(suite: Suite, work: CellWork, cost: SeedCost, compile_on: bool, ahead: bool,
                  cache_dir: Path) -> list[str]:
    """The lines after the models': the cells to score, the estimate per seed by phase with its
    notes, and the total over the seeds."""
    ev, c = suite.eval, cost
    per_seed = c.phases()["per_seed"]
    lines = ["", f"cells to score: {suite.n_cells()} ({work.n_evals} eval set(s), {work.n_docs} docs, "
                 f"{work.n_cells_p} perturbation cells incl. '{CLEAN.id}', modes {', '.join(ev.modes)}); "
                 f"{work.score_windows:,} windows per model and seed",
             f"estimate per seed: data {_fmt(c.data_s)}, fits {_fmt(c.fit_s)}, compile {_fmt(c.compile_s)}, "
             f"training {_fmt(c.train_s)}, perturbation {_fmt(c.t_pert)}, analyses {_fmt(c.an_fit)}, "
             f"scoring {_fmt(c.score_s)}, results files {_fmt(c.results_s)}: {_fmt(per_seed)}"]
    if compile_on:
        lines.append(f"  (compile: training {_fmt(c.compile_s)} above, scoring {_fmt(c.score_compile_s)} "
                     "inside scoring; sub-models' inside fits)")
    if suite.analyses:
        where = ("in perturbation; the first seed's in the plan-ahead process"
                 if ahead and c.movable else "in perturbation")
        lines.append(f"  (analyses: fitting {_fmt(c.an_fit)} per seed; their text work {_fmt(c.an_text)} {where} "
                     f"(first use {_fmt(c.an_first)}); in scoring, not in the model lines: their buckets "
                     f"{_fmt(c.an_byte * work.cell_bytes / work.cell_procs)} per model in {work.cell_procs} "
                     "process(es))")
    if c.dup_s > 0:
        lines.append(f"  (scoring: {1 - c.kept:.1%} of the sampled cells' windows repeat another and are "
                     f"forwarded once: {_fmt(c.dup_s)} less than the model lines add up to)")
    if ahead:
        lines.append("  (perturbation: in a process of its own while the models train (overlap.plan_ahead); "
                     "only what outlasts the training is counted)")
    lines.append(f"  (perturbation: fitting the perturbations {_fmt(c.pert_fit)}, once per run; plans cached in "
                 f"{cache_dir / 'perturbed'} are not perturbed again)")
    lines.append(f"estimated total: {_fmt(per_seed * len(suite.seeds))} for {len(suite.seeds)} seed(s) "
                 "(report not included)")
    if suite.baselines.compressors:  # model-free rows (docs/fragility.md), not in the estimate
        lines.append(f"compressor baseline cells: {suite.n_baseline_cells()} "
                     f"({', '.join(suite.baselines.compressors)} x {1 + len(suite.permutations)} stream(s))")
    return lines


def write_estimate(root: Path, suite: Suite, limit: Any, dev: Any, work: CellWork, cost: SeedCost,
                   compile_on: bool, ahead: bool, t_start: float) -> list[str]:
    """Write estimate.json into the run directory ``root`` (the run in it reads it back and writes
    estimated vs actual into run.json); returns the closing lines (``t_start``: perf_counter seconds)."""
    c = cost
    root.mkdir(parents=True, exist_ok=True)
    atomic_write_json(root / ESTIMATE_FILE, {
        "key": estimate_key(suite, limit),
        "device": str(dev), "seeds": len(suite.seeds), "seconds_per_seed": c.phases(),
        "compile": {"on": compile_on, "training_seconds": c.compile_s, "scoring_seconds": c.score_compile_s},
        "perturbation_fit_seconds": c.pert_fit, "score_distinct_fraction": c.kept,
        "plan_ahead": {"on": ahead, "perturbation_seconds": c.t_pert_all, "host_fit_seconds": c.fit_ahead_s},
        "analyses_timing": {"fit_seconds": c.an_fit, "first_use_seconds": c.an_first,
                            "bucket_seconds_per_byte": c.an_byte, "table_seconds_per_byte": c.an_tables,
                            "cell_bytes": work.cell_bytes, "cell_processes": work.cell_procs},
        "models": c.per_model,
        "dry_run_seconds": {"total": time.perf_counter() - t_start, "data": c.data_s, **c.measuring}})
    return [f"(written to {root / ESTIMATE_FILE}; the next run of this suite into that directory reports "
            "estimated vs actual, once)",
            f"dry run: {_fmt(time.perf_counter() - t_start)} (data {_fmt(c.data_s)}; "
            + ", ".join(f"{k} {_fmt(v)}" for k, v in c.measuring.items())
            + f"); max RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB"]
