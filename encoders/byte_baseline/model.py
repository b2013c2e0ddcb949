"""The ``bytes`` control encoder: (B, T) byte ids -> embedding (B, T, dim) -> backbone -> (B, T, 256).

``objective: mdm`` makes it a masked-diffusion model over bytes (``encoders/mdm.py``): the same
modules with a bidirectional backbone and one more input id (MASK = 257)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import nn

from encoders.backbone import Backbone, BackboneConfig, OutputHead, backbone_flops
from encoders.base import BOS, ByteLevelEncoder, TensorBatch, UnitNLL
from encoders.mdm import MaskedDiffusion, MdmUnits
from encoders.registry import register

MASK = 257  # input id of the masked-diffusion MASK unit (inputs: 258 ids under objective: mdm)


@dataclass(frozen=True, kw_only=True)
class ByteConfig:
    """``dim`` is used only when the encoder runs without a backbone (``backbone: null``);
    otherwise the embedding width is the backbone's.
    objective: ar (next-byte prediction, causal) | mdm (masked diffusion, bidirectional).
    mdm_schedule: linear | cosine — masking schedule α(t) of the MDM objective.
    mdm_span: masked-span length in units during MDM training (1 = independent masks)."""

    dim: int = 64
    objective: Literal["ar", "mdm"] = "ar"
    mdm_schedule: Literal["linear", "cosine"] = "linear"
    mdm_span: int = 1


@register("bytes")
class ByteEncoder(MaskedDiffusion, ByteLevelEncoder):
    """Byte embedding -> shared backbone -> next-byte head. Without a backbone it is a bigram model
    (a unigram model under MDM: a masked byte then sees nothing but MASK)."""

    Config = ByteConfig

    def __init__(self, config: ByteConfig, backbone: BackboneConfig | None) -> None:
        super().__init__(config, backbone)
        dim = backbone.dim if backbone is not None else config.dim
        self.dim = dim
        self.objective = config.objective
        mdm = config.objective == "mdm"
        self.embed = nn.Embedding(258 if mdm else 257, dim)
        self.backbone = Backbone(backbone, causal=not mdm) if backbone is not None else None
        self.head = OutputHead(dim, 256, bias=False)
        nn.init.normal_(self.embed.weight, std=0.02)
        nn.init.normal_(self.head.weight, std=0.02)
        if mdm:
            self.mdm_setup(config.mdm_schedule, config.mdm_span, mask_id=MASK, n_out=256)

    def logits(self, inputs: torch.Tensor) -> torch.Tensor:
        """inputs (B, T) long -> logits (B, T, 256); position t sees inputs <= t, i.e. bytes < t."""
        x = self.embed(inputs)
        if self.backbone is not None:
            x = self.backbone(x)
        return self.head(x)

    def mdm_units(self, window: bytes, score_from: int) -> MdmUnits:
        """BOS, then one unit per byte; bytes >= score_from are the scored slots."""
        n = len(window)
        return MdmUnits([BOS, *window], 1 + score_from, [(i, i + 1) for i in range(score_from, n)])

    def collate(self, windows: Sequence[bytes], score_from: Sequence[int]) -> TensorBatch:
        if self.objective == "mdm":
            return self.mdm_collate(windows, score_from)
        return super().collate(windows, score_from)

    def forward(self, batch: TensorBatch) -> UnitNLL:  # type: ignore[override]
        if self.objective == "mdm":
            return self.mdm_forward(batch)
        return super().forward(batch)

    def predict_logprobs(self, data: bytes, positions: Sequence[int]) -> dict[int, torch.Tensor]:
        if self.objective == "mdm":
            raise NotImplementedError("objective: mdm has no next-byte distribution; see the MDM leak probe")
        return super().predict_logprobs(data, positions)

    def flops(self, batch: TensorBatch) -> float:
        if self.objective == "mdm":
            R, N = batch["ids"].shape
            f = self.mdm_head_flops(batch, self.dim)
        else:
            R, N = batch["inputs"].shape
            f = 2.0 * R * N * self.dim * 256  # head
        if self.backbone_config is not None:
            f += backbone_flops(self.backbone_config, R, N, causal=self.objective != "mdm")
        return f

    def describe(self) -> dict[str, object]:
        if self.objective != "mdm":
            return {}
        return {"objective": "mdm", "mdm_schedule": self.mdm_schedule, "mdm_span": self.mdm_span}
