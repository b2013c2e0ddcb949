"""Built-in perturbations that need no third-party data: the control."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar

from perturbations.base import Perturbation
from perturbations.registry import register


@register("identity")
@dataclass(kw_only=True)
class Identity(Perturbation):
    """The control: returns the text unchanged at every severity."""

    is_random: ClassVar[bool] = False

    def perturb(self, text: str, rng: random.Random) -> str:
        return text
