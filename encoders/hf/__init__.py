"""``hf``: a causal LM trained elsewhere (a local ``transformers`` checkpoint and its tokenizer),
scored through the same windows, units and BPB as every encoder; never trained by the suite.
Needs the optional ``transformers`` dependency (``pip install 'tokbench[hf]'``)."""

from encoders.hf.model import HfConfig, HfEncoder
from encoders.hf.tokenize import ByteSpanTokenizer

__all__ = ["ByteSpanTokenizer", "HfConfig", "HfEncoder"]
