"""``tokbench run``: suite → data → encoders trained by one loop → perturbed scoring → results → report.

    Runner(load_suite("suites/smoke.yaml"), RunOptions()).run()

Everything finished is kept: models and cells are written atomically as they finish, and a
re-run of the same command skips them (a killed run resumes; new perturbations do not retrain).
"""

from __future__ import annotations

import copy
import errno
import inspect
import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from core.files import part_file, write_parts_atomic
from core.forkpool import WorkerDied, usable_cpus
from core.metrics import bpb
from core.schema import BUCKET_COLUMNS, RESULT_COLUMNS
from encoders.base import Encoder, config_to_dict
from harness.config.permutation import Permutation, variant_label
from harness.config.pretrained import is_trained_elsewhere
from harness.config.suite import SCHEMA_VERSION, EncoderSpec, PerturbationSpec, Suite
from harness.data.batchscore import CachedRow, PlanCache, code_hash, perturb_many
from harness.data.evalsets import CLEAN, EvalSet, decode, encode
from harness.data.load import DataPart, char_boundary, load_data, source_context, training_windows
from harness.data.perturb import apply
from harness.infra import plugins, watchdog
from harness.infra.accel import (
    cache_counts,
    cache_counts_since,
    compile_backbones,
    compile_clock,
    compile_since,
    gemm_tflops,
    one_torch_thread,
    want_compile,
    warm_compile_pool,
    warm_pool_wanted,
)
from harness.infra.determinism import deterministic_kernels
from harness.infra.device import pick_device
from harness.infra.provenance import git_sha, hardware, package_versions, tokbench_version
from harness.infra.results import RunDir
from harness.infra.watchdog import stall_limit
from harness.infra.writes import atomic_write_json, dumps, stable_hash, write_csv
from harness.overlap import compileahead, reportproc
from harness.overlap.cellsbehind import CellsBehind, cells_behind_wanted
from harness.overlap.planahead import (
    FitOnDemand,
    PlanAhead,
    plan_ahead_processes,
    plan_ahead_wanted,
)
from harness.pipeline.summary import phase_table
from harness.score.fragility import (
    BaselineDoc,
    baseline_metrics,
    compressor_dictionary,
    permutation_columns,
    permuter_for,
)
from harness.score.items import (
    FlatWindows,
    PlanRow,
    ScoreJob,
    dedup_enabled,
    flatten_windows,
    plan_clean_target,
    plan_full,
    plan_partition,
    score_prestart_wanted,
    split_for_target,
    start_scoring,
)
from harness.score.metrics import CellTotals, cell_metrics, count_words
from harness.score.pretrained import admit
from harness.train.loop import Checkpointer, build_encoder, fit_context, train_encoder
from perturbations.base import Perturbation
from perturbations.measure import EXACT_LIMIT, WINDOW, edit_rate, edit_rate_method
from perturbations.morphology import MorfessorSegmenter
from sources.base import Document

ESTIMATE_FILE = "estimate.json"  # written by --dry-run into the run directory


def estimate_key(suite: Any, limit: int | None) -> str:
    """What a dry run's estimate is of: the resolved suite and ``--limit``. A run compares
    itself with ``estimate.json`` only when its own key is the same."""
    import hashlib

    blob = json.dumps({"suite": suite.raw, "limit": limit}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


SPEED_KEYS = ("compile", "micro_batch_bytes", "cuda_graphs")  # budget keys that change speed/memory, not the model
TEXT_LIMIT = 20_000  # characters of each text kept in samples.jsonl
SAMPLE_BYTES = 65_536  # scored bytes of a sampled document kept with their per-byte NLL


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


def cache_budget(budget: Any) -> dict[str, Any]:
    """The budget as it enters the model cache key: without the speed-only keys, so turning
    compile or micro-batching on reuses the models trained without them (and old caches); and
    ``data_parallel`` and ``deterministic`` only when true, so the keys (and caches) of earlier
    runs did not change when those keys were added."""
    out = {k: v for k, v in asdict(budget).items() if k not in SPEED_KEYS}
    for key in ("data_parallel", "deterministic"):
        if not out.get(key):
            out.pop(key, None)
    return out


def cell_processes() -> int:
    """Forked processes that make a model's cells from its scores (rows, samples, buckets;
    CPU work): at most 4 — on an H200 host 16 made 50-document cells no faster (BENCHMARKS.md)."""
    return min(4, usable_cpus())


def assemble_processes(n_cells: int) -> int:
    """Forked processes that read the cells back for the results files: up to 8 (each reads a
    contiguous run of cells), none for a handful of cells (forking costs more than it saves)."""
    return min(8, usable_cpus()) if n_cells >= 64 else 1


# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainedModel:
    """An encoder trained (or loaded) for one seed, with its run.json facts and suite entry."""

    enc: Encoder
    meta: dict[str, Any]
    spec: EncoderSpec


# (perturbation id, severity) -> {document language: the instance for it}; None = language unknown
Instances = dict[tuple[str, float], dict[str | None, Perturbation]]


def train_mfu(st: dict[str, Any], peak: float) -> dict[str, float]:
    """Training MFU of one model's train stats ``st`` (run.json ``encoders.*.seeds.*.train``)
    against ``peak`` FLOP/s (the bf16 GEMM ceiling): ``mfu`` (model FLOPs with causal attention
    at half, ``flops_causal_attn_half``, ÷ training seconds), ``mfu_full_attn`` (run.json's own
    count), ``mfu_after_first_step`` (the first step's FLOPs and seconds, the cold compile's,
    left out) and, on CUDA, ``mfu_median_step`` (the mean step's FLOPs after the first ÷ the
    median device step time of ``step_clock``: the steady pace, with neither the compile nor
    the slow steps a GPU shared with other work makes). A data-parallel model's FLOPs are the
    sums over its ranks (train stats ``ranks``): it divides by ranks × peak. Fields whose inputs
    are missing are left out (records from before them, one-step runs)."""
    if "flops_causal_attn_half" not in st or not peak:
        return {}
    ranks_peak = peak * st.get("ranks", 1)
    sec = st["seconds"] or math.nan
    f = st["flops_causal_attn_half"]
    out = {"mfu": f / sec / ranks_peak, "mfu_full_attn": st["flops"] / sec / ranks_peak}
    steps = st.get("steps", 0)
    first_f = st.get("first_step_flops_causal_attn_half")
    first_s = st.get("first_step_seconds") or 0.0
    if first_f is not None and steps > 1 and sec > first_s:
        out["mfu_after_first_step"] = (f - first_f) / (sec - first_s) / ranks_peak
    clock = st.get("step_clock")
    if clock and clock.get("median_ms") and steps > 1:
        # without the first step's own count (older records), every step is taken as equal
        per_step = (f - first_f) / (steps - 1) if first_f is not None else f / steps
        out["mfu_median_step"] = per_step / (clock["median_ms"] / 1e3) / ranks_peak
    return out


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

    # -- models -------------------------------------------------------------------------------
    def model_key(self, spec: EncoderSpec, seed: int, train_fp: str, extra: dict[str, Any] | None = None) -> str:
        return stable_hash({
            "encoder": spec.name, "config": config_to_dict(spec.config),
            "backbone": config_to_dict(spec.backbone), "budget": cache_budget(self.budget),
            "train": train_fp, "seed": seed, "version": tokbench_version(), **(extra or {}),
        })  # file names come from this hash only, never from user text (labels, ids)

    def build(self, spec: EncoderSpec, seed: int) -> Encoder:
        return build_encoder(spec, seed, self.ctx.base_dir)

    def _bar(self, desc: str, total: int) -> Callable[[int, int, float], None] | None:
        """A tqdm progress callback for ``train_encoder`` (None when progress is off)."""
        if not self.opts.progress:
            return None
        bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, leave=False, file=sys.stderr, mininterval=1.0)

        def update(seen: int, n: int, loss: float) -> None:
            bar.update(seen - bar.n)
            bar.set_postfix_str(f"loss {loss:.3f} bpb", refresh=False)
            if seen >= n:
                bar.close()

        return update

    def get_model(self, spec: EncoderSpec, seed: int, train: DataPart, flops_target: float | None) -> tuple[Encoder, dict[str, Any]]:
        """Load the cached model, or build, fit and train it (resuming a partial checkpoint)."""
        extra: dict[str, Any] = {"flops_target": flops_target} if flops_target else {}
        if not spec.permutation.is_identity:  # a model of the permuted stream is another model
            extra["permutation"] = asdict(spec.permutation)
        key = self.model_key(spec, seed, train.fingerprint, extra or None)
        permuter = permuter_for(spec.permutation, self.budget.context_bytes, seed)
        path = self.rd.model_path(key)
        t_build = time.perf_counter()
        enc = self.build(spec, seed)
        if is_trained_elsewhere(enc):  # loaded with its weights, never fitted or trained here
            key = self.model_key(spec, seed, "trained elsewhere", {"checkpoint": enc.describe().get("checkpoint_sha256")})
            return enc, admit(enc, spec.label, key, self.device, seed, log=self.log)
        cached = self.rd.load_model(key)
        if cached is not None:
            state, meta = cached
            enc.load_state_dict(state)
            enc.to(self.device).eval()
            if want_compile(self.budget.compile, self.device):
                compile_backbones(enc)
            self.log(f"[model] {spec.label} seed {seed}: loaded from cache {path.name}")
            return enc, meta
        self.log(f"[model] {spec.label} seed {seed}: fit + train on {self.budget.train_bytes:,} bytes ({self.device})")
        enc.to(self.device)
        self._add_time("model_build_seconds", t_build)
        t0 = time.perf_counter()
        ctx = fit_context(train.docs, self.budget, self.device, seed, log=self.log,
                          progress=lambda what, n: self._bar(f"{spec.label} ({what})", n),
                          permuter=permuter)
        ahead = self.fit_ahead_state(spec, seed) if enc.host_fit else None
        if ahead:
            enc.set_extra_state(ahead)  # fitted in the fit-ahead process: fit() below finds it
        try:
            fit = enc.fit(ctx) or {}
            if ahead:
                fit["fitted_ahead"] = True
        except (Exception, SystemExit) as e:  # one line naming the encoder
            if isinstance(e, (OSError, MemoryError)):
                raise  # disk full and friends keep their own messages
            raise plugins.plugin_failed(enc, "fit", e) from e
        fit.setdefault("seconds", time.perf_counter() - t0)
        fit["wall_seconds"] = time.perf_counter() - t0
        n_bytes = self.budget.train_bytes
        max_flops = None
        if flops_target is not None:
            # match: flops — train until this encoder has spent the reference's FLOPs (fit
            # included); the schedule runs over the bytes that budget is estimated to buy.
            probe = list(training_windows(train.docs, 8 * self.budget.batch_bytes, self.budget.context_bytes, seed))
            b = enc.collate(probe, [0] * len(probe))
            per_byte = 3.0 * enc.flops(b) / max(1, b.scored_bytes)
            max_flops = max(0.0, flops_target - float(fit.get("flops", 0.0)))
            n_bytes = max(self.budget.context_bytes, int(max_flops / per_byte))
        windows = training_windows(train.docs, n_bytes if max_flops is None else 10 * n_bytes, self.budget.context_bytes, seed)
        stats = train_encoder(
            enc, windows, n_bytes, self.budget, self.device, max_flops=max_flops,
            checkpoint=Checkpointer(self.rd.partial_path(key), self.opts.checkpoint_seconds, log=self.log),
            progress=self._bar(f"train {spec.label} s{seed}", n_bytes), permuter=permuter, dp=self.dp,
        )
        self.timings["model_fit_train_seconds"] = (self.timings.get("model_fit_train_seconds", 0.0)
                                                   + fit["wall_seconds"] + stats["seconds"])
        self.timings["model_setup_seconds"] = self.timings.get("model_setup_seconds", 0.0) + stats["setup_seconds"]
        total = sum(p.numel() for p in enc.parameters())
        emb = enc.embedding_parameters()
        meta = {
            "key": key,
            "fit": fit,
            "train": stats,
            "params_total": total,
            "params_embedding": emb,
            "params_non_embedding": total - emb,
            "flops_per_byte_train": stats["flops"] / max(1, stats["bytes"]),
            "flops_per_byte_infer": stats["forward_flops"] / max(1, stats["bytes"]),
            "total_flops": stats["flops"] + float(fit.get("flops", 0.0)),
            "describe": enc.describe(),
        }
        if self.writes_models:  # one writer per model (data parallel: rank 0)
            t0 = time.perf_counter()
            state = {k: v.detach().to("cpu", copy=True) if isinstance(v, torch.Tensor) else copy.deepcopy(v)
                     for k, v in enc.state_dict().items()}
            saved = copy.deepcopy(meta)  # run.json's copy gains keys later; the file keeps these
            self.saves.submit(lambda: self.rd.save_model(key, state, saved), lambda: None)
            self._add_time("model_save_seconds", t0)
        self.log(
            f"[model] {spec.label} seed {seed}: {stats['bytes']:,} bytes in {stats['seconds']:.1f}s, "
            f"final loss {stats['final_loss_bpb']:.3f} bpb"
        )
        return enc, meta

    # -- perturbations ------------------------------------------------------------------------
    def scoring_inputs(self, data: Any) -> tuple[Instances, list[EvalSet]]:
        """Record loaded ``data`` on the runner (its facts; the train part, which perturbation
        fits and compressor baselines read) and build what scoring takes: the perturbations
        fitted for the eval sets' languages, and the eval sets."""
        self.data_facts.update(data.facts)
        self.train_part = data.train
        return self.perturbation_instances(data.train, data.evals), [EvalSet.of(e) for e in data.evals]

    def perturbation_instances(self, train: DataPart, evals: Sequence[DataPart]) -> Instances:
        """The instances the loader built (one per perturbation id and severity), fitted, and
        their variants for every document language of the eval sets ``evals``. ``fit`` runs once
        per id on the training text; the other severities share what it learned."""
        languages = {d.language for e in evals for d in e.docs if d.language is not None}
        out: Instances = {}
        fitted: dict[str, Perturbation] = {}
        texts: list[str] | None = None
        for spec in self.suite.perturbations:
            inst: Perturbation = spec.perturbation
            if type(inst).fit is not Perturbation.fit:
                if spec.id not in fitted:
                    if texts is None:
                        texts = [decode(d.data) for d in train.docs]
                    try:
                        inst.fit(texts)
                    except (Exception, SystemExit) as e:  # one line naming the plugin
                        raise plugins.plugin_failed(inst, "fit", e) from e
                    fitted[spec.id] = inst
                else:
                    inst.share_fit(fitted[spec.id])
            out[(spec.id, spec.severity)] = {
                None: inst, **{lang: inst.for_language(lang) for lang in sorted(languages)}
            }
        return out

    def plan_cells(self) -> list[tuple[PerturbationSpec, str]]:
        """Every (perturbation, mode) of an eval set, clean first, in results.csv order."""
        return [(pspec, mode) for pspec in [CLEAN, *self.suite.perturbations] for mode in self.suite.eval.modes]

    def start_plan_ahead(self, data: Any) -> tuple[Instances | FitOnDemand, list[EvalSet]]:
        """The eval sets, and the perturbation instances fitted on demand; when plan-ahead is on
        (``harness.overlap.planahead``), a forked process starts fitting the perturbations and writing
        every seed's plans into the plan cache while the models train (``self.ahead``; None when
        off, and the caller fits the perturbations itself)."""
        self.data_facts.update(data.facts)
        self.train_part = data.train
        evals = [EvalSet.of(e) for e in data.evals]
        perts = FitOnDemand([(s.id, s.severity) for s in self.suite.perturbations],
                            lambda: self.perturbation_instances(data.train, data.evals))
        self.ahead = None
        if not plan_ahead_wanted(self.suite.overlap.plan_ahead, self.device.type, self.opts.plan_cache):
            return perts, evals

        def work() -> dict[str, Any]:
            t0 = time.perf_counter()
            fitted = perts.fitted()
            self.try_perturbations(fitted, data.evals)  # a failing plugin: raised in the parent
            t1 = time.perf_counter()
            self.plan_processes = plan_ahead_processes()
            first: list[tuple[EvalSet, dict[Any, Any]]] = []
            for seed in self.suite.seeds:
                for es in evals:
                    plans = self.plans(es, self.plan_cells(), fitted, seed)
                    if seed == self.suite.seeds[0]:
                        first.append((es, plans))
            t2 = time.perf_counter()
            prepared = self.prepare_analyses_ahead(data.train, first)
            # Morfessor models trained for the perturbations: the morphology analysis trains the
            # same ones in the main process otherwise (same types and seed)
            return {"fit_seconds": t1 - t0, "plans_seconds": t2 - t1, "analyses_seconds": time.perf_counter() - t2,
                    "segmenters": MorfessorSegmenter.trained_models(), "analyses": prepared}

        self.ahead = PlanAhead(work, setup=one_torch_thread)
        self.start_fits_ahead(data.train)
        return perts, evals

    def prepare_analyses_ahead(self, train: DataPart, first: list[tuple[EvalSet, dict[Any, Any]]]) -> dict[str, Any]:
        """In the plan-ahead process: each analysis fitted as the run will fit it for the first
        seed — with only the encoders whose fit it reads (``Analysis.fit_encoders``: the BPE
        merges the morphology analysis takes its boundaries from), fitted here — and prepared on
        the first seed's plans; {analysis name: ``export_prepared()``}. The run adopts each after
        its own fit if it was made under the same fit (``adopt_prepared``), so its text work
        before scoring (≈ 10 s of a standard seed on the H200 host: BENCHMARKS.md)
        is done here while the models train. Anything that fails here is left to the run."""
        seed = self.suite.seeds[0]
        out: dict[str, Any] = {}
        specs = {s.label: s for s in self.suite.encoders}
        for aspec in self.suite.analyses:
            a = aspec.config
            try:
                encs = {}
                for label in a.fit_encoders([(s.label, s.name) for s in self.suite.encoders]):
                    cls = plugins.resolve("encoder", specs[label].name, search_paths=[self.ctx.base_dir])
                    if not getattr(cls, "host_fit", False):
                        raise ValueError(f"{label}: its fit needs the device")
                    encs[label] = self.fit_on_host(specs[label], seed, train)
                a.fit(train.docs, encs)
                # on the plan-ahead process's share of the CPUs, where the analysis takes a count
                kw = {"processes": self.plan_processes} if "processes" in inspect.signature(a.prepare).parameters else {}
                for es, plans in first:
                    if not a.datasets or es.part.name in a.datasets:
                        a.prepare([(p.doc, p.item.scored_bytes) for plan in plans.values() for p in plan if p is not None],
                                  **kw)
                got = a.export_prepared()
            except Exception:  # noqa: BLE001 - only a head start: the run prepares as before
                got = None
            if got is not None:
                out[a.registry_name] = got
        return out

    def fit_on_host(self, spec: EncoderSpec, seed: int, train: DataPart) -> Encoder:
        """A fresh encoder for ``spec`` with its ``fit`` run on the CPU, as the run fits it (the
        fit of a ``host_fit`` encoder: BPE's merges), in a process working ahead of training."""
        enc = self.build(spec, seed)
        enc.fit(fit_context(train.docs, self.budget, torch.device("cpu"), seed, log=lambda s: None,
                            permuter=permuter_for(spec.permutation, self.budget.context_bytes, seed)))
        return enc

    def start_fits_ahead(self, train: DataPart) -> None:
        """Under plan-ahead, a second forked process fits every encoder whose fit is host work
        (``Encoder.host_fit``: BPE's merges, 3-6 s each on the H200 host) for the first seed, one
        process per encoder, while the first models train; ``get_model`` hands each result to
        its encoder (``set_extra_state``), whose ``fit`` then finds it done. The same merges as a
        fit here (the encoder checks the key); any failure over there and the encoder is
        fitted here, as without it."""
        seed = self.suite.seeds[0]
        specs = [s for s in self.training_order()
                 if getattr(plugins.resolve("encoder", s.name, search_paths=[self.ctx.base_dir]), "host_fit", False)]
        self.fits_ahead = None
        if not specs:
            return

        def fit_one(spec: EncoderSpec) -> dict[str, Any]:
            return self.fit_on_host(spec, seed, train).get_extra_state()

        def work() -> dict[str, Any]:
            t0 = time.perf_counter()
            states = perturb_many(specs, fit_one, len(specs), stage="fit-ahead")
            return {"seconds": time.perf_counter() - t0, "states": dict(zip((s.label for s in specs), states))}

        self.fits_ahead = PlanAhead(work, setup=one_torch_thread)

    def fit_ahead_state(self, spec: EncoderSpec, seed: int) -> dict[str, Any] | None:
        """The state the fit-ahead process learned for ``spec`` (waiting for it), or None: not
        fitted ahead (another seed, not host work, plan-ahead off) or failed there."""
        if self.fits_ahead is None or seed != self.suite.seeds[0]:
            return None
        t0 = time.perf_counter()
        try:
            got = self.fits_ahead.wait()
        except Exception as e:  # noqa: BLE001 - only a speed-up: fit here, where errors are named
            self.log(f"[fit] fitting ahead failed ({type(e).__name__}); fitting here")
            self.fits_ahead = None
            return None
        finally:
            self._add_time("fit_ahead_wait_seconds", t0)
        self.timings["fit_ahead_seconds"] = got["seconds"]
        return got["states"].get(spec.label)

    def plan_ahead_result(self, wait: bool) -> dict[str, Any] | None:
        """The plan-ahead process's result (None while it runs, with ``wait`` False). Its
        exception is re-raised here (a perturbation plugin that failed: the run's one-line
        error); if the process itself died (killed, out of memory), the run goes on without it
        — the perturbations are fitted and the missing plans made here, as with plan-ahead off."""
        assert self.ahead is not None
        try:
            if wait:
                return self.ahead.wait()
            self.ahead.check()
            return self.ahead.result
        except WorkerDied as e:
            self.log(f"[perturb] {e}; perturbing in this process instead")
            self.ahead = None
            return None

    def wait_plan_ahead(self) -> None:
        """Before the first scoring: wait for the plan-ahead process (its exception re-raised
        here) and record its own seconds and how long scoring waited for it."""
        if self.ahead is None or "plan_ahead_plans_seconds" in self.timings:
            return
        t0 = time.perf_counter()
        got = self.plan_ahead_result(wait=True)
        self.timings["plan_ahead_wait_seconds"] = time.perf_counter() - t0
        if got is None:
            return
        self.timings["plan_ahead_fit_seconds"] = got["fit_seconds"]
        self.timings["plan_ahead_plans_seconds"] = got["plans_seconds"]
        self.timings["plan_ahead_analyses_seconds"] = got.get("analyses_seconds", 0.0)
        MorfessorSegmenter.adopt(got["segmenters"])
        self.analyses_ahead = got.get("analyses", {})

    def try_perturbations(self, perts: Instances, evals: list[DataPart]) -> None:
        """Perturb the start of the first eval document with every perturbation before training,
        so a plugin that raises in ``perturb()`` fails in seconds, not after training."""
        doc = evals[0].docs[0]
        sample = decode(doc.data[:2000])
        for spec in self.suite.perturbations:
            self.perturbed(perts.get((spec.id, spec.severity)), spec, self.suite.seeds[0], doc, sample)

    def perturbed(self, insts: dict[str | None, Perturbation] | None, spec: PerturbationSpec,
                  seed: int, doc: Document, text: str) -> str:
        """The perturbed text of one document; its rng depends only on (seed, id, params, doc id)."""
        if spec.id == "clean" or insts is None:
            return text
        return apply(insts[doc.language], text, seed, spec.id, spec.params, doc.id)  # params hold severity

    # -- the run ------------------------------------------------------------------------------
    def run_json(self, status: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "tokbench_version": tokbench_version(),
            "status": status,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
            "suite": self.suite.raw,
            "suite_path": self.suite.path,
            "git_sha": git_sha(),
            "packages": package_versions(),
            "hardware": hardware(self.device),
            "precision": self.precision_facts(),
            "data": self.data_facts,
            "encoders": self.encoder_facts,
            "analyses": self.analysis_facts,
            "timings": self.timings,
            "edit_rate": {"exact_limit_chars": EXACT_LIMIT, "window_chars": WINDOW,
                          "windowed_documents": self.windowed_docs},
            "speed": self.speed_facts(),
            "estimate_vs_actual": self.estimate_vs_actual(),
            "compile_ahead": self.compile_ahead.facts() if self.compile_ahead is not None else {"on": False},
            "score_compile_cache": self.score_compile_cache,
            **({"compile": self.compile_facts} if self.compile_facts else {}),
            **({"report_figure_seconds": self.report_figure_seconds} if self.report_figure_seconds else {}),
            **({"scaling": self.scaling_facts} if self.suite.scaling is not None else {}),
            **(extra or {}),
        }

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
        perts, evals = self.start_plan_ahead(data)
        self.compile_ahead = compileahead.start(self, data.train, data.evals)
        self.gemm_tflops = gemm_tflops(self.device)  # the MFU ceiling, measured in this process
        self.rd.root.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.rd.root / "run.json", self.run_json("running"))
        if self.ahead is None:
            perts, evals = self.scoring_inputs(data)
            self.try_perturbations(perts, data.evals)
        self.timings["perturb_fit_seconds"] = time.perf_counter() - t0
        cell_keys: list[str] = []
        t_train = t_score = 0.0
        self.timings["perturb_seconds"] = 0.0
        try:
            for seed in self.suite.seeds:
                t0 = time.perf_counter()
                models = self.train_models(seed, data.train)
                t_train += time.perf_counter() - t0
                self.wait_plan_ahead()  # first: it may hand the analyses their prepared text work
                t0 = time.perf_counter()
                self.fit_analyses(data.train, models, seed)
                self.timings["analyses_seconds"] = self.timings.get("analyses_seconds", 0.0) + time.perf_counter() - t0
                t0 = time.perf_counter()
                cell_keys += self.score_seed(seed, evals, models, perts)
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
        eva = self.estimate_vs_actual()
        if eva is not None:
            self.log("[time] estimated vs actual per seed: " + ", ".join(
                f"{k} {eva['estimated'].get(k, 0.0):.0f}/{v:.0f} s" for k, v in eva["actual"].items()))
            # the estimate was of this run (run.json keeps both): a later run into this
            # directory resumes from caches and must not be read against it
            (self.rd.root / ESTIMATE_FILE).unlink(missing_ok=True)

    def estimate_vs_actual(self) -> dict[str, Any] | None:
        """The dry run's per-seed estimate (``estimate.json`` in the run directory, if any, and
        only if it is of this suite and ``--limit``: ``estimate_key``) beside this run's
        measured phases, per seed."""
        path = self.rd.root / ESTIMATE_FILE
        if not path.exists() or "total_seconds" not in self.timings:
            return None
        est = json.loads(path.read_text())
        if est.get("key") != estimate_key(self.suite, self.opts.limit):
            return None  # an estimate of another suite, --set or --limit
        t, n = self.timings, max(1, len(self.suite.seeds))
        fits = sum(float(m["fit"].get("wall_seconds", 0.0)) for f in self.encoder_facts.values() for m in f["seeds"].values())
        actual = {"data": t.get("data_seconds", 0.0), "fits": fits / n, "training": (t.get("train_seconds", 0.0) - fits) / n,
                  "perturbation": t.get("perturb_fit_seconds", 0.0) / n + t.get("perturb_seconds", 0.0) / n,
                  "analyses": t.get("analyses_seconds", 0.0) / n, "scoring": t.get("score_forward_seconds", 0.0) / n,
                  "results": t.get("assemble_seconds", 0.0) / n,
                  "per_seed": (t["total_seconds"] - t.get("report_seconds", 0.0)) / n}
        # the run's training time holds each model's cold compile (its first step)
        e = {**est["seconds_per_seed"]}
        e["training"] = e.get("training", 0.0) + e.pop("compile", 0.0)
        return {"estimated": e, "actual": actual, "device": est.get("device"),
                "ratio_per_seed": e["per_seed"] / actual["per_seed"] if actual["per_seed"] else None}

    def speed_facts(self) -> dict[str, Any]:
        """MFU and throughput: model FLOPs per second ÷ the bf16 GEMM rate measured in this
        process (``gemm_bf16_tflops``; null on CPU, where no MFU is given). Training MFU counts
        causal attention at half (``flops_causal_attn_half``); ``mfu_full_attn`` uses run.json's
        own count (attention at full cost); ``mfu_after_first_step`` and ``mfu_median_step``
        the steady pace (``train_mfu``). Scoring: forward FLOPs of the packed scoring jobs."""
        peak = self.gemm_tflops * 1e12 if self.gemm_tflops else None
        train: dict[str, Any] = {}
        for label, facts in self.encoder_facts.items():
            for seed, meta in facts.get("seeds", {}).items():
                if meta.get("trained_elsewhere"):  # no training here: nothing to time
                    continue
                st = meta["train"]
                row = {"bytes_per_s": st["bytes_per_s"], "seconds": st["seconds"],
                       "first_step_seconds": st.get("first_step_seconds"), "fit_seconds": meta["fit"].get("wall_seconds"),
                       "peak_mem_bytes": st["peak_mem_bytes"]}
                if peak:
                    row.update(train_mfu(st, peak))
                train[f"{label} s{seed}"] = row

        def rates(st: dict[str, Any]) -> dict[str, Any]:
            sec = st.get("seconds") or math.nan
            out = {**st, "mb_per_s": st.get("scored_bytes", 0.0) / sec / 1e6,
                   "mfu": st.get("forward_flops", 0.0) / sec / peak if peak else None}
            if st.get("device_seconds"):  # CUDA: how much of the wall the GPU spent in forwards
                out["device_busy"] = st["device_seconds"] / sec
                out["mfu_in_forwards"] = st.get("forward_flops", 0.0) / st["device_seconds"] / peak if peak else None
            return out

        score = {}
        for label, st in self.score_facts.items():
            # per mode (score_items' groups): FLOPs and seconds of mixed batches are shares
            modes = {m: rates(g) for m, g in st.get("groups", {}).items()}
            score[label] = {**rates({k: v for k, v in st.items() if k != "groups"}), "modes": modes}
        out = {"gemm_bf16_tflops": self.gemm_tflops, "train": train, "score": score}
        if getattr(getattr(self, "suite", None), "scaling", None) is not None and "train_seconds" in self.timings:
            from harness.pipeline.sweep_speed import sweep_speed

            out["sweep"] = sweep_speed(self.encoder_facts, self.timings["train_seconds"], peak, self.gpus)
        return out

    def training_order(self) -> list[EncoderSpec]:
        """The suite's encoders in the order they are trained: under ``match: flops`` the
        reference first (its total FLOPs are the others' budget), else as listed."""
        order = list(self.suite.encoders)
        if self.budget.match == "flops":
            ref = self.budget.flops_reference or order[0].label
            order.sort(key=lambda s: s.label != ref)
        return order

    def record_encoder_facts(self, label: str, spec: EncoderSpec, seed: int, meta: dict[str, Any],
                             extra: tuple[str, ...] = ()) -> None:
        """Put a trained model's ``meta`` into run.json's ``encoders[label]``: under its seed,
        and its size and FLOP facts (and the ``extra`` keys of ``meta``) at the top."""
        facts = self.encoder_facts.setdefault(label, {"name": spec.name, "config": config_to_dict(spec.config),
                                                      "backbone": config_to_dict(spec.backbone), "seeds": {}})
        facts["seeds"][str(seed)] = meta
        for k in ("params_total", "params_embedding", "params_non_embedding", "flops_per_byte_train",
                  "flops_per_byte_infer", "describe", *extra):
            facts[k] = meta[k]
        if meta.get("trained_elsewhere"):  # the report keeps it out of compute-matched claims
            facts["trained_elsewhere"] = True
            facts["backbone"] = None  # its own architecture: the suite's backbone does not apply

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
            enc, meta = self.get_model(spec, seed, train, flops_target)
            if self.budget.match == "flops" and flops_target is None and not meta.get("trained_elsewhere"):
                flops_target = float(meta["total_flops"])
            t0 = time.perf_counter()
            if self.ahead is not None:  # a perturbation plugin that failed there: stop now
                self.plan_ahead_result(wait=False)  # its result, once there, is received here
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
        for spec in self.suite.analyses:
            a = spec.config
            a.fit(train.docs, {label: m.enc for label, m in models.items()})
            # prepared in the plan-ahead process under the same fit: its text work is done
            ahead = self.analyses_ahead.pop(a.registry_name, None) if seed == self.suite.seeds[0] else None
            adopted = a.adopt_prepared(ahead) if ahead is not None else False
            describe = getattr(a, "describe", None)
            self.analysis_facts[a.registry_name] = {**(describe() if callable(describe) else {}),
                                                    **({"prepared_ahead": adopted} if ahead is not None else {})}

    def seed_plans(self, es: EvalSet, perts: Instances | FitOnDemand, seed: int) -> dict[Any, Any]:
        """``plans`` of every cell of ``es`` for ``seed``, made once (by the run's thread or the
        scoring thread, whichever asks first) and kept while the seed scores."""
        key = (seed, es.part.name)
        with self._plans_lock:
            if key not in self._plans_memo:
                self._plans_memo = {k: v for k, v in self._plans_memo.items() if k[0] == seed}  # earlier seeds': done
                self._plans_memo[key] = self.plans(es, self.plan_cells(), perts, seed)
            return self._plans_memo[key]

    def forward_inputs(self, plans: dict[Any, Any], todo: list[bool]) -> tuple[list[Any], list[bool], list[str]]:
        """One model's packed job over an eval set: the items of every cell (``plan_cells``
        order; the finished ones too, so a resumed run forms the same batches), whether each is
        needed (its cell is in ``todo``), and each item's mode."""
        items, needed, modes = [], [], []
        for (pspec, mode), want in zip(self.plan_cells(), todo):
            for p in plans[(pspec.id, pspec.severity, mode)]:
                if p is not None:
                    items.append(p.item)
                    needed.append(want)
                    modes.append(mode)
        return items, needed, modes

    def start_forwards(self, model: TrainedModel, items: list[Any], needed: list[bool], modes: list[str], seed: int,
                       stats: dict[str, Any], flat: FlatWindows | None = None) -> ScoreJob:
        """One packed job's set-up with its collation started (``harness.score.items.start_scoring``);
        ``run_forwards`` runs it (arguments as there)."""
        return start_scoring(model.enc, items, self.device, self.suite.eval.batch_windows,
                             self.suite.score_dtype == "bfloat16", stats=stats, needed=needed,
                             mc_samples=self.suite.eval.mc_samples,
                             permuter=permuter_for(model.spec.permutation, self.budget.context_bytes, seed),
                             groups=modes, flat=flat)

    def run_forwards(self, model: TrainedModel, items: list[Any], needed: list[bool], modes: list[str], seed: int,
                     stats: dict[str, Any], progress: Callable[[int], Any] | None = None,
                     flat: FlatWindows | None = None, job: ScoreJob | None = None,
                     started: Callable[[], Any] | None = None) -> tuple[list[Any], dict[str, Any]]:
        """``score_items`` of one packed job into ``stats``, and its facts: wall seconds,
        seconds compiled meanwhile (by any thread: the clocks are the process's) and the compile
        caches' counts. ``flat``: the items' windows flattened once for every model of the set.
        ``job``: this job started ahead (``start_forwards``, with the same arguments), else it
        starts here; ``started``: called once its first forward is launched (``score_items``)."""
        label = model.spec.label
        if self.compile_ahead is not None:
            self.compile_ahead.ready(label, "score")  # waits only under overlap.compile_ahead_wait
        t0 = time.perf_counter()
        clock0, cache0 = compile_clock(), cache_counts()
        if job is None:
            job = self.start_forwards(model, items, needed, modes, seed, stats, flat)
        scores = job.run(progress, started)
        return scores, {"seconds": time.perf_counter() - t0, "compile_seconds": sum(compile_since(clock0).values()),
                        "cache": cache_counts_since(cache0)}

    def score_seed(self, seed: int, evals: list[EvalSet], models: dict[str, TrainedModel],
                   perts: Instances | FitOnDemand) -> list[str]:
        """Score every cell of one seed that is not on disk yet; returns all the seed's cell keys
        (in results.csv order). Per eval set: perturb once (plan cache, several processes), then
        each model scores all its cells of the set in one packed job."""
        bar = tqdm(total=self.suite.n_cells(per_seed=True), desc=f"score seed {seed}", unit="cell",
                   leave=False, file=sys.stderr, disable=not self.opts.progress, mininterval=1.0)
        keys: list[str] = []
        behind = CellsBehind(self.cells_behind, jobs=1)
        for key in ("score_cells_seconds", "score_cells_wait_seconds"):
            self.timings.setdefault(key, 0.0)  # written from the cells' thread: no new key mid-read
        try:
            self._score_sets(seed, evals, models, perts, bar, keys, behind)
            behind.join()
        finally:
            behind.join(quiet=True)  # an error elsewhere: the cells under way finish (their files are whole)
        self.timings["score_cells_wait_seconds"] += behind.wait_seconds
        with self._plans_lock:
            self._plans_memo.clear()  # the seed's plans: scored
        bar.close()
        return keys

    def _score_sets(self, seed: int, evals: list[EvalSet], models: dict[str, TrainedModel],
                    perts: Instances | FitOnDemand, bar: Any, keys: list[str], behind: CellsBehind) -> None:
        """``score_seed``'s work, eval set by eval set (``keys`` filled in place)."""
        for es in evals:
            fp = es.part.fingerprint
            cells: list[tuple[PerturbationSpec, str, dict[str, str], list[str]]] = []
            for pspec in [CLEAN, *self.suite.perturbations]:
                for mode in self.suite.eval.modes:
                    ck = {label: self.cell_key(m.meta["key"], fp, pspec, mode, seed, mc=hasattr(m.enc, "mc_samples"))
                          for label, m in models.items()}
                    todo = [label for label, k in ck.items() if self.rd.load_cell(k) is None]
                    keys += list(ck.values())
                    bar.update(len(ck) - len(todo))
                    cells.append((pspec, mode, ck, todo))
            # compressor baselines (docs/fragility.md): cells of their own on the same plans
            base_todo = []
            for pspec, mode, _, _ in cells:
                for name, perm in self.baseline_cells():
                    k = self.baseline_key(name, perm, fp, pspec, mode, seed)
                    keys.append(k)
                    if not self.rd.cell_path(k).exists():
                        base_todo.append((pspec, mode, name, perm, k))
            if not any(c[3] for c in cells) and not base_todo:
                continue
            t0 = time.perf_counter()
            plans = self.seed_plans(es, perts, seed)
            t1 = time.perf_counter()
            for a in (s.config for s in self.suite.analyses):  # text-only work, in CPU processes
                if not a.datasets or es.part.name in a.datasets:
                    a.prepare([(p.doc, p.item.scored_bytes) for plan in plans.values() for p in plan if p is not None])
            self._add_time("analyses_prepare_seconds", t1)
            self.timings["perturb_seconds"] += time.perf_counter() - t0  # perturbation and plan preparation
            t0 = time.perf_counter()
            for pspec, mode, name, perm, k in base_todo:
                cell = self.baseline_cell(name, perm, es, pspec, mode, seed, plans[(pspec.id, pspec.severity, mode)])
                cell["row"]["fingerprint"] = fp
                self.rd.save_cell(k, cell)
            self._add_time("score_baselines_seconds", t0)
            # The next model's job is started while this one's forwards run (``ScoreJob``): its
            # first batches are collated by then.
            order = [label for label in models if any(label in c[3] for c in cells)]
            prestart = score_prestart_wanted()
            ahead: dict[str, ScoreJob] = {}
            try:
                self._score_models(seed, es, fp, plans, cells, models, order, prestart, ahead, bar, behind)
            finally:
                for job in ahead.values():  # started for a model that did not get to run (an error)
                    job.close()

    def _score_models(self, seed: int, es: EvalSet, fp: str, plans: dict[Any, Any], cells: list[Any],
                      models: dict[str, TrainedModel], order: list[str], prestart: bool,
                      ahead: dict[str, ScoreJob], bar: Any, behind: CellsBehind) -> None:
        """``_score_sets``' packed jobs of one eval set, model by model in ``order`` (those with
        cells to make); ``ahead`` holds the jobs started early (``prestart``)."""
        # Every model's packed job holds the same items (``forward_inputs``: the plans'
        # ScoreItems in cell order), so their windows are flattened and made distinct once
        # for the set, not once a model (score_items' whole set-up, of which this is the
        # work, took 0.65-1.06 s a model on a slow H100 host: BENCHMARKS.md)
        flat: FlatWindows | None = None
        for pos, label in enumerate(order):
            model = models[label]
            # All cells of this model and eval set are packed into one job, the finished ones
            # too: batches are then the same in a fresh and in a resumed run (so are the
            # numbers, to the last bit); batches holding only finished cells are skipped.
            plan_of = [plans[(c[0].id, c[0].severity, c[1])] for c in cells]
            items, needed, modes = self.forward_inputs(plans, [label in c[3] for c in cells])
            n_windows = sum(len(it.windows) for it, nd in zip(items, needed) if nd)
            wbar = tqdm(total=n_windows, desc=f"score {label} {es.part.name}", unit="win", leave=False,
                        file=sys.stderr, mininterval=1.0,
                        disable=not self.opts.progress or n_windows < 1000)  # long documents: show progress
            if flat is None:
                t_flat = time.perf_counter()
                flat = flatten_windows(items, dedup_enabled())
                self._add_time("score_flatten_seconds", t_flat)
            started = None
            if prestart and pos + 1 < len(order):
                nxt = order[pos + 1]

                def started(nxt: str = nxt, flat: FlatWindows = flat) -> None:
                    n_items, n_needed, n_modes = self.forward_inputs(plans, [nxt in c[3] for c in cells])
                    ahead[nxt] = self.start_forwards(models[nxt], n_items, n_needed, n_modes, seed,
                                                     self.score_facts.setdefault(nxt, {}), flat)
            scores, facts = self.run_forwards(model, items, needed, modes, seed,
                                              self.score_facts.setdefault(label, {}), progress=wbar.update,
                                              flat=flat, job=ahead.pop(label, None), started=started)
            wbar.close()
            self.timings["score_items_seconds"] = self.timings.get("score_items_seconds", 0.0) + facts["seconds"]
            # of which compiling: inference-mode graphs and kernel keys new to scoring
            self.timings["score_compile_seconds"] = self.timings.get("score_compile_seconds", 0.0) + facts["compile_seconds"]
            for k, v in facts["cache"].items():
                self.score_compile_cache[k] = self.score_compile_cache.get(k, 0) + v
            tasks, k = [], 0
            for (pspec, mode, ck, todo), plan in zip(cells, plan_of):
                n = sum(p is not None for p in plan)
                if label in todo:
                    tasks.append((pspec, mode, ck[label], plan, k, n))
                k += n

            def cell_work(i: int, tasks: list[Any] = tasks, model: TrainedModel = model, es: EvalSet = es,
                          fp: str = fp, scores: list[Any] = scores) -> None:
                pspec, mode, key, plan, k, n = tasks[i]  # the children have it (fork): only i is sent
                cell = self.score_cell(model, es, pspec, mode, seed, plan, scores[k : k + n])
                cell["row"]["fingerprint"] = fp
                cell["row"].update(model.meta.get("sweep") or {})  # scaling columns of a grid point
                self.rd.save_cell(key, cell)

            # A cell is its documents' scores summed, its samples and its analysis buckets:
            # pure CPU work on this process's memory (28 s a standard seed on the H200 host,
            # one cell after another), so forked processes share it out; each writes its own
            # cells (atomic files, distinct names) and the numbers do not depend on where.
            # At most 4: forking this process (GBs of CUDA mappings) is not free — at 50
            # documents a cell set the H200 host took 1.5 s a model with up to 16 workers,
            # where the serial rate gives ≈ 1.1 s (BENCHMARKS.md).
            # On a GPU they are made while the next model scores (``CellsBehind``).
            def cells_job(tasks: list[Any] = tasks, cell_work: Callable[[int], None] = cell_work) -> None:
                t0 = time.perf_counter()
                perturb_many(range(len(tasks)), cell_work, cell_processes(), stage="cells")  # type: ignore[arg-type]
                with self._timings_lock:  # jobs may end at once: no lost addition
                    self._add_time("score_cells_seconds", t0)

            def landed(n: int = len(tasks)) -> None:
                bar.update(n)
                # run.json as each model's cells land: a run killed later (in another model's
                # scoring, or in the report) still shows where scoring's time went
                atomic_write_json(self.rd.root / "run.json", self.run_json("running"))

            behind.submit(cells_job, landed)

    def record_bytes_per_segment(self) -> None:
        """bytes per token / patch / byte on each clean eval set (BPE's "multilingual inequity")."""
        first_mode = self.suite.eval.modes[0]
        for r in self.rows:
            if r["perturbation_id"] == "clean" and r["mode"] == first_mode and r["encoder"] in self.encoder_facts:
                per = self.encoder_facts[r["encoder"]].setdefault("bytes_per_segment_by_eval", {})
                per[f"{r['dataset']} (seed {r['seed']})"] = r["bytes_per_segment"]

    def precision_facts(self) -> dict[str, Any]:
        """The compute precision training and scoring actually ran in on this device (bf16
        autocast applies on CUDA only; ``budget.dtype`` and ``eval.dtype`` ask for it), and
        whether the kernels were deterministic ones (``budget.deterministic``)."""
        cuda = self.device.type == "cuda"
        return {"train": self.budget.dtype if cuda else "float32",
                "score": self.suite.score_dtype if cuda else "float32",
                "deterministic": self.budget.deterministic}

    def cell_key(self, model_key: str, fp: str, pspec: PerturbationSpec, mode: str, seed: int,
                 mc: bool = False) -> str:
        """mc: the encoder's score is a Monte Carlo estimate (MDM), so eval.mc_samples is part of
        the key (left out otherwise, so exact cells keep their keys). The scoring precision is part
        of it where it differs from the training's (``budget.dtype`` is in the model key)."""
        ev = self.suite.eval
        own_dtype = self.suite.score_dtype != self.budget.dtype
        return stable_hash({**({"mc_samples": ev.mc_samples} if mc else {}),
            **({"score_dtype": self.suite.score_dtype} if own_dtype else {}),
            "model": model_key, "data": fp, "perturbation": pspec.name, "id": pspec.id, "severity": pspec.severity,
            "params": pspec.params, "mode": mode, "seed": seed, "context": self.budget.context_bytes,
            "stride": ev.stride_bytes, "fraction": ev.context_fraction, "target": ev.target_bytes,
            "sample_docs": ev.sample_docs, "texts": [ev.keep_texts, self.suite.encoders[0].label], "analyses": [config_to_dict(a.config) for a in self.suite.analyses],
            **({"windows": "partition"} if self.suite.permutations else {}),
        })

    # -- compressor baselines (docs/fragility.md) -----------------------------------------------
    def baseline_cells(self) -> list[tuple[str, Permutation]]:
        """(compressor, permutation) of every baseline cell per (eval set, perturbation, mode)."""
        perms = [Permutation(), *self.suite.permutations]
        return [(c, p) for c in self.suite.baselines.compressors for p in perms]

    def baseline_key(self, name: str, perm: Permutation, fp: str, pspec: PerturbationSpec, mode: str,
                     seed: int) -> str:
        ev, n_dict = self.suite.eval, self.suite.baselines.dictionary_bytes
        train_fp = self.train_part.fingerprint if self.train_part is not None and n_dict else None
        return stable_hash({
            "baseline": name, "permutation": asdict(perm), "data": fp, "perturbation": pspec.name,
            "id": pspec.id, "severity": pspec.severity, "params": pspec.params, "mode": mode,
            "seed": seed, "context": self.budget.context_bytes, "stride": ev.stride_bytes,
            "fraction": ev.context_fraction, "target": ev.target_bytes,
            "dictionary": [n_dict, train_fp, "training-stream"],
            "windows": bool(self.suite.permutations), "version": tokbench_version(),
        })

    def baseline_dictionary(self, perm: Permutation, seed: int) -> bytes:
        """The compressors' priming text under ``perm`` (made once per permutation and seed)."""
        if (perm, seed) not in self.dictionaries:
            n = self.suite.baselines.dictionary_bytes
            assert self.train_part is not None
            wins = training_windows(self.train_part.docs, n, self.budget.context_bytes, seed) if n else iter(())
            try:
                self.dictionaries[(perm, seed)] = compressor_dictionary(wins, perm, self.budget.context_bytes, seed, n)
            except ValueError as e:  # the stream's own error names no key
                raise ValueError(f"baselines.dictionary_bytes = {n:,}: {e} "
                                 f"(the train part holds {self.train_part.n_bytes:,} bytes)") from None
        return self.dictionaries[(perm, seed)]

    def baseline_cell(self, name: str, perm: Permutation, es: EvalSet, pspec: PerturbationSpec, mode: str,
                      seed: int, plan: list[PlanRow | None]) -> dict[str, Any]:
        """One compressor cell: a results row only (no samples, no buckets)."""
        docs = [BaselineDoc(p.item, p.n_bytes_clean, p.n_words, p.edit_rate) for p in plan if p is not None]
        m = baseline_metrics(name, perm, docs, self.budget.context_bytes, seed,
                             self.baseline_dictionary(perm, seed), es.script)
        row = {"encoder": variant_label(name, perm), "encoder_name": name, "seed": seed,
               "dataset": es.part.name, "language": es.language, "script": es.script or "",
               "perturbation": pspec.name, "perturbation_id": pspec.id, "severity": pspec.severity,
               "mode": mode, **m, "kind": "baseline", **permutation_columns(perm)}
        return {"row": row, "samples": [], "buckets": []}

    def plans(self, es: EvalSet, cells: list[tuple[PerturbationSpec, str]], perts: Instances | FitOnDemand,
              seed: int) -> dict[tuple[str, float, str], list[PlanRow | None]]:
        """Perturb and cut every document of an eval set once per (perturbation, mode); the plan
        is shared by all encoders, so they score exactly the same bytes. Perturbed texts come from
        the plan cache (keyed by content and code) or are computed in several processes and
        stored. None marks a document with nothing to score (clean_target, empty continuation)."""
        ev = self.suite.eval
        cache = PlanCache(self.ctx.cache_dir / "perturbed" if self.opts.plan_cache else None)
        keys: dict[tuple[str, float, str], str] = {}
        for pspec, mode in cells:
            keys[(pspec.id, pspec.severity, mode)] = cache.key(
                data=es.part.fingerprint, perturbation=pspec.name, id=pspec.id, severity=pspec.severity,
                params=pspec.params, seed=seed, mode=mode, fraction=ev.context_fraction if mode != "full" else None,
                # clean_target cuts the scored continuation by these: its word count and whether
                # a document has anything to score are in the cached rows
                target=(ev.target_bytes, self.budget.context_bytes) if mode != "full" else None,
                # a fitted perturbation (e.g. morphology) learned from the training text
                train=self.data_facts["train"]["fingerprint"], version=tokbench_version(),
                # the instance's class (the suite's own object: no fit needed for the key)
                code=code_hash(type(pspec.perturbation) if (pspec.id, pspec.severity) in perts else None))
        rows = {k: cache.get(key) for k, key in keys.items()}
        missing = list({(p.id, p.severity, m): (p, m) for p, m in cells if rows[(p.id, p.severity, m)] is None}.values())
        if missing and isinstance(perts, FitOnDemand):
            perts = perts.fitted()  # fit here, once, not in each forked process below

        def work(task: tuple[PerturbationSpec, str]) -> list[CachedRow]:
            pspec, mode = task
            return self.plan_rows(es, pspec, perts.get((pspec.id, pspec.severity)), seed, mode)

        for (pspec, mode), r in zip(missing, perturb_many(missing, work, self.plan_processes)):
            k = (pspec.id, pspec.severity, mode)
            rows[k] = r
            cache.put(keys[k], r)
        return {k: self.plan_items(es, k[2], r) for k, r in rows.items() if r is not None}

    def plan_rows(self, es: EvalSet, pspec: PerturbationSpec, insts: dict[str | None, Perturbation] | None,
                  seed: int, mode: str) -> list[CachedRow]:
        """Per document (perturbed text — the prefix in clean_target mode —, edit rate, words
        scored), or None when clean_target leaves nothing to score."""
        ev = self.suite.eval
        out: list[CachedRow] = []
        for doc, text in zip(es.part.docs, es.texts):
            if mode == "full":
                ptext = self.perturbed(insts, pspec, seed, doc, text)
                er = edit_rate(text, ptext) if pspec.id != "clean" else 0.0
                out.append((ptext, er, count_words(text)))
                continue
            prefix, cont = split_for_target(text, ev.context_fraction)
            pprefix = self.perturbed(insts, pspec, seed, doc, prefix)
            item = plan_clean_target(encode(pprefix), encode(cont), self.budget.context_bytes, ev.target_bytes)
            if item is None:
                out.append(None)
                continue
            er = edit_rate(prefix, pprefix) if pspec.id != "clean" else 0.0
            out.append((pprefix, er, count_words(decode(item.scored_bytes))))
        return out

    def plan_items(self, es: EvalSet, mode: str, rows: list[CachedRow]) -> list[PlanRow | None]:
        """Cached plan rows -> ``PlanRow``s (windows cut again: cheap and deterministic)."""
        ev = self.suite.eval
        stride = ev.stride_bytes or max(1, self.budget.context_bytes // 2)
        out: list[PlanRow | None] = []
        for doc, text, r in zip(es.part.docs, es.texts, rows):
            if r is None:
                out.append(None)
                continue
            ptext, er, n_words = r
            if mode == "full":
                # a permuted suite scores context-free windows, every cell alike (docs/fragility.md)
                item = (plan_partition(encode(ptext), self.budget.context_bytes) if self.suite.permutations
                        else plan_full(encode(ptext), self.budget.context_bytes, stride))
                out.append(PlanRow(doc, item, text, ptext, len(doc.data), er, n_words))
                continue
            _, cont = split_for_target(text, ev.context_fraction)
            target_item = plan_clean_target(encode(ptext), encode(cont), self.budget.context_bytes, ev.target_bytes)
            assert target_item is not None
            target = target_item.scored_bytes
            out.append(PlanRow(doc, target_item, text, ptext + decode(target), len(target), er, n_words))
        return out

    def edit_method(self, p: PlanRow, pspec: PerturbationSpec, mode: str) -> str:
        """"exact" or "windowed": how the row's edit rate was measured (perturbations/measure.py),
        from the lengths of the texts compared (the whole text in full mode, the prefix in
        clean_target mode)."""
        if pspec.id == "clean":
            return "exact"
        if mode == "full":
            return edit_rate_method(len(p.text), len(p.ptext))
        prefix, _ = split_for_target(p.text, self.suite.eval.context_fraction)
        return edit_rate_method(len(prefix), len(p.ptext) - len(decode(p.item.scored_bytes)))

    def score_cell(self, model: TrainedModel, es: EvalSet, pspec: PerturbationSpec, mode: str,
                   seed: int, plan: list[PlanRow | None], scores: list[Any]) -> dict[str, Any]:
        """One cell: its results row, its samples.jsonl rows and its analysis buckets, from its
        documents' scores (``score_items``, in the order of the plan's live rows)."""
        ev = self.suite.eval
        enc, spec = model.enc, model.spec
        analyses = [a.config for a in self.suite.analyses]
        doc_scripts = dict(zip((d.id for d in es.part.docs), es.scripts))
        live = [p for p in plan if p is not None]
        totals = CellTotals()
        samples = []
        buckets: dict[tuple[str, str], list[float]] = {}
        keys = {"encoder": spec.label, "encoder_name": spec.name, "seed": seed, "dataset": es.part.name,
                "language": es.language, "script": es.script or "", "perturbation": pspec.name,
                "perturbation_id": pspec.id, "severity": pspec.severity, "mode": mode}
        for i, (p, sc) in enumerate(zip(live, scores)):
            doc, scored = p.doc, p.item.scored_bytes
            totals.add(sc.nll, len(scored), p.n_bytes_clean, sc.n_units, p.n_words, sc.segments, p.edit_rate,
                       nll_var=sc.nll_var)
            row = {**keys, "doc_id": doc.id, "doc_language": doc.language, "doc_script": doc_scripts[doc.id],
                   "nll_nats": sc.nll, "n_bytes": len(scored),
                   "n_bytes_clean": p.n_bytes_clean, "n_tokens": sc.n_units, "n_words": p.n_words,
                   "edit_rate": p.edit_rate,
                   "edit_rate_method": self.edit_method(p, pspec, mode)}
            # The texts are the same for every encoder: store them once, on the first encoder's row.
            if ev.keep_texts and spec.label == self.suite.encoders[0].label:
                row.update(text=p.text[:TEXT_LIMIT], text_perturbed=p.ptext[:TEXT_LIMIT],
                           truncated=len(p.text) > TEXT_LIMIT or len(p.ptext) > TEXT_LIMIT)
            if i < ev.sample_docs:
                # per-byte NLL of at most SAMPLE_BYTES bytes: a 10 MB line must not make a 100 MB cell
                cut = len(scored) if len(scored) <= SAMPLE_BYTES else char_boundary(scored, SAMPLE_BYTES)
                row["scored_text"] = decode(scored[:cut])
                row["byte_nll"] = [round(float(x), 5) for x in sc.byte_nll[:cut]]
                row["segments"] = sc.segments if cut == len(scored) else None
                if cut < len(scored):
                    row["byte_nll_truncated"] = True
            samples.append(row)
        spans = [(p.doc, p.item.scored_bytes, sc.byte_nll) for p, sc in zip(live, scores)]
        for a in analyses:
            if a.datasets and es.part.name not in a.datasets:
                continue
            for b, v in a.cell_buckets(spans).items():  # summed over the documents in plan order
                buckets[(a.registry_name, b)] = list(v)
        m = cell_metrics(totals, es.script)
        row = {**keys, **m, "token_unit": enc.unit, "segment_unit": enc.segment, "kind": "model",
               "objective": getattr(enc, "objective", "ar"), **permutation_columns(spec.permutation)}
        brows = [{**keys, "analysis": a, "bucket": b, "n_words": v[0], "n_bytes": v[1], "nll_nats": v[2],
                  "bpb": bpb(v[2], v[1])} for (a, b), v in sorted(buckets.items())]
        return {"row": row, "samples": samples, "buckets": brows}

    def assemble(self, cell_keys: list[str]) -> None:
        """results.csv / samples.jsonl / buckets.csv from this suite's cells, in a stable order.
        The cells are read back (checksums, JSON) and their sample rows turned into JSON lines in
        forked processes (``assemble_processes``), a contiguous run of cells each, put together
        here in cell order: the files are the same bytes as one process makes."""
        keys = list(dict.fromkeys(cell_keys))  # first occurrence of each, in order
        procs = assemble_processes(len(keys))
        size = max(1, -(-len(keys) // (4 * procs)))  # a few tasks a process: uneven cells even out
        chunks = [keys[i : i + size] for i in range(0, len(keys), size)]
        rd = self.rd

        samples_path = self.rd.root / "samples.jsonl"

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
        self.windowed_docs = sum(part[3] for part in parts)
        write_csv(self.rd.root / "results.csv", rows, RESULT_COLUMNS)
        write_parts_atomic(samples_path, [part[1] for part in parts])
        if buckets:
            write_csv(self.rd.root / "buckets.csv", buckets, BUCKET_COLUMNS)
        self.rows = rows

    def render_report(self, rp: reportproc.ReportProcess | None = None) -> None:
        try:
            path, t = self._render(rp)
            self.timings.update({f"report_{k}_seconds": float(t[k]) for k in ("load", "tables", "figures", "page")
                                 if k in t})
            self.report_figure_seconds = dict(t.get("figure_seconds", {}))
        except OSError as e:
            if e.errno == errno.ENOSPC:
                raise  # disk full is the user's to fix: one line from the CLI, then resume
            self.log(f"[report] failed ({type(e).__name__}: {e}); results are complete — "
                     f"re-render with: tokbench report {self.rd.root}")
            return
        except Exception as e:  # the results are complete and kept; a report bug must not lose them
            self.log(f"[report] failed ({type(e).__name__}: {e}); results are complete — "
                     f"re-render with: tokbench report {self.rd.root}")
            return
        self.report_path = path
        self.log(f"[report] {path}")

    def _render(self, rp: reportproc.ReportProcess | None) -> tuple[Path, dict[str, Any]]:
        """Render the report in ``rp`` (``harness.overlap.reportproc``), or here when there is none or it
        failed: (report.html's path, the report's ``LAST_TIMINGS``)."""
        if rp is not None:
            try:
                return rp.render(self.rd.root)
            except reportproc.ReportProcessFailed as e:
                self.log(f"[report] {e}; rendering it in this process")
        from reports import render_run
        from reports.render import LAST_TIMINGS

        path = render_run(self.rd.root)
        return path, LAST_TIMINGS


