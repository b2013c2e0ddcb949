"""Design a scaling suite from measured sweep points: fit L(N, D), predict each budget's
compute-optimal size, check that the ladder brackets it, and predict the H200 wall per budget
(a planning aid, not a test; its numbers are predictions from earlier measurements).

    python benchmarks/scaling_design.py suites/scaling.yaml [--set KEY=VALUE ...] [--cache DIR]
        [--results DIR ...] [--times DIR ...] [--compare DIR ...] [--gpu-tflops T]
        [--timed-plan per-step|one-batch] [--candidate SETS]

1. **Points.** Every sweep row of the ``--results`` run directories (results.csv): clean BPB
   (``full`` mode, the eval set ``--eval-set``) with N = ``params_non_embedding`` and
   D = ``train_bytes``. Default: the H200 grid's five budgets 8e12–1.28e14 on the 43.3 MB mix
   (``benchmarks/results/scaling_grid_h200``). Runs on another text are only *compared*
   (``--compare``: their own fit, printed beside): another text has another E, A and B, so their
   points are not pooled.
2. **Law.** Per encoder, L(N, D) = E + A/N^a + B/D^b by least squares in BPB (scipy), in four
   variants because points on a few IsoFLOP lines barely separate the N and D terms:
   ``shared_E`` (one E for all encoders: same text, same irreducible entropy; A, a, B, b per
   encoder — the headline), ``free`` (E, A, a, B, b per encoder), ``shared_Ea`` (one E and one
   parameter exponent a: every encoder runs the same backbone ladder) and ``fixed_exp`` (one E,
   and a = 0.34, b = 0.28, the exponents Hoffmann et al. 2022 fitted for tokens of web text — an
   outside prior, not a fit to our points). Each variant's parameters come with Jacobian
   standard errors; where they exceed the value, the points do not determine that term and the
   optimum it implies is an extrapolation — the variants then disagree, and the design is judged
   under each.
3. **Step time.** Measured: ms per optimizer step = c0 + c1 · layers per encoder, least squares
   over the models of the ``--times`` run directories (their run.json: training seconds, first
   step excluded, over steps), all at one batch (32 KB in the default runs). At that batch a step
   of these small models is bound by the host's kernel launches, which grow with depth, not with
   FLOPs (a FLOPs term adds nothing to the fit). **Assumed** for another batch B (not measured):
   the host cost stays per step, and the extra windows add their GPU work on top, unhidden, at
   ``--gpu-tflops`` (default 35 TFLOP/s: the highest whole-step rate measured at 16 KB, bytes
   6 x 320 — host time included, so the GPU's own rate on those shapes is at least that):
   ms(B) = c0 + c1 · layers + (B − B_measured) · FLOPs per byte / rate. A smaller batch is
   given no saving. The *pessimistic* column adds the largest positive residual of the fit, floors
   a step at the fastest one measured (1-layer rungs are shallower than any timed), halves the
   rate and scales the batch-wait time measured (``host_wait_seconds``) with the batch.
   Predicted wall of a budget = start-up and data (measured, the data part scaled by the train
   part's size) + Σ over admissible points (planned steps × the measured ratio of steps run to
   steps planned × the over-read correction (``rung_facts``, with ``--timed-plan one-batch``
   only: runs planned with an 8-step probe padded as one batch while the loop pads per step carry
   a BPE over-read in their measured ratio that a plan counted per step does not have) × ms/step + first step +
   per-model set-up, measured) + one BPE fit per command
   (later rungs reuse the merges in-process) + scoring (measured seconds per model).
4. **Candidate.** For the suite given, every rung's N and training FLOPs per byte come from the
   encoders' own accounting on the suite's real training windows (as ``scaling_plan.py``), the
   grid is planned with the harness's refusal rules, and per budget and encoder the optimum of
   the fitted law along the IsoFLOP line (D = C / FLOPs-per-byte(N), log-interpolated between
   rungs) is compared with the admissible rungs: *bracketed* = at least one admissible rung on
   each side of N_opt.

The law is fitted on the text of the measured runs; a candidate with other text (more of it, other
sources) is predicted as if the law carried over — it does not exactly (another mix has another E).
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from reports.scaling import D0, N0, Law, LawFit
from reports.scaling import fit_law as _fit_law

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "benchmarks" / "results" / "scaling_grid_h200"
# Five budgets of suites/scaling.yaml at 1dae4c6 (43.3 MB mix), eager, 32 KB batches, planned
# per step as the loop runs (--timed-plan per-step).
DEFAULT_RESULTS = [MEASURED / d for d in ("b8e12", "b1.6e13", "b3.2e13", "b6.4e13", "b1.28e14")]
DEFAULT_TIMES = DEFAULT_RESULTS
DEFAULT_COMPARE: list[Path] = []
# Wall of each budget command (benchmarks/results/scaling_grid_h200/env_8e12-1.28e14.log).
DEFAULT_WALL = ["b8e12=121", "b1.6e13=177", "b3.2e13=338", "b6.4e13=381", "b1.28e14=348"]
GPU_TFLOPS = 35.0  # assumed GPU rate for a larger batch's extra windows (see 3. above)


def read_run_json(d: Path) -> dict:
    """run.json of run directory ``d``, or its gzipped copy (the committed runs keep run.json.gz)."""
    plain = d / "run.json"
    if plain.exists():
        return json.loads(plain.read_text())
    return json.loads(gzip.decompress((d / "run.json.gz").read_bytes()))


@dataclass(frozen=True)
class Point:
    encoder: str  # encoder_name (bytes, bpe)
    budget: float
    size: str
    n: float  # non-embedding parameters
    d: float  # training bytes read
    bpb: float


def load_points(dirs: Sequence[Path], eval_set: str) -> list[Point]:
    """Clean full-mode BPB of every sweep model in the run directories' results.csv."""
    out = []
    for d in dirs:
        with open(d / "results.csv", newline="") as f:
            for r in csv.DictReader(f):
                if (r.get("flop_budget") and r["perturbation"] == "identity" and r["mode"] == "full"
                        and r["dataset"] == eval_set):
                    out.append(Point(r["encoder_name"], float(r["flop_budget"]), r["model_size"],
                                     float(r["params_non_embedding"]), float(r["train_bytes"]), float(r["bpb"])))
    return out


# ---------------------------------------------------------------------------------------------
# L(N, D) = E + A/N^a + B/D^b


def law_data(points: Sequence[Point]) -> dict[str, np.ndarray]:
    """encoder → (P, 3) array of (N, D, BPB), as ``reports.scaling.fit_law`` takes them."""
    return {e: np.array([(p.n, p.d, p.bpb) for p in points if p.encoder == e])
            for e in sorted({p.encoder for p in points})}


def fit_law(points: Sequence[Point], variant: str) -> LawFit:
    """``reports.scaling.fit_law`` on measured points (module docstring, 2.)."""
    return _fit_law(law_data(points), variant)


def law_table(fit: LawFit, points: Sequence[Point]) -> str:
    lines = [f"law variant {fit.variant}: {fit.n_params} parameters on {len(points)} points, "
             f"rms residual {fit.rms():.3f} bpb"]
    for e, law in fit.laws.items():
        s = fit.se[e]
        a_coef, b_coef = math.exp(law.log_a_coef) * N0 ** law.a, math.exp(law.log_b_coef) * D0 ** law.b

        def pm(key: str, val: float, s: dict[str, float] = s) -> str:
            return f"{val:.3g}" + (f" ± {s[key]:.2g}" if key in s and math.isfinite(s[key]) else " (fixed)")

        lines.append(f"  {e:<6} E={pm('E', law.e)}  A={a_coef:.3g} a={pm('a', law.a)}  "
                     f"B={b_coef:.3g} b={pm('b', law.b)}  rms {fit.rms(e):.3f}, max |res| "
                     f"{np.abs(fit.residuals[e]).max():.3f} bpb")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Step time


@dataclass
class TimeModel:
    """ms per step = c0 + c1·layers per encoder at the measured batch, its extension to other
    batches (an assumption, module docstring 3.), and the measured fixed costs."""

    coef: dict[str, tuple[float, float]]
    resid_ms: dict[str, list[float]]
    rows: dict[str, list[tuple[int, float]]]  # measured (layers, ms/step) per encoder
    first_step_s: float  # mean first-step seconds (allocation, kernel autotune)
    setup_s: float  # per trained model, outside its training loop (build, FLOPs probe, save)
    steps_factor: dict[str, float]  # steps the loop ran / steps planned (BPE reads more bytes)
    score_s_per_model: float
    fixed_s: float  # process start + data loading per budget command
    data_s: float  # of which data loading (scaled by the train part's size for another text)
    train_part_bytes: int  # of the measured runs
    bpe_fit_s: float  # one uncached BPE fit of budget.train_bytes
    batch_bytes: int  # the batch every timed step used
    wait_ms: dict[str, float]  # mean host_wait_seconds per step (the step waiting for its batch)
    gpu_tflops: float = GPU_TFLOPS
    gflop: dict[str, list[float]] | None = None  # measured training GFLOPs per step, rows' order

    def flops_term(self, enc: str) -> tuple[float, float, float]:
        """(c0, c1, c2) of ms/step = c0 + c1·layers + c2·GFLOPs per step, least squares: how much
        a FLOPs term explains beyond depth at the measured batch (c2 in ms per GFLOP)."""
        assert self.gflop is not None
        x = np.array([[1.0, r[0], g] for r, g in zip(self.rows[enc], self.gflop[enc])])
        c, *_ = np.linalg.lstsq(x, np.array([r[1] for r in self.rows[enc]]), rcond=None)
        return float(c[0]), float(c[1]), float(c[2])

    def ms(self, enc: str, layers: int, flops_per_byte: float, batch_bytes: int,
           pessimistic: bool = False) -> float:
        """Predicted ms per step of a model with ``layers`` and training ``flops_per_byte`` at
        ``batch_bytes``. Measured part: c0 + c1·layers. Assumed part: the GPU work of the bytes
        beyond the measured batch, at ``gpu_tflops`` (halved when ``pessimistic``, which also adds
        the fit's largest positive residual, floors at the fastest measured step and scales the
        measured batch wait with the batch)."""
        c0, c1 = self.coef[enc]
        v = c0 + c1 * layers
        rate = self.gpu_tflops * 1e12 / (2 if pessimistic else 1)
        extra = max(0, batch_bytes - self.batch_bytes) * flops_per_byte / rate * 1000
        if pessimistic:
            v = max(v, min(r[1] for r in self.rows[enc])) + max(0.0, max(self.resid_ms[enc]))
            v += self.wait_ms.get(enc, 0.0) * max(0, batch_bytes / self.batch_bytes - 1)
        return v + extra

    def fixed(self, train_part_bytes: int) -> float:
        """Start-up + data loading of one command on a train part of ``train_part_bytes``."""
        return self.fixed_s + self.data_s * max(0.0, train_part_bytes / self.train_part_bytes - 1)


def time_model(dirs: Sequence[Path], fit_dirs: Sequence[Path], wall: dict[str, float],
               gpu_tflops: float = GPU_TFLOPS) -> TimeModel:
    """Fit the step-time model to run.json of ``dirs``; the uncached BPE fit time comes from any
    run of ``fit_dirs`` that fitted rather than loaded the merges."""
    rows: dict[str, list[tuple[int, float]]] = {}
    first, score, fixed, setup, data_s, batch, part = [], [], [], [], [], set(), set()
    ratio: dict[str, list[float]] = {}
    wait: dict[str, list[float]] = {}
    gflop: dict[str, list[float]] = {}
    for d in dirs:
        j = read_run_json(d)
        batch.add(int(j["suite"]["budget"]["batch_bytes"]))
        part.add(int(j["data"]["train"]["n_bytes"]))
        n_models, loop_s = 0, 0.0
        for e in j["encoders"].values():
            t = e["seeds"]["0"]["train"]
            ms = 1000 * (t["seconds"] - t["first_step_seconds"]) / max(1, t["steps"] - 1)
            rows.setdefault(e["name"], []).append((int(e["scaling"]["layers"]), ms))
            gflop.setdefault(e["name"], []).append(t["flops_causal_attn_half"] / max(1, t["steps"]) / 1e9)
            ratio.setdefault(e["name"], []).append(t["steps"] / e["scaling"]["planned_steps"])
            wait.setdefault(e["name"], []).append(1000 * t.get("host_wait_seconds", 0.0) / max(1, t["steps"]))
            first.append(t["first_step_seconds"])
            loop_s += t["seconds"]
            n_models += 1
        tm = j["timings"]
        if tm["train_seconds"] >= loop_s:  # a resumed command's run.json also lists models it loaded
            setup.append((tm["train_seconds"] - loop_s) / max(1, n_models))
        score.append(tm["score_seconds"] / max(1, n_models))
        w = wall.get(d.name, tm["total_seconds"])
        fixed.append(w - tm["total_seconds"] + tm["data_seconds"] + tm["perturb_seconds"])
        data_s.append(tm["data_seconds"])
    fits = []
    for d in fit_dirs:
        j = read_run_json(d)
        for e in j["encoders"].values():
            f = e["seeds"]["0"]["fit"]
            if f.get("cached") is False:
                fits.append(float(f["seconds"]))
    coef, resid = {}, {}
    for enc, v in rows.items():
        x = np.array([r[0] for r in v], float)
        y = np.array([r[1] for r in v])
        c1, c0 = np.polyfit(x, y, 1)
        coef[enc] = (float(c0), float(c1))
        resid[enc] = [float(r) for r in y - (c0 + c1 * x)]
    if len(batch) != 1 or len(part) != 1:
        raise SystemExit(f"--times runs used different batch_bytes {sorted(batch)} or train parts {sorted(part)}")
    return TimeModel(coef, resid, rows, float(np.mean(first)), float(np.mean(setup)),
                     {e: float(np.mean(v)) for e, v in ratio.items()}, float(np.mean(score)), float(np.mean(fixed)),
                     float(np.mean(data_s)), part.pop(), float(np.mean(fits)) if fits else 3.0, batch.pop(),
                     {e: float(np.mean(v)) for e, v in wait.items()}, gpu_tflops, gflop)


# ---------------------------------------------------------------------------------------------
# A candidate suite


def one_batch_flops_per_byte(enc: object, windows: list[bytes]) -> float:
    """Training FLOPs per scored byte (half convention) of ``windows`` collated as one batch —
    how ``harness.config.scaling.flops_per_byte`` counted with the one-batch probe, when the timed runs were
    planned: padded to the longest window of the whole 8-step probe, where the loop pads per
    step (for BPE 7–12 % more FLOPs per byte than the loop spends)."""
    batch = enc.collate(windows, [0] * len(windows))  # type: ignore[attr-defined]
    frozen = enc.frozen_flops(batch) if hasattr(enc, "frozen_flops") else 0.0
    return (3.0 * enc.flops(batch) - 2.0 * frozen) / max(1.0, batch.scored_bytes)  # type: ignore[attr-defined]


def rung_facts(suite: object, cache: Path | None, ref_batch: int | None = None, timed_one_batch: bool = False
               ) -> tuple[dict[tuple[str, str], tuple[int, float, float, float]], int]:
    """(encoder label, rung) → (N non-embedding, FLOPs/byte half, full, over-read) from the
    encoders' own accounting on the suite's training windows (BPE merges learned on
    budget.train_bytes, as the GPU run does); and the train part's size in bytes.

    over-read: the factor that takes the timed runs' measured ratio of steps run to steps planned
    (at ``ref_batch``, the time model carries it) to today's plan. Those runs were planned with
    the 8-step probe padded as one batch while the loop pads per step, so padded encoders (BPE)
    read more than planned; the plan now counts per step as the loop does, so that over-read
    is divided out: [per-step / one-batch FLOPs per byte at ``ref_batch``] (1 for bytes) — only
    when ``timed_one_batch`` (runs planned with the one-batch probe); runs planned per step need no correction (1)."""
    import torch

    from encoders.backbone import causal_attention_cost
    from harness.config.scaling import HEADLINE_ATTENTION, GridPoint, flops_per_byte
    from harness.data.load import load_data, source_context, training_windows
    from harness.pipeline.sweep import point_spec
    from harness.train.loop import build_encoder, fit_context

    ctx = source_context(suite, cache, lambda s: None)
    train = load_data(suite, ctx, prepare=False, log=lambda s: None).train
    cfg, b = suite.scaling, suite.budget
    seed = suite.seeds[0]
    probe = list(training_windows(train.docs, 8 * b.batch_bytes, b.context_bytes, seed))
    ref = ref_batch or b.batch_bytes
    ref_probe = list(training_windows(train.docs, 8 * ref, b.context_bytes, seed))
    out: dict[tuple[str, str], tuple[int, float, float, float]] = {}
    for spec in suite.encoders:
        for r in cfg.ladder:
            p = GridPoint(budget=cfg.budgets[0], rung=r, encoder=spec.label, label=f"{spec.label}:{r.name}")
            enc = build_encoder(point_spec(cfg, spec, p), seed, ctx.base_dir)
            with torch.no_grad(), causal_attention_cost(HEADLINE_ATTENTION):
                # BPE learns its merges once per process (encoders.bpe keeps them by data key).
                enc.fit(fit_context(train.docs, b, torch.device("cpu"), seed,
                                    sub_bytes_cap=b.batch_bytes, log=lambda s: None))
                half, full = flops_per_byte(enc, probe, b.windows_per_step, b.windows_per_micro_batch)
                # the plan now counts as the loop does (no over-read at this batch); the timed
                # runs' measured steps-run / steps-planned ratio carries their plan's over-read
                ref_steps = ref // b.context_bytes
                over = (flops_per_byte(enc, ref_probe, ref_steps, ref_steps)[0]
                        / one_batch_flops_per_byte(enc, ref_probe)) if timed_one_batch else 1.0
            n = sum(x.numel() for x in enc.parameters()) - enc.embedding_parameters()
            out[(spec.label, r.name)] = (n, half, full, over)
    return out, train.n_bytes


def optimum(law: Law, budget: float, ns: np.ndarray, fpb: np.ndarray) -> tuple[float, float, float]:
    """(N_opt, D_opt, L_opt) of ``law`` along the IsoFLOP line D = budget / FLOPs-per-byte(N),
    FLOPs per byte log-interpolated between rungs and extrapolated beyond them by the slope
    from the first to the last rung (over N from ladder min / 30 to ladder max × 30; the slope of
    two end rungs of almost equal N — BPE's 1 x 32 and 2 x 32, whose N is mostly the output
    head — would extrapolate wildly)."""
    o = np.argsort(ns)
    ln, lf = np.log(ns[o]), np.log(fpb[o])
    g = np.linspace(ln[0] - math.log(30), ln[-1] + math.log(30), 4000)
    lfg = np.interp(g, ln, lf)
    slope = (lf[-1] - lf[0]) / (ln[-1] - ln[0])
    lfg = np.where(g < ln[0], lf[0] + slope * (g - ln[0]), lfg)
    lfg = np.where(g > ln[-1], lf[-1] + slope * (g - ln[-1]), lfg)
    d = budget / np.exp(lfg)
    lg = law(np.exp(g), d)
    i = int(np.argmin(lg))
    return float(math.exp(g[i])), float(d[i]), float(lg[i])


def _header(suite_path: str, sets: list[str], suite: Any, facts: dict, part: int, tm: TimeModel,
            timed_one_batch: bool) -> list[str]:
    """The candidate's first lines: its train part, passes, batch, ladder and each rung's N and
    FLOPs per byte per encoder."""
    cfg, b = suite.scaling, suite.budget
    lines = [f"candidate {suite_path} {' '.join(sets)}".rstrip(),
             f"  train part {part:,} bytes; max_passes {cfg.max_passes:g} (≤ {cfg.max_passes * part / 1e6:.1f} MB "
             f"per point); batch {b.batch_bytes:,} bytes; min_steps {cfg.min_steps} "
             f"(≥ {cfg.min_steps * b.batch_bytes / 1e6:.1f} MB per point)",
             "  rungs: " + "; ".join(f"{r.name} {r.layers}x{r.dim}" for r in cfg.ladder)]
    if b.batch_bytes != tm.batch_bytes:
        lines.append(f"  NOTE: steps were timed at batch {tm.batch_bytes:,} bytes, this suite uses {b.batch_bytes:,}: "
                     f"the extra windows' GPU work is assumed at {tm.gpu_tflops:g} TFLOP/s on top of the "
                     f"measured per-step host cost (pessimistic: half that rate), not measured")
    for s in suite.encoders:
        e = s.label
        lines.append(f"  {s.name:<6} " + "; ".join(
            f"{r.name} N={facts[(e, r.name)][0] / 1e6:.3g}M {facts[(e, r.name)][1]:.3g} FLOPs/B" for r in cfg.ladder))
        over = [facts[(e, r.name)][3] for r in cfg.ladder]
        if timed_one_batch:
            lines.append(f"  {s.name:<6} loop reads x{min(over):.3f}-{max(over):.3f} the bytes its steps-run/planned "
                         f"ratio at {tm.batch_bytes:,} implies (the timed runs' one-batch plan divided out)")
    return lines


def _encoder_at_budget(suite: Any, c: float, e: str, name: str, facts: dict, part: int, fits: list[LawFit],
                       tm: TimeModel, bracketed: dict[str, dict[str, int]]) -> tuple[str, str, float, float, int]:
    """One encoder at budget ``c``: its table line, its line of predicted costs per point, the
    predicted training seconds (and pessimistic) and the number of admissible points;
    ``bracketed`` counts the budgets whose N_opt has admissible rungs on both sides."""
    from harness.config.scaling import GridPoint, plan_point

    cfg, b = suite.scaling, suite.budget
    pts = []
    for r in cfg.ladder:
        n, half, full, _ = facts[(e, r.name)]
        p = GridPoint(budget=c, rung=r, encoder=e, label="")
        p.params_non_embedding, p.flops_per_byte, p.flops_per_byte_full = n, half, full
        plan_point(cfg, p, base_lr=b.lr, batch_bytes=b.batch_bytes, train_part_bytes=part)
        pts.append(p)
    adm = [p for p in pts if not p.refused]
    wall = wall_hi = 0.0
    costs = []
    for p in adm:
        steps = p.steps * tm.steps_factor.get(name, 1.0) * facts[(e, p.rung.name)][3]
        ms = tm.ms(name, p.rung.layers, p.flops_per_byte, b.batch_bytes)
        ms_hi = tm.ms(name, p.rung.layers, p.flops_per_byte, b.batch_bytes, pessimistic=True)
        wall += steps * ms / 1000 + tm.first_step_s + tm.setup_s
        wall_hi += steps * ms_hi / 1000 + tm.first_step_s + tm.setup_s
        costs.append(f"{p.rung.name}: {p.train_bytes / 1e6:.0f}MB {p.steps}st {ms:.1f}ms {steps * ms / 1000:.0f}s")
    ns = np.array([facts[(e, r.name)][0] for r in cfg.ladder], float)
    fpb = np.array([facts[(e, r.name)][1] for r in cfg.ladder], float)
    opts, marks = [], []
    for f in fits:
        n_opt, d_opt, l_opt = optimum(f.laws[name], c, ns, fpb)
        lo = sum(p.params_non_embedding < n_opt for p in adm)
        hi = sum(p.params_non_embedding > n_opt for p in adm)
        bracketed[f.variant][e] += bool(lo and hi)
        marks.append(f"{lo}|{hi}" + ("" if lo and hi else "!"))
        opts.append(f"{n_opt / 1e6:6.3f}M {d_opt / 1e6:5.0f}MB{'' if lo and hi else '*':1}")
    adm_s = " ".join(f"{p.rung.name}:{p.params_non_embedding / 1e6:.2g}" for p in adm) or "-"
    line = f"{c:>8.3g} {name:<6} {adm_s:<58} " + " ".join(f"{o:>18}" for o in opts) + "  " + "/".join(marks)
    return line, f"  {c:>8.3g} {name:<6} " + "  ".join(costs), wall, wall_hi, len(adm)


def design(suite_path: str, sets: list[str], cache: Path | None, fits: list[LawFit], tm: TimeModel,
           timed_one_batch: bool = False) -> str:
    from harness.config import load_suite

    suite = load_suite(suite_path, sets)
    cfg = suite.scaling
    assert cfg is not None, "not a scaling suite"
    facts, part = rung_facts(suite, cache, tm.batch_bytes, timed_one_batch)
    encs = [s.label for s in suite.encoders]
    names = {s.label: s.name for s in suite.encoders}
    lines = _header(suite_path, sets, suite, facts, part, tm, timed_one_batch)
    lines.append("")
    lines.append(f"{'budget':>8} {'enc':<6} {'admissible rungs (N in M)':<58} "
                 + " ".join(f"{'N_opt ' + f.variant:>18}" for f in fits) + "  bracket")
    total_wall = {}
    detail: list[str] = []
    bracketed = {f.variant: {e: 0 for e in encs} for f in fits}
    for c in cfg.budgets:
        # one BPE fit per command: later rungs reuse the merges learned in the same process
        wall = tm.fixed(part) + tm.bpe_fit_s * sum(names[e] == "bpe" for e in encs)
        wall_hi = wall
        n_models = 0
        for e in encs:
            line, costs, w, w_hi, n = _encoder_at_budget(suite, c, e, names[e], facts, part, fits, tm, bracketed)
            lines.append(line)
            detail.append(costs)
            wall, wall_hi, n_models = wall + w, wall_hi + w_hi, n_models + n
        wall += n_models * tm.score_s_per_model
        wall_hi += n_models * tm.score_s_per_model
        total_wall[c] = (wall, wall_hi, n_models)
    lines.append("  (N_opt D_opt per law variant; * = no admissible rung on one side. bracket: admissible rungs "
                 "below|above N_opt per variant, ! = not bracketed)")
    lines.append("  budgets bracketed of " + f"{len(cfg.budgets)}: " + "; ".join(
        f"{v} " + ", ".join(f"{names[e]} {k}" for e, k in d.items()) for v, d in bracketed.items()))
    lines += ["", "predicted training per admissible point (bytes read, planned steps, ms/step, seconds):"] + detail
    lines.append("")
    lines.append("predicted H200 wall per budget command (eager; 'pessimistic': the step-time bounds of the "
                 "module docstring, 3.):")
    for c, (w, hi, n) in total_wall.items():
        lines.append(f"  {c:.3g} FLOPs: {n:2d} models  {w:5.0f} s ({w / 60:.1f} min), pessimistic {hi:5.0f} s "
                     f"({hi / 60:.1f} min)")
    lines.append(f"  all budgets: {sum(v[0] for v in total_wall.values()):.0f} s, pessimistic "
                 f"{sum(v[1] for v in total_wall.values()):.0f} s")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite", nargs="?", default="suites/scaling.yaml")
    ap.add_argument("--set", action="append", default=[], help="suite override, as in tokbench run")
    ap.add_argument("--cache", type=Path, default=None, help="data cache (TOKBENCH_CACHE)")
    ap.add_argument("--results", type=Path, nargs="+", default=DEFAULT_RESULTS,
                    help="measured sweep run directories (results.csv) for the law")
    ap.add_argument("--times", type=Path, nargs="+", default=DEFAULT_TIMES,
                    help="run directories (run.json) whose training step times the wall model uses")
    ap.add_argument("--compare", type=Path, nargs="*", default=DEFAULT_COMPARE,
                    help="run directories on another text: fitted alone (shared_E) and printed beside, not pooled")
    ap.add_argument("--eval-set", default="heldout")
    ap.add_argument("--wall", action="append", default=None,
                    help="DIR_NAME=SECONDS measured wall of a budget command (default: the default runs', env_8e12-1.28e14.log)")
    ap.add_argument("--gpu-tflops", type=float, default=GPU_TFLOPS,
                    help="assumed GPU rate for the windows a larger batch adds (module docstring, 3.)")
    ap.add_argument("--timed-plan", choices=["per-step", "one-batch"], default="per-step",
                    help="how the --times runs were planned: per-step or one-batch (the "
                         "8-step probe padded as one batch; their BPE over-read "
                         "is divided out)")
    ap.add_argument("--candidate", action="append", default=[], metavar="SETS",
                    help="another candidate after the first: its --set overrides joined by ' ; '")
    a = ap.parse_args()
    if a.gpu_tflops <= 0:
        ap.error(f"--gpu-tflops must be > 0, got {a.gpu_tflops}")
    points = load_points(a.results, a.eval_set)
    print(f"{len(points)} measured points from {', '.join(str(d.relative_to(ROOT)) if d.is_relative_to(ROOT) else str(d) for d in a.results)} "
          f"(clean BPB, full mode, eval set {a.eval_set})")
    for p in sorted(points, key=lambda p: (p.encoder, p.budget, p.n)):
        print(f"  {p.encoder:<6} C={p.budget:.3g} {p.size:<4} N={p.n / 1e6:7.3f}M D={p.d / 1e6:6.2f}MB bpb={p.bpb:.4f}")
    print()
    fits = [fit_law(points, v) for v in ("shared_E", "free", "shared_Ea", "fixed_exp")]
    for f in fits:
        print(law_table(f, points))
        for e in f.laws:
            worst = sorted(zip(f.residuals[e], [p for p in points if p.encoder == e]), key=lambda t: -abs(t[0]))[:2]
            print(f"    {e}: largest residuals " + ", ".join(f"{r:+.3f} at C={p.budget:.3g} {p.size}" for r, p in worst))
    if a.compare:
        old = load_points(a.compare, a.eval_set)
        print(f"compared, not pooled (another text mix): {len(old)} points of "
              f"{', '.join(d.name for d in a.compare)} in {a.compare[0].parent.name}, fitted alone")
        print(law_table(fit_law(old, "shared_E"), old))
    print()
    wall = dict(w.split("=", 1) for w in (a.wall or DEFAULT_WALL))
    tm = time_model(a.times, a.results, {k: float(v) for k, v in wall.items()}, a.gpu_tflops)
    print(f"step-time model (batch {tm.batch_bytes:,} bytes, eager, measured), from {', '.join(d.name for d in a.times)}:")
    for e, (c0, c1) in tm.coef.items():
        r = tm.resid_ms[e]
        fastest, slowest = min(x[1] for x in tm.rows[e]), max(x[1] for x in tm.rows[e])
        print(f"  {e:<6} ms/step = {c0:.1f} + {c1:.2f} x layers   ({len(r)} models, {min(x[0] for x in tm.rows[e])}-"
              f"{max(x[0] for x in tm.rows[e])} layers, residuals {min(r):+.1f} .. {max(r):+.1f} ms, steps "
              f"{fastest:.1f}-{slowest:.1f} ms; batch wait {tm.wait_ms[e]:.2f} ms/step)")
        f0, f1, f2 = tm.flops_term(e)
        print(f"  {e:<6} with a FLOPs term: {f0:.1f} + {f1:.2f} x layers + {f2:.4f} x GFLOPs/step "
              f"(GFLOPs/step {min(tm.gflop[e]):.0f}-{max(tm.gflop[e]):.0f}: the FLOPs add "
              f"<= {f2 * max(tm.gflop[e]):.1f} ms to a step)")
    print("  steps run / steps planned: " + ", ".join(f"{e} {v:.3f}" for e, v in tm.steps_factor.items()))
    print(f"  first step {tm.first_step_s:.2f} s and set-up {tm.setup_s:.2f} s per model; scoring {tm.score_s_per_model:.2f} s per model; "
          f"start-up + data {tm.fixed_s:.1f} s per command (data {tm.data_s:.1f} s of a {tm.train_part_bytes / 1e6:.1f} MB "
          f"train part); BPE fit {tm.bpe_fit_s:.1f} s (uncached)")
    print(f"  assumed, not measured: a batch larger than {tm.batch_bytes:,} bytes adds its extra windows' GPU work at "
          f"{tm.gpu_tflops:g} TFLOP/s (pessimistic {tm.gpu_tflops / 2:g}) on top of the per-step host cost")
    print()
    one_batch = a.timed_plan == "one-batch"
    print(design(a.suite, a.set, a.cache, fits, tm, one_batch))
    for cand in a.candidate:
        print()
        print(design(a.suite, a.set + [x.strip() for x in cand.split(" ; ") if x.strip()], a.cache, fits, tm, one_batch))


if __name__ == "__main__":
    main()
