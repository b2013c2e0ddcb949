"""Number formatting shared by tables, figures and summary sentences (no pandas, no matplotlib).

Differences (ΔBPB, A − B) are shown with three significant digits, so a small effect stays
visible (−0.00412, not −0.004) and a large one stays readable (+46.6, +1410 %); a value that
rounds to zero is written "0", never "−0.00".
"""

from __future__ import annotations

import math
from typing import Any


def is_num(x: Any) -> bool:
    """True for a finite-or-infinite real number (False for None, NaN, NA, text)."""
    try:
        return not math.isnan(float(x))
    except (TypeError, ValueError):
        return False


def sig3(x: Any, sign: bool = True) -> str:
    """``x`` with three significant digits, without exponent notation for |x| ≥ 1e-4.

    sign: prefix "+" on positive values. Values of 1000 and more are shown as integers (no
    decimals, so they may carry more than three digits). NaN/None → "—"; anything that rounds to
    zero → "0" (no negative zero).
    """
    if not is_num(x):
        return "—"
    v = float(f"{float(x):.3g}")  # round to 3 significant digits first (9.996 → 10.0)
    if v == 0.0:
        return "0"
    a = abs(v)
    if a < 1e-4:
        s = f"{v:.2e}"
    elif a >= 1000:
        s = f"{v:.0f}"
    else:
        s = f"{v:.{max(0, 2 - math.floor(math.log10(a)))}f}"
    return ("+" + s) if sign and v > 0 else s


def num(x: Any, spec: str = ".3f") -> str:
    """``x`` formatted by ``spec`` (Python's format mini-language: ".3f", "+.3f" signed, ".2g",
    ".0%"); "—" for anything that is not a finite real number (None, NaN, NA, ±inf, text)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "—"
    return format(v, spec) if math.isfinite(v) else "—"


def ci(lo: Any, hi: Any, spec: str = ".3f", missing: str = "—") -> str:
    """A confidence interval "[lo, hi]", both ends by ``num(·, spec)``; ``missing`` unless both
    ends are finite numbers (a bootstrap with too few units gives NaN ends)."""
    if num(lo) == "—" or num(hi) == "—":
        return missing
    return f"[{num(lo, spec)}, {num(hi, spec)}]"


def pvalue(p: Any) -> str:
    """A p-value: "<0.001" below 0.001, else three decimals; "—" when missing."""
    if not is_num(p):
        return "—"
    p = float(p)
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def p_phrase(p: Any) -> str:
    """"p < 0.001" / "p = 0.042" (for sentences)."""
    s = pvalue(p)
    return "p " + (s.replace("<", "< ") if s.startswith("<") else f"= {s}")
