"""Encoders: the Encoder interface, the registry, the shared backbone and one package per encoder."""

from encoders.base import (
    BOS,
    ByteLevelEncoder,
    Encoder,
    FitContext,
    TensorBatch,
    UnitNLL,
    byte_unit_nll,
    collate_bytes,
)
from encoders.registry import register

__all__ = [
    "BOS",
    "ByteLevelEncoder",
    "Encoder",
    "FitContext",
    "TensorBatch",
    "UnitNLL",
    "byte_unit_nll",
    "collate_bytes",
    "register",
]
