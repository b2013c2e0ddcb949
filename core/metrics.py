"""The one BPB formula and the constant it needs: every bits-per-byte number in tokbench comes from
``bpb`` here (harness cells, report tables, sanity checks, the training log).

Units: NLL in nats; BPB in bits per UTF-8 byte, always ΣNLL / (ln 2 · Σ bytes) over the text
scored — never a mean of per-document or per-token values.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

LN2 = math.log(2.0)  # nats per bit


def bpb(nll_nats: Any, n_bytes: Any) -> Any:
    """Bits per byte: nll_nats / (ln 2 · n_bytes).

    Scalars: a float, NaN when nothing was scored (n_bytes <= 0). Arrays / pandas Series
    (elementwise, same shape): the plain quotient, so callers check their byte counts first.
    """
    if isinstance(n_bytes, numbers.Real):
        return nll_nats / (LN2 * n_bytes) if n_bytes > 0 else math.nan
    return nll_nats / (LN2 * n_bytes)
