"""``tokbench run``: suite → data → encoders trained by one loop → perturbed scoring → results → report.

    Runner(load_suite("suites/smoke.yaml"), RunOptions()).run()

Everything finished is kept: models and cells are written atomically as they finish, and a
re-run of the same command skips them (a killed run resumes; new perturbations do not retrain).
``Runner`` holds the story of a run and its state (timings, facts, the processes working ahead);
each step is a function of its own module: the models (``models``), the plans (``plans``), the
work ahead of training (``ahead``), scoring (``scoring``, ``cells``), the cache keys (``keys``),
run.json (``facts``), and the results files and report (``outputs``).
"""

from __future__ import annotations

import errno
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from encoders.base import Encoder
from harness.config.permutation import Permutation
from harness.config.suite import EncoderSpec, PerturbationSpec, Suite
from harness.data.evalsets import EvalSet
from harness.data.load import DataPart, load_data, source_context
from harness.infra import watchdog
from harness.infra.accel import want_compile, warm_compile_pool, warm_pool_wanted
from harness.infra.determinism import deterministic_kernels
from harness.infra.device import pick_device
from harness.infra.meters import gemm_tflops
from harness.infra.results import RunDir
from harness.infra.watchdog import stall_limit
from harness.infra.writes import atomic_write_json
from harness.overlap import compileahead, reportproc
from harness.overlap.cellsbehind import CellsBehind, cells_behind_wanted
from harness.overlap.planahead import FitOnDemand, PlanAhead
from harness.pipeline import ahead as ahead_mod
from harness.pipeline.cells import baseline_cells
from harness.pipeline.facts import (
    ESTIMATE_FILE,
    estimate_vs_actual,
    record_bytes_per_segment,
    record_encoder_facts,
    run_json,
)
from harness.pipeline.keys import baseline_key, model_key
from harness.pipeline.models import TrainedModel, get_model, progress_bar
from harness.pipeline.outputs import assemble, render_report
from harness.pipeline.plans import (
    Instances,
    Plans,
    make_plans,
    perturbation_instances,
    plan_cells,
    try_perturbations,
)
from harness.pipeline.scoring import score_seed
from harness.pipeline.summary import phase_table
from harness.train.loop import build_encoder


@dataclass
class RunOptions:
    """Command-line options of ``tokbench run``."""

    out: Path | None = None
    device: str = "auto"
    limit: int | None = None
    prepare: bool = True  # let sources fetch/build their data first (idempotent)
    report: bool = True
    progress: bool = True
    cache_dir: Path | None = None
    checkpoint_seconds: float = 120.0
    plan_cache: bool = True  # keep perturbed texts in <cache>/perturbed for later runs
    ranks: int = 1  # --nproc: the processes a dry run estimates a scaling sweep on
    log: Callable[[str], None] = field(default=lambda s: print(s, file=sys.stderr))


class Runner:
    """One run of one suite. Public entry: ``run()``."""

    dp: Any = None  # harness.pipeline.distributed.DataParallel when each model trains across ranks
    ahead: PlanAhead | None = None  # the plan-ahead process while it runs (harness.overlap.planahead)
    fits_ahead: PlanAhead | None = None  # host-only encoder fits running ahead (start_fits_ahead)
    compile_ahead: compileahead.CompileAheadGroup | None = None  # the compile-ahead processes (harness.overlap.compileahead)
    plan_processes: int | None = None  # processes perturbing in plans(); None: every usable CPU
    writes_models = True  # False on the ranks of a data-parallel job other than rank 0

    def __init__(self, suite: Suite, opts: RunOptions) -> None:
        self.suite = suite
        self.opts = opts
        self.log = opts.log
        self.device = pick_device(opts.device)
        self.cells_behind = cells_behind_wanted(suite.overlap.cells_behind, self.device.type)
        self.warm_pool = warm_pool_wanted()  # likewise (harness.infra.accel.warm_compile_pool)
        self.report_process = reportproc.wanted(suite.overlap.report_process, self.device.type)
        stall_limit()  # likewise (harness.infra.watchdog: the pools' and the guarded loops' limit)
        self._plans_memo: dict[tuple[int, str], dict[Any, Any]] = {}  # (seed, eval set) -> its plans
        self._plans_lock = threading.Lock()  # the run's thread and the scoring thread: one makes them
        self._timings_lock = threading.Lock()  # timings several cell jobs add to at once
        # A trained model's files are written in a thread while the next model trains (on CUDA,
        # with the cells behind): sealing and fsync'ing them took 7.1 s of a standard seed on
        # the H200 host, 1.2 s a model on the critical path (BENCHMARKS.md). The
        # weights are copied to the host first, so what is written is the model as trained.
        self.saves = CellsBehind(self.cells_behind, name="tokbench-model-save")
        self.rd = RunDir(opts.out or Path("runs") / suite.name, log=self.log)
        watchdog.STACKS_DIR = self.rd.root  # a stuck loop's stacks land beside its results
        self.ctx = source_context(suite, opts.cache_dir, self.log)
        self.budget = suite.budget
        self.timings: dict[str, float] = {}
        self.encoder_facts: dict[str, dict[str, Any]] = {}
        self.data_facts: dict[str, Any] = {}
        self.analysis_facts: dict[str, Any] = {}
        self.eval_bytes = 0  # UTF-8 bytes of all eval sets (disk-space estimate)
        self.windowed_docs = 0  # samples whose edit rate is windowed (counted in assemble)
        self.report_path: Path | None = None  # set only once a report was written in full
        self.report_figure_seconds: dict[str, float] = {}  # each figure's seconds in the last report
        self.score_facts: dict[str, dict[str, float]] = {}
        self.score_compile_cache: dict[str, int] = {}  # scoring's graphs from the disk cache / anew
        self.compile_facts: dict[str, Any] = {}  # run.json "compile": the compile workers started early?
        self.analyses_ahead: dict[str, Any] = {}  # analyses prepared in the plan-ahead process, by name
        self.gemm_tflops: float | None = None
        self.gpus = 1  # GPUs the run trained on (a torchrun job's ranks may share them)
        self.scaling_facts: dict[str, Any] = {}  # refused grid points of a scaling sweep
        self.train_part: DataPart | None = None  # set by run(); primes the compressor baselines
        self.dictionaries: dict[tuple[Permutation, int], bytes] = {}


    # -- the story ----------------------------------------------------------------------------
    def run(self) -> Path:
        """Run the suite under the run-directory lock (one writer; see ``harness.infra.lock``)."""
        from harness.infra.cache import remove_stale_tmp
        from harness.infra.lock import RunLock

        with RunLock(self.rd.root, log=self.log):
            stale = remove_stale_tmp(self.rd.root)
            if stale:
                self.log(f"[cache] removed {len(stale)} temporary file(s) left by an interrupted write")
            threads = torch.get_num_threads()
            if self.device.type == "cuda":
                # This process's own torch CPU ops are small host bookkeeping (a batch's results,
                # BLT's patch sizes); on a pool of one thread per core they waited for cores the
                # collation and cell processes hold: 88 ms instead of 1 ms for a batch's patch
                # sizes as torch ops on an H100 host with 12 busy processes (BENCHMARKS.md).
                # The work that is heavy runs on the GPU or in other processes.
                torch.set_num_threads(1)
            try:
                with deterministic_kernels(self.budget.deterministic):
                    return self._run()
            except OSError as e:
                if e.errno == errno.ENOSPC:  # the CLI says how much space is needed (guards.py)
                    from harness.pipeline.guards import disk_need_estimate

                    params = {label: int(f.get("params_total", 0)) for label, f in self.encoder_facts.items()}
                    e.tokbench_need_bytes = disk_need_estimate(  # type: ignore[attr-defined]
                        self.suite, self.eval_bytes, params, self.rd.root)
                    e.tokbench_root = str(self.rd.root)  # type: ignore[attr-defined]
                raise
            finally:
                torch.set_num_threads(threads)

    def _run(self) -> Path:
        t_start = time.perf_counter()
        if self.warm_pool and want_compile(self.budget.compile, self.device):
            # the compile workers start while the data loads, not at the first model's compile
            self.compile_facts["warm_pool"] = warm_compile_pool()
        data = load_data(self.suite, self.ctx, prepare=self.opts.prepare, limit=self.opts.limit,
                         log=self.log)
        self.data_facts.update(data.facts)
        self.timings["data_seconds"] = data.seconds
        self.train_part = data.train
        self.eval_bytes = sum(e.n_bytes for e in data.evals)
        t0 = time.perf_counter()
        perts, evals = ahead_mod.start_plan_ahead(self, data)
        self.compile_ahead = compileahead.start(self, data.train, data.evals)
        self.gemm_tflops = gemm_tflops(self.device)  # the MFU ceiling, measured in this process
        self.rd.root.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.rd.root / "run.json", self.run_json("running"))
        if self.ahead is None:
            perts, evals = self.scoring_inputs(data)
            try_perturbations(self.suite, perts, data.evals)
        self.timings["perturb_fit_seconds"] = time.perf_counter() - t0
        cell_keys: list[str] = []
        t_train = t_score = 0.0
        self.timings["perturb_seconds"] = 0.0
        try:
            for seed in self.suite.seeds:
                t0 = time.perf_counter()
                models = self.train_models(seed, data.train)
                t_train += time.perf_counter() - t0
                ahead_mod.wait_plan_ahead(self)  # first: it may hand the analyses their prepared text work
                t0 = time.perf_counter()
                self.fit_analyses(data.train, models, seed)
                self.timings["analyses_seconds"] = self.timings.get("analyses_seconds", 0.0) + time.perf_counter() - t0
                t0 = time.perf_counter()
                cell_keys += score_seed(self, seed, evals, models, perts)
                t_score += time.perf_counter() - t0
                del models
                self.join_saves()  # the seed's models are on disk before its results files
        finally:  # an error before scoring: the processes are not wanted
            self.join_saves(quiet=sys.exc_info()[0] is not None)  # a model file is never half-done
            for proc in (self.ahead, self.fits_ahead, self.compile_ahead):
                if proc is not None:
                    proc.stop()
            if self.compile_ahead is not None and self.compile_ahead.finished is not None:
                self.timings["compile_ahead_seconds"] = self.compile_ahead.finished["seconds"]
        self.timings.update({"train_seconds": t_train, "score_seconds": t_score,
                             "score_forward_seconds": t_score - self.timings["perturb_seconds"]})
        self.timings["model_other_seconds"] = max(0.0, t_train - self.models_accounted())
        # the report's process imports its libraries while the results files are written
        rp = reportproc.ReportProcess.start() if self.opts.report and self.report_process else None
        try:
            self._finish(cell_keys, t_start, rp)
        finally:
            if rp is not None:
                rp.close()
        return self.rd.root

    def _finish(self, cell_keys: list[str], t_start: float, rp: reportproc.ReportProcess | None) -> None:
        """``run``'s end: results files, run.json, the report (in ``rp`` if given), the tables."""
        t0 = time.perf_counter()
        self.assemble(cell_keys)
        self.record_bytes_per_segment()
        self.timings["assemble_seconds"] = time.perf_counter() - t0
        self.timings["total_seconds"] = time.perf_counter() - t_start
        atomic_write_json(self.rd.root / "run.json", self.run_json("finished"))
        if self.opts.report:
            t0 = time.perf_counter()
            self.render_report(rp)
            self.timings["report_seconds"] = time.perf_counter() - t0
            self.timings["total_seconds"] = time.perf_counter() - t_start
            atomic_write_json(self.rd.root / "run.json", self.run_json("finished"))
        self.log(phase_table(self.timings, self.encoder_facts))
        eva = estimate_vs_actual(self)
        if eva is not None:
            self.log("[time] estimated vs actual per seed: " + ", ".join(
                f"{k} {eva['estimated'].get(k, 0.0):.0f}/{v:.0f} s" for k, v in eva["actual"].items()))
            # the estimate was of this run (run.json keeps both): a later run into this
            # directory resumes from caches and must not be read against it
            (self.rd.root / ESTIMATE_FILE).unlink(missing_ok=True)

    def train_models(self, seed: int, train: DataPart) -> dict[str, TrainedModel]:
        """Train (or load) every encoder for one seed, {label: model}. Under ``match: flops`` the
        reference encoder goes first and its total FLOPs are every other encoder's budget."""
        if self.suite.scaling is not None:  # an IsoFLOP grid: one model per (budget, size, encoder)
            from harness.pipeline.sweep import train_sweep

            return {label: TrainedModel(*m) for label, m in train_sweep(self, seed, train).items()}
        models: dict[str, TrainedModel] = {}
        flops_target = None
        for spec in self.training_order():
            if self.compile_ahead is not None and seed == self.suite.seeds[0]:
                self.compile_ahead.mark_training(spec.label)  # were its graphs compiled ahead by now?
            enc, meta = get_model(self, spec, seed, train, flops_target)
            if self.budget.match == "flops" and flops_target is None and not meta.get("trained_elsewhere"):
                flops_target = float(meta["total_flops"])
            t0 = time.perf_counter()
            if self.ahead is not None:  # a perturbation plugin that failed there: stop now
                ahead_mod.plan_ahead_result(self, wait=False)  # its result, once there, is received here
            self._add_time("model_plan_ahead_check_seconds", t0)
            models[spec.label] = TrainedModel(enc, meta, spec)
            t0 = time.perf_counter()
            self.record_encoder_facts(spec.label, spec, seed, meta)
            # run.json as the models finish: a killed run still shows what was trained, how fast
            atomic_write_json(self.rd.root / "run.json", self.run_json("running"))
            self._add_time("model_record_seconds", t0)
        return models

    def join_saves(self, quiet: bool = False) -> None:
        """Wait for the model file being written behind the run (re-raising its error, e.g. a
        full disk, unless ``quiet``); the wait is ``model_save_wait_seconds``."""
        t0 = time.perf_counter()
        try:
            self.saves.join(quiet)
        finally:
            self._add_time("model_save_wait_seconds", t0)

    def models_accounted(self) -> float:
        """Seconds of the models' phase that run.json accounts for: the fit walls and training
        seconds of the models trained in this process, and the building and saving of models
        (the rest of that phase — loading cached models, the loop's set-up and tear-down beyond
        its clock, run.json — is ``model_other_seconds``)."""
        return sum(self.timings.get(k, 0.0) for k in ("model_fit_train_seconds", "model_build_seconds",
                                                       "model_save_seconds"))

    def _add_time(self, key: str, t0: float) -> None:
        """Add the seconds since ``t0`` (``time.perf_counter``) to ``self.timings[key]``."""
        self.timings[key] = self.timings.get(key, 0.0) + time.perf_counter() - t0

    def fit_analyses(self, train: DataPart, models: dict[str, TrainedModel], seed: int | None = None) -> None:
        """Fit every analysis on the training part with this seed's ``models``; adopt the text
        work prepared ahead for the first seed; record each analysis's facts for run.json."""
        for spec in self.suite.analyses:
            a = spec.config
            a.fit(train.docs, {label: m.enc for label, m in models.items()})
            # prepared in the plan-ahead process under the same fit: its text work is done
            ahead = self.analyses_ahead.pop(a.registry_name, None) if seed == self.suite.seeds[0] else None
            adopted = a.adopt_prepared(ahead) if ahead is not None else False
            describe = getattr(a, "describe", None)
            self.analysis_facts[a.registry_name] = {**(describe() if callable(describe) else {}),
                                                    **({"prepared_ahead": adopted} if ahead is not None else {})}

    # -- steps the story and its subclasses call ----------------------------------------------
    def model_key(self, spec: EncoderSpec, seed: int, train_fp: str, extra: dict[str, Any] | None = None) -> str:
        """The model cache key of ``spec`` trained for ``seed`` (``harness.pipeline.keys.model_key``)."""
        return model_key(self.budget, spec, seed, train_fp, extra)

    def build(self, spec: EncoderSpec, seed: int) -> Encoder:
        """A fresh encoder for ``spec``, its initial weights fixed by ``seed``."""
        return build_encoder(spec, seed, self.ctx.base_dir)

    def _bar(self, desc: str, total: int) -> Callable[[int, int, float], None] | None:
        """A tqdm progress callback for ``train_encoder`` (None when progress is off)."""
        return progress_bar(self.opts.progress, desc, total)

    def training_order(self) -> list[EncoderSpec]:
        """The encoders in the order they are trained (``Suite.training_order``)."""
        return self.suite.training_order()

    def scoring_inputs(self, data: Any) -> tuple[Instances, list[EvalSet]]:
        """Record loaded ``data`` on the runner (its facts; the train part, which perturbation
        fits and compressor baselines read) and build what scoring takes: the perturbations
        fitted for the eval sets' languages, and the eval sets."""
        self.data_facts.update(data.facts)
        self.train_part = data.train
        return perturbation_instances(self.suite, data.train, data.evals), [EvalSet.of(e) for e in data.evals]

    def plans(self, es: EvalSet, perts: Instances | FitOnDemand, seed: int) -> Plans:
        """Every cell's plan of ``es`` for ``seed`` (``make_plans``), with the run's plan cache."""
        return make_plans(self.suite, es, plan_cells(self.suite), perts, seed,
                          cache_dir=self.ctx.cache_dir / "perturbed" if self.opts.plan_cache else None,
                          train_fp=self.data_facts["train"]["fingerprint"], processes=self.plan_processes)

    def baseline_cells(self) -> list[tuple[str, Permutation]]:
        """(compressor, permutation) of the baseline cells this process makes."""
        return baseline_cells(self.suite)

    def baseline_key(self, name: str, perm: Permutation, fp: str, pspec: PerturbationSpec, mode: str,
                     seed: int) -> str:
        """A compressor cell's cache key (``harness.pipeline.keys.baseline_key``)."""
        train_fp = self.train_part.fingerprint if self.train_part is not None else None
        return baseline_key(self.suite, train_fp, name, perm, fp, pspec, mode, seed)

    def record_encoder_facts(self, label: str, spec: EncoderSpec, seed: int, meta: dict[str, Any],
                             extra: tuple[str, ...] = ()) -> None:
        """A trained model's ``meta`` into run.json's ``encoders`` (``harness.pipeline.facts``)."""
        record_encoder_facts(self.encoder_facts, label, spec, seed, meta, extra)

    def run_json(self, status: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        """run.json's content now (``harness.pipeline.facts.run_json``)."""
        return run_json(self, status, extra)

    def assemble(self, cell_keys: list[str]) -> None:
        """The results files from the cells; their rows kept in ``self.rows``."""
        self.rows, self.windowed_docs = assemble(self.rd, cell_keys)

    def record_bytes_per_segment(self) -> None:
        """Bytes per token / patch on each clean eval set, from the results rows, into run.json."""
        record_bytes_per_segment(self.rows, self.encoder_facts, self.suite.eval.modes[0])

    def render_report(self, rp: reportproc.ReportProcess | None = None) -> None:
        """The report, in ``rp`` if given (``harness.pipeline.outputs.render_report``)."""
        render_report(self, rp)
