"""BPE trainer: merges checked by hand on a toy corpus, determinism, and tiktoken == the trainer's
own reference encoder on real text."""

from __future__ import annotations

import json
from pathlib import Path

import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from encoders.bpe.tokenizer import BpeTokenizer, pretoken_counts
from encoders.bpe.trainer import apply_merges, train_merges

# The classic toy corpus: {word: count}.
TOY = {b"hug": 10, b"pug": 5, b"pun": 12, b"bun": 4, b"hugs": 5}


def new_tokens(vocab: list[bytes]) -> list[bytes]:
    return vocab[256:]


def test_toy_merges_by_hand() -> None:
    # Pair counts: ug 10+5+5=20, pu 5+12=17, un 12+4=16, hu 10+5=15, gs 5, bu 4 -> "ug" first.
    # Then un 16; then h+ug 15; then p+un 12; then a tie at 5 between p+ug and hug+s, broken by the
    # smaller (left bytes, right bytes): b"hug" < b"p" -> "hugs" before "pug"; then b+un 4.
    vocab, merges = train_merges(TOY, vocab_size=1000, min_frequency=2)
    assert new_tokens(vocab) == [b"ug", b"un", b"hug", b"pun", b"hugs", b"pug", b"bun"]
    u, g, n, h = ord("u"), ord("g"), ord("n"), ord("h")
    assert merges[:3] == [(u, g), (u, n), (h, 256)]
    # Every word is now one token: training stopped early, below vocab_size.
    assert len(vocab) == 263


def test_vocab_size_and_min_frequency_stop_training() -> None:
    vocab, _ = train_merges(TOY, vocab_size=258)
    assert new_tokens(vocab) == [b"ug", b"un"]
    # With min_frequency 6 the tie at 5 and "bun" (4) are never merged.
    vocab, _ = train_merges(TOY, vocab_size=1000, min_frequency=6)
    assert new_tokens(vocab) == [b"ug", b"un", b"hug", b"pun"]


def test_overlapping_pairs_merge_left_to_right() -> None:
    # "aaa" holds the pair (a, a) twice, overlapping: it counts twice (10 + 10) but only one merge
    # fits; "aaaa" gives two merges. After "aa": (aa, a) occurs 10 times, (aa, aa) 3 times.
    vocab, merges = train_merges({b"aaa": 10, b"aaaa": 3}, vocab_size=1000)
    assert new_tokens(vocab) == [b"aa", b"aaa", b"aaaa"]
    assert merges == [(97, 97), (256, 97), (256, 256)]


def test_training_is_deterministic_and_order_free() -> None:
    a = train_merges(TOY, 300)
    b = train_merges(dict(reversed(list(TOY.items()))), 300)
    assert a == b


def naive_train(counts: dict[bytes, int], vocab_size: int) -> list[bytes]:
    """Obviously correct and slow: recount every pair before every merge."""
    words = {w: [bytes([x]) for x in w] for w in counts}
    vocab: list[bytes] = []
    while 256 + len(vocab) < vocab_size:
        pairs: dict[tuple[bytes, bytes], int] = {}
        for w, syms in words.items():
            for pair in zip(syms, syms[1:]):
                pairs[pair] = pairs.get(pair, 0) + counts[w]
        if not pairs:
            break
        best = min(pairs, key=lambda pr: (-pairs[pr], pr))
        if pairs[best] < 2:
            break
        vocab.append(best[0] + best[1])
        for w, syms in words.items():
            out, i = [], 0
            while i < len(syms):
                if i + 1 < len(syms) and (syms[i], syms[i + 1]) == best:
                    out.append(best[0] + best[1])
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            words[w] = out
    return vocab


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.binary(min_size=1, max_size=40).map(lambda b: bytes(97 + x % 3 for x in b)),
        st.integers(1, 9),
        max_size=12,
    ),
    st.integers(256, 300),
)
def test_incremental_trainer_equals_naive_recount(
    counts: dict[bytes, int], vocab_size: int
) -> None:
    # Small alphabets and long words make many overlapping and adjacent occurrences ("aaaa").
    vocab, _ = train_merges(counts, vocab_size)
    assert new_tokens(vocab) == naive_train(counts, vocab_size)


def test_merges_never_cross_pretokens() -> None:
    # GPT-2 split: "ab", " ab", " ab", " ab". "b " never appears inside a pre-token.
    tok = BpeTokenizer.train([b"ab ab ab ab"], vocab_size=300)
    learned = [t for t, r in tok.ranks.items() if r >= 256]
    assert learned == [b"ab", b" ab"]
    assert tok.encode(b"ab ab") == [256, 257]


def test_pretoken_counts_skip_invalid_bytes() -> None:
    counts = pretoken_counts([b"hi\xffhi", "hi"], "gpt2")
    assert counts == {b"hi": 3}


def _sample_text() -> tuple[list[bytes], bytes]:
    here = Path(json.__file__).parent
    train = [p.read_bytes() for p in sorted(here.glob("*.py"))]
    train.append(
        "Grüße aus Köln — Ελληνικά κείμενα, русский текст, 日本語のテキスト。\n".encode() * 20
    )
    held_out = Path(regex.__file__).read_bytes()[:30_000] + "Straße κείμενο текст 日本\n".encode()
    return train, held_out


def test_tiktoken_matches_reference_encoder() -> None:
    train, held_out = _sample_text()
    tok = BpeTokenizer.train(train, vocab_size=700)
    assert tok.merges is not None and len(tok.ranks) == 700
    merge_rank = {m: k for k, m in enumerate(tok.merges)}
    merged = [tok.ranks[tok.token_bytes(a) + tok.token_bytes(b)] for a, b in tok.merges]
    ref: list[int] = []
    for piece in regex.findall(tok.regex, held_out.decode("utf-8")):
        ref.extend(apply_merges(piece.encode("utf-8"), merge_rank, merged))
    ids = tok.encode(held_out)
    assert len(ids) < len(held_out) / 2  # merges really apply
    assert ids == ref
