"""CPU smoke test of suites/mdm.yaml (tiny --set overrides): every AR/MDM variant trains and
scores, MDM rows carry objective=mdm and a Monte Carlo standard error, AR rows an exact score, a
clean and a perturbed MDM cell share their masks, and the report pairs AR with MDM."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

from harness.cli import main

SUITE = Path(__file__).resolve().parents[3] / "suites" / "mdm.yaml"
TINY = [
    "data.train={source: stdlib, max_bytes: 200000}",
    "data.eval=[{name: stdlib, source: stdlib, max_bytes: 200000}]",
    "budget.train_bytes=8192", "budget.context_bytes=64", "budget.batch_bytes=1024",
    "budget.warmup_bytes=1024", "budget.dtype=float32",
    "backbone.layers=1", "backbone.dim=16", "backbone.heads=2",
    "seeds=[0]", "perturbations=[{name: case.upper, severity: 1.0}]",
    "eval.max_docs=2", "eval.target_bytes=32", "eval.sample_docs=1", "eval.mc_samples=4",
]


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, str]]:
    out = tmp_path_factory.mktemp("mdm") / "run"
    args = ["run", str(SUITE), "--out", str(out), "--quiet"]
    for s in TINY:
        args += ["--set", s]
    assert main(args) == 0
    assert "AR vs MDM" in (out / "report.md").read_text(encoding="utf-8")
    with open(out / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_every_variant_is_scored_with_its_objective(rows: list[dict[str, str]]) -> None:
    labels = {r["encoder"]: r["objective"] for r in rows}
    assert labels == {"bytes-ar": "ar", "bytes-mdm": "mdm", "bpe-1024-ar": "ar", "bpe-1024-mdm": "mdm",
                      "bpe-4096-ar": "ar", "bpe-4096-mdm": "mdm"}
    for r in rows:
        se = float(r["bpb_se"])
        if r["objective"] == "ar":
            assert se == 0.0
        else:
            assert 0.0 < se < float(r["bpb"]) and math.isfinite(se)


def test_mdm_clean_target_cells_share_masks(rows: list[dict[str, str]]) -> None:
    # Same continuation, same t and masks: the perturbed-minus-clean difference is far smaller than
    # the Monte Carlo error of either cell alone would allow if the masks were drawn independently.
    cells = {(r["encoder"], r["perturbation_id"]): r for r in rows if r["mode"] == "clean_target"}
    clean, pert = cells[("bytes-mdm", "clean")], cells[("bytes-mdm", "case.upper")]
    assert clean["n_bytes"] == pert["n_bytes"]
    delta = abs(float(pert["bpb"]) - float(clean["bpb"]))
    assert delta < float(clean["bpb_se"])
