"""Benchmark (not a test): time to learn a byte-level BPE vocabulary on ~5 MB of real text.

    python benchmarks/bpe_train.py                      # 4096 tokens on 5 MB of the stdlib sources
    python benchmarks/bpe_train.py --vocab 16384 --mb 10 --hf

Corpus: this Python's standard-library ``*.py`` files, concatenated in name order up to ``--mb``
megabytes (always present, no download). Prints seconds to train, then tiktoken encode speed and
bytes/token on the same text; ``--hf`` also times the ``tokenizers`` library's BpeTrainer on the same
documents for comparison (its regex pre-tokenizer is the ByteLevel/GPT-2 one).
"""

from __future__ import annotations

import argparse
import sys
import sysconfig
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from encoders.bpe.tokenizer import BpeTokenizer, pretoken_counts  # noqa: E402
from encoders.bpe.trainer import train_merges  # noqa: E402


def stdlib_corpus(n_bytes: int) -> list[bytes]:
    """Standard-library sources in name order, the last one cut so the total is ``n_bytes``."""
    docs: list[bytes] = []
    total = 0
    for p in sorted(Path(sysconfig.get_paths()["stdlib"]).rglob("*.py")):
        if total >= n_bytes:
            break
        d = p.read_bytes()[: n_bytes - total]
        docs.append(d)
        total += len(d)
    return docs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--mb", type=float, default=5.0)
    ap.add_argument("--pattern", default="gpt2")
    ap.add_argument("--hf", action="store_true", help="also time the tokenizers library trainer")
    args = ap.parse_args()
    docs = stdlib_corpus(int(args.mb * 1e6))
    n = sum(map(len, docs))
    print(f"corpus: {len(docs)} stdlib files, {n:,} bytes")

    t0 = time.perf_counter()
    counts = pretoken_counts(docs, args.pattern)
    t1 = time.perf_counter()
    vocab, merges = train_merges(counts, args.vocab)
    t2 = time.perf_counter()
    tok = BpeTokenizer({t: i for i, t in enumerate(vocab)}, args.pattern, merges)
    t3 = time.perf_counter()
    print(
        f"tokbench trainer: vocab {len(vocab)} in {t3 - t0:.2f} s "
        f"(pre-tokenize {t1 - t0:.2f} s, {len(counts):,} distinct pre-tokens; merges {t2 - t1:.2f} s; "
        f"tiktoken build {t3 - t2:.2f} s)"
    )
    t0 = time.perf_counter()
    n_tok = sum(len(tok.encode(d)) for d in docs)
    t1 = time.perf_counter()
    print(f"tiktoken encode: {n / (t1 - t0) / 1e6:.1f} MB/s, {n / n_tok:.3f} bytes/token")

    if args.hf:
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        hf = Tokenizer(models.BPE())
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(
            vocab_size=args.vocab,
            min_frequency=2,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        texts = [d.decode("utf-8", "replace") for d in docs]
        t0 = time.perf_counter()
        hf.train_from_iterator(texts, trainer)
        print(
            f"tokenizers BpeTrainer (Rust): vocab {hf.get_vocab_size()} in {time.perf_counter() - t0:.2f} s"
        )


if __name__ == "__main__":
    main()
