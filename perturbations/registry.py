"""Perturbation registry: name -> Perturbation subclass (a ``core.registry.Registry``).

Built-ins register with ``@register("typo.keyboard")``; ``REGISTRY.modules`` lists the modules that
hold them (imported on first lookup). Third-party perturbations come through the entry-point group
``tokbench.perturbations`` or are named ``"package.module:ClassName"`` in a suite.
"""

from __future__ import annotations

from core.registry import Registry

REGISTRY: Registry = Registry(
    "perturbation",
    base="perturbations.base:Perturbation",
    group="tokbench.perturbations",
    # Modules whose import registers the built-in perturbations.
    modules=[
        "perturbations.builtin",
        "perturbations.typo",
        "perturbations.unicode",
        "perturbations.case",
        "perturbations.space",
        "perturbations.repeat",
        "perturbations.layout",
        "perturbations.translit",
        "perturbations.morphology",
    ],
)
register = REGISTRY.register
