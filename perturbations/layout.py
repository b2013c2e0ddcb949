"""``keyboard.layout``: text typed with the wrong keyboard layout active ('привет' <-> 'ghbdtn')."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import numpy as np

from perturbations.chartable import CodepointPerturbation
from perturbations.checks import check_choice
from perturbations.codepoints import CharSet, CharTable, apply_table, selected_words, word_ids
from perturbations.registry import register
from perturbations.wordsel import NON_SPACE

# US QWERTY key -> the character the same key gives on another layout (unshifted row by row,
# then the shifted punctuation that differs). Upper-case letters follow their lower-case key.
_QWERTY = "`qwertyuiop[]asdfghjkl;'zxcvbnm,./"
LAYOUTS: dict[str, dict[str, str]] = {
    # Russian ЙЦУКЕН
    "ru": dict(zip(_QWERTY, "ёйцукенгшщзхъфывапролджэячсмитьбю.")) | {"?": ",", "~": "Ё", "{": "Х",
                                                                     "}": "Ъ", ":": "Ж", '"': "Э",
                                                                     "<": "Б", ">": "Ю"},
    # Ukrainian ЙЦУКЕН
    "uk": dict(zip(_QWERTY[1:], "йцукенгшщзхїфівапролджєячсмитьбю.")) | {"?": ",", "{": "Х", "}": "Ї",
                                                                         ":": "Ж", '"': "Є", "<": "Б",
                                                                         ">": "Ю"},
    # Greek (the ; and ς keys sit on q and w)
    "el": dict(zip("qwertyuiopasdfghjklzxcvbnm", ";ςερτυθιοπασδφγηξκλζχψωβνμ")),
    # Hebrew (SI-1452)
    "he": dict(zip("qwertyuiopasdfghjkl;'zxcvbnm,./",
                   "/'קראטוןםפשדגכעיחלךף,זסבהנמצתץ.")),
}  # fmt: skip


@functools.cache
def layout_tables(layout: str) -> tuple[CharTable, CharTable, CharSet]:
    """(latin -> native, native -> latin, native letters) for one layout."""
    to_native: dict[str, list[str]] = {}
    for key, ch in LAYOUTS[layout].items():
        to_native[key] = [ch]
        up_key, up_ch = key.upper(), ch.upper()
        # (the final-sigma key has no capital of its own: 'Σ' belongs to the s key)
        if key.isalpha() and len(up_key) == 1 and up_key not in LAYOUTS[layout] and ch != "ς":
            to_native[up_key] = [up_ch if len(up_ch) == 1 and ch.isalpha() else ch]
    to_latin: dict[str, list[str]] = {}
    for key, (ch,) in to_native.items():
        to_latin.setdefault(ch, [key])  # first key wins ('σ' <- 's', not the final-sigma key)
    native_letters = frozenset(ch for ch in to_latin if ch.isalpha())
    return CharTable(mapping=to_native), CharTable(mapping=to_latin), CharSet(native_letters.__contains__)


@register("keyboard.layout")
@dataclass(kw_only=True)
class WrongLayout(CodepointPerturbation):
    """Words typed with the wrong keyboard layout active: Russian typed on QWERTY
    ('привет' -> 'ghbdtn') and English typed on ЙЦУКЕН ('hello' -> 'руддщ').

    severity: probability that each word (run of non-space characters) is retyped, 0-1.
    layout: ru | uk | el | he; None = the document's language if it is one of these, else ru.
    direction: auto (a word with letters of the native script goes to QWERTY keys, any other word
    to the native layout) | to_latin | to_native. Characters without a key stay as they are.
    """

    layout: str | None = None
    direction: Literal["auto", "to_latin", "to_native"] = "auto"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice(self, "layout", LAYOUTS, allow_none=True)
        check_choice(self, "direction", ("auto", "to_latin", "to_native"))

    def edit(self, cps: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        layout = self.layout or (self.lang if self.lang in LAYOUTS else "ru")
        to_native, to_latin, native = layout_tables(layout)
        words = NON_SPACE.mask(cps)
        sel = selected_words(words, self.severity, gen)
        if self.direction == "auto":
            ids, n = word_ids(words)
            has_native = np.bincount(ids[words], weights=native.mask(cps)[words], minlength=n) > 0
            latin_word = np.zeros(cps.size, dtype=bool)
            latin_word[words] = has_native[ids[words]]
        else:
            latin_word = np.full(cps.size, self.direction == "to_latin")
        pos_l = np.flatnonzero(sel & latin_word & to_latin.mask(cps))
        pos_n = np.flatnonzero(sel & ~latin_word & to_native.mask(cps))
        # Both tables map one character to one character, so the two passes never shift positions.
        out = apply_table(cps, pos_l, to_latin, None)
        return apply_table(out, pos_n, to_native, None)
