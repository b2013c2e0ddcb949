"""A base for perturbations that replace single characters through a ``CharTable``: each
character the table maps is replaced with probability ``severity`` (``case.random``,
``unicode.nfd``, ``unicode.strip_diacritics``, ``unicode.homoglyph``)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

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
class CharTablePerturbation(Perturbation):
    """Subclasses implement ``table()``. ``pick_alternative``: whether a character with several
    replacements draws one at random (look-alikes) or takes the table's only one."""

    pick_alternative: ClassVar[bool] = False

    def __post_init__(self) -> None:
        check_fraction(self)

    def table(self) -> CharTable:
        raise NotImplementedError

    def perturb(self, text: str, rng: random.Random) -> str:
        if self.severity <= 0 or not text:
            return text
        gen = numpy_rng(rng)
        cps = to_codepoints(text)
        table = self.table()
        chosen = chosen_chars(cps, table, self.severity, gen)
        return from_codepoints(apply_table(cps, chosen, table, gen if self.pick_alternative else None))
