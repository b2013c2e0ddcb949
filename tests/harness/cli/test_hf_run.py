"""A suite mixing a model trained here and a checkpoint trained elsewhere (the ``hf`` encoder),
end to end through the CLI: the shipped example suite against a model made by the shipped tool,
``tokbench compare`` over two such runs, and the suites that must be refused."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[3]

HF_ONLY = """\
name: hf_only
seeds: [0]
data:
  train: {source: stdlib, max_bytes: 400000}
  eval: [{name: stdlib, source: stdlib, max_bytes: 400000}]
budget: {train_bytes: 100000, context_bytes: 128, batch_bytes: 4096}
encoders:
  - {name: hf, path: ./tiny-hf-model}
perturbations:
  - {name: case.upper, severity: 1.0}
eval: {modes: [full, clean_target], max_docs: 30, target_bytes: 64, sample_docs: 1}
"""


def rows(run: Path) -> list[dict[str, str]]:
    with open(run / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("hfrun")
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_tiny_hf_model.py"), str(tmp / "tiny-hf-model")],
                   check=True, capture_output=True, timeout=300)
    mp = pytest.MonkeyPatch()
    mp.chdir(tmp)  # the suites name ./tiny-hf-model, relative to the working directory
    try:
        assert main(["run", str(ROOT / "suites" / "hf_example.yaml"), "--limit", "3", "--out", "mixed", "--quiet",
                     "--no-report", "--set", "budget.train_bytes=8000", "--set", "budget.warmup_bytes=1000"]) == 0
        (tmp / "hf_only.yaml").write_text(HF_ONLY)
        assert main(["run", "hf_only.yaml", "--limit", "3", "--out", "hf_only", "--quiet", "--no-report"]) == 0
    finally:
        mp.undo()
    return tmp


def test_mixed_suite_scores_both_and_marks_the_checkpoint(runs: Path) -> None:
    got = rows(runs / "mixed")
    cells = {(r["encoder"], r["mode"], r["perturbation_id"]) for r in got}
    for enc in ("bytes", "hf"):
        for mode in ("full", "clean_target"):
            for p in ("clean", "typo.keyboard", "case.upper"):
                assert (enc, mode, p) in cells
    run = json.loads((runs / "mixed" / "run.json").read_text())
    hf, by = run["encoders"]["hf"], run["encoders"]["bytes"]
    assert hf["trained_elsewhere"] is True and hf["flops_per_byte_train"] is None and hf["backbone"] is None
    assert "train" not in hf["seeds"]["0"] and hf["seeds"]["0"]["causality"]["ok"]
    assert len(hf["describe"]["checkpoint_sha256"]) == 64
    assert "trained_elsewhere" not in by and by["seeds"]["0"]["train"]["bytes"] >= 8000
    # the clean_target cells of both encoders score the same bytes (the clean continuations)
    ct = {r["encoder"]: int(r["n_bytes"]) for r in got if r["mode"] == "clean_target" and r["perturbation_id"] == "clean"}
    assert ct["hf"] == ct["bytes"] > 0


def test_the_checkpoint_scores_the_same_in_another_suite(runs: Path) -> None:
    def nll(run: str) -> dict[tuple[str, str], float]:
        return {(r["mode"], r["perturbation_id"]): float(r["nll_nats"]) for r in rows(runs / run)
                if r["encoder"] == "hf" and r["perturbation_id"] in ("clean", "case.upper")}
    # equal up to the float rounding of differently filled batches (the mixed run packs more cells)
    assert len(nll("mixed")) == 4 and nll("mixed") == pytest.approx(nll("hf_only"), rel=1e-6)


def test_compare_merges_runs_and_keeps_the_checkpoint_out_of_flop_claims(runs: Path) -> None:
    assert main(["compare", str(runs / "mixed"), str(runs / "hf_only"), "--out", str(runs / "cmp")]) == 0
    md = (runs / "cmp" / "report.md").read_text()
    assert "hf (trained elsewhere)" in md and "left out of every FLOP comparison" in md
    assert "mixed/bytes" in md and "mixed/hf" in md and r"hf\_only/hf" in md  # Markdown-escaped


@pytest.mark.parametrize("budget, needle", [
    ("{match: flops}", "budget.match: encoder 'ck' is trained elsewhere"),
    ("{match: flops, flops_reference: ck}", "budget.flops_reference: encoder 'ck' is trained elsewhere"),
])
def test_a_checkpoint_cannot_set_a_flop_budget(tmp_path: Path, budget: str, needle: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "config.json").write_text("{}")  # validation looks for the folder only
    suite = tmp_path / "bad.yaml"
    suite.write_text(HF_ONLY.replace("{train_bytes: 100000, context_bytes: 128, batch_bytes: 4096}", budget)
                     .replace("- {name: hf, path: ./tiny-hf-model}",
                              f"- {{name: hf, id: ck, path: {tmp_path / 'ck'}}}\n  - {{name: bytes}}"))
    assert main(["validate", str(suite)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bad.yaml:" in err and needle in err, err


def test_a_checkpoint_cannot_join_a_scaling_grid() -> None:
    from harness.config.pretrained import check_suite
    from harness.config.suite import BudgetConfig, EncoderSpec

    specs = [EncoderSpec(name="bytes", label="b", config=None, backbone=None),
             EncoderSpec(name="hf", label="ck", config=None, backbone=None)]
    with pytest.raises(ValueError, match=r"\('encoders', 1\): encoder 'ck' is trained elsewhere: a scaling grid"):
        check_suite(specs, BudgetConfig(), object(), lambda keys, p: ValueError(f"{keys}: {p}"), [ROOT])
    check_suite(specs, BudgetConfig(), None, lambda keys, p: ValueError(p), [ROOT])  # no grid, match bytes: fine


def test_sanity_skips_a_checkpoint_encoder_with_a_line(capsys: pytest.CaptureFixture[str]) -> None:
    from harness.sanity.command import run_sanity
    from harness.sanity.probes import trainable_encoders

    assert "hf" not in trainable_encoders() and "bytes" in trainable_encoders()
    assert run_sanity(["hf"], "cpu", quick=True)
    assert "SKIP  hf" in capsys.readouterr().out


def test_dry_run_times_the_checkpoint_for_scoring_only(runs: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(runs)
    assert main(["run", "hf_only.yaml", "--limit", "2", "--out", "dry", "--dry-run"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("hf ")]
    assert line.split()[3] == "-"  # no training FLOPs
