"""Many processes, one suite, one results file (torch.distributed; see docs/distributed.md).

Two modes, chosen by the suite:

* models across ranks (default): ``plan_ranks`` gives each rank whole (seed, encoder) models,
  largest first by estimated training FLOPs; each rank trains its models and scores their
  cells; rank 0 gathers the model keys and facts and writes results.csv / run.json / report
  from the hash-named cell files, in exactly the order a one-process run writes them.
* one model across ranks (``budget.data_parallel: true``): every model is trained by all ranks
  together (``DataParallel``: each rank takes a contiguous slice of each global step's windows,
  the loss is divided by the all-reduced count of scored bytes and the gradients are summed, so
  the optimizer sees the one-process gradient); only rank 0 writes checkpoints and models; the
  cells are then scored by their model's owner as above.

Started by ``tokbench run SUITE --nproc N`` (``harness.pipeline.launch``) or directly under ``torchrun``.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as tdist
from torch import nn

from encoders.mdm import MaskedDiffusion
from harness.config.suite import Suite
from harness.data.evalsets import CLEAN, EvalSet
from harness.data.load import DataPart, load_data, training_windows
from harness.infra.meters import gemm_tflops
from harness.infra.schedule import assign_lpt
from harness.infra.writes import atomic_write_json
from harness.pipeline.keys import cell_key
from harness.pipeline.launch import LOCK_HELD_ENV, MULTICAST_OFF, run_lock
from harness.pipeline.models import TrainedModel, get_model
from harness.pipeline.plans import try_perturbations
from harness.pipeline.run import Runner, RunOptions
from harness.pipeline.scoring import score_seed
from harness.train.loop import build_encoder

# Collectives wait for the slowest rank's whole training / scoring share: no 30-minute default.
COLLECTIVE_TIMEOUT = timedelta(hours=48)


@dataclass(frozen=True)
class DistContext:
    """This process's place in the job: rank in [0, world), the rank on its node, the backend."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0
    backend: str = "none"

    @property
    def active(self) -> bool:
        return self.world > 1

    def barrier(self) -> None:
        if self.active:
            tdist.barrier()

    def all_gather_object(self, obj: Any) -> list[Any]:
        """[obj of rank 0, obj of rank 1, ...] on every rank (picklable objects)."""
        if not self.active:
            return [obj]
        out: list[Any] = [None] * self.world
        tdist.all_gather_object(out, obj)
        return out

    def broadcast_object(self, obj: Any, src: int = 0) -> Any:
        if not self.active:
            return obj
        box = [obj]
        tdist.broadcast_object_list(box, src=src)
        return box[0]


def env_world() -> int:
    """WORLD_SIZE as torchrun sets it (1 outside torchrun)."""
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def init(device: str = "auto") -> DistContext:
    """Join the process group torchrun described in the environment (RANK, WORLD_SIZE,
    LOCAL_RANK, MASTER_ADDR/PORT): NCCL when this rank drives a CUDA device, else gloo. A
    single process (WORLD_SIZE unset or 1) gets a context that does nothing."""
    world = env_world()
    if world <= 1:
        return DistContext()
    for k, v in MULTICAST_OFF.items():
        os.environ.setdefault(k, v)  # read by NCCL at communicator creation, i.e. after this
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    cuda = device != "cpu" and torch.cuda.is_available()
    shared = False
    if cuda:
        gpus = torch.cuda.device_count()
        # more ranks than GPUs on this node: round-robin, several ranks per GPU (small models'
        # host-bound steps fill each other's idle gaps); NCCL wants one rank per GPU, so gloo
        shared = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1) > gpus
        torch.cuda.set_device(local % gpus)  # "cuda" then means this rank's GPU everywhere
    backend = "nccl" if cuda and not shared else "gloo"
    if not tdist.is_initialized():
        tdist.init_process_group(backend, timeout=COLLECTIVE_TIMEOUT)
    return DistContext(rank, world, local, backend)


def shutdown(ctx: DistContext) -> None:
    if ctx.active and tdist.is_initialized():
        tdist.destroy_process_group()


# ---------------------------------------------------------------------------------------------
# the planner


def estimate_train_flops(suite: Suite, train: DataPart, base_dir: Path) -> dict[str, float]:
    """{encoder label: estimated training FLOPs of one model} = 3 × forward FLOPs per scored byte
    on one real batch × train_bytes — the dry run's count, without its fit stage and timing
    (an unfitted encoder that cannot collate yet, e.g. BPE before its merges, falls back to
    6 × parameters per byte)."""
    b = suite.budget
    probe = list(training_windows(train.docs, b.windows_per_step * b.context_bytes, b.context_bytes, suite.seeds[0]))
    out: dict[str, float] = {}
    for spec in suite.encoders:
        enc = build_encoder(spec, suite.seeds[0], base_dir)
        try:
            batch = enc.collate(probe, [0] * len(probe))
            per_byte = 3.0 * enc.flops(batch) / max(1, batch.scored_bytes)
        except Exception:  # not collatable before fit: the parameter count still orders sizes
            per_byte = 6.0 * sum(p.numel() for p in enc.parameters())
        out[spec.label] = per_byte * b.train_bytes
    return out


def plan_ranks(suite: Suite, costs: dict[str, float], world: int) -> dict[tuple[int, str], int]:
    """{(seed, encoder label): rank}: whole models (with all their cells) to ranks, largest
    first, balanced by ``costs`` (FLOPs of one model per label)."""
    jobs = [(seed, s.label) for seed in suite.seeds for s in suite.encoders]
    owner = assign_lpt([costs[label] for _, label in jobs], world)
    return dict(zip(jobs, owner))


# ---------------------------------------------------------------------------------------------
# one model across ranks


class DataParallel:
    """Data-parallel training of one model over all ranks, equal to one process's step.

    Each rank collates the contiguous slice ``shard(chunk)`` of a global step's windows; before
    the forward pass the ranks all-reduce [scored bytes, forward FLOPs, frozen FLOPs], so the
    loss each rank back-propagates is its Σ NLL / the GLOBAL Σ scored bytes; summing those
    gradients over ranks gives exactly the one-process gradient of Σ NLL / Σ bytes (not a mean
    of per-rank means). Gradient clipping and AdamW then run identically on every rank.
    """

    def __init__(self, ctx: DistContext) -> None:
        self.ctx = ctx

    @property
    def writer(self) -> bool:
        """Only rank 0 writes checkpoints and models."""
        return self.ctx.rank == 0

    def shard(self, chunk: list[bytes]) -> list[bytes]:
        n, r, w = len(chunk), self.ctx.rank, self.ctx.world
        return chunk[r * n // w:(r + 1) * n // w]

    def sum(self, values: list[float], device: torch.device) -> list[float]:
        """Element-wise sum over ranks (float64 so byte counts stay exact)."""
        t = torch.tensor(values, dtype=torch.float64, device=device)
        tdist.all_reduce(t)
        return [float(x) for x in t.tolist()]

    def sum_tensor(self, t: torch.Tensor) -> torch.Tensor:
        """Σ over ranks of a tensor on this rank's device (in place, returned; no host sync)."""
        tdist.all_reduce(t)
        return t

    def sync_parameters(self, model: nn.Module) -> None:
        """Rank 0's weights and buffers to every rank (fit stages are deterministic, but a GPU
        kernel's nondeterminism must not make the replicas drift from the first step)."""
        for t in [*model.parameters(), *model.buffers()]:
            tdist.broadcast(t.data, src=0)
        # A write through .data leaves the version counter that MaskedDiffusion's host mirror of
        # its rng buffer is keyed on: make it read the broadcast buffer.
        for m in model.modules():
            if isinstance(m, MaskedDiffusion):
                m.mdm_rng_reread()

    def all_reduce_grads(self, model: nn.Module) -> None:
        """Σ over ranks of every gradient; a parameter without a gradient on some rank (its
        slice did not use it) gets zeros there, one with no gradient on any rank keeps None —
        as in one process, where AdamW then skips it."""
        params = [p for p in model.parameters() if p.requires_grad]
        if not params:
            return
        dev = params[0].device
        has = torch.tensor([p.grad is not None for p in params], dtype=torch.float32, device=dev)
        tdist.all_reduce(has, op=tdist.ReduceOp.MAX)
        live = [p for p, h in zip(params, has.tolist()) if h > 0]
        for p in live:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        if not live:
            return
        flat = torch.cat([p.grad.reshape(-1) for p in live])  # one collective, not one per tensor
        tdist.all_reduce(flat)
        i = 0
        for p in live:
            n = p.numel()
            p.grad.copy_(flat[i:i + n].view_as(p.grad))
            i += n


# ---------------------------------------------------------------------------------------------
# the runner


class DistRunner(Runner):
    """``Runner`` for one rank of a torch.distributed job (see the module docstring)."""

    def __init__(self, suite: Suite, opts: RunOptions, ctx: DistContext) -> None:
        super().__init__(suite, opts)
        self.dist = ctx
        if ctx.rank != 0:
            log = opts.log
            self.log = lambda s: log(f"[rank {ctx.rank}] {s}")
        self.dp = DataParallel(ctx) if suite.budget.data_parallel and ctx.active else None
        self.writes_models = self.dp is None or self.dp.writer
        self.rows: list[dict[str, Any]] = []

    def run(self) -> Path:
        """Run the suite under the run directory's lock (taken by rank 0 unless the launcher
        already holds it)."""
        from harness.infra.determinism import deterministic_kernels

        with deterministic_kernels(self.budget.deterministic):
            if self.dist.rank == 0 and not os.environ.get(LOCK_HELD_ENV):

                with run_lock(self.rd.root, self.log):
                    return self._run_ranks()
            return self._run_ranks()

    def _run_ranks(self) -> Path:
        ctx = self.dist
        t_start = time.perf_counter()
        # rank 0 fetches / builds the sources first; the others then read its cache
        data = None
        if ctx.rank == 0:
            from harness.infra.cache import remove_stale_tmp

            stale = remove_stale_tmp(self.rd.root)  # before any rank writes (they wait below)
            if stale:
                self.log(f"[cache] removed {len(stale)} temporary file(s) left by an interrupted write")
            data = load_data(self.suite, self.ctx, prepare=self.opts.prepare, limit=self.opts.limit, log=self.log)
        ctx.barrier()
        if data is None:
            data = load_data(self.suite, self.ctx, prepare=False, limit=self.opts.limit, log=lambda s: None)
        self.data_facts.update(data.facts)
        self.timings["data_seconds"] = data.seconds
        self.timings["perturb_seconds"] = 0.0
        self.train_part = data.train  # primes the compressor baselines
        self.eval_bytes = sum(e.n_bytes for e in data.evals)
        # the MFU ceiling of one GPU, measured by rank 0 alone (ranks may share a GPU)
        self.gemm_tflops = ctx.broadcast_object(gemm_tflops(self.device) if ctx.rank == 0 else None)
        if ctx.rank == 0:
            self.rd.root.mkdir(parents=True, exist_ok=True)
            atomic_write_json(self.rd.root / "run.json", self.run_json("running"))
        owner, costs = self._deal(data.train)
        mine = sorted(f"{label} s{seed}" for (seed, label), r in owner.items() if r == ctx.rank)
        self.log(f"[dist] rank {ctx.rank}/{ctx.world} ({ctx.backend}, "
                 f"{'data_parallel' if self.dp else 'models across ranks'}): scores {', '.join(mine) or 'nothing'}")
        perts, evals = self.scoring_inputs(data)
        try_perturbations(self.suite, perts, data.evals)
        metas: dict[tuple[int, str], dict[str, Any]] = {}
        mc: dict[tuple[int, str], bool] = {}  # Monte Carlo scores (MDM): their cell keys differ
        t_train = t_score = 0.0
        for seed in self.suite.seeds:
            t0 = time.perf_counter()
            models = self.train_share(seed, data.train, owner)
            t_train += time.perf_counter() - t0
            metas.update({(seed, label): m.meta for label, m in models.items()})
            mc.update({(seed, label): hasattr(m.enc, "mc_samples") for label, m in models.items()})
            scored = {label: m for label, m in models.items() if owner[(seed, label)] == ctx.rank}
            self.fit_analyses(data.train, scored)
            t0 = time.perf_counter()
            if scored or (ctx.rank == 0 and self.suite.baselines.compressors):
                score_seed(self, seed, evals, scored, perts)
            t_score += time.perf_counter() - t0
            del models, scored
        timings = {"rank": ctx.rank, "train_seconds": t_train, "score_seconds": t_score,
                   "perturb_seconds": self.timings["perturb_seconds"], "analyses": self.analysis_facts,
                   "score_facts": self.score_facts, "mc": mc, "refused": self.scaling_facts.get("refused", {}),
                   "gpu": (socket.gethostname(), torch.cuda.current_device()) if self.device.type == "cuda" else None}
        gathered = ctx.all_gather_object((metas, timings))
        if ctx.rank != 0:
            return self.rd.root
        self._merge(gathered, metas, mc)
        cell_keys = self.ordered_cells(evals, metas, mc)
        slowest = max((t for _, t in gathered), key=lambda t: t["score_seconds"])
        self.timings.update({"train_seconds": max(t["train_seconds"] for _, t in gathered),
                             "score_seconds": slowest["score_seconds"], "perturb_seconds": slowest["perturb_seconds"],
                             "score_forward_seconds": slowest["score_seconds"] - slowest["perturb_seconds"]})
        self.assemble(cell_keys)
        self.record_bytes_per_segment()
        self.timings["total_seconds"] = time.perf_counter() - t_start
        dist_facts = {"world_size": ctx.world, "backend": ctx.backend,
                      "mode": "data_parallel" if self.dp else "models_across_ranks",
                      "owner": {f"{label} s{seed}": r for (seed, label), r in owner.items()},
                      "estimated_train_flops": costs, "ranks": [t for _, t in gathered]}
        atomic_write_json(self.rd.root / "run.json", self.run_json("finished", {"distributed": dist_facts}))
        if self.opts.report:
            self.render_report()
        return self.rd.root

    def _deal(self, train: DataPart) -> tuple[dict[tuple[int, str], int], dict[str, Any]]:
        """Which rank trains and scores each (seed, label), from costs rank 0 estimates and
        broadcasts: (owner, the estimated costs by "label sSEED")."""
        ctx = self.dist
        if self.suite.scaling is not None:  # grid points, not encoders, are dealt (harness.pipeline.sweep_ranks)
            from harness.pipeline.sweep_ranks import plan_sweep, sweep_costs, sweep_units

            point_costs = ctx.broadcast_object(sweep_costs(self.suite, self.ctx.base_dir) if ctx.rank == 0 else None)
            owner = plan_sweep(point_costs, ctx.world, sweep_units(self.suite))  # a stacked rung: one unit
            return owner, {f"{label} s{seed}": c for (seed, label), c in point_costs.items()}
        costs = ctx.broadcast_object(
            estimate_train_flops(self.suite, train, self.ctx.base_dir) if ctx.rank == 0 else None)
        return plan_ranks(self.suite, costs, ctx.world), costs

    def _merge(self, gathered: list[Any], metas: dict[tuple[int, str], dict[str, Any]],
               mc: dict[tuple[int, str], bool]) -> None:
        """On rank 0: every rank's model facts, refusals, analyses and scoring facts (``gathered``)
        into this runner's, ``metas`` and ``mc``; each rank's timings stay in ``gathered``."""
        for m, _ in gathered:
            metas.update(m)
        if self.suite.scaling is not None:  # refusals and facts in one-process (grid) order
            from harness.pipeline.sweep_ranks import merged_refusals

            self.scaling_facts["refused"] = merged_refusals(self.suite, [t.pop("refused") for _, t in gathered])
            self.encoder_facts.clear()  # rank 0's own points were recorded first: ordered_cells re-records
        self.gpus = max(1, len({t.pop("gpu") for _, t in gathered} - {None}))
        for _, t in gathered:
            t.pop("refused", None)
            self.analysis_facts.update(t.pop("analyses"))
            self.score_facts.update(t.pop("score_facts"))  # each model is scored on one rank only
            mc.update(t.pop("mc"))

    def baseline_cells(self) -> list[tuple[str, Any]]:
        """Compressor baseline cells are computed by rank 0 alone (the others would write the
        same files)."""
        return super().baseline_cells() if self.dist.rank == 0 else []

    def train_share(self, seed: int, train: DataPart, owner: dict[tuple[int, str], int]) -> dict[str, TrainedModel]:
        """This rank's models of one seed (all of them, trained together, under data_parallel).
        Under ``match: flops`` the reference's owner trains it first and broadcasts its FLOPs."""
        models: dict[str, TrainedModel] = {}
        if self.suite.scaling is not None:  # this rank's grid points, each trained as alone
            from harness.pipeline.sweep import train_sweep

            mine = train_sweep(self, seed, train, owned=lambda label: owner[(seed, label)] == self.dist.rank)
            return {label: TrainedModel(*m) for label, m in mine.items()}
        flops_target = None
        for i, spec in enumerate(self.training_order()):
            src = owner[(seed, spec.label)]
            if self.dp is not None or src == self.dist.rank:
                enc, meta = get_model(self, spec, seed, train, flops_target)
                models[spec.label] = TrainedModel(enc, meta, spec)
            if self.budget.match == "flops" and i == 0:
                if self.dp is None:  # every rank calls this broadcast once per seed, in seed order
                    total = models[spec.label].meta["total_flops"] if src == self.dist.rank else None
                    flops_target = float(self.dist.broadcast_object(total, src=src))
                else:
                    flops_target = float(models[spec.label].meta["total_flops"])
        return models

    def ordered_cells(self, evals: list[EvalSet], metas: dict[tuple[int, str], dict[str, Any]],
                      mc: dict[tuple[int, str], bool]) -> list[str]:
        """Every cell key in one-process order (seed, eval set, perturbation, mode, encoder), and
        the encoders' run.json facts in one-process order."""
        keys: list[str] = []
        for seed in self.suite.seeds:
            if self.suite.scaling is not None:  # the trained grid points (refused ones have no model)
                from harness.pipeline.sweep_ranks import sweep_order

                pairs = sweep_order(self.suite, seed, {label for s, label in metas if s == seed})
                extra: tuple[str, ...] = ("scaling",)
            else:
                pairs, extra = [(spec.label, spec) for spec in self.training_order()], ()
            for label, spec in pairs:
                self.record_encoder_facts(label, spec, seed, metas[(seed, label)], extra=extra)
            order = [spec for _, spec in pairs]
            for es in evals:
                fp = es.part.fingerprint
                cells = [(pspec, mode) for pspec in [CLEAN, *self.suite.perturbations] for mode in self.suite.eval.modes]
                for pspec, mode in cells:
                    keys += [cell_key(self.suite, metas[(seed, s.label)]["key"], fp, pspec, mode, seed, mc=mc[(seed, s.label)])
                             for s in order]
                # then the compressor baselines of the eval set, as ``harness.pipeline.scoring.score_seed`` lists them
                keys += [self.baseline_key(name, perm, fp, pspec, mode, seed)
                         for pspec, mode in cells for name, perm in self.baseline_cells()]
        return keys


def run_distributed(suite: Suite, opts: RunOptions) -> tuple[Runner, Path]:
    """One rank's whole run: join the group, run, leave. Returns the runner (its ``rows`` are
    filled on rank 0 only) and the run directory."""
    ctx = init(opts.device)
    try:
        runner = DistRunner(suite, opts, ctx)
        root = runner.run()
        ctx.barrier()  # nobody exits (and tears the group down) before rank 0 has written
        return runner, root
    finally:
        shutdown(ctx)


def is_rank0() -> bool:
    return int(os.environ.get("RANK", "0") or 0) == 0


__all__ = ["DataParallel", "DistContext", "DistRunner", "init", "plan_ranks",
           "run_distributed"]
