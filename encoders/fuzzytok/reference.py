"""Pure-PyTorch reference of FuzzyTok's convolutions: the CPU training path and the test oracle.

Shapes: x (B, T, C_in) channels-last; weight (C_out, C_in, K) as in ``nn.Conv1d``; bias (C_out,).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F


def activation(name: str, z: torch.Tensor) -> torch.Tensor:
    """The activations the kernels implement: none | gelu (exact, erf) | relu | silu."""
    if name == "gelu":
        return F.gelu(z)
    if name == "relu":
        return F.relu(z)
    if name == "silu":
        return F.silu(z)
    if name == "none":
        return z
    raise ValueError(f"activation: unknown value {name!r} (expected none, gelu, relu or silu)")


def dilated_causal_conv_ref(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, dilation: int
) -> torch.Tensor:
    """y[b, t] = bias + Σ_k W[:, :, k] · x[b, t − (K−1−k)·d] (zero before the start): (B, T, C_out).

    F.conv1d with (K−1)·d zeros of left padding, so output t sees inputs ≤ t only.
    """
    K = weight.shape[2]
    xt = F.pad(x.transpose(1, 2), ((K - 1) * dilation, 0))  # (B, C_in, T + (K-1)d)
    return F.conv1d(xt, weight, bias, dilation=dilation).transpose(1, 2)


def conv_layer_ref(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, dilation: int, act: str
) -> torch.Tensor:
    """One residual layer: x + act(conv_d(x) + b). x (B, T, C); weight (C, C, K)."""
    return x + activation(act, dilated_causal_conv_ref(x, weight, bias, dilation))


def conv_block_ref(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    dilations: Sequence[int],
    act: str,
) -> torch.Tensor:
    """A residual block: the layers of ``conv_layer_ref`` for each dilation in turn.

    x (B, T, C); weight (L, C, C, K); bias (L, C) or None; len(dilations) == L.
    """
    for i, d in enumerate(dilations):
        x = conv_layer_ref(x, weight[i], None if bias is None else bias[i], d, act)
    return x
