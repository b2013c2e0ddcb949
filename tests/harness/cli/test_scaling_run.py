"""suites/scaling_smoke.yaml end to end through the CLI, reduced so it stays within CI's budget:
budgets x0.1 and ``scaling.min_steps=22`` (the shipped suite's >= 200 steps per model would take a
few minutes here), one budget in each of two pieces, merged by ``tokbench report``. At 8e8 FLOPs
the largest bytes model (1.47e5 FLOPs/byte) gets 5.4 kB = 21 steps of 256 bytes: refused.
The full suite is run by hand: ``tokbench run suites/scaling_smoke.yaml`` (docs/scaling.md)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from harness.cli import main

pytestmark = pytest.mark.slow

SMOKE = str(Path(__file__).resolve().parents[3] / "suites" / "scaling_smoke.yaml")
REDUCED = ["--set", "scaling.budgets=[8e8, 1.04e9, 1.35e9, 1.75e9, 2.3e9]", "--set", "scaling.min_steps=22",
           "--set", "eval.max_docs=3", "--quiet", "--no-report"]
SWEEP = ["flop_budget", "model_size", "params_non_embedding", "train_bytes", "train_flops", "train_flops_full_attn"]


def rows(run: Path) -> list[dict[str, str]]:
    with open(run / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def pieces(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("scaling")
    a, b = tmp / "a", tmp / "b"
    assert main(["run", SMOKE, "--out", str(a), *REDUCED, "--set", "scaling.only_budgets=[8e8]"]) == 0
    assert main(["run", SMOKE, "--out", str(b), *REDUCED, "--set", "scaling.only_budgets=[2.3e9]"]) == 0
    return a, b


def test_rows_carry_the_sweep_columns_and_spend_the_budget(pieces: tuple[Path, Path]) -> None:
    a, _ = pieces
    rs = rows(a)
    assert all(c in rs[0] for c in SWEEP)
    models = {r["encoder"]: r for r in rs}
    assert len(models) == 2 * 5 - 1 and "bytes@8e8:s4" not in models  # encoders x sizes, one refused
    refused = json.loads((a / "run.json").read_text())["scaling"]["refused"]
    assert list(refused) == ["bytes@8e8:s4"] and "21 steps" in refused["bytes@8e8:s4"]
    for label, r in models.items():
        budget, spent, full = float(r["flop_budget"]), float(r["train_flops"]), float(r["train_flops_full_attn"])
        assert label.startswith(("bytes@", "bpe@")) and label.endswith(":" + r["model_size"])
        # the loop stops at the first step that reaches the budget: at most one step over
        assert budget <= spent <= budget * 1.05, label
        assert full > spent  # attention at full cost is more
        assert int(r["params_non_embedding"]) > 0 and int(r["train_bytes"]) > 0


def test_rerun_loads_every_model_from_the_cache(pieces: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = pieces
    before = (a / "results.csv").read_bytes()
    assert main(["run", SMOKE, "--out", str(a), *REDUCED, "--set", "scaling.only_budgets=[8e8]"]) == 0
    err = capsys.readouterr().err
    assert err.count("loaded from cache") == 9 and "bytes@8e8:s4: refused (cached)" in err
    assert "fit + train" not in err and "FLOPs = ~" not in err
    assert (a / "results.csv").read_bytes() == before


def test_pieces_merge_into_one_report(pieces: tuple[Path, Path], tmp_path: Path) -> None:
    a, b = pieces
    out = tmp_path / "merged"
    assert main(["report", str(a), str(b), "--out", str(out), "--bootstrap", "40", "--no-svg"]) == 0
    html = (out / "report.html").read_text()
    assert 'id="scaling"' in html and "Parity" in html
    md = (out / "report.md").read_text()
    opt = md.split("### Compute-optimal point per budget")[1].split("###")[0]
    assert sum(line.startswith("| stdlib | bytes |") for line in opt.splitlines()) == 2  # both pieces merged


def test_dry_run_refuses_points_below_min_steps(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", SMOKE, "--dry-run", "--set", "scaling.budgets=[8e8, 1.04e9, 1.35e9, 1.75e9, 2.3e9]",
                 "--set", "scaling.only_budgets=[8e8]"]) == 0
    out = capsys.readouterr().out
    assert "REFUSED" in out and "scaling.min_steps is 200" in out
    assert "estimated training time" in out
