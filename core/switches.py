"""On/off switches in the environment (``TOKBENCH_LOAD_WARNING=0``).

    on = switch("TOKBENCH_LOAD_WARNING")   # True (1), False (0) or None (unset: the caller's default)

Any other value is a ``ValueError`` naming the variable and its value (the CLI's one-line error).
"""

from __future__ import annotations

import os


def switch(name: str) -> bool | None:
    """``name`` in the environment: "1" True, "0" False, unset or empty None (surrounding
    whitespace ignored); anything else a ``ValueError`` naming it."""
    raw = os.environ.get(name, "").strip()
    if raw not in ("", "0", "1"):
        raise ValueError(f"{name}={raw!r}: expected 0 or 1")
    return None if raw == "" else raw == "1"
