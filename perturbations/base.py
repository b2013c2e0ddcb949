"""The Perturbation interface: a small dataclass whose fields are its YAML parameters.

A perturbation is pure text -> text. The harness owns the randomness: it seeds a fresh
``random.Random`` per (suite seed, perturbation id and params, document id) from a sha256, so the
output never depends on document order, batching or processes (the HELM pattern).
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(kw_only=True)
class Perturbation:
    """Base class. Subclasses are ``@dataclass(kw_only=True)`` and implement ``perturb``.

    severity: meaning is defined by each subclass's docstring; 0 must return the text unchanged.
    lang: ISO 639 code of the document, filled in by the harness when known (keyboard maps need it).

    Parameters are final once built: the harness never reassigns a field. One instance exists per
    (perturbation id, severity, document language); ``for_language`` makes the language variants
    and ``share_fit`` lets every severity use what one ``fit`` learned.
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

    def learned_state(self) -> dict[str, Any]:
        """What ``fit`` (or a lazy cache) stored on the instance: its attributes that are not
        dataclass fields."""
        names = {f.name for f in dataclasses.fields(self)}
        return {k: v for k, v in vars(self).items() if k not in names}

    def share_fit(self, fitted: Perturbation) -> None:
        """Use what ``fitted`` (the same perturbation at another severity or language) learned in
        ``fit``: the state objects are shared, not copied, so one fit serves them all."""
        self.__dict__.update(fitted.learned_state())

    def for_language(self, lang: str | None) -> Perturbation:
        """This perturbation for documents in ``lang``: itself when that is its ``lang`` already (or
        lang is unknown), else a new instance with that ``lang`` sharing what ``fit`` learned."""
        if lang is None or lang == self.lang:
            return self
        variant = dataclasses.replace(self, lang=lang)
        variant.share_fit(self)
        return variant
