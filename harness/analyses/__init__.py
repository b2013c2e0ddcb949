"""Per-word analyses over per-byte NLL (e.g. morphology buckets). See ``base.Analysis``."""

from harness.analyses.base import ANALYSES, BUILTIN_MODULES, Analysis, register_analysis

__all__ = ["ANALYSES", "BUILTIN_MODULES", "Analysis", "register_analysis"]
