"""Encoder registry: name -> Encoder subclass (a ``core.registry.Registry``).

Built-ins are listed lazily as ``"module:Attr"`` strings (importing torch-heavy modules only when
used); third-party encoders register with ``@register("name")``, through the ``tokbench.encoders``
entry-point group, or are named as ``"package.module:ClassName"`` in a suite.
"""

from __future__ import annotations

from dataclasses import is_dataclass

from core.registry import Registry


def _has_config(cls: type) -> str | None:
    config = getattr(cls, "Config", None)
    if not (isinstance(config, type) and is_dataclass(config)):
        return f"encoder class {cls.__qualname__} has no dataclass 'Config' attribute"
    return None


REGISTRY: Registry = Registry(
    "encoder",
    base="encoders.base:Encoder",
    group="tokbench.encoders",
    lazy={
        "bytes": "encoders.byte_baseline:ByteEncoder",
        "fuzzytok": "encoders.fuzzytok:FuzzyTokEncoder",
        "bpe": "encoders.bpe:BpeEncoder",
        "blt": "encoders.blt:BltEncoder",
        "hf": "encoders.hf:HfEncoder",
    },
    check=_has_config,
)
register = REGISTRY.register
