"""``repeat.chars``: characters typed several times ('sooo goood'), BLT's "Repeat" noise."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from perturbations.chartable import CodepointPerturbation
from perturbations.checks import check_int
from perturbations.codepoints import splice
from perturbations.registry import register
from perturbations.wordsel import ATTACHED, NON_SPACE


@register("repeat.chars")
@dataclass(kw_only=True)
class RepeatChars(CodepointPerturbation):
    """Repeated characters: 'good' -> 'goood'.

    severity: probability that each non-space character is repeated, 0-1. max_repeats: a chosen
    character gets 1..max_repeats extra copies (uniform), so the expected edit rate is about
    severity · (max_repeats + 1) / 2 times the share of non-space characters. Combining marks and
    other attached characters are not repeated on their own.
    """

    max_repeats: int = 3

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int(self, "max_repeats", 1, 100)

    def edit(self, cps: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        eligible = np.flatnonzero(NON_SPACE.mask(cps) & ~ATTACHED.mask(cps))
        pos = eligible[gen.random(eligible.size) < self.severity]
        if pos.size == 0:
            return cps
        rep_len = 1 + gen.integers(1, self.max_repeats + 1, size=pos.size)
        flat = np.repeat(cps[pos], rep_len)
        rep_off = np.cumsum(rep_len) - rep_len
        return splice(cps, pos, rep_off, rep_len, flat)
