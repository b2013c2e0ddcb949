"""Perturbation registry: name -> Perturbation subclass.

Built-ins register with ``@register("typo.keyboard")``; ``BUILTIN_MODULES`` lists the modules that
hold them (imported on first lookup). Third-party perturbations come through the entry-point group
``tokbench.perturbations`` or are named ``"package.module:ClassName"`` in a suite; resolution with
close-match errors is in ``harness.plugins``.
"""

from __future__ import annotations

from collections.abc import Callable

# Modules whose import registers the built-in perturbations.
BUILTIN_MODULES: list[str] = [
    "perturbations.builtin",
    "perturbations.typo",
    "perturbations.unicode",
    "perturbations.case",
    "perturbations.space",
    "perturbations.repeat",
    "perturbations.layout",
    "perturbations.translit",
    "perturbations.morphology",
]

REGISTRY: dict[str, type] = {}


def register(name: str) -> Callable[[type], type]:
    """Class decorator: ``@register("typo.keyboard")``."""

    def deco(cls: type) -> type:
        REGISTRY[name] = cls
        cls.registry_name = name
        return cls

    return deco
