"""``tokbench run --dry-run``: the models to train and the cells to score, with FLOPs, predicted
peak memory and a time estimate per seed, without training a model in full and without fetching
data. Each model's line is printed as soon as it is measured; the last lines give the per-seed
total by phase and what the dry run itself cost (seconds, max RSS).

How each part of a seed is estimated (all measured on the chosen device, with the run's dtype,
autocast and compile setting, through the code the run uses, models in the run's order):

* data: loading the prepared sources, timed (nothing is fetched: prepare the data first).
* fit stages: each encoder's ``fit`` on a ``FIT_SAMPLE``-byte sample of the training text, scaled
  linearly to the bytes the real fit reads. Law: BPE's pre-token counting and encoding are linear
  in the text and its merge updates grow with the distinct words, which grow slower than the
  text, so the term errs high; treat it as the loosest. A sub-model the fit trains (BLT's entropy
  model) is timed like a main model (below), its compile included; the rest of such a fit reads a
  fixed sample and is not scaled.
* compile (``budget.compile`` on): measured, never assumed. The dry run compiles in a private,
  empty inductor / Triton cache (removed at the end), so it measures what a first run pays and
  leaves the user's caches as they were. Compiled code is shared in one process (all blocks run
  one code object), so a model whose shapes an earlier model compiled pays little: the dry run
  sees that reuse because it measures the models in the run's order.
* training on CUDA: the run's own loop (``train_encoder``: collation in worker processes,
  prefetch, pinned copies, the compiled step) on real (micro-)batches: 3 steps (cold compile and
  any recompile a second shape causes), then 8 and 24 steps; per step = (t24 - t8) / 16,
  start-up = t8 - 8 steps, compile = t3 - (start-up + 3 steps). Peak memory: the
  allocator's peak over those steps; a model that cannot fit the device is refused.
* training on CPU: the same loop with steps of k = 2 and of k = 3 or more windows of the real
  length (``CPU_POSITIONS``), one step first (it holds the compile), then 1 and 4 steps timed,
  fitted as ``a + b·k`` and scaled to the run's windows per step (collation shares the cores with
  the step there, and is inside).
* perturbation: fitting the perturbations, then ``plan_rows`` on up to 4 documents per eval set,
  perturbation and mode, scaled to all documents and divided by the worker processes. On CUDA
  it runs in a forked process while the GPU measures the models. Under plan-ahead (the run
  perturbs while its models train, ``harness.overlap.planahead``) only what would outlast the training
  counts.
* scoring: the run's ``score_items`` (packed batches of ``eval.batch_windows`` windows on CUDA,
  of 4 on CPU) and ``score_cell`` on the clean cells of a sample of eval documents, scaled to the
  windows and documents of every cell; its first call holds the inference-mode compile.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from core.forkpool import can_fork
from encoders.base import Encoder
from harness.config.suite import Suite
from harness.data.evalsets import CLEAN, EvalSet
from harness.data.load import load_data, rolling_windows, source_context, training_windows
from harness.infra import watchdog
from harness.infra.accel import usable_cpus, want_compile
from harness.infra.device import pick_device
from harness.infra.results import RunDir
from harness.infra.watchdog import stall_limit
from harness.infra.writes import dumps
from harness.overlap.cellsbehind import cells_behind_wanted
from harness.overlap.planahead import PlanAhead, plan_ahead_processes, plan_ahead_wanted
from harness.pipeline.cells import cell_processes, score_cell
from harness.pipeline.estimate_sum import CellWork, SeedCost, summary_lines, write_estimate
from harness.pipeline.models import TrainedModel
from harness.pipeline.plans import clean_cells, perturbation_instances, plan_items, plan_rows
from harness.pipeline.run import RunOptions
from harness.score.items import dedup_enabled, flatten_windows, score_items, score_prestart_wanted
from harness.train.loop import build_encoder, fit_context
from harness.train.measure import _fmt, _score_sample, _sync, fit_sample
from harness.train.timing import DoesNotFit, release_memory, train_timing

SCORE_EXTRA_S = 1.0  # the scoring sample is repeated until the repeats add this many seconds
SCORE_MAX_REPEAT = 64  # ... or it is scored this many times over


def dry_run(suite: Suite, opts: RunOptions, emit: Callable[[str], None] | None = None) -> str:
    """The dry run's text; with ``emit``, each line is also handed to it as soon as it is known
    (a model's line once that model is measured). Timed with the run's kernels
    (``budget.deterministic``)."""
    from harness.infra.determinism import deterministic_kernels

    with deterministic_kernels(suite.budget.deterministic):
        return _dry_run(suite, opts, emit)


def _dry_run(suite: Suite, opts: RunOptions, emit: Callable[[str], None] | None) -> str:
    """``dry_run``'s body: set up as the run would, measure every model, add up a seed's phases
    (``SeedCost``) and write estimate.json; returns the text."""
    lines: list[str] = []

    def say(line: str = "") -> None:
        lines.append(line)
        if emit is not None:
            emit(line)

    t_start = time.perf_counter()
    dev, ctx, root = _set_up(suite, opts)
    data = load_data(suite, ctx, prepare=False, limit=opts.limit, log=opts.log)  # fetches nothing
    train, evals = data.train, data.evals
    if suite.scaling is not None:  # an IsoFLOP grid: per point, not per encoder
        from harness.pipeline.sweep import sweep_dry_run

        text = sweep_dry_run(suite, train, dev, ctx.base_dir, ranks=opts.ranks)
        if emit is not None:
            emit(text)
        return text
    b = suite.budget
    stride = suite.eval.stride_bytes or max(1, b.context_bytes // 2)
    # On CUDA the perturbation timing (pure CPU work) runs in a process forked now, before CUDA
    # is initialised, while the GPU measures the models; on CPU it would compete for the cores.
    # under plan-ahead the run perturbs on half the CPUs, while its models fit, compile and
    # train: only what outlasts them counts below
    ahead = plan_ahead_wanted(suite.overlap.plan_ahead, dev.type, opts.plan_cache)
    pert = _perturb_timing(suite, train, evals, stride, background=dev.type == "cuda",
                           processes=plan_ahead_processes() if ahead else usable_cpus())
    work = _cell_work(suite, evals, dev, stride)
    compile_on = want_compile(b.compile, dev)
    say(f"suite '{suite.name}': {len(suite.seeds)} seed(s) x {len(suite.encoders)} encoder(s) on {dev}; "
        f"train part {train.n_bytes:,} bytes in {len(train.docs)} docs; dtype {b.dtype}, "
        f"compile {'on (measured cold, in a private cache)' if compile_on else 'off'}")
    say()
    say(f"{'model':<16} {'params':>11} {'fwd FLOP/B':>10} {'train FLOPs':>11} {'peak mem':>9} "
        f"{'fit':>7} {'compile':>8} {'train':>8} {'score':>8}")
    sample = _score_sample(evals, b.context_bytes, stride, 2 * _score_batch(suite.eval.batch_windows, dev))
    cost = SeedCost(data_s=data.seconds)
    with _private_compile_caches(compile_on):
        _measure_models(suite, ctx.base_dir, train, sample, dev, work, ahead, cost, say)
    _analyses_and_perturbation(suite, train, sample, work, ahead, pert, cost)
    for line in summary_lines(suite, work, cost, compile_on, ahead, ctx.cache_dir):
        say(line)
    for line in write_estimate(root, suite, opts.limit, dev, work, cost, compile_on, ahead, t_start):
        say(line)
    return "\n".join(lines)


def _cell_work(suite: Suite, evals: list[Any], dev: torch.device, stride: int) -> CellWork:
    """The scoring work of one model and seed, counted from the eval sets (rolling windows
    ``stride`` bytes apart), and how the run spreads it, as the run decides."""
    ev = suite.eval
    n_cells_p = 1 + len(suite.perturbations)
    full, target = "full" in ev.modes, "clean_target" in ev.modes
    win_full = sum(len(rolling_windows(d.data, suite.budget.context_bytes, stride)) for e in evals for d in e.docs)
    n_docs = sum(len(e.docs) for e in evals)
    return CellWork(
        n_cells_p=n_cells_p, n_evals=len(evals), n_docs=n_docs,
        score_windows=n_cells_p * ((win_full if full else 0) + (n_docs if target else 0)),
        doc_cells=n_cells_p * len(ev.modes) * n_docs,
        cell_bytes=n_cells_p * sum((len(d.data) if full else 0)
                                   + (min(len(d.data), ev.target_bytes) if target else 0)
                                   for e in evals for d in e.docs),
        n_cells_model=n_cells_p * len(ev.modes) * len(evals),
        cell_procs=cell_processes(),
        cells_behind=cells_behind_wanted(suite.overlap.cells_behind, dev.type))


def _measure_models(suite: Suite, base_dir: Path, train: Any, sample: list[EvalSet], dev: torch.device,
                    work: CellWork, ahead: bool, cost: SeedCost, say: Callable[[str], None]) -> None:
    """Measure every encoder in the run's order (compiled code one model leaves, the next
    reuses), say its line as soon as it is measured, and add its seconds per seed to ``cost``."""
    b, ev = suite.budget, suite.eval
    order = suite.training_order()
    prestart = score_prestart_wanted()  # as the run's scoring decides (``harness.pipeline.scoring``)
    cost.n_models = len(order)
    for spec in order:
        t_model = time.perf_counter()
        m = _measure_model(suite, base_dir, spec, train, sample, dev)
        peak = m["peak_bytes"]
        _refuse_if_too_big(spec.label, peak, dev, b)
        t_score = _model_score_s(m, work, ev.sample_docs, spec is order[0], spec is order[-1], prestart)
        if ahead and m["host_fit"]:
            cost.fit_ahead_s += m["fit_s"]  # fitted in the fit-ahead process while others train
        else:
            cost.fit_s += m["fit_s"]
        cost.train_s += m["train_s"]
        cost.compile_s += m["compile_s"]
        cost.score_s += t_score
        cost.window_s += m["score_window_s"] * work.score_windows
        cost.score_compile_s += m["score_compile_s"]
        # the results files (results.csv, samples.jsonl, buckets.csv from every cell)
        cost.results_s += (m["assemble_row_s"] * work.doc_cells
                           + m["assemble_sample_s"] * work.n_cells_model * ev.sample_docs)
        mem = f"{peak / 2**30:.1f} GiB" if peak is not None else "-"
        train_flops = "-" if m["elsewhere"] else f"{3 * m['fpb'] * b.train_bytes:.3g}"  # never trained here
        say(f"{spec.label:<16} {m['params']:>11,} {m['fpb']:>10.3g} {train_flops:>11} {mem:>9} "
            f"{_fmt(m['fit_s']):>7} {_fmt(m['compile_s'] + m['score_compile_s']):>8} {_fmt(m['train_s']):>8} "
            f"{_fmt(t_score):>8}")
        cost.tokenizers[spec.label] = m["tokenizer"]
        # what was measured, for reading an estimate against a run (estimate.json "models")
        cost.per_model[spec.label] = {k: v for k, v in m.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        cost.per_model[spec.label]["score_s"] = t_score
        del m
        release_memory()
        cost.measuring[spec.label] = time.perf_counter() - t_model


def _refuse_if_too_big(label: str, peak: int | None, dev: torch.device, b: Any) -> None:
    """Raise DoesNotFit where a model's predicted peak memory (bytes, CUDA only) is over 95 % of
    the device's."""
    dev_mem = torch.cuda.get_device_properties(dev).total_memory if dev.type == "cuda" else None
    if peak is not None and dev_mem is not None and peak > 0.95 * dev_mem:
        raise DoesNotFit(
            f"encoder '{label}': predicted peak memory {peak / 2**30:.1f} GiB exceeds the device's "
            f"{dev_mem / 2**30:.1f} GiB; set budget.micro_batch_bytes (e.g. {max(b.context_bytes, b.batch_bytes // 4)})")


def _model_score_s(m: dict[str, Any], work: CellWork, sample_docs: int, first: bool, last: bool,
                   prestart: bool) -> float:
    """Seconds per seed on the critical path to score one model (``m``: ``_measure_model``'s
    times; ``first``/``last``: it is the first/last model the run trains)."""
    # the cells are made from the scores in up to cell_processes() forked processes
    cell_work = (m["score_doc_s"] * work.doc_cells + m["score_cell_s"] * work.n_cells_model
                 + m["score_sample_row_s"] * work.n_cells_model * sample_docs)
    # behind (harness.overlap.cellsbehind.CellsBehind, on CUDA): made while the next model scores; only
    # the last job, the last model's cells of the last eval set, is waited for
    if work.cells_behind:
        cell_work = cell_work / work.n_evals if last else 0.0
    # a job's fixed cost (set-up, workers forked, first batches collated) is hidden for
    # every model but the first of an eval set: its job starts while the one before it
    # runs (``harness.score.items.ScoreJob``)
    job_s = m["score_job_s"] * work.n_evals if first or not prestart else 0.0
    return (m["score_window_s"] * work.score_windows + job_s
            + cell_work / work.cell_procs + m["score_compile_s"])


def _analyses_and_perturbation(suite: Suite, train: Any, sample: list[EvalSet], work: CellWork, ahead: bool,
                               pert: Callable[[], tuple[float, float, float]], cost: SeedCost) -> None:
    """After the models: time the analyses, wait for the perturbation timing (``pert``), and set
    ``cost``'s analyses and perturbation seconds per seed (only what outlasts training under
    plan-ahead); scoring gains the analyses' buckets and loses the repeated windows' forwards."""
    c = cost
    t_an = time.perf_counter()
    c.an_fit, c.an_first, c.an_byte, c.an_tables = _analysis_timing(suite, train, sample, c.tokenizers)
    # the analyses' buckets of every cell are made in scoring (in the cell processes); their word
    # tables of every distinct text before it, in "perturbation" (the analyses' text work, on all
    # CPUs; the first rows train the segmenters there)
    c.score_s += c.an_byte * work.cell_bytes * (1 / work.n_evals if work.cells_behind else c.n_models) / work.cell_procs
    c.measuring["analyses"] = time.perf_counter() - t_an
    t_wait = time.perf_counter()
    t_pert, c.pert_fit, c.kept = pert()
    c.measuring["perturbation (wait)"] = time.perf_counter() - t_wait
    # each distinct window is forwarded once: the repeats' share of the windows' time goes
    c.dup_s = (1.0 - c.kept) * c.window_s
    c.score_s -= c.dup_s
    c.t_pert_all = t_pert  # the perturbation's own seconds per seed, overlapped or not
    c.an_text = c.an_first + c.an_tables * work.cell_bytes * c.kept / max(1, usable_cpus())
    if ahead:
        # fitted and planned (every seed's plans) while the first seed's models fit, compile and
        # train; only what outlasts them is on the critical path. The analyses that can hand
        # their preparation over (``Analysis.export_prepared``) do the first seed's text work
        # there too, after the plans, on the process's share of the CPUs (harness.pipeline.ahead
        # ``prepare_analyses_ahead``); later seeds do theirs in the run.
        from harness.analyses.base import Analysis

        n = len(suite.seeds)
        c.movable = any(type(a.config).export_prepared is not Analysis.export_prepared for a in suite.analyses)
        first = (c.an_first + c.an_tables * work.cell_bytes * c.kept / max(1, plan_ahead_processes())) if c.movable else 0.0
        t_pert = max(0.0, t_pert * n + first - (c.fit_s + c.compile_s + c.train_s)) / n
        t_pert += c.an_text * (n - 1) / n if c.movable else c.an_text
    else:
        t_pert += c.an_text
    c.t_pert = t_pert


def _set_up(suite: Suite, opts: RunOptions) -> tuple[torch.device, Any, Path]:
    """What the run would start from: (its device, the sources' context, its run directory)."""
    dev = pick_device(opts.device)
    ctx = source_context(suite, opts.cache_dir, opts.log)
    root = opts.out or Path("runs") / suite.name
    stall_limit()  # a bad stall limit fails here, as in the run
    watchdog.STACKS_DIR = root  # a stuck loop's stacks land in the run directory
    return dev, ctx, root


def _measure_model(suite: Suite, base_dir: Path, spec: Any, train: Any, sample: list[EvalSet],
                   dev: torch.device) -> dict[str, Any]:
    """Fit (on a sample), training and scoring times of one encoder, in seconds of the run:
    fit_s, compile_s (the main model's training compile), train_s, peak_bytes (CUDA, else None),
    score_window_s (per scored window), score_doc_s (per document row of a cell), score_compile_s;
    and params, fpb (forward FLOPs per scored byte)."""
    b = suite.budget
    seed = suite.seeds[0]
    enc = build_encoder(spec, seed, base_dir).to(dev)
    t1 = time.perf_counter()
    sub: dict[str, float] = {}
    holder: list[Any] = []

    def sub_train(s: Any, n: int) -> dict[str, Any]:
        # a sub-model (BLT's entropy model): timed like a main model (those steps also leave it
        # trained a little, so the parent's fit can go on)
        t2 = time.perf_counter()
        s.fit(holder[0])
        s.to(dev)
        est = train_timing(s, train.docs, b, dev, seed, n)
        sub["seconds"] = est["train_s"] + est["compile_s"]
        sub["measuring"] = time.perf_counter() - t2
        s.eval()
        return {"bytes": n, "flops": 0.0, "seconds": 0.0}

    # The fit sees the real budget (a sub-model's bytes derive from it) but only the first
    # documents of the training text, about FIT_SAMPLE bytes.
    fit_docs = fit_sample(train.docs)
    fit_bytes = sum(len(d.data) for d in fit_docs)
    ctx = fit_context(fit_docs, b, dev, seed, log=lambda s: None)
    ctx.train = sub_train
    holder.append(ctx)
    enc.fit(ctx)
    quick = time.perf_counter() - t1 - sub.get("measuring", 0.0)
    # A fit that reads the training text (BPE merges) scales with the bytes it reads; the rest of
    # a fit that trains a sub-model (BLT's threshold on a fixed sample) does not.
    real_fit_bytes = min(b.train_bytes, train.n_bytes)
    scale = 1.0 if sub else real_fit_bytes / max(1, min(fit_bytes, real_fit_bytes))
    fit_s = (quick * scale if type(enc).fit is not Encoder.fit else 0.0) + sub.get("seconds", 0.0)
    release_memory()  # the fit's sample text and sub-model steps
    elsewhere = bool(getattr(enc, "trained_elsewhere", False))
    if elsewhere:  # loaded and scored, never trained (harness/config/pretrained.py)
        est: dict[str, Any] = {"train_s": 0.0, "compile_s": 0.0, "peak_bytes": None}
    else:
        est = train_timing(enc, train.docs, b, dev, seed, b.train_bytes)
    enc.zero_grad(set_to_none=True)
    probe = list(training_windows(train.docs, 4 * b.context_bytes, b.context_bytes, seed))
    batch = enc.collate(probe, [0] * len(probe))
    fpb = enc.flops(batch) / max(1, batch.scored_bytes)
    sc = _score_timing(suite, TrainedModel(enc, {"key": ""}, spec), sample, dev)
    tok = getattr(enc, "tokenizer", None)  # for the analyses' fit (a BPE encoder's boundaries)
    return {"fit_s": fit_s, "compile_s": est["compile_s"], "train_s": est["train_s"],
            "peak_bytes": est.get("peak_bytes"), "params": sum(p.numel() for p in enc.parameters()),
            "fpb": fpb, "tokenizer": tok, "host_fit": bool(getattr(enc, "host_fit", False)), "elsewhere": elsewhere,
            **sc}


def _score_batch(batch_windows: int, dev: torch.device) -> int:
    """Windows per scoring forward in the dry run: the run's on CUDA, 4 on CPU (linear there)."""
    return batch_windows if dev.type == "cuda" else min(batch_windows, 4)


def _score_timing(suite: Suite, model: TrainedModel, sample: list[EvalSet],
                  dev: torch.device) -> dict[str, float]:
    """The run's scoring path on the clean cells of the sample: ``score_items`` on all their
    windows packed (the first call holds the inference compile; then once and repeated, see
    below), then ``score_cell`` with and without the per-byte sample rows.
    Returns score_window_s (the cost of one more window), score_job_s (a packed job's fixed
    cost: the run packs one job per eval set), score_doc_s (a document row of a cell),
    score_sample_row_s (the extra of a row that keeps its per-byte NLL: ``eval.sample_docs`` a
    cell), score_cell_s (saving a cell) and score_compile_s."""
    seed = suite.seeds[0]
    bw = _score_batch(suite.eval.batch_windows, dev)
    bf16 = suite.score_dtype == "bfloat16"
    cells = clean_cells(suite, sample, seed)
    items = [p.item for _, _, plan in cells for p in plan if p is not None]
    n_win = sum(len(it.windows) for it in items)
    if not n_win:
        return {"score_window_s": 0.0, "score_job_s": 0.0, "score_doc_s": 0.0, "score_sample_row_s": 0.0,
                "score_cell_s": 0.0, "score_compile_s": 0.0, "assemble_row_s": 0.0, "assemble_sample_s": 0.0}
    def job(rep: int) -> tuple[float, list[Any]]:
        t0 = time.perf_counter()
        out = score_items(model.enc, items * rep, dev, bw, bf16, stats={}, dedup=False)
        _sync(dev)
        return time.perf_counter() - t0, out

    first, scores = job(1)  # holds the inference compile
    one = job(1)[0]
    if dev.type == "cuda":
        one = min(one, job(1)[0])
    # A packed job has a fixed cost (collation workers forked, the pipeline filled) that a sample
    # of a few hundred windows would spread over every window of the run, and on a GPU those
    # windows take ~20 ms in all, less than that cost's noise: the sample is repeated, doubling,
    # until the repeats add SCORE_EXTRA_S, and a window's cost is that difference (the larger job
    # timed twice, the faster kept: its first call may meet a new last-batch shape). On an H200
    # a sample scored once and twice over made the scoring estimate 4-6x the run.
    # (on CPU a window costs milliseconds: twice over is enough, and the sample is not re-timed)
    cuda = dev.type == "cuda"
    rep, big = 2, job(2)[0]
    while cuda and big - one < SCORE_EXTRA_S and rep < SCORE_MAX_REPEAT:
        rep *= 2
        big = job(rep)[0]
    if cuda:
        big = min(big, job(rep)[0])
    scores = scores[: len(items)]
    per_window = max(0.0, big - one) / ((rep - 1) * n_win)
    if per_window <= 0.0:  # noise larger than the repeats: no fixed part
        per_window, job_s = one / n_win, 0.0
    else:
        job_s = max(0.0, one - per_window * n_win)
    # a cell's rows, samples and metrics; the analyses' buckets are timed with their fit. Twice:
    # with the suite's per-byte sample rows and without, as a cell of hundreds of documents has
    # eval.sample_docs of them and the sample's cells of a few documents nearly only those.
    made: list[Any] = []
    plain: list[Any] = []  # the same cells without per-byte sample rows
    spent = []
    for first_pass, keep in ((True, suite.eval.sample_docs), (False, 0)):
        timed = dataclasses.replace(suite, analyses=(), eval=dataclasses.replace(suite.eval, sample_docs=keep))
        t0 = time.perf_counter()
        k, rows, kept = 0, 0, 0
        for es, mode, plan in cells:
            n = sum(p is not None for p in plan)
            cell = score_cell(timed, model, es, CLEAN, mode, seed, plan, scores[k : k + n])
            (made if first_pass else plain).append(cell)
            k += n
            rows += n
            kept += min(n, keep)
        spent.append((time.perf_counter() - t0, kept))
    doc_s = spent[1][0] / max(1, rows)
    sample_row_s = max(0.0, spent[0][0] - spent[1][0]) / max(1, spent[0][1])
    cell_s, assemble_row_s, assemble_sample_s = _cell_file_timing(made, plain, rows, spent[0][1])
    return {"score_window_s": per_window, "score_job_s": job_s, "score_doc_s": doc_s,
            "score_sample_row_s": sample_row_s, "score_cell_s": cell_s,
            "assemble_row_s": assemble_row_s, "assemble_sample_s": assemble_sample_s,
            "score_compile_s": max(0.0, first - one) if want_compile(suite.budget.compile, dev) else 0.0}


def _cell_file_timing(made: list[Any], plain: list[Any], rows: int, sample_rows: int) -> tuple[float, float, float]:
    """Seconds to save a cell (sealed, fsync'd), and for the results files (each cell loaded
    back and its rows written out, ``harness.pipeline.outputs.assemble``) per document row and
    per sample row's extra: ``made`` cells hold ``sample_rows`` sample rows in all, ``plain``
    the same ``rows`` rows without them. Written into a throwaway directory, never the run's
    (the run would take them for finished cells)."""
    with tempfile.TemporaryDirectory(prefix="tokbench-dry-cells-") as tmp:
        rd = RunDir(Path(tmp), log=lambda s: None)
        t0 = time.perf_counter()
        for i, cell in enumerate(made):
            rd.save_cell(f"dry{i}", cell)
        cell_s = (time.perf_counter() - t0) / max(1, len(made))
        assembled = []
        for group, name in ((made, "dry"), (plain, "plain")):
            for i, cell in enumerate(group):
                rd.save_cell(f"{name}{i}", cell)
            t0 = time.perf_counter()
            for i in range(len(group)):
                c = rd.load_cell(f"{name}{i}")
                _ = "".join(dumps(r) + "\n" for r in c["samples"]) if c is not None else ""
            assembled.append(time.perf_counter() - t0)
    return cell_s, assembled[1] / max(1, rows), max(0.0, assembled[0] - assembled[1]) / max(1, sample_rows)


def _analysis_timing(suite: Suite, train: Any, sample: list[EvalSet],
                     tokenizers: dict[str, Any]) -> tuple[float, float, float, float]:
    """(fit seconds, first rows' extra seconds, seconds per scored byte of a cell's buckets,
    seconds per scored byte of word tables, serially) of the suite's analyses: ``fit`` on the
    whole training part, as the run does (with the BPE tokenizers the dry run fitted on its
    sample: the morphology analysis borrows a BPE encoder's boundaries), then ``cell_buckets`` of
    the sample documents, per eval set and mode (clean_target scores only ``eval.target_bytes``)."""
    if not suite.analyses:
        return 0.0, 0.0, 0.0, 0.0
    encs = {label: _Tokenized(tok) for label, tok in tokenizers.items() if tok is not None}
    t0 = time.perf_counter()
    for spec in suite.analyses:
        spec.config.fit(train.docs, encs)
    fit_s = time.perf_counter() - t0

    def rows(part: int | None) -> int:
        """Buckets of the sample's cells (``part``: every other document from that one on);
        returns the bytes they scored."""
        n = 0
        for es in sample:
            docs = es.part.docs if part is None else es.part.docs[part::2]
            for mode in suite.eval.modes:
                spans = []
                for doc in docs:
                    scored = doc.data if mode == "full" else doc.data[: suite.eval.target_bytes]
                    spans.append((doc, scored, np.zeros(len(scored))))
                for spec in suite.analyses:  # a cell's buckets at once, as the run sums them
                    a = spec.config
                    if not a.datasets or es.part.name in a.datasets:
                        a.cell_buckets(spans)
                n += sum(len(sp[1]) for sp in spans)
        return n

    def timed(part: int | None) -> tuple[float, int]:
        t0 = time.perf_counter()
        n = rows(part)
        return time.perf_counter() - t0, n

    # Three passes: every other document (the first rows of each language train its segmenter,
    # lazily: a once-per-run cost), the other half (word tables of new text with trained
    # segmenters: the run makes them for every distinct text up front, in its "analyses' text
    # work", then buckets), then all again (buckets of cached tables: the cells' pace). Per
    # scored byte: the sample's documents are no typical length.
    (t_a, n_a), (t_b, n_b), (t_c, n_c) = timed(0), timed(1), timed(None)
    bucket_b = t_c / max(1, n_c)
    tables_b = max(0.0, t_b / max(1, n_b) - bucket_b)
    first_s = max(0.0, t_a - n_a * (tables_b + bucket_b))
    return fit_s, first_s, bucket_b, tables_b


@dataclasses.dataclass
class _Tokenized:
    """A trained BPE encoder as the analyses see it: its tokenizer (without its weights)."""

    tokenizer: Any
    registry_name: str = "bpe"


def _perturb_timing(suite: Suite, train: Any, evals: list[Any], stride: int, background: bool,
                    processes: int) -> Callable[[], tuple[float, float, float]]:
    """Start ``_perturb_time``; returns a function giving its result (seconds per seed, of which
    fitting). background: in a forked process (``harness.overlap.planahead.PlanAhead``; call this before
    CUDA is initialised)."""
    if not background or not can_fork():
        return lambda: _perturb_time(suite, train, evals, stride, processes)
    proc = PlanAhead(lambda: {"result": _perturb_time(suite, train, evals, stride, processes)})
    return lambda: proc.wait()["result"]


def _perturb_time(suite: Suite, train: Any, evals: list[Any], stride: int,
                  processes: int) -> tuple[float, float, float]:
    """Seconds to perturb and plan every cell of one seed: ``plan_rows`` on up to 4 documents
    per eval set, perturbation and mode, scaled to all documents, divided by the ``processes``
    the run perturbs in (at most one per task); plus fitting the perturbations once. Returns (total, fitting, the
    fraction of the sampled windows that are distinct): scoring forwards each distinct window
    of an eval set's cells once (``score_items``), and the sample's planned cells say how many
    that is — a perturbation that leaves a document as it was repeats its clean windows."""
    t0 = time.perf_counter()
    perts = perturbation_instances(suite, train, evals)
    fit_s = time.perf_counter() - t0
    specs = [CLEAN, *suite.perturbations]
    total = 0.0
    n_windows = n_distinct = 0
    for ep in evals:
        sample = EvalSet.of(dataclasses.replace(ep, docs=ep.docs[:4]))
        items = []  # every cell's windows of this eval set's sample, as scoring packs them
        for pspec in specs:
            for mode in suite.eval.modes:
                t1 = time.perf_counter()
                rows = plan_rows(suite, sample, pspec, perts.get((pspec.id, pspec.severity)), suite.seeds[0], mode)
                total += (time.perf_counter() - t1) * len(ep.docs) / max(1, len(sample.part.docs))
                items += [p.item for p in plan_items(suite, sample, mode, rows) if p is not None]
        fw = flatten_windows(items)
        n_windows += len(fw.flat)
        n_distinct += len(fw.distinct)
    kept = n_distinct / n_windows if n_windows and dedup_enabled() else 1.0
    return fit_s + total / max(1, min(processes, len(specs) * len(suite.eval.modes))), fit_s, kept


@contextlib.contextmanager
def _private_compile_caches(on: bool) -> Iterator[None]:
    """Point inductor's and Triton's on-disk caches at an empty temporary directory for the
    duration (removed afterwards): the dry run measures a cold compile, and a later run pays its
    own (a benchmark of the run stays a cold-compile benchmark)."""
    if not on:
        yield
        return
    tmp = tempfile.mkdtemp(prefix="tokbench-dry-compile-")
    keys = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
    old = {k: os.environ.get(k) for k in keys}
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(tmp, "inductor")
    os.environ["TRITON_CACHE_DIR"] = os.path.join(tmp, "triton")
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(tmp, ignore_errors=True)
