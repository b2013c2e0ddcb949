"""Encoder registry: name -> Encoder subclass.

Built-ins are listed lazily as ``"module:Attr"`` strings (importing torch-heavy modules only when
used); third-party encoders register through the ``tokbench.encoders`` entry-point group or are
named as ``"package.module:ClassName"`` in a suite. Resolution (with close-match errors) lives in
``harness.plugins`` so all three registries behave the same.
"""

from __future__ import annotations

from collections.abc import Callable

BUILTIN: dict[str, str] = {
    "bytes": "encoders.byte_baseline:ByteEncoder",
    "fuzzytok": "encoders.fuzzytok:FuzzyTokEncoder",
    "bpe": "encoders.bpe:BpeEncoder",
    "blt": "encoders.blt:BltEncoder",
}

REGISTRY: dict[str, type] = {}


def register(name: str) -> Callable[[type], type]:
    """Class decorator: ``@register("myenc")`` makes ``name: myenc`` usable in suites."""

    def deco(cls: type) -> type:
        REGISTRY[name] = cls
        cls.registry_name = name
        return cls

    return deco
