"""``BpeTokenizer``: byte-level BPE trained here (or read from a local ``.tiktoken`` file), run by tiktoken.

    tok = BpeTokenizer.train([b"some text", ...], vocab_size=4096)   # or .from_file("cl100k_base.tiktoken")
    ids = tok.encode(data)              # any bytes -> list[int]
    tok.decode(ids) == data             # always, byte for byte
    ids, spans = tok.encode_with_offsets(data)   # spans[i] = (start, end) byte offsets of token i

Nothing here touches the network: tiktoken's ``get_encoding`` would download its files, so the
``tiktoken.Encoding`` is built from our own mergeable ranks.

Any bytes round-trip. Input is split into maximal valid UTF-8 runs and the bytes between them that
are not valid UTF-8 (stray continuation bytes, truncated sequences, UTF-8-encoded surrogates, Latin-1
bytes). Each valid run goes through tiktoken's regex pre-tokenizer and merges; each invalid byte
becomes its own single-byte token. So an invalid byte never changes how the valid text around it
is split, and no string is ever re-encoded with replacement characters (tiktoken's ``str`` path
silently turns lone surrogates into U+FFFD, and its private ``_encode_bytes`` stops applying the
regex after the first invalid byte).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import regex
import tiktoken

from encoders.bpe.trainer import train_merges

# Pre-tokenizer regexes (the ones tiktoken uses for gpt2 / cl100k_base), selectable by name.
PATTERNS: dict[str, str] = {
    "gpt2": r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    "cl100k": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
}

# surrogateescape maps each undecodable byte 0x80-0xFF to U+DC80-U+DCFF; runs of them are the
# invalid bytes.
_ESCAPED = re.compile("[\udc80-\udcff]+")


def resolve_pattern(pattern: str) -> str:
    """A pattern name from ``PATTERNS`` or a regex (``regex`` module syntax) -> the regex.
    Raises a one-line ValueError if the regex does not compile."""
    pat = PATTERNS.get(pattern, pattern)
    try:
        regex.compile(pat)
    except regex.error as e:
        raise ValueError(f"bpe pattern {pattern!r} is not a valid regex: {e}") from None
    return pat


def split_utf8(data: bytes) -> Iterator[str | int]:
    """Maximal valid UTF-8 runs of ``data`` as ``str`` and every other byte as an ``int``, in order.
    Concatenating the runs' UTF-8 and the bytes gives ``data`` back."""
    try:
        if data:
            yield data.decode("utf-8")
        return
    except UnicodeDecodeError:
        pass
    text = data.decode("utf-8", "surrogateescape")
    pos = 0
    for m in _ESCAPED.finditer(text):
        if m.start() > pos:
            yield text[pos : m.start()]
        for ch in m.group():
            yield ord(ch) - 0xDC00
        pos = m.end()
    if pos < len(text):
        yield text[pos:]


def pretoken_counts(texts: Iterable[bytes | str], pattern: str) -> Counter[bytes]:
    """Occurrences of every pre-token (bytes) in the valid UTF-8 runs of ``texts``; invalid bytes are
    skipped, as they are always single-byte tokens."""
    rx = regex.compile(resolve_pattern(pattern))
    counts: Counter[str] = Counter()
    for t in texts:
        data = t.encode("utf-8", "surrogatepass") if isinstance(t, str) else t
        for run in split_utf8(data):
            if isinstance(run, str):
                counts.update(rx.findall(run))
    return Counter({k.encode("utf-8"): v for k, v in counts.items()})


def merge_key(fingerprint: str, vocab_size: int, pattern: str, min_frequency: int = 2) -> str:
    """Cache key of trained merges: sha256 over the corpus fingerprint, vocab size, regex and
    minimum pair frequency (everything the merges depend on)."""
    h = hashlib.sha256(
        f"{fingerprint}|{vocab_size}|{resolve_pattern(pattern)}|{min_frequency}".encode()
    )
    return h.hexdigest()


class BpeTokenizer:
    """Byte-level BPE with tiktoken as the encoder.

    ranks: ``{token bytes: id}``; must contain all 256 single bytes (so every byte string is
    encodable); ids need not be contiguous (``n_vocab`` = largest id + 1). merges: the trainer's
    ``(left id, right id)`` list when trained here (None when loaded from a file).
    """

    def __init__(
        self,
        ranks: dict[bytes, int],
        pattern: str = "gpt2",
        merges: Sequence[tuple[int, int]] | None = None,
        name: str = "tokbench-bpe",
    ) -> None:
        missing = [b for b in range(256) if bytes([b]) not in ranks]
        if missing:
            raise ValueError(
                f"BPE ranks lack {len(missing)} single-byte tokens (e.g. {bytes(missing[:4])!r}); "
                "every byte needs a token"
            )
        if len(set(ranks.values())) != len(ranks) or min(ranks.values()) < 0:
            raise ValueError("BPE ranks must be distinct non-negative integers")
        self.pattern = pattern
        self.regex = resolve_pattern(pattern)
        self.ranks = dict(ranks)
        self.merges = list(merges) if merges is not None else None
        self.encoding = tiktoken.Encoding(
            name=name, pat_str=self.regex, mergeable_ranks=self.ranks, special_tokens={}
        )
        self.n_vocab = max(self.ranks.values()) + 1
        self.byte_id = [self.ranks[bytes([b])] for b in range(256)]
        self.token_len = [0] * self.n_vocab  # bytes per id; 0 for ids that are holes in the ranks
        for t, r in self.ranks.items():
            self.token_len[r] = len(t)

    # -- construction ----------------------------------------------------------------------------
    @classmethod
    def train(
        cls,
        texts: Iterable[bytes | str],
        vocab_size: int,
        pattern: str = "gpt2",
        min_frequency: int = 2,
    ) -> BpeTokenizer:
        """Learn merges on ``texts`` until ``vocab_size`` tokens (256 bytes included) or until no
        pair occurs ``min_frequency`` times. Deterministic for the same input."""
        vocab, merges = train_merges(pretoken_counts(texts, pattern), vocab_size, min_frequency)
        return cls({t: i for i, t in enumerate(vocab)}, pattern, merges)

    @classmethod
    def from_file(cls, path: str | Path, pattern: str = "gpt2") -> BpeTokenizer:
        """Read a local ``.tiktoken`` rank file (lines ``<base64 token> <rank>``). Never downloads:
        a missing or malformed file is a one-line ValueError naming the path."""
        p = Path(path)
        if not p.is_file():
            raise ValueError(f"BPE rank file not found: {p}")
        ranks: dict[bytes, int] = {}
        with p.open("rb") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                parts = line.split()
                try:
                    if len(parts) != 2:
                        raise ValueError
                    ranks[base64.b64decode(parts[0], validate=True)] = int(parts[1])
                except ValueError:
                    raise ValueError(
                        f"{p}:{lineno}: expected '<base64 token> <rank>', got {line[:60]!r}"
                    ) from None
        if not ranks:
            raise ValueError(f"BPE rank file is empty: {p}")
        try:
            return cls(ranks, pattern, name=p.stem)
        except ValueError as e:
            raise ValueError(f"{p}: {e}") from None

    def to_file(self, path: str | Path) -> None:
        """Write the ranks in tiktoken's ``.tiktoken`` format (rank order)."""
        lines = [
            base64.b64encode(t) + b" " + str(r).encode()
            for t, r in sorted(self.ranks.items(), key=lambda kv: kv[1])
        ]
        Path(path).write_bytes(b"\n".join(lines) + b"\n")

    # -- encoding --------------------------------------------------------------------------------
    def encode(self, data: bytes) -> list[int]:
        """Any bytes -> token ids (valid UTF-8 runs through tiktoken, other bytes one token each)."""
        ids: list[int] = []
        enc = self.encoding.encode_ordinary
        for run in split_utf8(data):
            if isinstance(run, str):
                ids.extend(enc(run))
            else:
                ids.append(self.byte_id[run])
        return ids

    def decode(self, ids: Sequence[int]) -> bytes:
        """Token ids -> bytes; ``decode(encode(b)) == b`` for every ``b``."""
        return self.encoding.decode_bytes(list(ids))

    def encode_with_offsets(self, data: bytes) -> tuple[list[int], list[tuple[int, int]]]:
        """Token ids and each token's ``(start, end)`` byte span in ``data``; spans tile ``data``."""
        ids = self.encode(data)
        spans: list[tuple[int, int]] = []
        pos = 0
        lens = self.token_len
        for i in ids:
            spans.append((pos, pos + lens[i]))
            pos += lens[i]
        return ids, spans

    def token_bytes(self, i: int) -> bytes:
        return self.encoding.decode_single_token_bytes(i)

    def state(self) -> dict[str, object]:
        """Plain types only (str, int, list, bytes), so ``torch.load(weights_only=True)`` reads it."""
        order = sorted(self.ranks.items(), key=lambda kv: kv[1])
        return {
            "pattern": self.pattern,
            "tokens": [t for t, _ in order],
            "ids": [r for _, r in order],
            "merges": [list(m) for m in self.merges] if self.merges is not None else None,
        }

    @classmethod
    def from_state(cls, state: dict[str, object]) -> BpeTokenizer:
        tokens, ids, merges = state["tokens"], state["ids"], state["merges"]
        assert isinstance(tokens, list) and isinstance(ids, list)
        return cls(
            dict(zip(tokens, ids)),
            str(state["pattern"]),
            [tuple(m) for m in merges] if isinstance(merges, list) else None,  # type: ignore[misc]
        )
