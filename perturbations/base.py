"""The Perturbation interface: a small dataclass whose fields are its YAML parameters.

A perturbation is pure text -> text. The harness owns the randomness: it seeds a fresh
``random.Random`` per (suite seed, perturbation id and params, document id) from a sha256, so the
output never depends on document order, batching or processes (the HELM pattern).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import ClassVar


@dataclass(kw_only=True)
class Perturbation:
    """Base class. Subclasses are ``@dataclass(kw_only=True)`` and implement ``perturb``.

    severity: meaning is defined by each subclass's docstring; 0 must return the text unchanged.
    lang: ISO 639 code of the document, filled in by the harness when known (keyboard maps need it).
    """

    severity: float = 0.0
    lang: str | None = None

    # Whether perturb() uses its rng (identity-like perturbations set False): the property tests
    # then check that different seeds give different output.
    is_random: ClassVar[bool] = True

    def perturb(self, text: str, rng: random.Random) -> str:
        """Return the perturbed text. Must not raise on any Unicode input (empty, NUL, RTL, ...)."""
        raise NotImplementedError

    def fit(self, texts: list[str]) -> None:  # noqa: B027 - optional hook, empty by default
        """Optional: called once with training texts before use (e.g. to train a segmenter)."""
