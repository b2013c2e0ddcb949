"""Bases for the character-level perturbations, which edit a text as a ``(N,) uint32`` array of
code points (``perturbations.codepoints``).

``CodepointPerturbation`` holds the part they all share: severity checked to be in [0, 1],
severity 0 and empty text returned unchanged, and the rest handed to ``edit`` as code points with
a numpy Generator drawn from the harness's rng. ``CharTablePerturbation`` is the common case of
replacing single characters through a ``CharTable``: each character the table maps is replaced
with probability ``severity`` (``case.random``, ``unicode.nfd``, ``unicode.strip_diacritics``,
``unicode.homoglyph``)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from perturbations.base import Perturbation
from perturbations.checks import check_fraction
from perturbations.codepoints import (
    CharTable,
    apply_table,
    from_codepoints,
    numpy_rng,
    to_codepoints,
)
from perturbations.wordsel import chosen_chars


@dataclass(kw_only=True)
class CodepointPerturbation(Perturbation):
    """Subclasses implement ``edit``; severity is a fraction in [0, 1] (subclasses with more
    parameters check them after calling ``super().__post_init__()``)."""

    def __post_init__(self) -> None:
        check_fraction(self)

    def edit(self, cps: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        """``(N,) uint32`` code points of a non-empty text -> the perturbed ``(N',) uint32`` ones
        (``cps`` itself when nothing changes). Called only when severity > 0."""
        raise NotImplementedError

    def perturb(self, text: str, rng: random.Random) -> str:
        if self.severity <= 0 or not text:
            return text
        return from_codepoints(self.edit(to_codepoints(text), numpy_rng(rng)))


@dataclass(kw_only=True)
class CharTablePerturbation(CodepointPerturbation):
    """Subclasses implement ``table()``. ``pick_alternative``: whether a character with several
    replacements draws one at random (look-alikes) or takes the table's only one."""

    pick_alternative: ClassVar[bool] = False

    def table(self) -> CharTable:
        raise NotImplementedError

    def edit(self, cps: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        table = self.table()
        chosen = chosen_chars(cps, table, self.severity, gen)
        return apply_table(cps, chosen, table, gen if self.pick_alternative else None)
