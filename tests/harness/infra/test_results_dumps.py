"""``harness.infra.writes.dumps``: one pass when nothing is NaN or inf, the null-substituted copy when
something is — the same text either way as cleaning first (the path every object took before)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from harness.infra.writes import _clean_floats, _json_default, dumps


def _cleaned_first(obj: object, indent: int | None = None) -> str:
    text = json.dumps(_clean_floats(obj), default=_json_default, ensure_ascii=False, indent=indent, allow_nan=False)
    return text.replace("\udcff", "\\udcff")


def test_finite_objects_give_the_text_cleaning_first_gave() -> None:
    obj = {"a": [0.1, 2, (3, 4.5)], "p": Path("x/y"), "n": np.int64(7), "f": np.float32(0.25),
           "s": "café \udcff", 3: {"k": [1.5] * 5}}
    for indent in (None, 2):
        assert dumps(obj, indent) == _cleaned_first(obj, indent)


def test_nan_and_inf_anywhere_become_null() -> None:
    obj = {"rows": [{"bpb": float("nan"), "ok": 1.0}, [0.5, math.inf, -math.inf]], "x": float("nan")}
    assert json.loads(dumps(obj)) == {"rows": [{"bpb": None, "ok": 1.0}, [0.5, None, None]], "x": None}
    assert dumps(obj) == _cleaned_first(obj)
