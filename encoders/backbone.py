"""Shared backbone: a small causal transformer (RMSNorm, RoPE, SDPA, GELU MLP), nanoGPT-sized.

Every encoder that uses a backbone uses this one, built from the suite's ``backbone`` section, so
the comparison between encoders is a comparison of what goes *into* the backbone (bytes, conv
features, BPE tokens, patches), not of the sequence model itself.

    x (B, N, dim) -> Backbone -> (B, N, dim)      # N: bytes, tokens or patches

Causal by default: position n attends to positions <= n only (``is_causal=True`` in SDPA).
``Backbone(cfg, causal=False)`` is the bidirectional variant masked-diffusion encoders use
(``encoders/mdm.py``): every position attends to every valid position of its sequence.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend


@dataclass(frozen=True, kw_only=True)
class BackboneConfig:
    """Shape of the shared transformer; ``mlp_ratio`` x dim hidden units in each MLP."""

    layers: int = 2
    dim: int = 64
    heads: int = 4
    mlp_ratio: int = 4
    dropout: float = 0.0
    rope_base: float = 10000.0


class RMSNorm(nn.Module):
    """Root-mean-square norm over the last axis: (..., dim) -> (..., dim)."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalise in fp32 so bf16 activations keep their scale.
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return y.to(x.dtype) * self.weight


# How OutputHead computes scoring logits under autocast (benchmarks and tests set ``SCORE_HEAD``):
# "split" (the default) — float32 logits from three bf16
# tensor-core products of each operand's high and low bf16 parts, about 16 significant bits per
# operand (``_split_bf16_product_fp32``); "fp32" — float32 inputs, weights and product (SIMT on a
# GPU); "mixed" — bf16-rounded inputs and weights, float32 accumulation and float32 logits (one
# bf16 GEMM with a float32 output on CUDA); "bf16" — the autocast matmul, as training runs it
# (bf16 logits).
SCORE_HEADS = ("split", "fp32", "mixed", "bf16")
SCORE_HEAD = "split"


def _mm_fp32_out(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a (M, K) bf16 @ b (N, K)^T -> (M, N) float32, summed and returned in float32: on CUDA one
    tensor-core GEMM (``torch.mm(..., out_dtype=float32)``); elsewhere (or a torch without mm's
    ``out_dtype``) the same products in float32 — a product of two bf16 values is exact in
    float32, so only the order of the sums can differ."""
    if a.is_cuda:
        try:
            return torch.mm(a, b.t(), out_dtype=torch.float32)
        except (RuntimeError, TypeError, NotImplementedError):  # a torch without mm's out_dtype
            pass
    return a.float() @ b.float().t()


def _bf16_product_fp32(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x (M, K) @ weight (N, K)^T -> (M, N) float32 from bf16-rounded operands, accumulated and
    returned in float32 — what a bf16 tensor-core GEMM computes before it rounds its output."""
    return _mm_fp32_out(x.to(torch.bfloat16), weight.to(torch.bfloat16))


def _split_bf16(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """t (float32) -> (hi, lo) bf16 with hi = bf16(t), lo = bf16(t - hi): hi + lo holds t to about
    2^-17 of |t| (16 significant bits), against 2^-9 for hi alone."""
    hi = t.to(torch.bfloat16)
    return hi, (t.float() - hi.float()).to(torch.bfloat16)


def _split_bf16_product_fp32(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x (M, K) @ weight (N, K)^T -> (M, N) float32 to about 16 significant bits per operand, at
    tensor-core speed: with x = xh + xl and w = wh + wl split into bf16 parts (``_split_bf16``),
    x·w ≈ xh·wh + xl·wh + xh·wl (the dropped xl·wl is ~2^-18 of |x||w|), summed in float32 as one
    bf16 GEMM over the concatenated K axis: [xh | xl | xh] (M, 3K) @ [wh | wh | wl] (N, 3K)^T.
    Each product's error is ~1e-5 relative (float32's is 6e-8; "mixed" rounding is 4e-3): three
    times a bf16 GEMM's work, on an H200 a few times faster than one float32 (SIMT) GEMM, and it
    needs no process-wide TF32 switch (BLT's entropy model runs float32 matmuls at the same time
    in the scoring prefetch thread, BENCHMARKS.md)."""
    xh, xl = _split_bf16(x)
    wh, wl = _split_bf16(weight)
    return _mm_fp32_out(torch.cat((xh, xl, xh), dim=1), torch.cat((wh, wh, wl), dim=1))


class OutputHead(nn.Linear):
    """The output layer, (..., dim) -> (..., n_out) logits: an ``nn.Linear`` (same parameters and
    checkpoint keys) whose logits are computed in float32 when no gradient is taken under autocast.

    Why: bf16 keeps 8 significant bits, so a logit near 10 is rounded to a multiple of 2^-4 and a
    cell's NLL inherits that error. On an H200 (smoke suite, BENCHMARKS.md) it brought in-distribution
    BPE and BLT cells 10-100x closer to the fp32 path (34 of 40 cells within 2e-4, was 30); the
    out-of-distribution cells (BPB 11-15) stay 3-5e-3 off, an error of the bf16 backbone, which
    this does not touch. Training keeps the autocast matmul
    (its gradient noise dwarfs the rounding, and the head is the largest GEMM of a small model).

    Scoring, under ``torch.inference_mode``, computes the logits as ``SCORE_HEAD`` says: "split"
    (the default: float32 logits from three bf16 tensor-core GEMMs of the operands' high and low
    bf16 parts, ≈ 1e-5 relative error a product; BENCHMARKS.md holds its per-cell
    agreement with the fp32 head), "fp32" (one float32 GEMM of tokens x dim x n_out: on an H200
    2.5x the whole backbone's time for a 16,384-token vocabulary, BENCHMARKS.md), "mixed"
    (the same GEMM at bf16 speed: the operands rounded to bf16 as the backbone's own matmuls round
    theirs, the logits not rounded; failed the 2e-4 bound) or "bf16" (training's
    autocast matmul). Without autocast (CPU, fp32 runs) this is ``nn.Linear`` exactly, whatever
    the mode."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dev = x.device.type
        if torch.is_grad_enabled() or not torch.is_autocast_enabled(dev) or SCORE_HEAD == "bf16":
            return super().forward(x)
        with torch.autocast(dev, enabled=False):
            bias = None if self.bias is None else self.bias.float()
            product = {"split": _split_bf16_product_fp32, "mixed": _bf16_product_fp32}.get(SCORE_HEAD)
            if product is not None:
                y = product(x.reshape(-1, x.shape[-1]).float(), self.weight)
                y = y.view(*x.shape[:-1], y.shape[-1])
                return y if bias is None else y + bias
            if SCORE_HEAD != "fp32":
                raise ValueError(f"SCORE_HEAD={SCORE_HEAD!r} is not one of {', '.join(SCORE_HEADS)}")
            return F.linear(x.float(), self.weight.float(), bias)


def rope_cache(n: int, head_dim: int, base: float, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin tables (n, head_dim), float32, for rotary position embeddings, laid out for
    ``apply_rope``: channel pair j = (2j, 2j+1) rotates by angle t·base^(-2j/head_dim) at
    position t; cos holds cos θ at both channels of a pair, sin holds (-sin θ, +sin θ).
    Row t depends on t alone, so the first n rows of a longer table are this table bit for bit
    (``Backbone.rope`` keeps one table and slices it)."""
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim))
    t = torch.arange(n, device=device, dtype=torch.float32)
    freqs = torch.outer(t, inv)  # (n, head_dim // 2)
    cos, sin = freqs.cos(), freqs.sin()
    return torch.stack((cos, cos), dim=-1).flatten(-2), torch.stack((-sin, sin), dim=-1).flatten(-2)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs of channels (2j, 2j+1) of x (..., N, hd), e.g. (B, H, N, hd), with cos/sin
    (N, hd) from ``rope_cache``; or of any layout whose position axis the tables broadcast
    along, e.g. q and k at once as (B, N, 2, H, hd) with cos/sin viewed (N, 1, 1, hd), as
    ``CausalSelfAttention`` calls it. Returns x's shape.

    x·cos + swap(x)·sin, swap exchanging the two channels of each pair: channel 2j gets
    x₂ⱼ·cos θ + x₂ⱼ₊₁·(-sin θ) and 2j+1 gets x₂ⱼ₊₁·cos θ + x₂ⱼ·sin θ — the products and sums
    of the textbook x₁·c − x₂·s, x₁·s + x₂·c bit for bit (negation is exact, a + (−b) is
    a − b, and a sum of two terms does not depend on their order), in 6 ops instead of 10
    (tests/encoders/test_backbone.py holds the textbook form and checks equality)."""
    c, s = cos.to(x.dtype), sin.to(x.dtype)
    swap = x.unflatten(-1, (-1, 2)).flip(-1).flatten(-2)
    return swap * s + x * c


# The length at which compiled blocks were first trained in this process (see ``_sdpa``).
_FIRST_TRAINED_LENGTH: list[int] = []
# Called with that length once it is known (the harness's compile-ahead process needs it: its
# graphs follow the same rule, so they must know the same first length).
FIRST_LENGTH_LISTENERS: list[Callable[[int], None]] = []


def attention_in_graph(n: int) -> bool:
    """Whether a compiled block's training step at length ``n`` may keep attention inside its
    graph: only at the first length any compiled backbone of the process trained at (its code is
    shared by every model, so the first traced length is the one the graph assumes; see ``_sdpa``).
    Scoring (no gradient) always keeps it inside: the fault is in the backward only."""
    if not torch.is_grad_enabled():
        return True
    if not _FIRST_TRAINED_LENGTH:
        _FIRST_TRAINED_LENGTH.append(n)
        for listener in FIRST_LENGTH_LISTENERS:
            listener(n)
    return n == _FIRST_TRAINED_LENGTH[0]


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
          causal: bool, dropout_p: float) -> torch.Tensor:
    """``F.scaled_dot_product_attention``: q, k, v (B, H, N, hd) -> (B, H, N, hd); ``_sdpa_eager``
    is the same call kept out of compiled graphs.

    Why two: compiled with symbolic batch and length (``Backbone.dynamic_shapes``), inductor's
    backward asserts that the attention output saved for it has the strides of the length the
    graph was first traced at (N_hint * C at dim 0), so a block trained at any other length fails
    with "expected size ..., stride 264192==393216" (torch 2.11 on an H200, 2.13 on CPU;
    tests/harness/infra/test_compile_shapes.py reproduces it). Out of the graph the step is correct at
    every length but slower (the byte model's training step on an H200: +36 %, BENCHMARKS.md), so
    blocks call that one only when training at a length other than the first
    (``attention_in_graph``): fixed-length byte models keep the fused graph, BPE and BLT (lengths
    vary by batch) graph-break around attention.

    Under the harness's "fixed" cuDNN mode (``CUDNN_FIXED``) cuDNN is left out here (flash, then
    memory-efficient, then math): this path serves every length that varies — scoring, BPE and
    BLT's latent — and torch 2.11 picked cuDNN for the compiled scoring forward of a BPE model on
    an H200, whose host-side plan per new shape cost 7.6 ms a call (88.9 of 114.7 ms of host
    time in six profiled batches: BENCHMARKS.md). Only ``_sdpa_cudnn_first`` (compiled
    training at the fixed first length) asks for cuDNN."""
    if CUDNN_FIXED:
        from torch.nn.attention import sdpa_kernel

        if torch.compiler.is_compiling():  # traced: the backend is picked at trace time
            with sdpa_kernel(_NO_CUDNN):
                return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, dropout_p=dropout_p)
        # Eager, ``sdpa_kernel`` sets process-wide flags and puts the old ones back on exit: from
        # two threads the exits could interleave and leave the other call with cuDNN back in; one at a time
        with _SDPA_FLAGS, sdpa_kernel(_NO_CUDNN):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, dropout_p=dropout_p)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, dropout_p=dropout_p)


_SDPA_FLAGS = threading.Lock()  # ``_sdpa``'s eager calls under ``sdpa_kernel``, one thread at a time


_sdpa_eager = torch.compiler.disable(_sdpa)


@torch.compiler.disable
def _sdpa_eager_marking(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                        causal: bool, dropout_p: float, x: torch.Tensor) -> torch.Tensor:
    """``_sdpa_eager``, then batch and length marked symbolic on its output y (B, H, N, hd) and
    on the block's input x (B, N, C): the two tensors the graph after the break starts from.
    Only eager code can mark them (``Backbone.forward`` marks its own input the same way), and
    a marked tensor makes the resumed graph compile symbolic at its first length, not static
    there and again at the next (marks are hints; they change no number)."""
    y = _sdpa(q, k, v, mask, causal, dropout_p)
    for t, dims in ((y, (0, 2)), (x, (0, 1))):
        for d in dims:
            torch._dynamo.maybe_mark_dynamic(t, d)
    return y

# Whether compiled training steps at the fixed first length ask for cuDNN attention first, and
# every other attention call leaves cuDNN out (set by the harness on CUDA,
# ``harness.infra.accel.attention_backends``; False: torch's own choice everywhere).
CUDNN_FIXED = False
_NO_CUDNN = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def _sdpa_cudnn_first(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                      causal: bool, dropout_p: float) -> torch.Tensor:
    """``_sdpa`` with cuDNN attention first in the backends' priority (flash, memory-efficient
    and math after it, for inputs cuDNN refuses); traced into the compiled graph (no break)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    order = [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
             SDPBackend.MATH]
    with sdpa_kernel(order, set_priority=True):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, dropout_p=dropout_p)


def split_qkv(qkv: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
              position_major: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """qkv (B, N, 3, H, hd), one linear's output viewed -> q, k (rotated) and v, (B, H, N, hd)
    each, in one of two memory layouts with the same products and sums (bit for bit:
    tests/encoders/test_backbone.py):

    * position-major — q and k rotated together into a new (B, N, 2, H, hd) tensor, q, k and v
      (B, H, N, hd) views (strided, last axis contiguous). For attention inside a compiled
      graph: in the head-major layout the rotation's backward wrote the qkv gradient transposed
      and the attention output needed a copy before ``proj``, passes at a fraction of the memory
      bandwidth; flash and cuDNN allocate their output (and q/k/v gradients) position-major for
      such views, so the output's transpose is free. The byte model's training step on an H200:
      80.6 -> 68.9 ms of kernels, with cuDNN attention (BENCHMARKS.md).
    * head-major — q and k rotated into a contiguous (2, B, H, N, hd), v a view. Eager attention
      (out of the graph: BPE's and BLT's varying lengths; runs without compile): with strided
      views BPE-1024's training step on an H200 ran 25 device copies and 36 fills (2.6 + 2.4 ms)
      and took 0.9 ms more kernel time than in this layout."""
    if position_major:
        qk = apply_rope(qkv[:, :, :2], cos[:, None, None, :], sin[:, None, None, :])  # (B, N, 2, H, hd)
        return qk[:, :, 0].transpose(1, 2), qk[:, :, 1].transpose(1, 2), qkv[:, :, 2].transpose(1, 2)
    qkv_h = qkv.permute(2, 0, 3, 1, 4)  # (3, B, H, N, hd) view
    q, k = apply_rope(qkv_h[:2], cos, sin).unbind(0)
    return q, k, qkv_h[2]


class CausalSelfAttention(nn.Module):
    """Multi-head self-attention through SDPA (flash / memory-efficient kernels on GPU); causal
    unless built with ``causal=False``."""

    def __init__(self, cfg: BackboneConfig, causal: bool = True) -> None:
        super().__init__()
        self.causal = causal
        if cfg.dim % cfg.heads:
            raise ValueError(f"backbone.dim={cfg.dim} is not divisible by backbone.heads={cfg.heads}")
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim, bias=False)
        self.proj = nn.Linear(cfg.dim, cfg.dim, bias=False)
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                valid: torch.Tensor | None = None, in_graph: bool | str = True) -> torch.Tensor:
        """x (B, N, C); valid (B, N) bool or None: keys that may be attended to (bidirectional
        only — a causal model never sees the padding after a window, so it needs no mask).
        in_graph: False runs SDPA outside a compiled graph (``_sdpa_eager``); "cudnn" inside it
        with cuDNN first (``_sdpa_cudnn_first``); eager, the same call."""
        q, k, v, mask = self.project(x, cos, sin, valid, position_major=in_graph is not False and torch.compiler.is_compiling())
        sdpa = _sdpa_cudnn_first if in_graph == "cudnn" else _sdpa if in_graph else _sdpa_eager
        return self.output(sdpa(q, k, v, mask, self.causal, self.dropout if self.training else 0.0))

    def project(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, valid: torch.Tensor | None,
                position_major: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """x (B, N, C) -> q, k (rotated), v (B, H, N, hd) and the key mask (B, 1, 1, N) bool or None.
        position_major: the layout for attention inside a compiled graph (see ``split_qkv``)."""
        B, N, C = x.shape
        qkv = self.qkv(x).view(B, N, 3, self.heads, C // self.heads)  # one linear for q, k and v
        q, k, v = split_qkv(qkv, cos, sin, position_major=position_major)
        # (B, 1, 1, N) key mask: padded slots of a shorter window must not be seen, or a
        # bidirectional prediction would depend on what else is in the batch.
        mask = None if self.causal or valid is None else valid[:, None, None, :]
        return q, k, v, mask

    def output(self, y: torch.Tensor) -> torch.Tensor:
        """Attention output y (B, H, N, hd) -> (B, N, C) through ``proj``. The shape comes from y
        alone (no sizes held from before the attention): where attention leaves the graph, what
        follows is a graph of its own whose inputs should be tensors only (``Block.forward``)."""
        return self.proj(y.transpose(1, 2).flatten(2))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg: BackboneConfig, causal: bool = True) -> None:
        super().__init__()
        self.norm1 = RMSNorm(cfg.dim)
        self.attn = CausalSelfAttention(cfg, causal)
        self.norm2 = RMSNorm(cfg.dim)
        hidden = cfg.mlp_ratio * cfg.dim
        self.fc = nn.Linear(cfg.dim, hidden, bias=False)
        self.out = nn.Linear(hidden, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                valid: torch.Tensor | None = None, in_graph: bool | str = True) -> torch.Tensor:
        if in_graph is False:
            # Attention out of the graph (``_sdpa``), called here rather than inside
            # ``self.attn``: the graph breaks in this frame only, and what follows it compiles
            # as one resumed graph whose inputs the eager call marks symbolic
            # (``_sdpa_eager_marking``). Broken inside ``self.attn``, the break left two
            # resumed graphs (its rest and this block's), both compiled static first and again
            # at the next length or batch: four graphs more per width, recompiled at a BPE
            # model's second training step (3-4 s on an H200, BENCHMARKS.md).
            a = self.attn
            q, k, v, mask = a.project(self.norm1(x), cos, sin, valid, position_major=False)
            y = _sdpa_eager_marking(q, k, v, mask, a.causal, a.dropout if self.training else 0.0, x)
            x = x + a.output(y)
        else:
            x = x + self.attn(self.norm1(x), cos, sin, valid, in_graph)
        return x + self.out(F.gelu(self.fc(self.norm2(x))))


class Backbone(nn.Module):
    """Stack of transformer blocks with a final RMSNorm: (B, N, dim) -> (B, N, dim).

    causal: True for autoregressive encoders; False (bidirectional) for masked diffusion. The
    parameters are the same either way, so the two objectives compare at equal size."""

    def __init__(self, cfg: BackboneConfig, causal: bool = True) -> None:
        super().__init__()
        self.cfg = cfg
        self.causal = causal
        self.blocks = nn.ModuleList(Block(cfg, causal) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.dim)
        self.dynamic_shapes = False  # set when the blocks are compiled (harness.infra.accel.compile_backbones)
        self.compilable = True  # False: compile_backbones leaves it eager (BLT's entropy model)
        # RoPE tables per device: (the longest table made, {n: its first n rows as views}); not
        # module state (not in state_dict, not moved by .to: a new device makes its own).
        self._rope: dict[torch.device, tuple[int, dict[int, tuple[torch.Tensor, torch.Tensor]]]] = {}
        # tables replaced by a longer one (a new longest length is rare: a few in a run)
        self._rope_superseded: list[tuple[torch.Tensor, torch.Tensor]] = []
        for name, p in self.named_parameters():
            if p.dim() == 2:
                # GPT-2 style init; residual projections scaled down with depth.
                std = 0.02 / math.sqrt(2 * cfg.layers) if name.endswith(("proj.weight", "out.weight")) else 0.02
                nn.init.normal_(p, mean=0.0, std=std)

    def forward(self, x: torch.Tensor, valid: torch.Tensor | None = None, *,
                valid_all: bool | None = None) -> torch.Tensor:
        """x (B, N, dim); valid (B, N) bool: real (not padding) positions, used when bidirectional.
        An all-valid mask is dropped so SDPA keeps its fastest (flash) kernel. valid_all: whether
        every position is valid, when the caller knows it from collation; None = read it from
        ``valid`` here (on a GPU a host sync)."""
        if valid is not None and (bool(valid.all()) if valid_all is None else valid_all):
            valid = None
        cos, sin = self.rope(x.shape[1], x.device)
        if self.dynamic_shapes:
            # Compiled blocks (harness.infra.accel): batch and length vary (BPE's token counts, the
            # last batch, scoring), so compile them symbolic at once rather than static first and
            # again on the second shape; "maybe": a size the graph needs stays static silently.
            for t, dims in ((x, (0, 1)), (cos, (0,)), (sin, (0,)), (valid, (0, 1))):
                for d in dims if t is not None else ():
                    torch._dynamo.maybe_mark_dynamic(t, d)
        # compiled: one graph variant per value (a guarded Python value); eager: no difference.
        # A compiled training step at the first length (the byte-level models' fixed windows)
        # asks for cuDNN attention first where the harness says so (CUDNN_FIXED).
        in_graph: bool | str = not self.dynamic_shapes or attention_in_graph(x.shape[1])
        if in_graph and self.dynamic_shapes and CUDNN_FIXED and x.is_cuda and torch.is_grad_enabled():
            in_graph = "cudnn"
        for blk in self.blocks:
            x = blk(x, cos, sin, valid, in_graph)
        return self.norm(x)

    def rope(self, n: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """RoPE cos, sin (n, head_dim) float32 on ``device`` (``rope_cache``): made once per
        device and length, not every forward (its ten ops ran in every forward before).

        One table per device, of the longest length seen, and each length a view of its first
        rows (bit-identical to ``rope_cache(n, ...)``, see there): lengths vary (BPE's token
        counts, BLT's patches, scoring), and a table per length would add up. Made outside
        inference mode, so tables first made while scoring can be saved for backward later. A
        table replaced by a longer one is kept: a CUDA graph captured at a shorter length reads
        its memory on every replay and holds no reference to it (freed, it was reused or
        returned to the driver: BPE steps replayed garbage or crashed)."""
        if torch.compiler.is_compiling():  # traced into a graph: constants there, no cache
            return rope_cache(n, self.cfg.dim // self.cfg.heads, self.cfg.rope_base, device)
        longest, views = self._rope.get(device, (0, {}))
        hit = views.get(n)
        if hit is not None:
            return hit
        with torch.inference_mode(False), torch.no_grad():
            if n > longest:
                if longest:  # a captured CUDA graph still reads the views handed out: keep their table
                    self._rope_superseded.append(views[longest])
                cos, sin = rope_cache(n, self.cfg.dim // self.cfg.heads, self.cfg.rope_base, device)
                longest, views = n, {n: (cos, sin)}
                self._rope[device] = (longest, views)
            else:
                cos, sin = views[longest]
                views[n] = (cos[:n], sin[:n])
        return views[n]

    def flops(self, batch: int, n: int) -> float:
        """Forward FLOPs (2 per multiply-add) for a (batch, n) sequence batch: matmuls + attention."""
        return backbone_flops(self.cfg, batch, n, self.causal)


# Fraction of the dense QK^T / AV cost at which causal self-attention is counted: 1.0 (the
# default, torch's FLOP counter on the math path) or 0.5 (a causal kernel skips the masked half).
# Scaling sweeps count under both conventions (docs/scaling.md); only this context changes it.
_CAUSAL_ATTENTION_COST: ContextVar[float] = ContextVar("causal_attention_cost", default=1.0)


@contextmanager
def causal_attention_cost(fraction: float) -> Iterator[None]:
    """Count causal self-attention at ``fraction`` of its dense cost inside the block:
    ``with causal_attention_cost(0.5): f = encoder.flops(batch)``."""
    token = _CAUSAL_ATTENTION_COST.set(float(fraction))
    try:
        yield
    finally:
        _CAUSAL_ATTENTION_COST.reset(token)


def backbone_flops(cfg: BackboneConfig, batch: int, n: int, causal: bool = True) -> float:
    """Analytic forward FLOPs of the backbone on ``batch`` sequences of length ``n``.

    Counts the linear layers (qkv, proj, MLP) and the two attention matmuls at full (non-causal)
    cost — equal to torch's FLOP counter on the math SDPA path (tests/encoders/test_backbone.py);
    norms, RoPE and softmax are ignored (< 1 %). Inside ``causal_attention_cost(f)`` the attention
    matmuls count f times their dense cost. A bidirectional backbone (``causal=False``, masked
    diffusion) always counts them at full cost: no half of its attention is masked.
    """
    d, h = cfg.dim, cfg.mlp_ratio * cfg.dim
    per_token_linear = 2 * (3 * d * d + d * d + 2 * d * h)
    attn = 2 * 2 * n * n * d * (_CAUSAL_ATTENTION_COST.get() if causal else 1.0)  # QK^T and AV
    return float(cfg.layers * batch * (n * per_token_linear + attn))


def backbone_flops_rows(cfg: BackboneConfig, lengths: Sequence[int], causal: bool = True) -> float:
    """``backbone_flops`` summed over sequences of their own ``lengths`` (tokens each): a padded
    (B, max n) batch's model FLOPs without its padding, which pays only for the batch's shape (a
    BPE window of CJK text holds ~3x the tokens of an English one, so padding every window to the
    batch's longest can double the executed work)."""
    return float(sum(backbone_flops(cfg, 1, int(n), causal) for n in lengths))
