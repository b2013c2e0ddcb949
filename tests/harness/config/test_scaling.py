"""harness/config/scaling.py: the sweep config's checks, the grid, and per-point planning (bytes from
FLOPs, warm-up, width rule, refusals) against hand-computed values."""

from __future__ import annotations

import math

import pytest

from harness.config.scaling import GridPoint, Rung, ScalingConfig, grid, plan_point, sweep_columns

LADDER = tuple(Rung(name=f"s{i}", layers=n, dim=d, heads=4) for i, (n, d) in
               enumerate([(2, 32), (2, 64), (3, 96), (4, 128), (4, 192)]))
BUDGETS = (1e12, 3e12, 1e13, 3e13, 1e14)


def cfg(**kw: object) -> ScalingConfig:
    return ScalingConfig(**{"budgets": BUDGETS, "ladder": LADDER, **kw})


@pytest.mark.parametrize("kw, msg", [
    ({"budgets": (1e12, 1e13, 1e14, 1e15)}, "at least 5"),
    ({"budgets": (1e12, 3e12, 2e12, 3e13, 1e14)}, "ascending"),
    ({"budgets": (1e12, 2e12, 4e12, 8e12, 1e15)}, "log-spaced"),
    ({"ladder": LADDER[:4]}, "at least 5 model sizes"),
    ({"ladder": LADDER[:4] + (Rung(name="s0", layers=9, dim=32, heads=4),)}, "names repeat"),
    ({"ladder": LADDER[:4] + (Rung(name="x", layers=2, dim=32, heads=4),)}, "pairs repeat"),
    ({"ladder": LADDER[:4] + (Rung(name="x", layers=2, dim=48, heads=16),)}, "even head size"),
    ({"only_budgets": (2e12,)}, "not one of the budgets"),
])
def test_config_rejects(kw: dict, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        cfg(**kw)


def test_grid_order_labels_and_pieces() -> None:
    c = cfg(only_budgets=(3e13,))
    pts = grid(c, ["bytes", "bpe-512"])
    assert [p.label for p in pts[:3]] == ["bytes@3e13:s0", "bpe-512@3e13:s0", "bytes@3e13:s1"]
    assert len(pts) == 5 * 2 and {p.budget for p in pts} == {3e13}
    assert len(grid(cfg(), ["bytes"])) == 25


def test_width_rule() -> None:
    c = cfg(lr_ref_dim=64, lr_width_power=0.5)
    assert c.lr(4e-3, 64) == pytest.approx(4e-3)
    assert c.lr(4e-3, 256) == pytest.approx(2e-3)  # (64/256)^0.5 = 1/2
    assert cfg(lr_width_power=0.0).lr(1e-3, 999) == 1e-3


def test_plan_point_bytes_steps_warmup() -> None:
    c = cfg(warmup_fraction=0.1, min_steps=200)
    p = GridPoint(budget=1e13, rung=LADDER[1], encoder="bytes", label="x", flops_per_byte=1e5,
                  flops_per_byte_full=1.2e5, fit_flops=2e12)
    plan_point(c, p, base_lr=3e-3, batch_bytes=256, train_part_bytes=10**8)
    assert p.train_bytes == 80_000_000          # (1e13 − 2e12) / 1e5
    assert p.steps == 80_000_000 // 256
    assert p.warmup_bytes == 8_000_000
    assert p.passes == pytest.approx(0.8)
    assert p.refused == ""
    assert sweep_columns(p)["train_flops_full_attn"] == pytest.approx(1.2e13)


def test_plan_point_refusals() -> None:
    c = cfg(min_steps=200, max_passes=2.0)
    few = plan_point(c, GridPoint(budget=1e12, rung=LADDER[4], encoder="b", label="x", flops_per_byte=1e6,
                                  flops_per_byte_full=1e6), base_lr=1e-3, batch_bytes=8192, train_part_bytes=10**9)
    assert "122 steps" in few.refused and "min_steps is 200" in few.refused
    rep = plan_point(c, GridPoint(budget=1e14, rung=LADDER[0], encoder="b", label="x", flops_per_byte=1e4,
                                  flops_per_byte_full=1e4), base_lr=1e-3, batch_bytes=1024, train_part_bytes=10**9)
    assert "repeat the train part" in rep.refused and "10.0 times" in rep.refused
    fit = plan_point(c, GridPoint(budget=1e12, rung=LADDER[0], encoder="b", label="x", flops_per_byte=1e4,
                                  flops_per_byte_full=1e4, fit_flops=2e12), base_lr=1e-3, batch_bytes=1024,
                     train_part_bytes=10**9)
    assert "fit stage alone" in fit.refused
    assert math.isclose(fit.lr, c.lr(1e-3, 32))


def test_suite_errors_are_one_located_line() -> None:
    from pathlib import Path

    from harness.config import ConfigError, load_suite

    smoke = Path(__file__).resolve().parents[3] / "suites" / "scaling_smoke.yaml"
    s = load_suite(smoke, ["scaling.only_budgets=[1.25e10]"])
    assert s.scaling is not None and s.scaling.selected() == [1.25e10] and len(s.scaling.ladder) == 5
    with pytest.raises(ConfigError) as e:
        load_suite(smoke, ["scaling.budgets=[1e9, 2e9, 4e9, 8e9]"])
    msg = str(e.value)
    assert "\n" not in msg and "scaling: budgets: at least 5 FLOP budgets are needed for a fit, got 4" in msg
    with pytest.raises(ConfigError, match=r"scaling.ladder\[0\]: unknown key 'width'; valid keys: dim, heads"):
        load_suite(smoke, ["scaling.ladder[0]={name: s0, layers: 1, width: 16, heads: 2}"])
