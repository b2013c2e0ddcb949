"""core: the one BPB formula, the one results schema, the generic registry."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from core.metrics import LN2, bpb
from core.registry import PluginError, Registry
from core.schema import (
    BUCKET_COLUMNS,
    CELL_KEYS,
    NUMERIC_COLUMNS,
    REQUIRED_RESULTS,
    RESULT_COLUMNS,
    STRING_COLUMNS,
)


def test_bpb_scalar_array_and_series() -> None:
    # 8 bytes at ln 256 nats each = 8 bits per byte, by hand
    assert bpb(8 * math.log(256), 8) == pytest.approx(8.0)
    assert LN2 == math.log(2.0)
    assert math.isnan(bpb(1.0, 0))
    assert bpb(np.float64(LN2 * 3), np.int64(3)) == pytest.approx(1.0)
    arr = bpb(np.array([LN2, 4 * LN2]), np.array([1, 2]))
    np.testing.assert_allclose(arr, [1.0, 2.0])
    df = pd.DataFrame({"nll": [2 * LN2, 9 * LN2], "n": [2, 3]})
    assert bpb(df["nll"], df["n"]).tolist() == pytest.approx([1.0, 3.0])


def test_schema_lists_are_consistent() -> None:
    assert len(set(RESULT_COLUMNS)) == len(RESULT_COLUMNS)
    assert set(STRING_COLUMNS) | set(NUMERIC_COLUMNS) == set(RESULT_COLUMNS)
    assert not set(STRING_COLUMNS) & set(NUMERIC_COLUMNS)
    assert set(CELL_KEYS) <= set(RESULT_COLUMNS) and set(REQUIRED_RESULTS) <= set(RESULT_COLUMNS)
    assert set(CELL_KEYS) - {"encoder", "seed", "dataset", "perturbation_id", "severity", "mode"} == set()
    assert {"analysis", "bucket", "bpb"} <= set(BUCKET_COLUMNS)


class Base:
    pass


@dataclass
class Good(Base):
    x: int = 1


class NotADataclass(Base):
    pass


def test_registry_register_resolve_check_and_errors() -> None:
    reg: Registry = Registry("thing", base=f"{__name__}:Base", group="tokbench.test_things_none")
    reg.register("good")(Good)
    reg.register("plain")(NotADataclass)
    assert reg.resolve("good") is Good and Good.registry_name == "good"
    assert dict(reg) == {"good": Good, "plain": NotADataclass}
    with pytest.raises(PluginError, match=r"plain'.*is not a dataclass"):
        reg.resolve("plain")
    with pytest.raises(PluginError, match=r"unknown thing 'god' \(did you mean 'good'\?\); known: good, plain"):
        reg.resolve("god")
    with pytest.raises(PluginError, match="is not a subclass of"):
        reg.resolve("math:pi")
    # a lazy "module:Attr" entry is imported only when named
    reg.lazy["lazy_good"] = f"{__name__}:Good"
    assert reg.resolve("lazy_good") is Good
    assert reg.available()["lazy_good"] == f"{__name__}:Good"
    assert reg.known_names() == ["good", "lazy_good", "plain"]
