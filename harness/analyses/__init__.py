"""Per-word analyses over per-byte NLL (e.g. morphology buckets). See ``base.Analysis``."""

from harness.analyses.base import Analysis
from harness.analyses.registry import REGISTRY, register

__all__ = ["REGISTRY", "Analysis", "register"]
