"""Shared helpers for perturbations that act on whole words or on chosen characters.

A *word* here is a maximal run of letters, digits and combining marks (``WORD_CHARS``), or — for
the perturbations that retype whole tokens — a maximal run of non-whitespace (``NON_SPACE``).
"""

from __future__ import annotations

import unicodedata

import numpy as np

from perturbations.codepoints import CharSet, CharTable, apply_table, selected_words


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or unicodedata.category(ch)[0] == "M"


WORD_CHARS = CharSet(_is_word_char)
NON_SPACE = CharSet(lambda ch: not ch.isspace())
# Characters that attach to the previous one (combining marks, ZWJ, variation selectors): never
# separate them from their base.
ATTACHED = CharSet(lambda ch: unicodedata.category(ch) in ("Mn", "Mc", "Me", "Cf"))


def chosen_chars(
    cps: np.ndarray, table: CharTable, fraction: float, gen: np.random.Generator
) -> np.ndarray:
    """Sorted positions of the characters ``table`` can replace, each chosen with probability
    ``fraction``."""
    eligible = np.flatnonzero(table.mask(cps))
    return eligible[gen.random(eligible.size) < fraction]


def replace_in_words(
    cps: np.ndarray,
    table: CharTable,
    fraction: float,
    gen: np.random.Generator,
    words: CharSet = WORD_CHARS,
) -> np.ndarray:
    """Choose each word (run of ``words`` characters) with probability ``fraction`` and replace
    every character of it that ``table`` maps (first candidate)."""
    sel = selected_words(words.mask(cps), fraction, gen)
    pos = np.flatnonzero(sel & table.mask(cps))
    return apply_table(cps, pos, table, None)
