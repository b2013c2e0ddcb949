"""Surprisal-coloured text: the same document, clean and perturbed, once per encoder, each
character shaded by how surprised the encoder was.

A character's NLL is the sum of the per-byte NLL (``byte_nll``, nats) over its UTF-8 bytes
(``scored_text.encode("utf-8", "surrogateescape")`` gives the scored bytes back, so a stray
non-UTF-8 byte is its own one-byte "character"). The shade is that sum divided by the character's
bytes, in bits per byte, so a 3-byte CJK character and a 1-byte Latin letter use the same scale;
the tooltip gives the character's total in bits. Output is plain data (text pieces + CSS class);
the Jinja template escapes it, so corpus text can never become markup.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from core.metrics import LN2
from core.schema import CLEAN_ID

# Upper edges (bits/byte) of the shade classes s0..s7; the last class is open-ended.
BIN_EDGES = (0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0)
BIN_LABELS = ("<0.5", "0.5–1", "1–2", "2–3", "3–4", "4–6", "6–8", "≥8")


@dataclass
class Piece:
    """One displayed character: text (safe to escape and encode), shade class, tooltip, and
    whether an encoder segment (token / patch) starts here."""

    text: str
    cls: str
    title: str
    seg_start: bool = False


@dataclass
class Line:
    encoder: str
    pieces: list[Piece]
    bpb: float  # bits per byte over the whole scored text of this sample
    n_bytes: int
    truncated: bool
    error: str = ""


@dataclass
class Variant:
    label: str  # "clean" or "typo.keyboard @ 0.2"
    lines: list[Line] = field(default_factory=list)


@dataclass
class SampleView:
    dataset: str
    doc_id: str
    language: str
    script: str
    seed: int
    mode: str
    variants: list[Variant] = field(default_factory=list)


def shade_class(bits_per_byte: float) -> str:
    for i, edge in enumerate(BIN_EDGES):
        if bits_per_byte < edge:
            return f"s{i}"
    return f"s{len(BIN_EDGES)}"


def visible(ch: str) -> str:
    """A displayable form of one character: control characters become their Unicode control
    pictures, lone surrogates (undecodable bytes) become ``\\xHH``; newlines stay newlines."""
    o = ord(ch)
    if 0xDC80 <= o <= 0xDCFF:
        return f"\\x{o - 0xDC00:02x}"
    if 0xD800 <= o <= 0xDFFF:
        return "\ufffd"
    if ch in "\n\t":
        return ch
    if o < 0x20:
        return chr(0x2400 + o)
    if o == 0x7F:
        return "\u2421"
    if unicodedata.category(ch) in ("Cc", "Cs"):
        return "\ufffd"
    return ch


def char_pieces(scored_text: str, byte_nll: list[float], segments: list[int] | None,
                max_chars: int) -> tuple[list[Piece], bool]:
    """Per-character pieces for the first ``max_chars`` characters.

    Raises ValueError when the number of scored bytes and of per-byte NLL values differ.
    """
    data = scored_text.encode("utf-8", "surrogateescape")
    if len(data) != len(byte_nll):
        raise ValueError(f"scored_text has {len(data)} bytes but byte_nll has {len(byte_nll)} values")
    starts: set[int] = set()
    if segments:
        pos = 0
        for n in segments:
            starts.add(pos)
            pos += int(n)
    pieces = []
    pos = 0
    for i, ch in enumerate(scored_text):
        if i >= max_chars:
            return pieces, True
        nb = len(ch.encode("utf-8", "surrogateescape"))
        bits = sum(byte_nll[pos:pos + nb]) / LN2
        cp = f"U+{ord(ch):04X}"
        pieces.append(Piece(visible(ch), shade_class(bits / nb), f"{cp} · {nb} B · {bits:.2f} bits",
                            bool(segments) and pos in starts and pos > 0))
        pos += nb
    return pieces, False


def build_samples(texts: list[dict[str, Any]], encoders: list[str], max_chars: int = 400,
                  max_docs: int = 12, max_variants: int = 4) -> list[SampleView]:
    """Pick one document per (eval set, document script) — so a mixed-script set shows each of
    its scripts — (lowest seed, full mode if present) that every encoder scored clean, and show
    it clean plus at the highest severity of up to ``max_variants - 1`` perturbations that all
    encoders also scored on that document."""
    if not texts:
        return []
    modes = {t.get("mode") for t in texts}
    mode = "full" if "full" in modes else next(iter(sorted(m for m in modes if m)), "full")
    seed = min(int(t.get("seed", 0)) for t in texts)
    by: dict[tuple, dict[str, dict[str, Any]]] = {}
    for t in texts:
        if t.get("mode") != mode or int(t.get("seed", 0)) != seed:
            continue
        key = (t.get("dataset", ""), str(t.get("doc_id")), t["perturbation_id"],
               float(t.get("severity") or 0.0))
        by.setdefault(key, {})[t["encoder"]] = t
    present = [e for e in encoders if any(e in v for v in by.values())]
    views: list[SampleView] = []
    seen: set[tuple[str, str]] = set()
    for (ds, doc, pid, _sev), encs in by.items():
        if pid != CLEAN_ID or set(present) - set(encs):
            continue
        first = next(iter(encs.values()))
        if (ds, str(first.get("script") or "")) in seen:
            continue
        seen.add((ds, str(first.get("script") or "")))
        view = SampleView(ds, doc, str(first.get("language") or ""), str(first.get("script") or ""),
                          seed, mode)
        view.variants.append(_variant("clean", encs, present, max_chars))
        # highest severity per perturbation id on this document, all encoders present
        top: dict[str, tuple[float, dict[str, dict[str, Any]]]] = {}
        for (ds2, doc2, pid2, sev2), encs2 in by.items():
            if ds2 == ds and doc2 == doc and pid2 != CLEAN_ID and not set(present) - set(encs2):
                if pid2 not in top or sev2 > top[pid2][0]:
                    top[pid2] = (sev2, encs2)
        for pid2 in _diverse(list(top), max_variants - 1):
            sev2, encs2 = top[pid2]
            view.variants.append(_variant(f"{pid2} @ {sev2:g}", encs2, present, max_chars))
        views.append(view)
        if len(views) >= max_docs:
            break
    return views


def _diverse(pids: list[str], k: int) -> list[str]:
    """Up to ``k`` perturbation ids, one per family (name before the first dot) first, in order."""
    first, rest, fams = [], [], set()
    for p in pids:
        fam = p.split(".", 1)[0]
        (rest if fam in fams else first).append(p)
        fams.add(fam)
    return (first + rest)[:k]


def _variant(label: str, encs: dict[str, dict[str, Any]], encoders: list[str], max_chars: int
             ) -> Variant:
    v = Variant(label)
    for enc in encoders:
        s = encs[enc]
        nll = [float(x) for x in s["byte_nll"]]
        try:
            pieces, trunc = char_pieces(s["scored_text"], nll, s.get("segments"), max_chars)
            err = ""
        except ValueError as e:
            pieces, trunc, err = [], False, str(e)
        n = len(nll)
        v.lines.append(Line(enc, pieces, sum(nll) / (LN2 * n) if n else math.nan, n, trunc, err))
    return v
