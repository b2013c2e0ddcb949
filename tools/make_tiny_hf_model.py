"""Make a small Hugging Face causal LM with random weights and a tokenizer trained here, offline.

    python tools/make_tiny_hf_model.py ./tiny-hf-model                    # GPT-2, byte-level BPE
    python tools/make_tiny_hf_model.py ./tiny-llama --family llama        # Llama, byte-fallback BPE
    python tools/make_tiny_hf_model.py ./tiny-bytes --family bytes        # GPT-2, one token per byte

The folder holds what ``save_pretrained`` writes (``config.json``, ``model.safetensors``,
``tokenizer.json``, ...): what ``{name: hf, path: ./tiny-hf-model}`` in a suite loads
(``suites/hf_example.yaml``, docs/encoders.md). Nothing is downloaded: the tokenizer is trained
with the ``tokenizers`` library on a few kilobytes of text embedded here and the weights are a
seeded random draw, so its BPB measures nothing but the plumbing. The tests and
``benchmarks/bench_hf_score.py`` build their models with ``build``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

# A little text of mixed kinds (prose, code, digits, non-Latin scripts) for the tokenizer to learn on.
SAMPLE = """\
The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs!
It was the best of times, it was the worst of times, it was the age of wisdom.
def add(a, b):\n    return a + b  # 1234 + 5678 = 6912\n
Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich. Où est la gare ? Ça va.
Съешь же ещё этих мягких французских булок, да выпей чаю. 我能吞下玻璃而不伤身体。
""" * 8

FAMILIES = ("gpt2", "llama", "bytes")


def train_tokenizer(family: str, vocab_size: int, texts: list[str]) -> Any:
    """A ``tokenizers.Tokenizer`` of ``family``: ``gpt2`` — byte-level BPE (GPT-2's pre-tokenizer
    and decoder); ``llama`` — SentencePiece-style BPE on "▁"-joined words with byte fallback (the
    256 ``<0xXX>`` tokens), as Llama 2's ``tokenizer.json`` is; ``bytes`` — byte-level with no
    merges: one token per byte. Special tokens: ``<|endoftext|>`` (gpt2, bytes) or ``<unk>``,
    ``<s>``, ``</s>`` (llama)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    if family in ("gpt2", "bytes"):
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        alphabet = pre_tokenizers.ByteLevel.alphabet()
        size = 257 if family == "bytes" else vocab_size
        trainer = trainers.BpeTrainer(vocab_size=size, special_tokens=["<|endoftext|>"],
                                      initial_alphabet=alphabet, show_progress=False)
        tok.train_from_iterator(texts if family == "gpt2" else [""], trainer)
        return tok
    if family == "llama":
        tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
        tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                         decoders.Fuse(), decoders.Strip(" ", 1, 0)])
        byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>", *byte_tokens],
                                      show_progress=False)
        tok.train_from_iterator(texts, trainer)
        return tok
    raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")


def build(out: Path | str, family: str = "gpt2", *, vocab_size: int = 512, dim: int = 32, layers: int = 2,
          heads: int = 2, positions: int = 2048, seed: int = 0, texts: list[str] | None = None) -> Path:
    """Write a causal LM of ``family`` (random weights, seed ``seed``) and its tokenizer to ``out``
    with ``save_pretrained``; returns ``out``. dim/layers/heads: the transformer's width, depth
    and heads; positions: its longest input in tokens."""
    import torch
    from transformers import (
        GPT2Config,
        GPT2LMHeadModel,
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
    )

    out = Path(out)
    tok = train_tokenizer(family, vocab_size, texts or [SAMPLE])
    if family == "llama":
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
        config: Any = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=dim, intermediate_size=4 * dim,
                                  num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                                  max_position_embeddings=positions, bos_token_id=fast.bos_token_id,
                                  eos_token_id=fast.eos_token_id, pad_token_id=None)
        model_cls: Any = LlamaForCausalLM
    else:
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>")
        config = GPT2Config(vocab_size=tok.get_vocab_size(), n_embd=dim, n_layer=layers, n_head=heads,
                            n_positions=positions, bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id)
        model_cls = GPT2LMHeadModel
    torch.manual_seed(seed)
    model = model_cls(config)
    model.save_pretrained(out)
    fast.save_pretrained(out)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="folder to write the model and tokenizer to")
    ap.add_argument("--family", choices=FAMILIES, default="gpt2")
    ap.add_argument("--vocab-size", type=int, default=512)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    path = build(a.out, a.family, vocab_size=a.vocab_size, dim=a.dim, layers=a.layers, seed=a.seed)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
