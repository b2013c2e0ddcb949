"""Case noise: ``case.upper`` (whole words in capitals) and ``case.random`` (flipped letters)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perturbations.chartable import CharTablePerturbation, CodepointPerturbation
from perturbations.codepoints import CharTable
from perturbations.registry import register
from perturbations.wordsel import replace_in_words

# str.upper / str.swapcase per character; a few expand ('ß' -> 'SS'), which splice handles.
UPPER = CharTable(func=lambda ch: (ch.upper(),))
SWAPCASE = CharTable(func=lambda ch: (ch.swapcase(),))


@register("case.upper")
@dataclass(kw_only=True)
class UpperCase(CodepointPerturbation):
    """Words in capitals: 'the cat' -> 'THE cat' (BLT's "UpperCase" at severity 1).

    severity: probability that each word (run of letters, digits and marks) is upper-cased, 0-1;
    1 upper-cases the whole text. Scripts without case are unchanged.
    """

    def edit(self, cps: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        return replace_in_words(cps, UPPER, self.severity, gen)


@register("case.random")
@dataclass(kw_only=True)
class RandomCase(CharTablePerturbation):
    """Random case flips: 'robust' -> 'roBuSt' (BLT's "RandomCase").

    severity: probability that each cased letter has its case flipped, 0-1 (so the edit rate is
    about severity times the share of cased letters in the text).
    """

    def table(self) -> CharTable:
        return SWAPCASE
