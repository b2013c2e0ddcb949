"""The ``bytes`` control encoder: (B, T) byte ids -> embedding (B, T, dim) -> backbone -> (B, T, 256)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from encoders.backbone import Backbone, BackboneConfig, backbone_flops
from encoders.base import Encoder, TensorBatch, UnitNLL, byte_unit_nll, collate_bytes
from encoders.registry import register


@dataclass(frozen=True, kw_only=True)
class ByteConfig:
    """``dim`` is used only when the encoder runs without a backbone (``backbone: null``);
    otherwise the embedding width is the backbone's."""

    dim: int = 64


@register("bytes")
class ByteEncoder(Encoder):
    """Byte embedding -> shared backbone -> next-byte head. Without a backbone it is a bigram model."""

    Config = ByteConfig
    unit = "byte"
    segment = "byte"

    def __init__(self, config: ByteConfig, backbone: BackboneConfig | None) -> None:
        super().__init__(config, backbone)
        dim = backbone.dim if backbone is not None else config.dim
        self.dim = dim
        self.embed = nn.Embedding(257, dim)
        self.backbone = Backbone(backbone) if backbone is not None else None
        self.head = nn.Linear(dim, 256, bias=False)
        nn.init.normal_(self.embed.weight, std=0.02)
        nn.init.normal_(self.head.weight, std=0.02)

    def collate(self, windows: Sequence[bytes], score_from: Sequence[int]) -> TensorBatch:
        return collate_bytes(windows, score_from)

    def logits(self, inputs: torch.Tensor) -> torch.Tensor:
        """inputs (B, T) long -> logits (B, T, 256); position t sees inputs <= t, i.e. bytes < t."""
        x = self.embed(inputs)
        if self.backbone is not None:
            x = self.backbone(x)
        return self.head(x)

    def forward(self, batch: TensorBatch) -> UnitNLL:  # type: ignore[override]
        return byte_unit_nll(self.logits(batch["inputs"]), batch["targets"])

    def flops(self, batch: TensorBatch) -> float:
        B, T = batch["inputs"].shape
        f = 2.0 * B * T * self.dim * 256  # head
        if self.backbone_config is not None:
            f += backbone_flops(self.backbone_config, B, T)
        return f

    @torch.no_grad()
    def predict_logprobs(self, data: bytes, positions: Sequence[int]) -> dict[int, torch.Tensor]:
        dev = next(self.parameters()).device
        batch = collate_bytes([data], [0]).to(dev)
        logp = torch.log_softmax(self.logits(batch["inputs"])[0].float(), dim=-1)
        return {p: logp[p].cpu() for p in positions if 0 <= p < len(data)}
