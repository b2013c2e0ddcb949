"""The dry run (harness/pipeline/estimate.py): lines handed out as they are known, the phases it writes,
and its private compile caches. Its accuracy against a run is a benchmark (BENCHMARKS.md), not a
test; tests/harness/cli/test_run.py checks that a run reads the estimate back."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.config import load_suite
from harness.pipeline.estimate import _private_compile_caches, dry_run
from harness.pipeline.run import RunOptions

SUITE = """\
name: tiny-estimate
seeds: [0]
data:
  train: {paths: [corpus], docs: paragraph, language: en}
  eval:
    - {name: heldout, paths: [corpus], language: en}
budget: {train_bytes: 6000, context_bytes: 64, batch_bytes: 512, warmup_bytes: 500}
backbone: {layers: 1, dim: 16, heads: 2}
encoders:
  - name: bytes
  - {name: bpe, vocab_size: 300}
perturbations:
  - {name: case.upper, severity: 1.0}
  - {name: unicode.strip_diacritics, severity: 1.0}   # ASCII text: the clean windows again
eval: {max_docs: 5, target_bytes: 24, sample_docs: 1, batch_windows: 8}
"""


def _write_suite(tmp_path: Path) -> Path:
    """SUITE and its corpus in ``tmp_path``; returns the suite's path."""
    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_text("\n\n".join(
        f"Paragraph {p}: the quick brown fox jumps over the lazy dog, again and again." for p in range(40)))
    (tmp_path / "s.yaml").write_text(SUITE)
    return tmp_path / "s.yaml"


def test_dry_run_hands_out_each_line_as_it_is_known(tmp_path: Path) -> None:
    _write_suite(tmp_path)
    suite = load_suite(tmp_path / "s.yaml")
    seen: list[tuple[str, bool]] = []  # (line, estimate.json already written?)
    out = tmp_path / "o"
    text = dry_run(suite, RunOptions(out=out, device="cpu", progress=False, log=lambda s: None),
                   emit=lambda line: seen.append((line, (out / "estimate.json").exists())))
    lines = [line for line, _ in seen]
    assert "\n".join(lines) == text
    model_rows = [i for i, line in enumerate(lines) if line.split()[:1] in (["bytes"], ["bpe"])]
    total = next(i for i, line in enumerate(lines) if line.startswith("estimate per seed:"))
    # the models' lines come first, each before anything is summed or written
    assert len(model_rows) == 2 and max(model_rows) < total
    assert not any(written for _, written in seen[: total + 1])
    assert lines[-1].startswith("dry run: ") and "max RSS" in lines[-1]
    est = json.loads((out / "estimate.json").read_text())
    phases = est["seconds_per_seed"]
    assert {"data", "fits", "compile", "training", "perturbation", "analyses", "scoring", "results",
            "per_seed"} <= set(phases)
    assert phases["results"] > 0  # the results files: every cell loaded back and written out
    # what each model's line was made of, kept for reading an estimate against a run
    assert set(est["models"]) == {"bytes", "bpe"}
    assert all(m["score_window_s"] > 0 and m["train_s"] > 0 for m in est["models"].values())
    assert phases["per_seed"] == pytest.approx(sum(v for k, v in phases.items() if k != "per_seed"))
    assert phases["training"] > 0 and phases["scoring"] > 0 and phases["compile"] == 0.0  # compile is off on CPU
    assert est["compile"]["on"] is False and est["dry_run_seconds"]["total"] > 0
    assert not (out / "models").exists()
    # three cells of equal windows, one of them (strip_diacritics on ASCII) a repeat of clean's:
    # at most 2/3 of the sampled windows are distinct, and scoring is estimated for those
    kept = est["score_distinct_fraction"]
    assert 0 < kept <= 2 / 3 + 1e-12
    assert any(line.startswith("  (scoring: ") and "forwarded once" in line for line in lines)


def test_private_compile_caches_are_temporary_and_restore_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_CACHE_DIR", "/somewhere/triton")
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    with _private_compile_caches(True):
        inductor = Path(os.environ["TORCHINDUCTOR_CACHE_DIR"])
        assert os.environ["TRITON_CACHE_DIR"] != "/somewhere/triton"
        inductor.mkdir(parents=True)
        (inductor / "x").write_text("compiled")
    assert not inductor.exists()  # removed with its temporary directory
    assert os.environ["TRITON_CACHE_DIR"] == "/somewhere/triton"
    assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ
    with _private_compile_caches(False):  # compile off: nothing changes
        assert "TORCHINDUCTOR_CACHE_DIR" not in os.environ


@pytest.mark.parametrize("ahead", ["0", "1"])
def test_plan_ahead_counts_only_what_outlasts_training(tmp_path: Path, ahead: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Under plan-ahead the run perturbs while its models train (harness.overlap.planahead): the
    estimate's perturbation is the part of the process's own seconds that outlasts the fits,
    compile and training; without it, all of them."""
    _write_suite(tmp_path)
    out = tmp_path / "o"
    on = "true" if ahead == "1" else "false"
    text = dry_run(load_suite(tmp_path / "s.yaml", [f"overlap.plan_ahead={on}"]), RunOptions(out=out, device="cpu", progress=False, log=lambda s: None))
    est = json.loads((out / "estimate.json").read_text())
    p, own = est["seconds_per_seed"], est["plan_ahead"]["perturbation_seconds"]
    assert est["plan_ahead"]["on"] is (ahead == "1") and own > 0
    if ahead == "1":
        assert p["perturbation"] == pytest.approx(max(0.0, own - (p["fits"] + p["compile"] + p["training"])))
        assert est["plan_ahead"]["host_fit_seconds"] > 0  # BPE's merges: learned ahead, not in "fits"
        assert "while the models train" in text
    else:
        assert p["perturbation"] == own and "while the models train" not in text
        assert est["plan_ahead"]["host_fit_seconds"] == 0.0


def test_training_fit_takes_each_calls_compile_out_of_its_wall() -> None:
    """The bytes model's calls as an H200 timed them (benchmarks/dry_train_probe.py):
    (wall s, steps, compile-clock s) of 3, 8, 24 and 64 steps. The 8-step call compiled 3 s more
    (a shape the first call left out), so its wall exceeded the 24-step call's and the old fit's
    step time came out 0; with each call's compile taken out, the step is the last two calls'
    difference (the run's steps took 81-83 ms there)."""
    from harness.train.timing import fit_train_calls

    calls = [(23.76, 4, 21.51), (4.062, 9, 3.0), (2.17, 25, 0.0), (5.48, 65, 0.0)]
    got = fit_train_calls(calls, 246)
    step = (5.48 - 2.17) / 40
    startup = 2.17 - 25 * step
    assert got["step_s"] == pytest.approx(step)
    assert got["train_s"] == pytest.approx(startup + 246 * step)
    # the clocks' 24.51 s, plus what the two warm-up calls took beyond start-up and their steps
    extra = (23.76 - 21.51 - startup - 4 * step) + (4.062 - 3.0 - startup - 9 * step)
    assert got["compile_s"] == pytest.approx(24.51 + extra)
    # a long call faster than the short one (noise): its mean step, never a step of 0
    noisy = fit_train_calls([(10.0, 4, 9.0), (2.0, 9, 0.0), (3.0, 25, 0.0), (2.9, 65, 0.0)], 100)
    assert noisy["step_s"] == pytest.approx(2.9 / 65) and noisy["train_s"] > 0


def test_plan_ahead_takes_the_first_seeds_analysis_text_work(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """With an analysis that hands its preparation over (morphology), the first seed's text work
    is done in the plan-ahead process after its plans, on its share of the CPUs: it joins the
    part that overlaps training, and only what outlasts training counts."""
    from harness.overlap.planahead import plan_ahead_processes

    (tmp_path / "corpus").mkdir()
    (tmp_path / "corpus" / "a.txt").write_text("\n\n".join(
        f"Paragraph {p}: the quick brown fox jumps over the lazy dog, again and again." for p in range(40)))
    (tmp_path / "s.yaml").write_text(SUITE + "analyses:\n  - name: morphology\n")
    out = tmp_path / "o"
    text = dry_run(load_suite(tmp_path / "s.yaml", ["overlap.plan_ahead=true"]), RunOptions(out=out, device="cpu", progress=False, log=lambda s: None))
    est = json.loads((out / "estimate.json").read_text())
    p, own, an = est["seconds_per_seed"], est["plan_ahead"]["perturbation_seconds"], est["analyses_timing"]
    kept = est["score_distinct_fraction"]
    first = an["first_use_seconds"] + an["table_seconds_per_byte"] * an["cell_bytes"] * kept / plan_ahead_processes()
    assert first > 0
    assert p["perturbation"] == pytest.approx(max(0.0, own + first - (p["fits"] + p["compile"] + p["training"])))
    assert "the first seed's in the plan-ahead process" in text


@pytest.mark.parametrize("prestart", ["0", "1"])
def test_a_jobs_fixed_cost_counts_for_the_first_model_only_when_jobs_start_ahead(
        tmp_path: Path, prestart: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run starts each model's scoring job while the one before it runs
    (``harness.score.items.PRESTART``, ``ScoreJob``), so a job's fixed cost (set-up, first
    batches) is on the critical path for the first model of an eval set only. A fixed cost of
    100 s a job, far above the rest, shows where the estimate counts it."""
    import harness.pipeline.estimate as E

    real = E._measure_model

    def measured(*a, **k):  # noqa: ANN002, ANN003, ANN202
        m = real(*a, **k)
        m["score_job_s"] = 100.0
        return m

    monkeypatch.setattr(E, "_measure_model", measured)
    import harness.score.items

    monkeypatch.setattr(harness.score.items, "PRESTART", prestart == "1")
    _write_suite(tmp_path)
    out = tmp_path / "o"
    dry_run(load_suite(tmp_path / "s.yaml"), RunOptions(out=out, device="cpu", progress=False, log=lambda s: None))
    models = json.loads((out / "estimate.json").read_text())["models"]
    assert models["bytes"]["score_s"] >= 100  # the first model (one eval set): its job's cost counts
    assert (models["bpe"]["score_s"] >= 100) is (prestart == "0")
