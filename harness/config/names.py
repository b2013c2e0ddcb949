"""Checks on user-given names (encoder ids / labels, perturbation ids, eval set names, the suite
name), applied when the suite is validated, so a name that would break a file name, a CSV cell or
a terminal line is refused on one line before anything is trained.

Cache file names never contain user text: models and cells are named by a hash of their
configuration (``harness.infra.writes.stable_hash``); only the suite name becomes a folder name
(``runs/<name>``), and it is restricted to letters, digits, '.', '_' and '-' by the loader.
"""

from __future__ import annotations

import unicodedata

MAX_NAME_CHARS = 100  # a file name holds 255 bytes; a label also lands in table headers
# First characters a spreadsheet reads as a formula (OWASP "CSV injection"; tab and carriage
# return are control characters, refused anyway)
FORMULA_STARTS = "=+-@"


def name_problem(name: str, what: str = "name") -> str | None:
    """Why ``name`` is not acceptable (None when it is): empty, over MAX_NAME_CHARS characters,
    holding a control character (NUL, newline, escape, ...), a path separator, '.'/'..', or
    starting with a formula character (``FORMULA_STARTS``)."""
    if not name:
        return f"{what} is empty"
    if len(name) > MAX_NAME_CHARS:
        return f"{what} is {len(name)} characters long; at most {MAX_NAME_CHARS}"
    if name[0] in FORMULA_STARTS:  # OWASP CSV injection: results.csv would start a cell with it
        return f"{what} starts with {name[0]!r}, which a spreadsheet opening results.csv runs as a formula"
    for i, c in enumerate(name):
        if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            return f"{what} holds the control character {c!r} at position {i}"
        if c in "/\\":
            return f"{what} holds a path separator {c!r} at position {i}"
    if name in (".", ".."):
        return f"{what} may not be {name!r}"
    return None


def shown(name: str, limit: int = 40) -> str:
    """``repr`` of a name for a one-line message, cut to ``limit`` characters."""
    return repr(name) if len(name) <= limit else repr(name[:limit]) + f"... ({len(name)} characters)"
