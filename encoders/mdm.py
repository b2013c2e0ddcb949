"""Masked-diffusion objective (``objective: mdm``), shared by every encoder that supports it.

An absorbing-state masked diffusion model (as in MDLM / MD4) sees a sequence of *units* (bytes or
BPE tokens) in which some are replaced by a MASK unit, and predicts the true value of every masked
unit from the unmasked ones, with a bidirectional backbone. Training and scoring use the
continuous-time negative ELBO

    NELBO(x) = E_{t ~ U(0,1)} E_{z ~ q_t(.|x)} [ w(t) · Σ_{i masked in z} −log p_θ(x_i | z) ],
    w(t) = −α'(t) / (1 − α(t)),

where each scored unit is masked independently with probability 1 − α(t). ``α`` is the schedule:

    linear:  α(t) = 1 − t,          w(t) = 1 / t
    cosine:  α(t) = cos(π t / 2),   w(t) = (π/2) · cot(π t / 4)

The NELBO is an UPPER BOUND on the model's own negative log-likelihood of the scored units (the
model's likelihood is a sum over all unmasking orders; the bound is what is tractable). It does not
depend on the schedule (substitute the masking rate m = 1 − α(t): the integral becomes
∫₀¹ E[Σ_masked NLL | m] / m dm for any monotone α with α(0) = 1, α(1) = 0); the schedule only
changes the Monte Carlo variance. For n scored units it equals exactly

    Σ_{∅ ≠ S ⊆ units} (|S| − 1)! (n − |S|)! / n! · Σ_{i ∈ S} −log p_θ(x_i | x with S masked),

which ``exact_elbo`` enumerates for tiny n (the tests check the estimator against it).

Context units (``window[:score_from]``) are never masked: a window's NELBO bounds the NLL of its
scored units given its context, like the autoregressive score of the same window.

Monte Carlo:
  * training — one t per window, stratified across the batch (t_b = (b + 1 − u) / B, one u per
    batch), masks from a generator seeded by (encoder seed, step), so a resumed run replays them.
    An optional span variant (``span`` > 1) masks aligned blocks of ``span`` units at once
    (each unit's marginal masking probability is unchanged); it is for training only.
  * scoring — ``mc_samples`` copies of each window, t stratified across the copies, masks seeded by
    the scored bytes alone: a clean and a perturbed cell of ``clean_target`` (same continuation,
    different prefix) get the same t and the same masks, so Monte Carlo noise cancels in ΔBPB.
    Each window also reports the variance of its estimate (``UnitNLL.window_var``), from which
    the harness derives the standard error of BPB. Equal windows (same bytes, same score_from)
    draw the same masks on the same input: one estimate, so the harness counts k occurrences as
    k²·variance, not k (``harness.score.metrics.McVariance``).

A subclass (``ByteEncoder``, ``BpeEncoder``) supplies ``mdm_units`` (the unit ids of one window)
and the modules ``embed``, ``backbone`` (or None) and ``head``; this mixin does the rest.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

import torch
import torch.nn.functional as F

from encoders.base import TensorBatch, UnitNLL

Schedule = Literal["linear", "cosine"]
SCHEDULES: tuple[str, ...] = ("linear", "cosine")


# -- schedules ------------------------------------------------------------------------------------
def mask_prob(schedule: str, t: torch.Tensor) -> torch.Tensor:
    """1 − α(t): probability that a scored unit is masked at time t (float64 in, float64 out)."""
    if schedule == "linear":
        return t.clone()
    if schedule == "cosine":
        return 2.0 * torch.sin(math.pi * t / 4.0) ** 2  # = 1 − cos(π t / 2), stable near 0
    raise ValueError(f"unknown masked-diffusion schedule {schedule!r} (known: {', '.join(SCHEDULES)})")


def loss_weight(schedule: str, t: torch.Tensor) -> torch.Tensor:
    """w(t) = −α'(t) / (1 − α(t)), the NELBO weight of the masked units' NLL at time t."""
    if schedule == "linear":
        return 1.0 / t
    if schedule == "cosine":
        # (π/2) sin(πt/2) / (1 − cos(πt/2)) = (π/2) cot(πt/4)
        return (math.pi / 2.0) / torch.tan(math.pi * t / 4.0)
    raise ValueError(f"unknown masked-diffusion schedule {schedule!r} (known: {', '.join(SCHEDULES)})")


def stratified_t(n: int, gen: torch.Generator) -> torch.Tensor:
    """(n,) float64 times in (0, 1], one per stratum [k/n, (k+1)/n), sharing one uniform offset
    (a low-discrepancy draw: the mean of w·NLL over the n copies has lower variance than n
    independent draws, and t = 0, where w is infinite, never occurs)."""
    u = torch.rand(1, generator=gen, dtype=torch.float64)
    return (torch.arange(n, dtype=torch.float64) + 1.0 - u) / n


def stratified_variance(per_copy: torch.Tensor) -> torch.Tensor:
    """Variance of the mean of each row of ``per_copy`` (W, S): the S estimates of one window in
    stratum order (increasing t). NaN for S = 1.

    The copies share one uniform offset (systematic sampling), so the plain sample variance / S
    overstates the error by the smooth trend *between* strata (about 2x in SE for the cosine
    schedule). Successive differences d_h = e_h − e_{h−1} remove that trend; the first one is
    counted twice because the lowest-t copy carries the heavy tail of w(t) (1/t for linear) and
    would otherwise enter once while every other copy enters twice:
    v = (Σ_h d_h² + d_1²) / (2 S²), which equals σ²/S in expectation for independent copies.
    On a sharp random model (300 repeats, S = 8 and 32) its RMS matched the empirical SD of the
    estimate within 2 % for both schedules (tests/encoders/test_mdm.py checks it)."""
    W, S = per_copy.shape
    if S < 2:
        return torch.full((W,), math.nan, dtype=torch.float64, device=per_copy.device)
    d2 = (per_copy[:, 1:] - per_copy[:, :-1]) ** 2
    return (d2.sum(1) + d2[:, 0]) / (2.0 * S * S)


def sample_mask(p: torch.Tensor, n_units: int, gen: torch.Generator, span: int = 1) -> torch.Tensor:
    """(R, n_units) bool: unit i of row r masked with probability p[r] (p: (R,) float64).

    span > 1 masks aligned blocks of ``span`` units (random phase per row) together: each unit is
    still masked with probability p[r], but neighbours are masked jointly (training only: the
    NELBO weights assume independent masks)."""
    R = p.shape[0]
    if span <= 1:
        return torch.rand(R, n_units, generator=gen, dtype=torch.float64) < p[:, None]
    phase = torch.randint(0, span, (R, 1), generator=gen)
    block = (torch.arange(n_units)[None, :] + phase) // span  # (R, n_units)
    n_blocks = n_units // span + 2
    masked = torch.rand(R, n_blocks, generator=gen, dtype=torch.float64) < p[:, None]
    return masked.gather(1, block)


def seed_of(data: bytes, salt: int = 0) -> int:
    """A 63-bit generator seed from bytes (stable across processes and machines)."""
    h = hashlib.sha256(salt.to_bytes(8, "little", signed=True) + data).digest()
    return int.from_bytes(h[:8], "little") & ((1 << 63) - 1)


def exact_elbo(nll_of_subset: Callable[[tuple[int, ...]], float], n: int) -> float:
    """Exact NELBO (nats) of n scored units by enumerating every non-empty masked subset S:
    Σ_S (|S|−1)!(n−|S|)!/n! · nll_of_subset(S), where ``nll_of_subset(S)`` is Σ_{i∈S} −log p(x_i |
    x with S masked). 2^n − 1 model calls: for tests on tiny windows only."""
    total = 0.0
    for k in range(1, n + 1):
        coef = math.factorial(k - 1) * math.factorial(n - k) / math.factorial(n)
        for s in combinations(range(n), k):
            total += coef * nll_of_subset(s)
    return total


# -- the encoder mixin ----------------------------------------------------------------------------
@dataclass
class MdmUnits:
    """The unit sequence of one window under MDM.

    ids: every slot's true unit id (BOS, context units, then the scored slots).
    n_ctx: slots before the first scored slot (never masked).
    spans: one per scored slot: (start, end) byte span in the window, or None for a PAD slot
        (BPE pads its scored part to a fixed number of slots; a PAD's NLL is scored and added to
        the window's last real unit, so BPB counts it and the bytes are unchanged).
    segments: byte lengths of the scored segments (BPE tokens), None for byte-level encoders.
    """

    ids: list[int]
    n_ctx: int
    spans: list[tuple[int, int] | None]
    segments: list[int] | None = None


def to_device_async(x: torch.Tensor, device: torch.device) -> torch.Tensor:
    """A host tensor made this step (the training masks, the loss weights) onto ``device``
    without the host waiting for the device: a plain ``.to(cuda)`` copies and then synchronizes
    the stream, i.e. waits for every kernel queued before it (issue #16); from pinned memory the
    copy is queued behind them instead, and the caching host allocator keeps the pinned block
    until the copy has run. Same values either way; on CPU (or another device) a plain ``.to``."""
    if device.type != "cuda" or x.device.type != "cpu":
        return x.to(device)
    return x.pin_memory().to(device, non_blocking=True)


class MaskedDiffusion:
    """Mixin giving an encoder the MDM ``collate``/``forward``. The subclass calls ``mdm_setup``
    in ``__init__`` (after creating its modules) and implements ``mdm_units``; it must have
    ``embed`` (input ids incl. MASK), ``backbone`` (bidirectional, or None) and ``head``."""

    mask_id: int  # input id of the MASK unit
    n_out: int  # head outputs: the values a masked unit can take (incl. PAD for BPE)
    mdm_schedule: str
    mdm_span: int
    mc_samples: int  # Monte Carlo samples per window when scoring (the harness sets it)

    def mdm_setup(self, schedule: str, span: int, mask_id: int, n_out: int) -> None:
        if schedule not in SCHEDULES:
            raise ValueError(f"mdm_schedule={schedule!r} is not one of {', '.join(SCHEDULES)}")
        if span < 1:
            raise ValueError(f"mdm_span={span} must be >= 1")
        self.mdm_schedule, self.mdm_span = schedule, span
        self.mask_id, self.n_out = mask_id, n_out
        self.mc_samples = 8
        # [seed, step]: a buffer, so checkpoints carry it and a resumed run draws the same masks.
        seed = int(torch.randint(0, 2**62, (1,)))
        self.register_buffer("mdm_rng", torch.tensor([seed, 0], dtype=torch.long))  # type: ignore[attr-defined]

    def mdm_units(self, window: bytes, score_from: int) -> MdmUnits:
        raise NotImplementedError

    # -- network ----------------------------------------------------------------------------------
    def mdm_hidden(self, ids: torch.Tensor, mask: torch.Tensor, valid: torch.Tensor, *,
                   valid_all: bool | None = None) -> torch.Tensor:
        """ids (R, N) long true unit ids; mask (R, N) bool masked slots; valid (R, N) bool real
        (not batch-padding) slots -> (R, N, dim). The true id of a masked slot never reaches the
        network: it is replaced by MASK here, before the embedding (the leak probe checks it).
        valid_all: whether every slot is real, when collation knows it (``Backbone.forward``)."""
        inputs = torch.where(mask, torch.full_like(ids, self.mask_id), ids)
        x = self.embed(inputs)  # type: ignore[attr-defined]
        if self.backbone is not None:  # type: ignore[attr-defined]
            x = self.backbone(x, valid, valid_all=valid_all)  # type: ignore[attr-defined]
        return x

    def mdm_logits(self, ids: torch.Tensor, mask: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
        """(R, N, n_out) logits of every slot's value given the masked sequence."""
        return self.head(self.mdm_hidden(ids, mask, valid))  # type: ignore[attr-defined]

    # -- collation --------------------------------------------------------------------------------
    def mdm_collate(self, windows: Sequence[bytes], score_from: Sequence[int]) -> TensorBatch:
        """Windows -> R = W·S rows (S = 1 in training, ``mc_samples`` when scoring).

        tensors: ``ids``/``valid``/``scored``/``mask`` (R, N); ``t`` (R,) float64 (scoring
        only; training draws t and masks in ``forward``); per window (W, N): ``real`` (slot
        holds a real scored unit), ``ustart``/``uend`` (its byte span), ``attach`` (slot whose
        unit a scored slot's NLL is added to: itself, or the last real unit for a PAD).
        """
        units = [self.mdm_units(w, s) for w, s in zip(windows, score_from)]
        # Scoring masks are seeded by the scored bytes only: clean and perturbed prefixes share them.
        seeds = [w[s:] for w, s in zip(windows, score_from)]
        return self.mdm_collate_units(units, seeds, sum(len(w) - s for w, s in zip(windows, score_from)))

    def mdm_collate_units(self, units: Sequence[MdmUnits], seeds: Sequence[bytes],
                          scored_bytes: int) -> TensorBatch:
        """``mdm_collate`` from prepared unit sequences; ``seeds[i]`` (bytes) seeds window i's
        scoring masks and times."""
        S = 1 if self.training else max(1, int(self.mc_samples))  # type: ignore[attr-defined]
        W = len(units)
        N = max((len(u.ids) for u in units), default=0)
        ids = torch.zeros(W, N, dtype=torch.long)
        valid = torch.zeros(W, N, dtype=torch.bool)
        scored = torch.zeros(W, N, dtype=torch.bool)
        real = torch.zeros(W, N, dtype=torch.bool)
        ustart = torch.full((W, N), -1, dtype=torch.long)
        uend = torch.full((W, N), -1, dtype=torch.long)
        attach = torch.full((W, N), -1, dtype=torch.long)
        mask = torch.zeros(W * S, N, dtype=torch.bool)
        t = torch.ones(W * S, dtype=torch.float64)
        for i, (u, seed) in enumerate(zip(units, seeds)):
            n, k = len(u.ids), len(u.spans)
            ids[i, :n] = torch.tensor(u.ids, dtype=torch.long)
            valid[i, :n] = True
            scored[i, u.n_ctx : u.n_ctx + k] = True
            last = -1
            for j, sp in enumerate(u.spans):
                slot = u.n_ctx + j
                if sp is not None:
                    real[i, slot] = True
                    ustart[i, slot], uend[i, slot] = sp
                    last = slot
                attach[i, slot] = slot if sp is not None else last
            if k and last < 0:
                raise ValueError("a window's scored slots hold no real unit (only PAD)")
            if not self.training and k:
                gen = torch.Generator().manual_seed(seed_of(seed))
                tt = stratified_t(S, gen)
                t[i * S : (i + 1) * S] = tt
                mask[i * S : (i + 1) * S, u.n_ctx : u.n_ctx + k] = sample_mask(
                    mask_prob(self.mdm_schedule, tt), k, gen
                )
        segs = [u.segments for u in units]
        scored_rows = scored.repeat_interleave(S, 0)
        # Where the scored slots and the real units are, found here on the host (CPU tensors:
        # nonzero waits for nothing), and whether any slot is padding: on a GPU the forward would
        # otherwise read each from the device (nonzero's size, valid.all()) — a host sync per step.
        r, n = scored_rows.nonzero(as_tuple=True)
        b, m = real.nonzero(as_tuple=True)
        tensors = {
            "ids": ids.repeat_interleave(S, 0), "valid": valid.repeat_interleave(S, 0),
            "scored": scored_rows, "mask": mask, "t": t,
            "real": real, "ustart": ustart, "uend": uend, "attach": attach,
            "scored_r": r, "scored_n": n, "real_b": b, "real_m": m,
        }
        meta = {"mc_samples": S, "segments": None if all(x is None for x in segs) else segs,
                "all_valid": bool(valid.all())}
        return TensorBatch(tensors, meta, scored_bytes)

    def _training_masks(self, scored: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """t (R,) stratified across the batch and masks (R, N) for one training step, from a CPU
        generator seeded by (encoder seed, step); advances the step."""
        seed, step = self._mdm_rng_host()
        gen = torch.Generator().manual_seed(seed_of(step.to_bytes(8, "little"), seed))
        R, N = scored.shape
        t = stratified_t(R, gen)[torch.randperm(R, generator=gen)]  # strata not tied to row order
        mask = sample_mask(mask_prob(self.mdm_schedule, t), N, gen, self.mdm_span)
        buf = self.mdm_rng  # type: ignore[attr-defined]
        buf[1] += 1
        self._mdm_rng_cache = (buf, buf._version, (seed, step + 1))
        return t, to_device_async(mask, scored.device) & scored

    def _mdm_rng_host(self) -> tuple[int, int]:
        """(seed, step) of ``mdm_rng`` as Python ints. The buffer lives on the model's device
        (checkpoints carry it); reading it every step would make the host wait for the GPU, so
        it is read once and then mirrored as the step advances. The mirror is keyed by the
        buffer's identity and in-place version counter: moving the model (a new tensor) or
        loading a state dict (an in-place copy: a resumed run) makes it read the buffer again."""
        buf = self.mdm_rng  # type: ignore[attr-defined]
        cache = getattr(self, "_mdm_rng_cache", None)
        if cache is None or cache[0] is not buf or cache[1] != buf._version:
            cache = (buf, buf._version, tuple(int(v) for v in buf.tolist()))
            self._mdm_rng_cache = cache
        return cache[2]

    def mdm_rng_reread(self) -> None:
        """Forget the host mirror of ``mdm_rng``: the next step reads the buffer. For a write
        its version counter does not see, i.e. one through ``.data`` (the distributed harness's
        broadcast of rank 0's buffers)."""
        self._mdm_rng_cache = None

    # -- loss -------------------------------------------------------------------------------------
    def mdm_forward(self, batch: TensorBatch) -> UnitNLL:
        """Training: NELBO terms w(t)·NLL of the masked slots (loss = Σ / scored bytes, as for AR).
        Scoring: per real scored unit, the mean over the S copies of its w(t)-weighted NLL (PAD
        slots folded into the window's last unit), so a window's units sum to its NELBO estimate;
        ``window_var`` (W,) = variance of that estimate (``stratified_variance``; NaN when S = 1)."""
        ids, valid, scored = batch["ids"], batch["valid"], batch["scored"]
        S = int(batch.meta["mc_samples"])
        R, N = ids.shape
        if self.training:  # type: ignore[attr-defined]
            t, mask = self._training_masks(scored)
        else:
            t, mask = batch["t"], batch["mask"]
        # t is on the host in training (drawn there); scoring's t came with the batch, and
        # scoring reads its results back anyway
        w = to_device_async(loss_weight(self.mdm_schedule, t.cpu().double()), ids.device)  # (R,)
        h = self.mdm_hidden(ids, mask, valid, valid_all=batch.meta.get("all_valid"))
        # the head runs on scored slots only; their indices come from collation when it made them
        r, n = ((batch["scored_r"], batch["scored_n"]) if "scored_r" in batch.tensors
                else scored.nonzero(as_tuple=True))
        logits = self.head(h[r, n])  # type: ignore[attr-defined]  # (Q, n_out)
        nll = F.cross_entropy(logits.float(), ids[r, n], reduction="none")  # (Q,) nats
        term = nll * mask[r, n].float() * w[r].float()  # (Q,) NELBO terms, 0 where unmasked
        W = R // S
        if self.training:
            a = batch["attach"][r // S, n]
            return UnitNLL(nll=term, window=r // S, start=batch["ustart"][r // S, a],
                           end=batch["uend"][r // S, a], segments=batch.meta.get("segments"))
        term = term.double()
        per_copy = torch.zeros(R, dtype=torch.float64, device=ids.device).index_add_(0, r, term)
        per_copy = per_copy.view(W, S)
        var = stratified_variance(per_copy)
        slot = torch.zeros(W, N, dtype=torch.float64, device=ids.device)
        slot.index_put_((r // S, batch["attach"][r // S, n]), term / S, accumulate=True)
        b, m = ((batch["real_b"], batch["real_m"]) if "real_b" in batch.tensors
                else batch["real"].nonzero(as_tuple=True))
        return UnitNLL(nll=slot[b, m], window=b, start=batch["ustart"][b, m],
                       end=batch["uend"][b, m], segments=batch.meta.get("segments"),
                       window_var=var)

    def mdm_head_flops(self, batch: TensorBatch, dim: int) -> float:
        """Head FLOPs: 2·dim·n_out per scored slot (all of them, masked or not, as ``forward``)."""
        return 2.0 * int(batch["scored"].sum()) * dim * self.n_out

    def mdm_probe_input(self, data: bytes, score_from: int) -> tuple[torch.Tensor, torch.Tensor]:
        """For the leak probe: (ids (1, N) long, scored (1, N) bool) of one window."""
        u = self.mdm_units(data, score_from)
        ids = torch.tensor([u.ids], dtype=torch.long)
        scored = torch.zeros_like(ids, dtype=torch.bool)
        scored[0, u.n_ctx : u.n_ctx + len(u.spans)] = True
        return ids, scored
