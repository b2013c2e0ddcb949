"""``fuzzytok``: the vocabulary-free encoder. Raw bytes -> embedding -> residual blocks of dilated
causal convolutions (own Triton kernels, PyTorch reference beside them) -> LayerNorm + linear ->
one vector per byte -> shared backbone (or none) -> next-byte head. Receptive field
1 + blocks · (K − 1) · Σ dilations bytes (43 with the defaults)."""

from encoders.fuzzytok.model import FuzzyTokConfig, FuzzyTokEncoder
from encoders.fuzzytok.ops import conv_block, dilated_causal_conv
from encoders.fuzzytok.reference import conv_block_ref, dilated_causal_conv_ref

__all__ = [
    "FuzzyTokConfig",
    "FuzzyTokEncoder",
    "conv_block",
    "conv_block_ref",
    "dilated_causal_conv",
    "dilated_causal_conv_ref",
]
