"""The run's work ahead of training (suite ``overlap.plan_ahead``): a forked process fits the
perturbations and writes every seed's plans into the plan cache, and prepares the analyses; a
second one fits the encoders whose fit is host work (BPE's merges) for the first seed. The run
waits for them only where it needs their results; any failure over there and the run does the
work itself, as with plan-ahead off (``harness.overlap.planahead``).
"""

from __future__ import annotations

import inspect
import time
from typing import TYPE_CHECKING, Any

import torch

from core.forkpool import WorkerDied
from encoders.base import Encoder
from harness.config.suite import EncoderSpec, Suite
from harness.data.batchscore import perturb_many
from harness.data.evalsets import EvalSet
from harness.data.load import DataPart
from harness.infra import plugins
from harness.infra.accel import one_torch_thread
from harness.overlap.planahead import (
    FitOnDemand,
    PlanAhead,
    plan_ahead_processes,
    plan_ahead_wanted,
)
from harness.pipeline.plans import Instances, perturbation_instances, try_perturbations
from harness.score.fragility import permuter_for
from harness.train.loop import build_encoder, fit_context
from perturbations.morphology import MorfessorSegmenter

if TYPE_CHECKING:
    from pathlib import Path

    from harness.pipeline.run import Runner


def start_plan_ahead(runner: Runner, data: Any) -> tuple[Instances | FitOnDemand, list[EvalSet]]:
    """The eval sets, and the perturbation instances fitted on demand; when plan-ahead is on,
    a forked process starts fitting the perturbations and writing every seed's plans into the
    plan cache while the models train (``runner.ahead``; None when off, and the caller fits the
    perturbations itself), and another fits the host-fitted encoders (``start_fits_ahead``)."""
    suite = runner.suite
    runner.data_facts.update(data.facts)
    runner.train_part = data.train
    evals = [EvalSet.of(e) for e in data.evals]
    perts = FitOnDemand([(s.id, s.severity) for s in suite.perturbations],
                        lambda: perturbation_instances(suite, data.train, data.evals))
    runner.ahead = None
    if not plan_ahead_wanted(suite.overlap.plan_ahead, runner.device.type, runner.opts.plan_cache):
        return perts, evals

    def work() -> dict[str, Any]:
        t0 = time.perf_counter()
        fitted = perts.fitted()
        try_perturbations(suite, fitted, data.evals)  # a failing plugin: raised in the parent
        t1 = time.perf_counter()
        runner.plan_processes = plan_ahead_processes()
        first: list[tuple[EvalSet, dict[Any, Any]]] = []
        for seed in suite.seeds:
            for es in evals:
                plans = runner.plans(es, fitted, seed)
                if seed == suite.seeds[0]:
                    first.append((es, plans))
        t2 = time.perf_counter()
        prepared = prepare_analyses_ahead(suite, runner.ctx.base_dir, data.train, first, runner.plan_processes)
        # Morfessor models trained for the perturbations: the morphology analysis trains the
        # same ones in the main process otherwise (same types and seed)
        return {"fit_seconds": t1 - t0, "plans_seconds": t2 - t1, "analyses_seconds": time.perf_counter() - t2,
                "segmenters": MorfessorSegmenter.trained_models(), "analyses": prepared}

    runner.ahead = PlanAhead(work, setup=one_torch_thread)
    runner.fits_ahead = start_fits_ahead(suite, runner.ctx.base_dir, data.train)
    return perts, evals


def prepare_analyses_ahead(suite: Suite, base_dir: Path, train: DataPart,
                           first: list[tuple[EvalSet, dict[Any, Any]]], processes: int | None) -> dict[str, Any]:
    """In the plan-ahead process: each analysis fitted as the run will fit it for the first
    seed — with only the encoders whose fit it reads (``Analysis.fit_encoders``: the BPE
    merges the morphology analysis takes its boundaries from), fitted here — and prepared on
    the first seed's plans; {analysis name: ``export_prepared()``}. The run adopts each after
    its own fit if it was made under the same fit (``adopt_prepared``), so its text work
    before scoring (≈ 10 s of a standard seed on the H200 host: BENCHMARKS.md)
    is done here while the models train. Anything that fails here is left to the run."""
    seed = suite.seeds[0]
    out: dict[str, Any] = {}
    specs = {s.label: s for s in suite.encoders}
    for aspec in suite.analyses:
        a = aspec.config
        try:
            encs = {}
            for label in a.fit_encoders([(s.label, s.name) for s in suite.encoders]):
                cls = plugins.resolve("encoder", specs[label].name, search_paths=[base_dir])
                if not getattr(cls, "host_fit", False):
                    raise ValueError(f"{label}: its fit needs the device")
                encs[label] = fit_on_host(suite, base_dir, specs[label], seed, train)
            a.fit(train.docs, encs)
            # on the plan-ahead process's share of the CPUs, where the analysis takes a count
            kw = {"processes": processes} if "processes" in inspect.signature(a.prepare).parameters else {}
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


def fit_on_host(suite: Suite, base_dir: Path, spec: EncoderSpec, seed: int, train: DataPart) -> Encoder:
    """A fresh encoder for ``spec`` with its ``fit`` run on the CPU, as the run fits it (the
    fit of a ``host_fit`` encoder: BPE's merges), in a process working ahead of training."""
    b = suite.budget
    enc = build_encoder(spec, seed, base_dir)
    enc.fit(fit_context(train.docs, b, torch.device("cpu"), seed, log=lambda s: None,
                        permuter=permuter_for(spec.permutation, b.context_bytes, seed)))
    return enc


def start_fits_ahead(suite: Suite, base_dir: Path, train: DataPart) -> PlanAhead | None:
    """A forked process that fits every encoder whose fit is host work (``Encoder.host_fit``:
    BPE's merges, 3-6 s each on the H200 host) for the first seed, one process per encoder,
    while the first models train; None when there is none. ``get_model`` hands each result to
    its encoder (``set_extra_state``), whose ``fit`` then finds it done (the encoder checks the
    key); any failure over there and the encoder is fitted in the run, as without it."""
    seed = suite.seeds[0]
    specs = [s for s in suite.training_order()
             if getattr(plugins.resolve("encoder", s.name, search_paths=[base_dir]), "host_fit", False)]
    if not specs:
        return None

    def fit_one(spec: EncoderSpec) -> dict[str, Any]:
        return fit_on_host(suite, base_dir, spec, seed, train).get_extra_state()

    def work() -> dict[str, Any]:
        t0 = time.perf_counter()
        states = perturb_many(specs, fit_one, len(specs), stage="fit-ahead")
        return {"seconds": time.perf_counter() - t0, "states": dict(zip((s.label for s in specs), states))}

    return PlanAhead(work, setup=one_torch_thread)


def fit_ahead_state(runner: Runner, spec: EncoderSpec, seed: int) -> dict[str, Any] | None:
    """The state the fit-ahead process learned for ``spec`` (waiting for it), or None: not
    fitted ahead (another seed, not host work, plan-ahead off) or failed there."""
    if runner.fits_ahead is None or seed != runner.suite.seeds[0]:
        return None
    t0 = time.perf_counter()
    try:
        got = runner.fits_ahead.wait()
    except Exception as e:  # noqa: BLE001 - only a speed-up: fit here, where errors are named
        runner.log(f"[fit] fitting ahead failed ({type(e).__name__}); fitting here")
        runner.fits_ahead = None
        return None
    finally:
        runner._add_time("fit_ahead_wait_seconds", t0)
    runner.timings["fit_ahead_seconds"] = got["seconds"]
    return got["states"].get(spec.label)


def plan_ahead_result(runner: Runner, wait: bool) -> dict[str, Any] | None:
    """The plan-ahead process's result (None while it runs, with ``wait`` False). Its
    exception is re-raised here (a perturbation plugin that failed: the run's one-line
    error); if the process itself died (killed, out of memory), the run goes on without it
    — the perturbations are fitted and the missing plans made here, as with plan-ahead off."""
    assert runner.ahead is not None
    try:
        if wait:
            return runner.ahead.wait()
        runner.ahead.check()
        return runner.ahead.result
    except WorkerDied as e:
        runner.log(f"[perturb] {e}; perturbing in this process instead")
        runner.ahead = None
        return None


def wait_plan_ahead(runner: Runner) -> None:
    """Before the first scoring: wait for the plan-ahead process (its exception re-raised
    here) and record its own seconds and how long scoring waited for it."""
    if runner.ahead is None or "plan_ahead_plans_seconds" in runner.timings:
        return
    t0 = time.perf_counter()
    got = plan_ahead_result(runner, wait=True)
    runner.timings["plan_ahead_wait_seconds"] = time.perf_counter() - t0
    if got is None:
        return
    runner.timings["plan_ahead_fit_seconds"] = got["fit_seconds"]
    runner.timings["plan_ahead_plans_seconds"] = got["plans_seconds"]
    runner.timings["plan_ahead_analyses_seconds"] = got.get("analyses_seconds", 0.0)
    MorfessorSegmenter.adopt(got["segmenters"])
    runner.analyses_ahead = got.get("analyses", {})
