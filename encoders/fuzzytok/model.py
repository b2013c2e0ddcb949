"""The ``fuzzytok`` encoder: bytes -> embedding -> residual dilated causal conv blocks -> LayerNorm
+ linear -> shared backbone over bytes (or none) -> 256-way next-byte head.

    inputs (B, T) long (BOS + bytes shifted right)
      -> embed (B, T, dim)
      -> blocks x [for d in dilations: h = h + act(conv_d(h) + b)]   (causal, kernel_size taps)
      -> LayerNorm -> Linear (B, T, D)          D = backbone.dim, or dim without a backbone
      -> backbone (B, T, D) -> head (B, T, 256)

One continuous vector per byte, no sequence compression. Without a backbone the model sees only
the conv receptive field; with one, the whole window.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from core.errors import field_error
from encoders.backbone import Backbone, BackboneConfig, OutputHead, backbone_flops
from encoders.base import ByteLevelEncoder, TensorBatch
from encoders.fuzzytok.ops import conv_block, use_triton
from encoders.registry import register


@dataclass(frozen=True, kw_only=True)
class FuzzyTokConfig:
    """Conv stack shape. ``dim``: conv channels (bytes are embedded at this width).
    ``dilations``: one residual layer per entry in each of ``blocks`` blocks.
    ``impl``: auto = Triton kernels on CUDA, PyTorch reference elsewhere; triton | torch force it.
    ``fused_block``: on the Triton path, run each block's layers in one launch (halo recompute).
    Off by default: on an H200 it was slower than one launch per layer (BENCHMARKS.md), and its
    training memory is that of ``recompute: true`` per layer.
    ``recompute``: on the Triton path, true keeps only each block's input for the backward and
    recomputes the layers' intermediates there (about a third of the reference's training memory);
    false keeps every layer's input and activation derivative (about the reference's memory, a faster
    backward). Unset: false, or true with ``fused_block`` (the fused block always recomputes)."""

    dim: int = 64
    kernel_size: int = 3
    dilations: tuple[int, ...] = (1, 2, 4)
    blocks: int = 3
    activation: Literal["gelu", "relu", "silu", "none"] = "gelu"
    impl: Literal["auto", "triton", "torch"] = "auto"
    fused_block: bool = False
    recompute: bool | None = None

    def __post_init__(self) -> None:
        if self.dim < 1:
            raise field_error("fuzzytok", "dim", f"must be >= 1, got {self.dim}")
        if self.kernel_size < 1:
            raise field_error("fuzzytok", "kernel_size", f"must be >= 1, got {self.kernel_size}")
        if not self.dilations or any(d < 1 for d in self.dilations):
            raise field_error("fuzzytok", "dilations", f"must be a non-empty list of integers >= 1, got {list(self.dilations)}")
        if self.blocks < 0:
            raise field_error("fuzzytok", "blocks", f"must be >= 0, got {self.blocks}")
        if self.activation not in ("gelu", "relu", "silu", "none"):
            raise field_error("fuzzytok", "activation", f"unknown value {self.activation!r} (gelu, relu, silu, none)")
        if self.impl not in ("auto", "triton", "torch"):
            raise field_error("fuzzytok", "impl", f"unknown value {self.impl!r} (auto, triton, torch)")
        if self.fused_block and self.recompute is False:
            raise field_error("fuzzytok", "recompute", "false needs fused_block: false "
                             "(the fused block keeps no intermediates to reuse)")

    @property
    def recompute_backward(self) -> bool:
        """``recompute`` resolved: unset means false, or true with the fused block."""
        return self.fused_block if self.recompute is None else self.recompute

    @property
    def receptive_field(self) -> int:
        """Input positions each output sees: 1 + blocks · (K − 1) · Σ dilations."""
        return 1 + self.blocks * (self.kernel_size - 1) * sum(self.dilations)


class ConvBlock(nn.Module):
    """len(dilations) residual layers h ← h + act(conv_d(h) + b): (B, T, C) -> (B, T, C).

    weight (L, C, C, K) in Conv1d layout per layer; bias (L, C).
    """

    def __init__(self, dim: int, kernel_size: int, dilations: tuple[int, ...], activation: str,
                 init_std: float) -> None:
        super().__init__()
        self.dilations = tuple(dilations)
        self.activation = activation
        self.weight = nn.Parameter(torch.randn(len(dilations), dim, dim, kernel_size) * init_std)
        self.bias = nn.Parameter(torch.zeros(len(dilations), dim))

    def forward(self, x: torch.Tensor, impl: str, fused: bool, recompute: bool) -> torch.Tensor:
        return conv_block(x, self.weight, self.bias, self.dilations, self.activation, impl=impl,  # type: ignore[arg-type]
                          fused=fused, recompute=recompute)


@register("fuzzytok")
class FuzzyTokEncoder(ByteLevelEncoder):
    """Byte embedding -> dilated causal conv blocks -> LayerNorm + linear -> backbone -> head."""

    Config = FuzzyTokConfig

    def __init__(self, config: FuzzyTokConfig, backbone: BackboneConfig | None) -> None:
        super().__init__(config, backbone)
        c = config
        self.dim = c.dim
        self.out_dim = backbone.dim if backbone is not None else c.dim
        self.embed = nn.Embedding(257, c.dim)
        n_layers = max(1, c.blocks * len(c.dilations))
        # Residual branches start small (scaled by depth) so the stack begins near identity.
        std = 1.0 / math.sqrt(c.dim * c.kernel_size) / math.sqrt(n_layers)
        self.blocks = nn.ModuleList(
            ConvBlock(c.dim, c.kernel_size, c.dilations, c.activation, std) for _ in range(c.blocks)
        )
        self.norm = nn.LayerNorm(c.dim)
        self.proj = nn.Linear(c.dim, self.out_dim)
        self.backbone = Backbone(backbone) if backbone is not None else None
        self.head = OutputHead(self.out_dim, 256, bias=False)
        nn.init.normal_(self.embed.weight, std=0.02)
        nn.init.normal_(self.head.weight, std=0.02)

    def features(self, inputs: torch.Tensor) -> torch.Tensor:
        """inputs (B, T) long -> conv features (B, T, out_dim); position t sees inputs <= t."""
        h = self.embed(inputs)
        for blk in self.blocks:
            h = blk(h, self.config.impl, self.config.fused_block, self.config.recompute_backward)
        return self.proj(self.norm(h))

    def logits(self, inputs: torch.Tensor) -> torch.Tensor:
        """inputs (B, T) long -> logits (B, T, 256); position t predicts byte t from bytes < t."""
        x = self.features(inputs)
        if self.backbone is not None:
            x = self.backbone(x)
        return self.head(x)

    def conv_flops(self, batch: int, seq: int) -> float:
        """Forward FLOPs of the conv stack alone: 2 · B · T · C² · K per layer."""
        c = self.config
        return 2.0 * batch * seq * c.dim * c.dim * c.kernel_size * len(c.dilations) * c.blocks

    def flops(self, batch: TensorBatch) -> float:
        """Forward FLOPs (2 per MAC): conv layers, projection, backbone and head. The embedding
        lookup, LayerNorm, biases and activations are not counted (as torch's FlopCounterMode)."""
        B, T = batch["inputs"].shape
        f = self.conv_flops(B, T)
        f += 2.0 * B * T * self.dim * self.out_dim  # proj
        f += 2.0 * B * T * self.out_dim * 256  # head
        if self.backbone_config is not None:
            f += backbone_flops(self.backbone_config, B, T)
        return f

    def describe(self) -> dict[str, Any]:
        c = self.config
        dev = next(self.parameters()).device
        rf = c.receptive_field
        return {
            "vocab_size": 256,
            "receptive_field_bytes": rf,
            # Bytes of history behind each prediction: the conv field without a backbone, else the window.
            "context": "window" if self.backbone_config is not None else f"{rf} bytes",
            "conv_layers": c.blocks * len(c.dilations),
            "kernel_size": c.kernel_size,
            "dilations": list(c.dilations),
            "impl": "triton" if use_triton(c.impl, torch.empty(0, device=dev)) else "torch",
            "fused_block": c.fused_block,
            "recompute": c.recompute_backward,
        }
