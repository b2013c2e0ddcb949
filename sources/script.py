"""ISO 15924 script of a text, detected from its code points.

``detect_script(text) -> str`` counts the *letters* of a text per script (Unicode general category
L* or M*, looked up in a table of code-point blocks below) and names the text's script:

* no letter at all (digits, punctuation, symbols, whitespace, empty text) → ``"Zyyy"`` (Common);
* combining marks outside a script block (U+0300–036F …) are ``Zinh`` (Inherited) and are ignored,
  as they take the script of their base letter;
* Han mixed with Hiragana/Katakana → ``"Jpan"``; Han mixed with Hangul → ``"Kore"``; Han alone →
  ``"Hani"`` (simplified and traditional are not told apart);
* a non-Latin script that holds at least ``NON_LATIN_MIN_SHARE`` (25 %) of the letters wins over
  Latin, because technical text in every language embeds Latin identifiers (a Japanese man page is
  Japanese even when half its letters are option names);
* two non-Latin scripts each above that share → ``"Mixd"``; otherwise the script with the most
  letters if it holds at least half of them, else ``"Mixd"``.

``"Mixd"`` is not an ISO 15924 code; tokbench uses it (as results.csv documents) for text with no
dominant script. Letters of scripts missing from the table count as ``"Zzzz"`` (unknown).
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections import Counter

# A letter share a non-Latin script needs to name a text that also has Latin letters.
NON_LATIN_MIN_SHARE = 0.25

# (first, last, script): letter blocks. Order does not matter; they are sorted below.
_BLOCKS: list[tuple[int, int, str]] = [
    (0x0041, 0x005A, "Latn"), (0x0061, 0x007A, "Latn"), (0x00AA, 0x00AA, "Latn"),
    (0x00BA, 0x00BA, "Latn"), (0x00C0, 0x024F, "Latn"), (0x0250, 0x02AF, "Latn"),
    (0x1D00, 0x1D7F, "Latn"), (0x1E00, 0x1EFF, "Latn"), (0x2C60, 0x2C7F, "Latn"),
    (0xA720, 0xA7FF, "Latn"), (0xAB30, 0xAB6F, "Latn"), (0xFB00, 0xFB06, "Latn"),
    (0xFF21, 0xFF3A, "Latn"), (0xFF41, 0xFF5A, "Latn"),
    (0x0370, 0x03FF, "Grek"), (0x1F00, 0x1FFF, "Grek"),
    (0x0400, 0x052F, "Cyrl"), (0x1C80, 0x1C8F, "Cyrl"), (0x2DE0, 0x2DFF, "Cyrl"),
    (0xA640, 0xA69F, "Cyrl"),
    (0x0530, 0x058F, "Armn"), (0xFB13, 0xFB17, "Armn"),
    (0x0590, 0x05FF, "Hebr"), (0xFB1D, 0xFB4F, "Hebr"),
    (0x0600, 0x06FF, "Arab"), (0x0750, 0x077F, "Arab"), (0x0870, 0x08FF, "Arab"),
    (0xFB50, 0xFDFF, "Arab"), (0xFE70, 0xFEFF, "Arab"),
    (0x0700, 0x074F, "Syrc"), (0x0780, 0x07BF, "Thaa"),
    (0x0900, 0x097F, "Deva"), (0xA8E0, 0xA8FF, "Deva"),
    (0x0980, 0x09FF, "Beng"), (0x0A00, 0x0A7F, "Guru"), (0x0A80, 0x0AFF, "Gujr"),
    (0x0B00, 0x0B7F, "Orya"), (0x0B80, 0x0BFF, "Taml"), (0x0C00, 0x0C7F, "Telu"),
    (0x0C80, 0x0CFF, "Knda"), (0x0D00, 0x0D7F, "Mlym"), (0x0D80, 0x0DFF, "Sinh"),
    (0x0E00, 0x0E7F, "Thai"), (0x0E80, 0x0EFF, "Laoo"), (0x0F00, 0x0FFF, "Tibt"),
    (0x1000, 0x109F, "Mymr"), (0x10A0, 0x10FF, "Geor"), (0x1C90, 0x1CBF, "Geor"),
    (0x1100, 0x11FF, "Hang"), (0x3130, 0x318F, "Hang"), (0xA960, 0xA97F, "Hang"),
    (0xAC00, 0xD7FF, "Hang"), (0xFFA0, 0xFFDC, "Hang"),
    (0x1200, 0x139F, "Ethi"), (0x2D80, 0x2DDF, "Ethi"),
    (0x13A0, 0x13FF, "Cher"), (0x1780, 0x17FF, "Khmr"), (0x1800, 0x18AF, "Mong"),
    (0x3040, 0x309F, "Hira"), (0x30A0, 0x30FF, "Kana"), (0x31F0, 0x31FF, "Kana"),
    (0xFF66, 0xFF9F, "Kana"),
    (0x2E80, 0x2FDF, "Hani"), (0x3005, 0x3007, "Hani"), (0x3021, 0x3029, "Hani"),
    (0x3038, 0x303B, "Hani"), (0x3400, 0x4DBF, "Hani"), (0x4E00, 0x9FFF, "Hani"),
    (0xF900, 0xFAFF, "Hani"), (0x20000, 0x3134F, "Hani"),
]
_BLOCKS.sort()
_STARTS = [b[0] for b in _BLOCKS]


@functools.lru_cache(maxsize=1 << 16)
def char_script(ch: str) -> str:
    """Script of one character: a code from the table, ``"Zinh"`` for a combining mark outside
    every block, ``"Zyyy"`` for a non-letter, ``"Zzzz"`` for a letter of an unlisted script."""
    cat = unicodedata.category(ch)
    if cat[0] not in "LM":
        return "Zyyy"
    cp = ord(ch)
    i = bisect.bisect_right(_STARTS, cp) - 1
    if i >= 0 and cp <= _BLOCKS[i][1]:
        return _BLOCKS[i][2]
    return "Zinh" if cat[0] == "M" else "Zzzz"


_ASCII_LETTER = re.compile(r"[A-Za-z]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")


def script_counts(text: str) -> Counter[str]:
    """Letters per script (``Zyyy`` and ``Zinh`` characters are not counted)."""
    # Regexes count ASCII letters and pick out the rest at C speed; most corpora here are
    # largely ASCII markup and spaces.
    counts: Counter[str] = Counter()
    n_ascii = len(_ASCII_LETTER.findall(text))
    if n_ascii:
        counts["Latn"] = n_ascii
    for ch, n in Counter(_NON_ASCII.findall(text)).items():
        s = char_script(ch)
        if s not in ("Zyyy", "Zinh"):
            counts[s] += n
    return counts


def _merge_cjk(counts: Counter[str]) -> Counter[str]:
    """Fold Han, Kana and Hangul into the ISO 15924 union codes Jpan / Kore / Hani."""
    han, kana = counts.pop("Hani", 0), counts.pop("Hira", 0) + counts.pop("Kana", 0)
    hang = counts.pop("Hang", 0)
    if kana and kana >= hang:
        counts["Jpan"] += han + kana
        if hang:
            counts["Hang"] += hang
    elif hang:
        counts["Kore"] += han + hang
    elif han:
        counts["Hani"] += han
    return counts


def detect_script(text: str) -> str:
    """ISO 15924 code of ``text`` (or ``"Mixd"`` / ``"Zyyy"``; see the module docstring)."""
    counts = _merge_cjk(script_counts(text))
    total = sum(counts.values())
    if total == 0:
        return "Zyyy"
    non_latin = [(n, s) for s, n in counts.items() if s != "Latn" and n >= NON_LATIN_MIN_SHARE * total]
    if len(non_latin) >= 2:
        return "Mixd"
    if len(non_latin) == 1:
        return non_latin[0][1]
    n, s = max((n, s) for s, n in counts.items())
    return s if n >= 0.5 * total else "Mixd"


def detect_script_bytes(data: bytes, max_bytes: int = 200_000) -> str:
    """``detect_script`` of UTF-8 bytes (invalid bytes are ignored; only the first ``max_bytes``
    are read, which is plenty to tell a document's script)."""
    return detect_script(data[:max_bytes].decode("utf-8", errors="ignore"))
