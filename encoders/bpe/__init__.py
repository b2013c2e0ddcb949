"""``bpe``: the BPE baseline. Byte-level BPE merges learned on the suite's training split (or a local
``.tiktoken`` rank file), encoded by tiktoken offline; token embedding -> shared backbone -> V-way
head; token NLL summed per window and divided by the window's bytes."""

from encoders.bpe.model import BpeConfig, BpeEncoder
from encoders.bpe.tokenizer import PATTERNS, BpeTokenizer

__all__ = ["PATTERNS", "BpeConfig", "BpeEncoder", "BpeTokenizer"]
