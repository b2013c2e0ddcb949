"""reports.fmt.num / ci: the one fixed-format number and confidence-interval text of the MDM,
fragility and scaling tables (each had its own copy before)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from reports.fmt import ci, num


@pytest.mark.parametrize(("x", "spec", "want"), [
    (0.12345, ".3f", "0.123"), (-0.12345, "+.3f", "-0.123"), (0.5, "+.3f", "+0.500"),
    (np.float64(1.5), ".3f", "1.500"), (3, ".3f", "3.000"), (3.2e15, ".2g", "3.2e+15"),
    (0.456, ".0%", "46%"), (-0.00012, "+.4f", "-0.0001"),
    (None, ".3f", "—"), (math.nan, ".3f", "—"), (math.inf, ".3f", "—"), (-math.inf, "+.3f", "—"),
    (pd.NA, ".3f", "—"), (np.float64("nan"), ".2g", "—"), ("text", ".3f", "—"),
])
def test_num(x: object, spec: str, want: str) -> None:
    assert num(x, spec) == want


def test_num_default_is_three_decimals() -> None:
    assert num(2.0) == "2.000"


def test_ci() -> None:
    assert ci(0.1, 0.2) == "[0.100, 0.200]"
    assert ci(-0.01, 0.02, "+.4f") == "[-0.0100, +0.0200]"
    assert ci(1.2e14, 3.4e15, ".2g") == "[1.2e+14, 3.4e+15]"
    assert ci(math.nan, 0.2) == "—" and ci(0.1, math.inf) == "—" and ci(None, 0.2) == "—"
    assert ci(math.nan, 0.2, missing="") == ""  # MDM table: the value stands alone
