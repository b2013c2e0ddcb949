"""FuzzyTok's convolutions as ``torch.library`` custom ops (Triton kernels) beside the reference.

Public functions pick the path: ``impl="triton"`` runs the kernels (CUDA, or Triton's interpreter
on CPU), ``"torch"`` the reference in ``reference.py``, ``"auto"`` Triton on CUDA tensors and the
reference elsewhere (the interpreter is thousands of times slower than ``F.conv1d``).

Ops (namespace ``fuzzytok``), each with a fake implementation (for ``torch.compile``), an autograd
formula whose backward is itself an op, and a FLOP formula so ``FlopCounterMode`` counts them:
  * ``dilated_causal_conv(x (B,T,Ci), weight (Co,Ci,K), bias (Co,)?, dilation) -> (B,T,Co)``
  * ``conv_block(x (B,T,C), weight (L,C,C,K), bias (L,C)?, dilations [L], activation, fused)``
    — L residual layers ``h ← h + act(conv_{d_l}(h) + b_l)``; ``fused`` runs them in one launch.
    Its backward recomputes the block's intermediates from the saved input instead of storing them.
  * ``conv_block_store(x, weight, bias?, dilations, activation) -> (y, saved)`` — the same block
    with every layer's input and activation derivative act'(z) kept for a backward without
    recomputation.
FLOP formulas count model FLOPs (2 per multiply-add): backward = 2 × forward (dx and dW), not the
forward recomputation the block backward also does.

Eager calls of ``dilated_causal_conv`` (no torch.compile tracing, dispatch mode or autocast) run
the same kernels through ``_ConvFunction`` (a ``torch.autograd.Function``): the custom op's
Python autograd wrapper and redispatch cost more host time than a small convolution's kernels.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor
from torch.utils._python_dispatch import _get_current_dispatch_mode
from torch.utils.flop_counter import register_flop_formula

from encoders.fuzzytok.reference import conv_block_ref, dilated_causal_conv_ref

Impl = Literal["auto", "triton", "torch"]


@functools.cache  # an import statement costs µs a call
def _kernels():  # noqa: ANN202 - module
    # Imported on first use: importing it enables Triton's interpreter on machines without a GPU,
    # which only the Triton path needs.
    from encoders.fuzzytok import kernels

    return kernels


# -- dilated_causal_conv -------------------------------------------------------------------------


@torch.library.custom_op("fuzzytok::dilated_causal_conv", mutates_args=())
def _conv_op(x: Tensor, weight: Tensor, bias: Tensor | None, dilation: int) -> Tensor:
    return _kernels().conv_forward(x, weight, bias, dilation)


@_conv_op.register_fake
def _conv_fake(x: Tensor, weight: Tensor, bias: Tensor | None, dilation: int) -> Tensor:
    return x.new_empty(x.shape[0], x.shape[1], weight.shape[0])


@torch.library.custom_op("fuzzytok::dilated_causal_conv_backward", mutates_args=())
def _conv_bwd_op(dy: Tensor, x: Tensor, weight: Tensor, dilation: int) -> tuple[Tensor, Tensor, Tensor]:
    return _conv_grads(dy, x, weight, dilation, True, True)  # type: ignore[return-value]


def _conv_grads(dy: Tensor, x: Tensor, weight: Tensor, dilation: int, want_dx: bool,
                want_dw: bool) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
    """(dx, dW, db) of y = conv(x, W) + b for dy; dW and db in the weight's dtype, dW contiguous
    (so autograd's gradient accumulation can keep it without a copy into the weight's layout)."""
    k = _kernels()
    dx = k.conv_forward(dy, weight, None, dilation, transpose=True) if want_dx else None
    if not want_dw:
        return dx, None, None
    dw, db = k.conv_weight_grad(x, dy, dilation, weight.shape[2], with_bias=True)
    return dx, dw.to(weight.dtype, memory_format=torch.contiguous_format), db.to(weight.dtype)


@_conv_bwd_op.register_fake
def _conv_bwd_fake(dy: Tensor, x: Tensor, weight: Tensor, dilation: int) -> tuple[Tensor, Tensor, Tensor]:
    return torch.empty_like(x), torch.empty_like(weight), weight.new_empty(weight.shape[0])


def _conv_setup(ctx, inputs, output) -> None:  # noqa: ANN001
    x, weight, bias, dilation = inputs
    ctx.save_for_backward(x, weight)
    ctx.dilation = dilation
    ctx.has_bias = bias is not None


def _conv_backward(ctx, dy: Tensor):  # noqa: ANN001, ANN202
    x, weight = ctx.saved_tensors
    dx, dw, db = _conv_bwd_op(dy, x, weight, ctx.dilation)
    return dx, dw, (db if ctx.has_bias else None), None


_conv_op.register_autograd(_conv_backward, setup_context=_conv_setup)


class _ConvFunction(torch.autograd.Function):
    """The same kernels as the custom op, for eager calls: ``torch.autograd.Function`` dispatches in
    a few µs of Python where the custom op's autograd wrapper and redispatch cost several times that
    per call (forward and backward op), which at C ≤ 128 is more than the kernels run."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None, dilation: int) -> Tensor:  # noqa: ANN001
        ctx.save_for_backward(x, weight)
        ctx.dilation = dilation
        return _kernels().conv_forward(x, weight, bias, dilation)

    @staticmethod
    def backward(ctx, dy: Tensor):  # noqa: ANN001, ANN205
        x, weight = ctx.saved_tensors
        need_x, need_w, need_b, _ = ctx.needs_input_grad
        dx, dw, db = _conv_grads(dy, x, weight, ctx.dilation, need_x, need_w or need_b)
        return dx, (dw if need_w else None), (db if need_b else None), None


# False sends eager calls through the custom op too (tests and benchmarks compare).
EAGER_FUNCTION = True


def _eager_plain(*tensors: Tensor | None) -> bool:
    """Whether a call may skip the custom op: plain tensors, not traced by torch.compile, no
    dispatch mode (FlopCounterMode, fake tensors), no autocast (which the op registers rules for)
    and no torch.func transform (which then meets the op exactly as before this path existed)."""
    if not EAGER_FUNCTION or torch.compiler.is_compiling() or _get_current_dispatch_mode() is not None:
        return False
    if torch._C._are_functorch_transforms_active():
        return False
    for t in tensors:  # a loop, not any() over a generator: a few µs a call on the lent hosts
        if t is not None and type(t) is not Tensor:
            return False
    return not torch.is_autocast_enabled(tensors[0].device.type)  # type: ignore[union-attr]


def conv_flops(x_shape: Sequence[int], w_shape: Sequence[int]) -> int:
    """Forward FLOPs of one dilated causal conv: 2 · B · T · C_out · C_in · K."""
    B, T = x_shape[0], x_shape[1]
    c_out, c_in, k = w_shape
    return 2 * B * T * c_out * c_in * k


@register_flop_formula(torch.ops.fuzzytok.dilated_causal_conv)
def _conv_flop(x_shape, w_shape, bias_shape, dilation, out_shape=None, **kwargs) -> int:  # noqa: ANN001
    return conv_flops(x_shape, w_shape)


@register_flop_formula(torch.ops.fuzzytok.dilated_causal_conv_backward)
def _conv_bwd_flop(dy_shape, x_shape, w_shape, dilation, out_shape=None, **kwargs) -> int:  # noqa: ANN001
    return 2 * conv_flops(x_shape, w_shape)


# -- conv_block ----------------------------------------------------------------------------------


def _layer_bias(bias: Tensor | None, i: int) -> Tensor | None:
    return None if bias is None else bias[i]


@torch.library.custom_op("fuzzytok::conv_block", mutates_args=())
def _block_op(
    x: Tensor, weight: Tensor, bias: Tensor | None, dilations: list[int], activation: str, fused: bool
) -> Tensor:
    k = _kernels()
    if fused and k.block_halo(dilations, weight.shape[3]) <= k.MAX_BLOCK_HALO:
        return k.block_forward(x, weight, bias, dilations, activation)
    h = x.contiguous()
    wf = k.gemm_weights(weight, False, x.dtype)
    for i, d in enumerate(dilations):
        h = k.launch_conv(h, wf[i], _layer_bias(bias, i), d, mode=k.MODE_LAYER, act=activation, res=h)
    return h


@_block_op.register_fake
def _block_fake(
    x: Tensor, weight: Tensor, bias: Tensor | None, dilations: list[int], activation: str, fused: bool
) -> Tensor:
    return torch.empty_like(x)


@torch.library.custom_op("fuzzytok::conv_block_backward", mutates_args=())
def _block_bwd_op(
    dy: Tensor, x: Tensor, weight: Tensor, bias: Tensor | None, dilations: list[int], activation: str
) -> tuple[Tensor, Tensor, Tensor]:
    k = _kernels()
    L = len(dilations)
    # Recompute the block's inputs to each layer (never stored by the forward).
    wf, wt = k.gemm_weights(weight, False, x.dtype), k.gemm_weights(weight, True, x.dtype)
    hs = [x.contiguous()]
    for i in range(L - 1):
        hs.append(k.launch_conv(hs[i], wf[i], _layer_bias(bias, i), dilations[i],
                                mode=k.MODE_LAYER, act=activation, res=hs[i]))
    dws: list[Tensor] = [x] * L
    dbs: list[Tensor] = [x] * L
    grad = dy.contiguous()
    for i in reversed(range(L)):
        d = dilations[i]
        # g = dL/dz at the pre-activation z = conv(h) + b: recompute z, multiply by act'(z).
        g = k.launch_conv(hs[i], wf[i], _layer_bias(bias, i), d, mode=k.MODE_ACTGRAD, act=activation, res=grad)
        dws[i], dbs[i] = k.conv_weight_grad(hs[i], g, d, weight.shape[3], with_bias=True)
        # dL/dh = grad (residual path) + convᵀ(g).
        grad = k.launch_conv(g, wt[i], None, d, mode=k.MODE_ADD, res=grad, transpose=True)
    return grad, torch.stack(dws).to(weight.dtype), torch.stack(dbs).to(weight.dtype)


@_block_bwd_op.register_fake
def _block_bwd_fake(
    dy: Tensor, x: Tensor, weight: Tensor, bias: Tensor | None, dilations: list[int], activation: str
) -> tuple[Tensor, Tensor, Tensor]:
    return torch.empty_like(x), torch.empty_like(weight), weight.new_empty(weight.shape[0], weight.shape[1])


def _block_setup(ctx, inputs, output) -> None:  # noqa: ANN001
    x, weight, bias, dilations, activation, fused = inputs
    ctx.save_for_backward(x, weight, bias)
    ctx.dilations = dilations
    ctx.activation = activation


def _block_backward(ctx, dy: Tensor):  # noqa: ANN001, ANN202
    x, weight, bias = ctx.saved_tensors
    dx, dw, db = _block_bwd_op(dy, x, weight, bias, ctx.dilations, ctx.activation)
    return dx, dw, (db if bias is not None else None), None, None, None


_block_op.register_autograd(_block_backward, setup_context=_block_setup)


# -- conv_block_store: the same block, intermediates kept for the backward -----------------------
#
# The recomputing block above saves only its input: its backward runs each layer's convolution
# again (to get the pre-activation) and rebuilds the block's inner inputs, about 1.7 extra
# convolutions per layer. This variant trades memory for that time: the forward also writes each
# layer's activation derivative act'(z_l) (from the same evaluation as act(z_l)) and keeps each
# inner layer's input h_l (outputs it writes anyway), so the backward is two convolutions per
# layer (dx, dW) and no activation at all: g = dL/dz of the layer below is one multiply in the dx
# epilogue, which also sums g's columns for that layer's bias gradient.


def _store_slots(L: int) -> int:
    """Saved tensors of a store block: inner inputs h_1 … h_{L−1}, then act'(z_0) … act'(z_{L−1})."""
    return 2 * L - 1


@torch.library.custom_op("fuzzytok::conv_block_store", mutates_args=())
def _block_store_op(
    x: Tensor, weight: Tensor, bias: Tensor | None, dilations: list[int], activation: str
) -> tuple[Tensor, Tensor]:
    """→ (y (B, T, C), saved (2L − 1, B, T, C)); saved is for the backward only."""
    k = _kernels()
    x = x.contiguous()
    L = len(dilations)
    saved = x.new_empty(_store_slots(L), *x.shape)
    y = torch.empty_like(x)
    wf = k.gemm_weights(weight, False, x.dtype)
    h = x
    for i, d in enumerate(dilations):
        out = saved[i] if i < L - 1 else y
        k.launch_conv(h, wf[i], _layer_bias(bias, i), d, mode=k.MODE_LAYER_SAVE, act=activation, res=h,
                      out=out, pre=saved[L - 1 + i])
        h = out
    return y, saved


@_block_store_op.register_fake
def _block_store_fake(
    x: Tensor, weight: Tensor, bias: Tensor | None, dilations: list[int], activation: str
) -> tuple[Tensor, Tensor]:
    return torch.empty_like(x), x.new_empty(_store_slots(len(dilations)), *x.shape)


@torch.library.custom_op("fuzzytok::conv_block_store_backward", mutates_args=())
def _block_store_bwd_op(
    dy: Tensor, x: Tensor, saved: Tensor, weight: Tensor, dilations: list[int], activation: str
) -> tuple[Tensor, Tensor, Tensor]:
    # ``activation`` is not needed here (the saved derivatives carry it); it stays in the schema.
    k = _kernels()
    L = len(dilations)
    B, T, C = x.shape
    hs = [x.contiguous()] + [saved[i] for i in range(L - 1)]
    ds = [saved[L - 1 + i] for i in range(L)]  # act'(z_i)
    wt = k.gemm_weights(weight, True, x.dtype)
    grad = dy.contiguous()  # dL/dh at the current layer's output
    # g = dL/dz of the current layer, q its per-tile column sums (q.sum(0) is the bias gradient).
    g, q = k.mul_col_sums(grad, ds[L - 1])
    dws: list[Tensor] = [x] * L
    dbs: list[Tensor] = [x] * L
    for i in reversed(range(L)):
        d = dilations[i]
        dws[i] = k.conv_weight_grad(hs[i], g, d, weight.shape[3])
        dbs[i] = q.sum(0)
        if i > 0:
            # dL/dh_i = grad + convᵀ(g); the same epilogue forms the layer below's g and its sums.
            g_below, q_below = torch.empty_like(grad), k.col_sum_buffer(B, T, C, grad.device)
            grad = k.launch_conv(g, wt[i], None, d, mode=k.MODE_ADD_ACTGRAD, res=grad, transpose=True,
                                 pre=ds[i - 1], grad_out=g_below, col_sums=q_below)
            g, q = g_below, q_below
        else:
            grad = k.launch_conv(g, wt[i], None, d, mode=k.MODE_ADD, res=grad, transpose=True)
    return grad, torch.stack(dws).to(weight.dtype), torch.stack(dbs).to(weight.dtype)


@_block_store_bwd_op.register_fake
def _block_store_bwd_fake(
    dy: Tensor, x: Tensor, saved: Tensor, weight: Tensor, dilations: list[int], activation: str
) -> tuple[Tensor, Tensor, Tensor]:
    return torch.empty_like(x), torch.empty_like(weight), weight.new_empty(weight.shape[0], weight.shape[1])


def _block_store_setup(ctx, inputs, output) -> None:  # noqa: ANN001
    x, weight, bias, dilations, activation = inputs
    _, saved = output
    ctx.save_for_backward(x, saved, weight)
    ctx.has_bias = bias is not None
    ctx.dilations = dilations
    ctx.activation = activation
    # `saved` is an output only so the backward can have it; no gradient flows into it, and
    # materialising a zero gradient for it would cost a (2L − 1, B, T, C) memset.
    ctx.mark_non_differentiable(saved)
    ctx.set_materialize_grads(False)


def _block_store_backward(ctx, dy: Tensor, _dsaved: Tensor | None):  # noqa: ANN001, ANN202
    x, saved, weight = ctx.saved_tensors
    dx, dw, db = _block_store_bwd_op(dy, x, saved, weight, ctx.dilations, ctx.activation)
    return dx, dw, (db if ctx.has_bias else None), None, None


_block_store_op.register_autograd(_block_store_backward, setup_context=_block_store_setup)


def block_flops(x_shape: Sequence[int], w_shape: Sequence[int]) -> int:
    """Forward FLOPs of a block: L convolutions C×C×K over B·T rows."""
    L, c_out, c_in, k = w_shape
    return L * conv_flops(x_shape, (c_out, c_in, k))


@register_flop_formula(torch.ops.fuzzytok.conv_block)
def _block_flop(x_shape, w_shape, bias_shape, dilations, activation, fused, out_shape=None, **kwargs) -> int:  # noqa: ANN001
    return block_flops(x_shape, w_shape)


@register_flop_formula(torch.ops.fuzzytok.conv_block_backward)
def _block_bwd_flop(dy_shape, x_shape, w_shape, bias_shape, dilations, activation, out_shape=None, **kwargs) -> int:  # noqa: ANN001
    return 2 * block_flops(x_shape, w_shape)


@register_flop_formula(torch.ops.fuzzytok.conv_block_store)
def _block_store_flop(x_shape, w_shape, bias_shape, dilations, activation, out_shape=None, **kwargs) -> int:  # noqa: ANN001
    return block_flops(x_shape, w_shape)


@register_flop_formula(torch.ops.fuzzytok.conv_block_store_backward)
def _block_store_bwd_flop(dy_shape, x_shape, saved_shape, w_shape, dilations, activation, out_shape=None, **kwargs) -> int:  # noqa: ANN001
    return 2 * block_flops(x_shape, w_shape)


# Under torch.autocast on CUDA (the harness's bf16 training) run the kernels on bf16 operands with
# fp32 accumulation, as autocast does for F.conv1d; without this the custom ops would see the fp32
# embedding output and run in TF32 at about half the speed.
torch.library.register_autocast("fuzzytok::dilated_causal_conv", "cuda", torch.bfloat16)
torch.library.register_autocast("fuzzytok::conv_block", "cuda", torch.bfloat16)
torch.library.register_autocast("fuzzytok::conv_block_store", "cuda", torch.bfloat16)


# -- public entry points ---------------------------------------------------------------------------


def use_triton(impl: Impl, x: Tensor) -> bool:
    """auto → Triton on CUDA tensors only; triton/torch force the path."""
    if impl not in ("auto", "triton", "torch"):
        raise ValueError(f"impl: unknown value {impl!r} (expected auto, triton or torch)")
    return impl == "triton" or (impl == "auto" and x.is_cuda)


def dilated_causal_conv(
    x: Tensor, weight: Tensor, bias: Tensor | None = None, dilation: int = 1, *, impl: Impl = "auto"
) -> Tensor:
    """Causal dilated conv: x (B, T, C_in), weight (C_out, C_in, K), bias (C_out,) → (B, T, C_out).

    y[t] = b + Σ_k W[:, :, k] · x[t − (K−1−k)·d], zeros before the start. Differentiable on both paths.
    """
    if dilation < 1 or weight.dim() != 3 or weight.shape[2] < 1:
        raise ValueError(f"dilated_causal_conv: need dilation >= 1 and weight (C_out, C_in, K >= 1); "
                         f"got dilation={dilation}, weight {tuple(weight.shape)}")
    if use_triton(impl, x):
        if _eager_plain(x, weight, bias):
            if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad
                                            or (bias is not None and bias.requires_grad)):
                return _ConvFunction.apply(x, weight, bias, int(dilation))
            return _kernels().conv_forward(x, weight, bias, int(dilation))
        return torch.ops.fuzzytok.dilated_causal_conv(x, weight, bias, int(dilation))
    return dilated_causal_conv_ref(x, weight, bias, dilation)


def conv_block(
    x: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    dilations: Sequence[int],
    activation: str,
    *,
    impl: Impl = "auto",
    fused: bool = True,
    recompute: bool = True,
) -> Tensor:
    """Residual block: for each dilation d_l, h ← h + act(conv_{d_l}(h) + b_l). x (B, T, C) → (B, T, C).

    weight (L, C, C, K), bias (L, C) or None. Triton path only: ``fused`` runs all layers in one
    launch; ``recompute`` keeps only the block input for the backward and recomputes the rest
    (less memory); ``recompute=False`` keeps every layer's input and activation derivative (faster
    backward, per-layer launches). The reference path keeps what autograd keeps.
    """
    if weight.dim() != 4 or weight.shape[0] != len(dilations) or weight.shape[1] != weight.shape[2]:
        raise ValueError(f"conv_block: weight must be (L, C, C, K) with L = len(dilations) = {len(dilations)}; "
                         f"got {tuple(weight.shape)}")
    if fused and not recompute:
        raise ValueError("conv_block: fused=True needs recompute=True (the fused block keeps no intermediates)")
    if use_triton(impl, x):
        dils = [int(d) for d in dilations]
        if not recompute:
            return torch.ops.fuzzytok.conv_block_store(x, weight, bias, dils, activation)[0]
        return torch.ops.fuzzytok.conv_block(x, weight, bias, dils, activation, fused)
    return conv_block_ref(x, weight, bias, dilations, activation)
