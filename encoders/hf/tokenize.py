"""``ByteSpanTokenizer``: a Hugging Face fast tokenizer that says which source bytes each token covers.

    tok = ByteSpanTokenizer(AutoTokenizer.from_pretrained(path))
    piece = tok.encode(data, start=True)     # data: bytes; a text's beginning (the tokenizer's own conventions)
    piece = tok.encode(data, start=False)    # a continuation of text already fed (no prefix space added)
    piece.ids                                # (n,) token ids
    piece.unit                               # (n,) int: the unit each token belongs to
    piece.unit_end                           # (u,) int: one past each unit's last byte; units tile [0, len(data))

Any tokenizer with a ``tokenizer.json`` (byte-level BPE like GPT-2's, SentencePiece-style BPE with
byte fallback like Llama's, pure byte vocabularies) maps tokens to *characters* through its offset
mapping; characters map to UTF-8 bytes exactly. A token does not always cover whole characters
(byte-level BPE splits "ö" into two tokens, byte fallback spells it as two ``<0xXX>`` tokens, both
report the character), and a token may cover nothing (a prefix "▁" the tokenizer added). So
tokens are grouped into **units**: the shortest runs of consecutive tokens whose character spans
do not overlap the next run's. A unit's NLL is the sum of its tokens' NLL — the exact probability
of its bytes given what came before — so BPB = ΣNLL / (ln 2 · Σ bytes) whatever the grouping, and
units tile the bytes exactly once (a character no token reports, e.g. dropped by a normalizer,
joins the next unit).

Bytes that are not valid UTF-8 cannot be given to a ``str`` tokenizer: each is fed as U+FFFD and its
unit covers that one byte.

Two encodings from one tokenizer (copies of its ``tokenizer.json`` pipeline, post-processor removed:
the encoder adds the one BOS itself, and no special tokens or offset trimming come from here):
``start`` is the pipeline as it is (a SentencePiece model's "▁" prefix included); ``continuation``
has every prefix addition switched off (``Prepend`` normalizers dropped, ``add_prefix_space`` false,
``prepend_scheme`` never), so text that continues a window's context is encoded as the bytes it is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

_SURROGATES = (0xDC80, 0xDCFF)  # surrogateescape's stand-ins for bytes that are not valid UTF-8


@dataclass(frozen=True)
class Piece:
    """Tokens of one byte string. ids: (n,) int64 token ids. unit: (n,) int64, the unit of each
    token (0-based, non-decreasing). unit_end: (u,) int64, one past the last byte of each unit,
    increasing, the last one equal to the string's byte length (units tile it)."""

    ids: np.ndarray
    unit: np.ndarray
    unit_end: np.ndarray


def _without_prefix(node: Any) -> Any:
    """A normalizer / pre-tokenizer JSON tree with every prefix addition switched off."""
    if isinstance(node, list):
        return [_without_prefix(n) for n in node if not (isinstance(n, dict) and n.get("type") == "Prepend")]
    if not isinstance(node, dict):
        return node
    if node.get("type") == "Prepend":
        return None
    out = {k: _without_prefix(v) for k, v in node.items()}
    if "add_prefix_space" in out:
        out["add_prefix_space"] = False
    if "prepend_scheme" in out:
        out["prepend_scheme"] = "never"
    return out


def char_byte_offsets(text: str) -> np.ndarray:
    """(len(text) + 1,) int64: byte offset of each character of ``text`` in its UTF-8 encoding
    (surrogateescape stand-ins count 1 byte: they are the invalid bytes themselves)."""
    cp = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    n = 1 + (cp >= 0x80).astype(np.int64) + (cp >= 0x800) + (cp >= 0x10000)
    n[(cp >= _SURROGATES[0]) & (cp <= _SURROGATES[1])] = 1
    out = np.zeros(len(cp) + 1, dtype=np.int64)
    np.cumsum(n, out=out[1:])
    return out


def units_from_spans(a: np.ndarray, b: np.ndarray, n_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Group tokens with byte spans [a_i, b_i) (in order; empty where a_i >= b_i) into units.

    A unit ends after token i when every later non-empty token starts at or after the furthest
    byte reached so far (``M_i``), ``M_i`` moved since the last end and bytes remain after it. Returns (unit (n,) of
    each token, unit_end (u,)); the last end is ``n_bytes``."""
    n = len(a)
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    full = b > a  # empty tokens neither reach nor block anything
    reach = np.maximum.accumulate(np.where(full, b, 0))  # (n,) M_i
    starts = np.where(full, a, np.iinfo(np.int64).max)
    later = np.minimum.accumulate(starts[::-1])[::-1]  # later[i] = min start of tokens >= i
    next_min = np.append(later[1:], np.iinfo(np.int64).max)  # of tokens > i
    # an end must leave bytes for the unit after it (trailing empty tokens join the last unit)
    ok = (reach <= next_min) & (reach > 0) & (reach < n_bytes)
    idx = np.flatnonzero(ok[:-1])  # the last unit is closed below, at the end of the bytes
    if idx.size:  # of equal reaches (empty tokens after an end), the first one ends the unit
        idx = idx[np.concatenate(([True], reach[idx[1:]] > reach[idx[:-1]]))]
    step = np.zeros(n, dtype=np.int64)
    step[idx + 1] = 1
    unit = np.cumsum(step)
    ends = np.append(reach[idx], n_bytes).astype(np.int64)
    return unit, ends


class ByteSpanTokenizer:
    """A fast (``tokenizer.json``-backed) Hugging Face tokenizer, encoding bytes into tokens and
    the units that tile them (module docstring)."""

    def __init__(self, hf_tokenizer: Any) -> None:
        backend = getattr(hf_tokenizer, "backend_tokenizer", None)
        if backend is None:
            raise ValueError(f"{type(hf_tokenizer).__name__} is not a fast tokenizer (no tokenizer.json): "
                             "tokbench needs its offset mapping to attribute NLL to bytes")
        from tokenizers import Tokenizer

        spec = json.loads(backend.to_str())
        spec["post_processor"] = None  # no special tokens, no offset trimming
        spec["truncation"] = None
        spec["padding"] = None
        self.start = Tokenizer.from_str(json.dumps(spec))
        cont = dict(spec)
        for key in ("normalizer", "pre_tokenizer"):
            cont[key] = _without_prefix(spec.get(key))
        self.continuation = Tokenizer.from_str(json.dumps(cont))
        self.unk_id = hf_tokenizer.unk_token_id
        self.vocab_size = len(hf_tokenizer)

    def encode(self, data: bytes, start: bool) -> Piece:
        """Tokens and units of ``data`` (module docstring): as a text's beginning when ``start``,
        else as the continuation of text already fed. Raises ValueError when bytes are left
        without tokens or the tokenizer falls back to its unknown token (no byte probability)."""
        if not data:
            z = np.zeros(0, dtype=np.int64)
            return Piece(z, z, z)
        try:
            text = data.decode("utf-8")
            offsets = char_byte_offsets(text)
        except UnicodeDecodeError:  # invalid bytes: each fed as U+FFFD, one byte long
            text = data.decode("utf-8", "surrogateescape")
            offsets = char_byte_offsets(text)
            text = "".join("\ufffd" if _SURROGATES[0] <= ord(c) <= _SURROGATES[1] else c for c in text)
        enc = (self.start if start else self.continuation).encode(text, add_special_tokens=False)
        ids = np.asarray(enc.ids, dtype=np.int64)
        if ids.size == 0:
            raise ValueError(f"the tokenizer gave no tokens for {len(data)} bytes ({data[:40]!r}…)")
        if self.unk_id is not None and bool((ids == self.unk_id).any()):
            raise ValueError(f"the tokenizer maps part of {data[:40]!r}… to its unknown token: "
                             "no probability of those bytes (a vocabulary without byte fallback)")
        ch = np.asarray(enc.offsets, dtype=np.int64).reshape(-1, 2)
        ch = np.clip(ch, 0, len(text))
        unit, ends = units_from_spans(offsets[ch[:, 0]], offsets[ch[:, 1]], len(data))
        return Piece(ids, unit, ends)
