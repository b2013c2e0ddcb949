"""The ``bytes`` control encoder: (B, T) byte ids -> embedding (B, T, dim) -> backbone -> (B, T, 256)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from encoders.backbone import Backbone, BackboneConfig, backbone_flops
from encoders.base import ByteLevelEncoder, TensorBatch
from encoders.registry import register


@dataclass(frozen=True, kw_only=True)
class ByteConfig:
    """``dim`` is used only when the encoder runs without a backbone (``backbone: null``);
    otherwise the embedding width is the backbone's."""

    dim: int = 64


@register("bytes")
class ByteEncoder(ByteLevelEncoder):
    """Byte embedding -> shared backbone -> next-byte head. Without a backbone it is a bigram model."""

    Config = ByteConfig

    def __init__(self, config: ByteConfig, backbone: BackboneConfig | None) -> None:
        super().__init__(config, backbone)
        dim = backbone.dim if backbone is not None else config.dim
        self.dim = dim
        self.embed = nn.Embedding(257, dim)
        self.backbone = Backbone(backbone) if backbone is not None else None
        self.head = nn.Linear(dim, 256, bias=False)
        nn.init.normal_(self.embed.weight, std=0.02)
        nn.init.normal_(self.head.weight, std=0.02)

    def logits(self, inputs: torch.Tensor) -> torch.Tensor:
        """inputs (B, T) long -> logits (B, T, 256); position t sees inputs <= t, i.e. bytes < t."""
        x = self.embed(inputs)
        if self.backbone is not None:
            x = self.backbone(x)
        return self.head(x)

    def flops(self, batch: TensorBatch) -> float:
        B, T = batch["inputs"].shape
        f = 2.0 * B * T * self.dim * 256  # head
        if self.backbone_config is not None:
            f += backbone_flops(self.backbone_config, B, T)
        return f
