"""``blt``: Byte Latent Transformer — bytes grouped into patches where a small byte LM (the
entropy model) is uncertain, a latent transformer (the shared backbone) over patches, and a local
decoder back to next-byte predictions. ``patching: space`` and ``patching: static`` are the
ablations the BLT paper compares against. See ``encoders/blt/model.py`` for the causal layout."""

from encoders.blt.model import BltConfig, BltEncoder
from encoders.blt.patching import patch_starts

__all__ = ["BltConfig", "BltEncoder", "patch_starts"]
