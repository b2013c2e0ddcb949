"""Analytic memory guard: refuse, before anything is trained, a suite whose models cannot train
or score on the device, or whose permutations' fixed orders do not fit (``tokbench validate``
and ``tokbench run``, with or without ``--dry-run``).

    need = estimate_train_memory(params, backbone, budget, vocab=256)      # bytes
    check_suite_memory(suite, torch.device("cpu"))                          # raises MemoryTooLarge

This is an estimate from the shapes, not a measurement (``--dry-run`` also measures); it errs on
the high side for activations (every tensor autograd keeps, one position per byte) so that a
refusal is meant. ``--no-memory-check`` skips it (e.g. validating a GPU suite on a laptop).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

import torch

FLOAT_BYTES = 4  # parameters, gradients, optimizer state and activations in float32


class MemoryTooLarge(ValueError):
    """A model whose training cannot fit the device (one line with the numbers)."""


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes of each part of one training step's peak memory."""

    params: int  # number of parameters
    weights: int  # 4 B / parameter
    grads: int  # 4 B / parameter
    adamw: int  # exp_avg + exp_avg_sq: 8 B / parameter
    activations: int  # intermediates kept for backward, one step (see estimate_train_memory)

    @property
    def total(self) -> int:
        return self.weights + self.grads + self.adamw + self.activations


def estimate_train_memory(params: int, backbone: Any, budget: Any, vocab: int = 256,
                          activation_bytes: int = FLOAT_BYTES) -> int:
    """Peak bytes of one AdamW training step, estimated from shapes (see ``train_estimate``)."""
    return train_estimate(params, backbone, budget, vocab, activation_bytes).total


def train_estimate(params: int, backbone: Any, budget: Any, vocab: int = 256,
                   activation_bytes: int = FLOAT_BYTES) -> MemoryEstimate:
    """What it counts:

    * weights, gradients and AdamW's two moments in float32: 16 B per parameter;
    * activations autograd keeps for backward in one micro-batch of W = micro_batch_bytes //
      context_bytes windows (batch_bytes when micro-batching is off: only one micro-batch's
      activations are alive at a time) of T = context_bytes positions (one position per byte: an upper bound for
      token-level encoders): per layer (13 + 2·mlp_ratio)·T·dim values — norm inputs and outputs
      (4), q, k, v and the rotated q, k (5), attention output and its logsumexp-sized state (2),
      projection input and residual (2), the MLP hidden before and after the activation
      (2·mlp_ratio) — plus 2·T·dim for the embedding and final norm and 2·T·vocab for the logits
      and their gradient; ``activation_bytes`` per value (4 in float32, 2 under bfloat16 autocast).

    Not counted: the T×T attention matrix (SDPA's flash / memory-efficient kernels, on CPU and GPU,
    never keep it), the allocator's slack, the CUDA context, and encoder-specific side models
    (BLT's entropy model trains before the main model, not with it). ``backbone``: a
    BackboneConfig or None (no transformer); ``budget``: a BudgetConfig.
    """
    T = int(budget.context_bytes)
    step = int(budget.batch_bytes)
    micro = int(getattr(budget, "micro_batch_bytes", 0) or 0)
    W = max(1, (min(step, micro) if micro > 0 else step) // max(1, T))
    per_window = 2 * T * int(vocab)
    if backbone is not None:
        d, L, r = int(backbone.dim), int(backbone.layers), int(backbone.mlp_ratio)
        per_window += L * (13 + 2 * r) * T * d + 2 * T * d
    p = int(params)
    return MemoryEstimate(params=p, weights=FLOAT_BYTES * p, grads=FLOAT_BYTES * p,
                          adamw=2 * FLOAT_BYTES * p, activations=activation_bytes * W * per_window)


def analytic_params(backbone: Any, vocab: int = 256) -> int:
    """Parameters of the shared transformer plus an input embedding and output head of ``vocab``
    rows: per layer 4·dim² (qkv, proj) + 2·mlp_ratio·dim² (MLP) + 2·dim (norms)."""
    emb = 2 * (vocab + 1) * (backbone.dim if backbone is not None else 64)
    if backbone is None:
        return emb
    d, r = backbone.dim, backbone.mlp_ratio
    return backbone.layers * (4 * d * d + 2 * r * d * d + 2 * d) + d + emb


def count_params(cls: type, config: Any, backbone: Any) -> int | None:
    """Exact parameter count of ``cls(config, backbone)`` built on the meta device (no memory is
    allocated); None if the encoder cannot be built that way."""
    try:
        with torch.device("meta"):
            model = cls(config, backbone)
        return sum(p.numel() for p in model.parameters())
    except Exception:  # an encoder that reads data or files in __init__: fall back to analytic
        return None


def device_memory(device: torch.device) -> tuple[int, str]:
    """(bytes the device offers, what that number is): CUDA total memory, or the CPU's available
    RAM (MemAvailable from /proc/meminfo, else total physical memory)."""
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        return int(props.total_memory), f"{props.name} has"
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024, "the CPU has available"
    except OSError:
        pass
    return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")), "the CPU has"


def gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 / 10 else f"{n / 2**20:.1f} MiB"


def _models(suite: Any) -> list[tuple[int, Any]]:
    """(index in ``suite.encoders``, spec) of every model the suite trains: each encoder, or in a
    scaling sweep each encoder at every ladder size (``bytes@s3``: the rung's backbone)."""
    scaling = getattr(suite, "scaling", None)
    if scaling is None:
        return list(enumerate(suite.encoders))
    return [(i, replace(spec, label=f"{spec.label}@{r.name}", backbone=scaling.backbone(spec.backbone, r)))
            for i, spec in enumerate(suite.encoders) if spec.backbone is not None for r in scaling.ladder]


def _trained_models(suite: Any) -> list[tuple[int, Any]]:
    """``_models`` without the encoders trained elsewhere (``hf``: loaded and scored, never
    trained here)."""
    from harness.infra import plugins

    paths = plugins.suite_plugin_paths(suite.path, suite.plugin_paths)
    return [(i, spec) for i, spec in _models(suite)
            if not getattr(plugins.resolve("encoder", spec.name, search_paths=paths), "trained_elsewhere", False)]


def suite_estimates(suite: Any, device: torch.device) -> list[tuple[Any, int, bool, MemoryEstimate]]:
    """Per model of ``suite`` that it trains (``_trained_models``), in its order: (spec, parameters, whether that count is exact,
    estimated training memory on ``device``: activations in bf16 on CUDA under
    ``budget.dtype: bfloat16``, else float32)."""
    from harness.infra import plugins

    out = []
    paths = plugins.suite_plugin_paths(suite.path, suite.plugin_paths)
    bf16 = device.type == "cuda" and getattr(suite.budget, "dtype", "float32") == "bfloat16"
    for _, spec in _trained_models(suite):
        cls = plugins.resolve("encoder", spec.name, search_paths=paths)
        vocab = int(getattr(spec.config, "vocab_size", 256) or 256)
        n = count_params(cls, spec.config, spec.backbone)
        exact = n is not None
        if n is None:
            n = analytic_params(spec.backbone, vocab)
        out.append((spec, n, exact, train_estimate(n, spec.backbone, suite.budget, vocab, 2 if bf16 else FLOAT_BYTES)))
    return out


def score_estimate(params: int, backbone: Any, context: int, rows: int, vocab: int = 256,
                   activation_bytes: int = FLOAT_BYTES) -> int:
    """Peak bytes of one scoring forward (no autograd): the weights (4 B / parameter) plus, for
    each of ``rows`` windows of ``context`` positions (one per byte, as in ``train_estimate``),
    the logits and their log-softmax (2·vocab values) and one layer's live intermediates at a time
    ((6 + 2·mlp_ratio)·dim: input, q, k, v, attention output, residual and the MLP hidden).
    ``rows``: eval.batch_windows times the Monte Carlo samples of an MDM encoder (each window is
    scored ``eval.mc_samples`` times in the same forward)."""
    per_position = 2 * int(vocab)
    if backbone is not None:
        per_position += (6 + 2 * int(backbone.mlp_ratio)) * int(backbone.dim)
    return FLOAT_BYTES * int(params) + activation_bytes * int(rows) * int(context) * per_position


# A fixed permutation is a tuple of Python ints (an 8-byte slot and a 28-byte int object each),
# drawn once per permutation and kept for the run (harness.config.permutation.fixed_order's cache).
PERMUTATION_BYTES_PER_POSITION = 36


def check_suite_memory(suite: Any, device: torch.device, limit: int | None = None) -> list[str]:
    """Raise MemoryTooLarge for the first encoder whose estimated training or scoring memory
    exceeds the device's (``limit`` overrides it, for tests), or for permutations whose fixed
    orders do not fit; returns one summary line per encoder. Every allocation a suite's numbers
    size is here: training (``train_estimate``), scoring with ``eval.batch_windows`` and an MDM
    encoder's ``eval.mc_samples`` (``score_estimate``), the permutations' fixed orders."""
    if limit is None:
        limit, what = device_memory(device)
    else:
        what = "the limit is"
    where = f"{suite.path}: " if getattr(suite, "path", None) else ""
    ctx = int(suite.budget.context_bytes)
    perms = getattr(suite, "permutations", ()) or ()
    perm_bytes = PERMUTATION_BYTES_PER_POSITION * ctx * len(perms)
    if perm_bytes > limit:
        raise MemoryTooLarge(
            f"{where}permutations: {len(perms)} fixed order(s) of budget.context_bytes = {ctx:,} positions "
            f"need about {gib(perm_bytes)}, but {what} {gib(limit)}; lower budget.context_bytes or list "
            "fewer permutations (--no-memory-check skips this check)")
    ev = suite.eval
    bf16 = device.type == "cuda" and getattr(suite.budget, "dtype", "float32") == "bfloat16"
    lines = []
    for (i, _), (spec, n, exact, est) in zip(_trained_models(suite), suite_estimates(suite, device)):
        line = (f"encoders[{i}] ({spec.label}): training needs about {gib(est.total)} "
                f"({n:,}{'' if exact else ' (estimated)'} parameters: weights+grads+AdamW "
                f"{gib(est.weights + est.grads + est.adamw)}, activations {gib(est.activations)} per step)")
        if est.total > limit:
            raise MemoryTooLarge(
                f"{where}{line}, but {what} {gib(limit)}; lower backbone.layers / backbone.dim or "
                "budget.batch_bytes / budget.context_bytes (--no-memory-check skips this check)")
        mdm = getattr(spec.config, "objective", "ar") == "mdm"
        rows = int(ev.batch_windows) * (int(ev.mc_samples) if mdm else 1)
        vocab = int(getattr(spec.config, "vocab_size", 256) or 256)
        need = score_estimate(n, spec.backbone, ctx, rows, vocab, 2 if bf16 else FLOAT_BYTES)
        if need > limit:
            rows_text = (f"eval.batch_windows {ev.batch_windows} x eval.mc_samples {ev.mc_samples}"
                         if mdm else f"eval.batch_windows {ev.batch_windows}")
            raise MemoryTooLarge(
                f"{where}encoders[{i}] ({spec.label}): scoring needs about {gib(need)} ({rows_text} windows "
                f"of {ctx:,} positions a forward), but {what} {gib(limit)}; lower "
                f"{'eval.mc_samples or ' if mdm else ''}eval.batch_windows (--no-memory-check skips this check)")
        lines.append(line)
    return lines
