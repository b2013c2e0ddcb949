"""harness/config/scaling.py → run.json → reports/scaling.py: "passes at D_opt" divides D_opt by the
training text's size, and that size must come out exact although the loop reads a little more
(or less) than planned. Before, run.json held the planned passes next to the bytes actually read,
so the text size derived from them was high by actual/planned."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from harness.config.scaling import GridPoint, Rung, ScalingConfig, plan_point, point_facts
from reports.scaling import with_train_part_bytes

LADDER = tuple(Rung(name=f"s{i}", layers=n, dim=d, heads=4) for i, (n, d) in
               enumerate([(2, 32), (2, 64), (3, 96), (4, 128), (4, 192)]))
PART = 10**8  # bytes of the train part


def _trained_point(actual_over_planned: float) -> GridPoint:
    c = ScalingConfig(budgets=(1e12, 3e12, 1e13, 3e13, 1e14), ladder=LADDER, min_steps=1)
    p = GridPoint(budget=1e13, rung=LADDER[1], encoder="bytes", label="bytes@1e13:s1",
                  flops_per_byte=1e5, flops_per_byte_full=1.2e5)
    plan_point(c, p, base_lr=3e-3, batch_bytes=256, train_part_bytes=PART)
    assert p.passes == pytest.approx(1.0)  # planned: 1e8 bytes over a 1e8-byte text
    p.train_bytes = int(p.train_bytes * actual_over_planned)  # what train_sweep does after the loop
    return p


@pytest.mark.parametrize("ratio", [1.0, 1.009, 1.105, 0.97])
def test_stored_passes_match_the_bytes_read(ratio: float) -> None:
    p = _trained_point(ratio)
    facts = point_facts(p, PART, "sha256:abc")
    assert facts["planned_passes"] == pytest.approx(1.0)
    assert facts["passes"] == pytest.approx(p.train_bytes / PART)  # actual bytes / text
    assert facts["train_part_bytes"] == PART and facts["train_fingerprint"] == "sha256:abc"
    res = pd.DataFrame({"encoder": [p.label], "seed": [0], "train_bytes": [p.train_bytes]})
    # stored size, and (as older readers would do) actual bytes ÷ stored passes: both exact
    for entry in (facts, {k: v for k, v in facts.items() if k != "train_part_bytes"}):
        got = with_train_part_bytes(res, {p.label: {"scaling": entry}})["train_part_bytes"].iloc[0]
        assert got == pytest.approx(PART, rel=1e-6)


def test_stored_size_wins_over_the_legacy_division() -> None:
    # A legacy entry (planned passes 1.0 next to 1.105e8 bytes read) derives 1.105e8; with the
    # size stored the report uses it and ignores the division.
    res = pd.DataFrame({"encoder": ["r/x", "r/y"], "seed": [0, 0],
                        "train_bytes": [110_500_000] * 2})
    enc = {"r/x": {"scaling": {"passes": 1.0}},
           "r/y": {"scaling": {"passes": 1.0, "train_part_bytes": PART}}}
    got = with_train_part_bytes(res, enc)["train_part_bytes"].tolist()
    assert got[0] == pytest.approx(1.105 * PART) and got[1] == PART
    assert not any(math.isnan(g) for g in got)
