"""Parameter checks shared by the built-in perturbations (one-line ValueErrors naming the field)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def _name(p: Any) -> str:
    return getattr(type(p), "registry_name", type(p).__qualname__)


def check_fraction(p: Any, field: str = "severity") -> None:
    """Raise ValueError unless ``p.<field>`` is a number in [0, 1]."""
    v = getattr(p, field)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= float(v) <= 1.0:
        raise ValueError(f"{_name(p)}: {field} must be a number between 0 and 1, got {v!r}")


def check_choice(p: Any, field: str, choices: Iterable[str], allow_none: bool = False) -> None:
    """Raise ValueError unless ``p.<field>`` is one of ``choices`` (or None when allowed)."""
    v = getattr(p, field)
    options = sorted(choices)
    if v is None and allow_none:
        return
    if v not in options:
        raise ValueError(f"{_name(p)}: {field} must be one of {', '.join(options)}; got {v!r}")


def check_int(p: Any, field: str, lo: int, hi: int) -> None:
    """Raise ValueError unless ``p.<field>`` is an integer in [lo, hi]."""
    v = getattr(p, field)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"{_name(p)}: {field} must be an integer between {lo} and {hi}, got {v!r}")
