"""Scoring a seed: per eval set, the plans made once (perturbation, plan cache), the compressor
baseline cells, then each model's cells of the set in one packed job (``score_items``), its
next model's job started while its forwards run, and its cells made from the scores in forked
processes, behind the run on a GPU (``CellsBehind``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

from harness.config.permutation import Permutation
from harness.config.suite import PerturbationSpec, Suite
from harness.data.batchscore import perturb_many
from harness.data.evalsets import CLEAN, EvalSet
from harness.infra.accel import cache_counts, cache_counts_since, compile_clock, compile_since
from harness.infra.writes import atomic_write_json
from harness.overlap.cellsbehind import CellsBehind
from harness.overlap.planahead import FitOnDemand
from harness.pipeline.cells import baseline_cell, baseline_dictionary, cell_processes, score_cell
from harness.pipeline.facts import run_json
from harness.pipeline.keys import cell_key
from harness.pipeline.models import TrainedModel
from harness.pipeline.plans import Instances, plan_cells
from harness.score.fragility import permuter_for
from harness.score.items import (
    FlatWindows,
    ScoreJob,
    dedup_enabled,
    flatten_windows,
    score_prestart_wanted,
    start_scoring,
)

if TYPE_CHECKING:
    from harness.pipeline.run import Runner


def seed_plans(runner: Runner, es: EvalSet, perts: Instances | FitOnDemand, seed: int) -> dict[Any, Any]:
    """``plans`` of every cell of ``es`` for ``seed``, made once (by the run's thread or the
    scoring thread, whichever asks first) and kept while the seed scores."""
    key = (seed, es.part.name)
    with runner._plans_lock:
        if key not in runner._plans_memo:
            runner._plans_memo = {k: v for k, v in runner._plans_memo.items() if k[0] == seed}  # earlier seeds': done
            runner._plans_memo[key] = runner.plans(es, perts, seed)
        return runner._plans_memo[key]


def forward_inputs(suite: Suite, plans: dict[Any, Any], todo: list[bool]) -> tuple[list[Any], list[bool], list[str]]:
    """One model's packed job over an eval set: the items of every cell (``plan_cells``
    order; the finished ones too, so a resumed run forms the same batches), whether each is
    needed (its cell is in ``todo``), and each item's mode."""
    items, needed, modes = [], [], []
    for (pspec, mode), want in zip(plan_cells(suite), todo):
        for p in plans[(pspec.id, pspec.severity, mode)]:
            if p is not None:
                items.append(p.item)
                needed.append(want)
                modes.append(mode)
    return items, needed, modes


def start_forwards(runner: Runner, model: TrainedModel, items: list[Any], needed: list[bool], modes: list[str], seed: int,
                   stats: dict[str, Any], flat: FlatWindows | None = None) -> ScoreJob:
    """One packed job's set-up with its collation started (``harness.score.items.start_scoring``);
    ``run_forwards`` runs it (arguments as there)."""
    return start_scoring(model.enc, items, runner.device, runner.suite.eval.batch_windows,
                         runner.suite.score_dtype == "bfloat16", stats=stats, needed=needed,
                         mc_samples=runner.suite.eval.mc_samples,
                         permuter=permuter_for(model.spec.permutation, runner.budget.context_bytes, seed),
                         groups=modes, flat=flat)


def run_forwards(runner: Runner, model: TrainedModel, items: list[Any], needed: list[bool], modes: list[str], seed: int,
                 stats: dict[str, Any], progress: Callable[[int], Any] | None = None,
                 flat: FlatWindows | None = None, job: ScoreJob | None = None,
                 started: Callable[[], Any] | None = None) -> tuple[list[Any], dict[str, Any]]:
    """``score_items`` of one packed job into ``stats``, and its facts: wall seconds,
    seconds compiled meanwhile (by any thread: the clocks are the process's) and the compile
    caches' counts. ``flat``: the items' windows flattened once for every model of the set.
    ``job``: this job started ahead (``start_forwards``, with the same arguments), else it
    starts here; ``started``: called once its first forward is launched (``score_items``)."""
    label = model.spec.label
    if runner.compile_ahead is not None:
        runner.compile_ahead.ready(label, "score")  # waits only under overlap.compile_ahead_wait
    t0 = time.perf_counter()
    clock0, cache0 = compile_clock(), cache_counts()
    if job is None:
        job = start_forwards(runner, model, items, needed, modes, seed, stats, flat)
    scores = job.run(progress, started)
    return scores, {"seconds": time.perf_counter() - t0, "compile_seconds": sum(compile_since(clock0).values()),
                    "cache": cache_counts_since(cache0)}


def score_seed(runner: Runner, seed: int, evals: list[EvalSet], models: dict[str, TrainedModel],
               perts: Instances | FitOnDemand) -> list[str]:
    """Score every cell of one seed that is not on disk yet; returns all the seed's cell keys
    (in results.csv order). Per eval set: perturb once (plan cache, several processes), then
    each model scores all its cells of the set in one packed job."""
    bar = tqdm(total=runner.suite.n_cells(per_seed=True), desc=f"score seed {seed}", unit="cell",
               leave=False, file=sys.stderr, disable=not runner.opts.progress, mininterval=1.0)
    keys: list[str] = []
    behind = CellsBehind(runner.cells_behind, jobs=1)
    for key in ("score_cells_seconds", "score_cells_wait_seconds"):
        runner.timings.setdefault(key, 0.0)  # written from the cells' thread: no new key mid-read
    try:
        _score_sets(runner, seed, evals, models, perts, bar, keys, behind)
        behind.join()
    finally:
        behind.join(quiet=True)  # an error elsewhere: the cells under way finish (their files are whole)
    runner.timings["score_cells_wait_seconds"] += behind.wait_seconds
    with runner._plans_lock:
        runner._plans_memo.clear()  # the seed's plans: scored
    bar.close()
    return keys


def _score_sets(runner: Runner, seed: int, evals: list[EvalSet], models: dict[str, TrainedModel],
                perts: Instances | FitOnDemand, bar: Any, keys: list[str], behind: CellsBehind) -> None:
    """``score_seed``'s work, eval set by eval set (``keys`` filled in place)."""
    for es in evals:
        fp = es.part.fingerprint
        cells: list[tuple[PerturbationSpec, str, dict[str, str], list[str]]] = []
        for pspec in [CLEAN, *runner.suite.perturbations]:
            for mode in runner.suite.eval.modes:
                ck = {label: cell_key(runner.suite, m.meta["key"], fp, pspec, mode, seed, mc=hasattr(m.enc, "mc_samples"))
                      for label, m in models.items()}
                todo = [label for label, k in ck.items() if runner.rd.load_cell(k) is None]
                keys += list(ck.values())
                bar.update(len(ck) - len(todo))
                cells.append((pspec, mode, ck, todo))
        # compressor baselines (docs/fragility.md): cells of their own on the same plans
        base_todo = []
        for pspec, mode, _, _ in cells:
            for name, perm in runner.baseline_cells():
                k = runner.baseline_key(name, perm, fp, pspec, mode, seed)
                keys.append(k)
                if not runner.rd.cell_path(k).exists():
                    base_todo.append((pspec, mode, name, perm, k))
        if not any(c[3] for c in cells) and not base_todo:
            continue
        t0 = time.perf_counter()
        plans = seed_plans(runner, es, perts, seed)
        t1 = time.perf_counter()
        for a in (s.config for s in runner.suite.analyses):  # text-only work, in CPU processes
            if not a.datasets or es.part.name in a.datasets:
                a.prepare([(p.doc, p.item.scored_bytes) for plan in plans.values() for p in plan if p is not None])
        runner._add_time("analyses_prepare_seconds", t1)
        runner.timings["perturb_seconds"] += time.perf_counter() - t0  # perturbation and plan preparation
        t0 = time.perf_counter()
        for pspec, mode, name, perm, k in base_todo:
            cell = baseline_cell(runner.suite, name, perm, es, pspec, mode, seed, plans[(pspec.id, pspec.severity, mode)],
                                 _dictionary(runner, perm, seed))
            cell["row"]["fingerprint"] = fp
            runner.rd.save_cell(k, cell)
        runner._add_time("score_baselines_seconds", t0)
        # The next model's job is started while this one's forwards run (``ScoreJob``): its
        # first batches are collated by then.
        order = [label for label in models if any(label in c[3] for c in cells)]
        prestart = score_prestart_wanted()
        ahead: dict[str, ScoreJob] = {}
        try:
            _score_models(runner, seed, es, fp, plans, cells, models, order, prestart, ahead, bar, behind)
        finally:
            for job in ahead.values():  # started for a model that did not get to run (an error)
                job.close()


def _score_models(runner: Runner, seed: int, es: EvalSet, fp: str, plans: dict[Any, Any], cells: list[Any],
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
        items, needed, modes = forward_inputs(runner.suite, plans, [label in c[3] for c in cells])
        n_windows = sum(len(it.windows) for it, nd in zip(items, needed) if nd)
        wbar = tqdm(total=n_windows, desc=f"score {label} {es.part.name}", unit="win", leave=False,
                    file=sys.stderr, mininterval=1.0,
                    disable=not runner.opts.progress or n_windows < 1000)  # long documents: show progress
        if flat is None:
            t_flat = time.perf_counter()
            flat = flatten_windows(items, dedup_enabled())
            runner._add_time("score_flatten_seconds", t_flat)
        started = None
        if prestart and pos + 1 < len(order):
            nxt = order[pos + 1]

            def started(nxt: str = nxt, flat: FlatWindows = flat) -> None:
                n_items, n_needed, n_modes = forward_inputs(runner.suite, plans, [nxt in c[3] for c in cells])
                ahead[nxt] = start_forwards(runner, models[nxt], n_items, n_needed, n_modes, seed,
                                                 runner.score_facts.setdefault(nxt, {}), flat)
        scores, facts = run_forwards(runner, model, items, needed, modes, seed,
                                          runner.score_facts.setdefault(label, {}), progress=wbar.update,
                                          flat=flat, job=ahead.pop(label, None), started=started)
        wbar.close()
        runner.timings["score_items_seconds"] = runner.timings.get("score_items_seconds", 0.0) + facts["seconds"]
        # of which compiling: inference-mode graphs and kernel keys new to scoring
        runner.timings["score_compile_seconds"] = runner.timings.get("score_compile_seconds", 0.0) + facts["compile_seconds"]
        for k, v in facts["cache"].items():
            runner.score_compile_cache[k] = runner.score_compile_cache.get(k, 0) + v
        tasks, k = [], 0
        for (pspec, mode, ck, todo), plan in zip(cells, plan_of):
            n = sum(p is not None for p in plan)
            if label in todo:
                tasks.append((pspec, mode, ck[label], plan, k, n))
            k += n

        def cell_work(i: int, tasks: list[Any] = tasks, model: TrainedModel = model, es: EvalSet = es,
                      fp: str = fp, scores: list[Any] = scores) -> None:
            pspec, mode, key, plan, k, n = tasks[i]  # the children have it (fork): only i is sent
            cell = score_cell(runner.suite, model, es, pspec, mode, seed, plan, scores[k : k + n])
            cell["row"]["fingerprint"] = fp
            cell["row"].update(model.meta.get("sweep") or {})  # scaling columns of a grid point
            runner.rd.save_cell(key, cell)

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
            with runner._timings_lock:  # jobs may end at once: no lost addition
                runner._add_time("score_cells_seconds", t0)

        def landed(n: int = len(tasks)) -> None:
            bar.update(n)
            # run.json as each model's cells land: a run killed later (in another model's
            # scoring, or in the report) still shows where scoring's time went
            atomic_write_json(runner.rd.root / "run.json", run_json(runner, "running"))

        behind.submit(cells_job, landed)


def _dictionary(runner: Runner, perm: Permutation, seed: int) -> bytes:
    """The compressors' priming text under ``perm`` (``baseline_dictionary``), made once per
    permutation and seed of the run."""
    if (perm, seed) not in runner.dictionaries:
        assert runner.train_part is not None
        runner.dictionaries[(perm, seed)] = baseline_dictionary(runner.suite, runner.train_part, perm, seed)
    return runner.dictionaries[(perm, seed)]
