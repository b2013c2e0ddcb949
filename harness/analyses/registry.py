"""Analysis registry: name -> Analysis subclass (a ``core.registry.Registry``).

Built-ins register with ``@register("name")`` in the modules listed here (imported on first
lookup); third-party analyses come through the ``tokbench.analyses`` entry-point group or are
named ``"package.module:ClassName"`` in a suite.
"""

from __future__ import annotations

from core.registry import Registry

REGISTRY: Registry = Registry(
    "analysis",
    base="harness.analyses.base:Analysis",
    group="tokbench.analyses",
    modules=["harness.analyses.morphology"],
)
register = REGISTRY.register
