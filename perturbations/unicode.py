"""Unicode noise: ``unicode.nfd``, ``unicode.homoglyph``, ``unicode.strip_diacritics``,
``unicode.styling``.

These change how a text is encoded more than what it says: the same words in other code points
(decomposed accents, Cyrillic look-alikes, mathematical letters). Characters a perturbation has no
mapping for are left as they are; output is always valid Unicode.
"""

from __future__ import annotations

import functools
import unicodedata
from dataclasses import dataclass
from typing import ClassVar, Literal

import numpy as np

from perturbations.chartable import CharTablePerturbation, CodepointPerturbation
from perturbations.checks import check_choice
from perturbations.codepoints import CharTable, selected_words
from perturbations.registry import register
from perturbations.wordsel import WORD_CHARS


def _nfd(ch: str) -> tuple[str, ...]:
    d = unicodedata.normalize("NFD", ch)
    return (d,) if d != ch else ()


NFD = CharTable(func=_nfd)


@register("unicode.nfd")
@dataclass(kw_only=True)
class Decompose(CharTablePerturbation):
    """Canonical decomposition: 'é' (U+00E9) -> 'e' + U+0301. Same text to a reader, other bytes.

    severity: probability that each character with a canonical decomposition (accented letters,
    Hangul syllables, ...) is decomposed, 0-1; 1 decomposes all of them (as NFD does, without
    reordering marks already present).
    """

    def table(self) -> CharTable:
        return NFD


# Latin letter -> look-alikes in Cyrillic and Greek (visually identical in common fonts).
HOMOGLYPHS: dict[str, dict[str, str]] = {
    "cyrillic": {
        "a": "а", "c": "с", "e": "е", "i": "і", "j": "ј", "o": "о", "p": "р", "s": "ѕ", "x": "х",
        "y": "у", "A": "А", "B": "В", "C": "С", "E": "Е", "H": "Н", "I": "І", "J": "Ј", "K": "К",
        "M": "М", "O": "О", "P": "Р", "S": "Ѕ", "T": "Т", "X": "Х", "Y": "Ү",
    },
    "greek": {
        "o": "ο", "v": "ν", "A": "Α", "B": "Β", "E": "Ε", "H": "Η", "I": "Ι", "K": "Κ", "M": "Μ",
        "N": "Ν", "O": "Ο", "P": "Ρ", "T": "Τ", "X": "Χ", "Y": "Υ", "Z": "Ζ",
    },
}  # fmt: skip


@functools.cache
def homoglyph_table(target: str) -> CharTable:
    """Both directions: Latin -> look-alikes in the target scripts, and look-alike -> Latin."""
    scripts = ("cyrillic", "greek") if target == "any" else (target,)
    mapping: dict[str, list[str]] = {}
    for script in scripts:
        for latin, other in HOMOGLYPHS[script].items():
            mapping.setdefault(latin, []).append(other)
            mapping.setdefault(other, []).append(latin)
    return CharTable(mapping=mapping)


@register("unicode.homoglyph")
@dataclass(kw_only=True)
class Homoglyph(CharTablePerturbation):
    """Look-alike substitution across scripts: Latin 'a' <-> Cyrillic 'а', Latin 'O' <-> Greek 'Ο'.

    severity: probability that each character having a look-alike is swapped for one, 0-1.
    Works both ways, so Cyrillic and Greek text gets Latin look-alikes.
    target: any | cyrillic | greek — the scripts whose look-alikes are used.
    """

    target: Literal["any", "cyrillic", "greek"] = "any"

    pick_alternative: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice(self, "target", ("any", "cyrillic", "greek"))

    def table(self) -> CharTable:
        return homoglyph_table(self.target)


def _is_diacritic(ch: str) -> bool:
    """Combining marks that are diacritics (Latin/Greek/Cyrillic accents, Hebrew points, Arabic
    harakat) — not the vowel signs of Indic or Thai scripts, whose removal would delete letters."""
    cp = ord(ch)
    return unicodedata.category(ch) == "Mn" and (
        0x0300 <= cp <= 0x036F
        or 0x1AB0 <= cp <= 0x1AFF
        or 0x1DC0 <= cp <= 0x1DFF
        or 0x20D0 <= cp <= 0x20FF
        or 0xFE20 <= cp <= 0xFE2F
        or 0x0483 <= cp <= 0x0489
        or 0x0591 <= cp <= 0x05C7
        or 0x064B <= cp <= 0x065F
        or cp == 0x0670
    )


def _strip(ch: str) -> tuple[str, ...]:
    if _is_diacritic(ch):
        return ("",)
    d = unicodedata.normalize("NFD", ch)
    if d == ch or not any(_is_diacritic(c) for c in d):
        return ()
    return (unicodedata.normalize("NFC", "".join(c for c in d if not _is_diacritic(c))),)


STRIP = CharTable(func=_strip)


@register("unicode.strip_diacritics")
@dataclass(kw_only=True)
class StripDiacritics(CharTablePerturbation):
    """Remove accents: 'café' -> 'cafe', 'Ζεύς' -> 'Ζευς'; also Hebrew points and Arabic harakat.

    severity: probability that each accented character (precomposed, or a free-standing combining
    diacritic) loses its diacritics, 0-1. Indic and Thai vowel signs are letters, not diacritics,
    and are kept.
    """

    def table(self) -> CharTable:
        return STRIP


# Mathematical Alphanumeric Symbols (U+1D400..): first code point of A..Z, a..z, 0..9 per style,
# and the letters that live elsewhere (the "holes", encoded earlier in Letterlike Symbols).
_MATH: dict[str, tuple[int, int, int | None]] = {
    "bold": (0x1D400, 0x1D41A, 0x1D7CE),
    "italic": (0x1D434, 0x1D44E, None),
    "bold_italic": (0x1D468, 0x1D482, None),
    "script": (0x1D49C, 0x1D4B6, None),
    "bold_script": (0x1D4D0, 0x1D4EA, None),
    "fraktur": (0x1D504, 0x1D51E, None),
    "double_struck": (0x1D538, 0x1D552, 0x1D7D8),
    "sans": (0x1D5A0, 0x1D5BA, 0x1D7E2),
    "sans_bold": (0x1D5D4, 0x1D5EE, 0x1D7EC),
    "monospace": (0x1D670, 0x1D68A, 0x1D7F6),
}
_HOLES: dict[str, dict[str, int]] = {
    "italic": {"h": 0x210E},
    "script": {"B": 0x212C, "E": 0x2130, "F": 0x2131, "H": 0x210B, "I": 0x2110, "L": 0x2112,
               "M": 0x2133, "R": 0x211B, "e": 0x212F, "g": 0x210A, "o": 0x2134},
    "fraktur": {"C": 0x212D, "H": 0x210C, "I": 0x2111, "R": 0x211C, "Z": 0x2128},
    "double_struck": {"C": 0x2102, "H": 0x210D, "N": 0x2115, "P": 0x2119, "Q": 0x211A, "R": 0x211D,
                      "Z": 0x2124},
}  # fmt: skip
STYLES: tuple[str, ...] = (*_MATH, "fullwidth", "circled")
_UPPER, _LOWER, _DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz", "0123456789"


def style_map(style: str) -> dict[str, str]:
    """ASCII letter/digit -> its styled form (every value is an assigned code point)."""
    out: dict[str, str] = {}
    if style == "fullwidth":
        return {chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)}
    if style == "circled":
        out = {ch: chr(0x24B6 + i) for i, ch in enumerate(_UPPER)}
        out.update({ch: chr(0x24D0 + i) for i, ch in enumerate(_LOWER)})
        out.update({str(d): chr(0x2460 + d - 1) for d in range(1, 10)})
        out["0"] = chr(0x24EA)
        return out
    upper, lower, digits = _MATH[style]
    out = {ch: chr(upper + i) for i, ch in enumerate(_UPPER)}
    out.update({ch: chr(lower + i) for i, ch in enumerate(_LOWER)})
    if digits is not None:
        out.update({ch: chr(digits + i) for i, ch in enumerate(_DIGITS)})
    out.update({ch: chr(cp) for ch, cp in _HOLES.get(style, {}).items()})
    return out


@functools.cache
def style_table(style: str) -> CharTable:
    return CharTable(mapping={k: [v] for k, v in style_map(style).items()})


@register("unicode.styling")
@dataclass(kw_only=True)
class Styling(CodepointPerturbation):
    """Styled letters: '𝐛𝐨𝐥𝐝', '𝑖𝑡𝑎𝑙𝑖𝑐', '𝓈𝒸𝓇𝒾𝓅𝓉', '𝔣𝔯𝔞𝔨𝔱𝔲𝔯', 'ｆｕｌｌｗｉｄｔｈ', 'ⓒⓘⓡⓒⓛⓔⓓ' (the
    perturbation TokSuite found to hurt nearly every tokenizer most).

    severity: probability that each word (run of letters and digits) is styled, 0-1; only its
    ASCII letters and digits change (styles without digits keep them).
    style: bold | italic | bold_italic | script | bold_script | fraktur | double_struck | sans |
    sans_bold | monospace | fullwidth | circled | random (a random style per word).
    """

    style: str = "bold"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice(self, "style", (*STYLES, "random"))

    def edit(self, cps: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        words = WORD_CHARS.mask(cps)
        sel = selected_words(words, self.severity, gen)
        styles = STYLES if self.style == "random" else (self.style,)
        # one style per word: word index -> style index
        starts = words & ~np.concatenate(([False], words[:-1]))
        if not starts.any():
            return cps
        word_style = gen.integers(len(styles), size=int(starts.sum()))
        per_char = word_style[np.maximum(np.cumsum(starts) - 1, 0)]
        out = cps.copy()
        for i, style in enumerate(styles):
            table = style_table(style)
            pos = np.flatnonzero(sel & (per_char == i) & table.mask(cps))
            if pos.size:  # every styled form is one code point: assign in place
                reps = table.first(table.lookup(cps[pos]))
                out[pos] = table.flat[table.rep_off[reps]]
        return out
