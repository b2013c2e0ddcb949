"""End to end through the CLI: a tiny suite on text files written here, results columns,
determinism, caching, resume after a kill, and one-line errors for bad input."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.pipeline.summary import phase_table

REQUIRED = ("encoder,seed,dataset,language,perturbation,perturbation_id,severity,mode,n_docs,n_bytes,"
            "n_bytes_clean,nll_nats,bpb,bpb_clean,byte_ppl,word_ppl,token_ppl,n_tokens,edit_rate").split(",")

SUITE = """\
name: tiny
seeds: [0]
data:
  train:
    paths: [corpus]
    docs: paragraph
    language: en
  eval:
    - name: heldout
      paths: [corpus]
      language: en
    - name: other
      paths: [other.txt]
      docs: line
budget: {train_bytes: 6000, context_bytes: 64, batch_bytes: 512, warmup_bytes: 500}
backbone: {layers: 1, dim: 16, heads: 2}
encoders:
  - name: bytes
perturbations:
  - {name: case.upper, severity: [0.5, 1.0]}
eval: {max_docs: 5, target_bytes: 24, sample_docs: 1}
"""


def make_suite(tmp: Path) -> Path:
    (tmp / "corpus").mkdir()
    for f in range(3):
        paras = [f"File {f} paragraph {p}: the quick brown fox jumps over the lazy dog, again and again."
                 for p in range(30)]
        (tmp / "corpus" / f"f{f}.txt").write_text("\n\n".join(paras))
    (tmp / "other.txt").write_bytes(
        "Une ligne en français, avec des accents — très bien.\n".encode() * 3
        + b"Invalid \xff\xfe bytes never crash a run, they are scored as bytes.\n"
    )
    p = tmp / "tiny.yaml"
    p.write_text(SUITE)
    return p


def read_rows(run: Path) -> list[dict[str, str]]:
    with open(run / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    tmp = tmp_path_factory.mktemp("run")
    suite = make_suite(tmp)
    assert main(["run", str(suite), "--out", str(tmp / "out"), "--quiet", "--no-report"]) == 0
    return suite, tmp / "out"


def test_results_have_every_cell_and_column(finished: tuple[Path, Path]) -> None:
    _, out = finished
    rows = read_rows(out)
    assert set(REQUIRED) <= set(rows[0])
    # 1 encoder x 2 eval sets x (clean + 2 severities) x 2 modes
    assert len(rows) == 12
    assert {r["perturbation_id"] for r in rows} == {"clean", "case.upper"}
    assert {(r["token_unit"], r["segment_unit"]) for r in rows} == {("byte", "byte")}
    for r in rows:
        assert float(r["bpb"]) == pytest.approx(float(r["nll_nats"]) / (0.6931471805599453 * int(r["n_bytes"])))
        if r["mode"] == "clean_target":
            assert int(r["n_bytes"]) == int(r["n_bytes_clean"])  # the scored continuation is clean
    upper = [r for r in rows if r["perturbation_id"] == "case.upper" and r["mode"] == "full"]
    assert all(float(r["edit_rate"]) > 0 for r in upper)
    run = json.loads((out / "run.json").read_text())
    assert run["schema_version"] >= 1 and run["status"] == "finished"
    assert run["encoders"]["bytes"]["params_total"] > 0
    assert run["data"]["train"]["fingerprint"]
    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    # every (cell, document) has its numbers; the texts only with eval.keep_texts: true
    assert len(samples) == sum(int(r["n_docs"]) for r in rows)
    assert all({"nll_nats", "n_bytes", "n_bytes_clean", "doc_id"} <= set(s) for s in samples)
    assert not any("text" in s or "text_perturbed" in s for s in samples)
    with_bytes = [s for s in samples if "byte_nll" in s]
    assert with_bytes
    for s in with_bytes:
        assert len(s["byte_nll"]) == len(s["scored_text"].encode("utf-8", "surrogateescape"))
        assert sum(s["byte_nll"]) == pytest.approx(s["nll_nats"], abs=1e-3)


def test_rerun_is_cached_and_identical(finished: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    suite, out = finished
    before = (out / "results.csv").read_text()
    assert main(["run", str(suite), "--out", str(out), "--quiet", "--no-report"]) == 0
    assert "loaded from cache" in capsys.readouterr().err
    assert (out / "results.csv").read_text() == before


def test_fresh_run_gives_the_same_numbers(finished: tuple[Path, Path], tmp_path: Path) -> None:
    suite, out = finished
    assert main(["run", str(suite), "--out", str(tmp_path / "again"), "--quiet", "--no-report"]) == 0
    assert (tmp_path / "again" / "results.csv").read_text() == (out / "results.csv").read_text()


def test_plan_cache_keys_the_scored_continuation(finished: tuple[Path, Path], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # clean_target's cached plan rows hold the scored continuation's word count (and whether a
    # document has anything to score), both cut by eval.target_bytes: a run with another
    # target_bytes read the first run's counts from the shared cache (n_words and word_ppl off)
    suite, out = finished
    runs = {name: tmp_path / name for name in ("a", "b", "c")}
    for d in runs.values():
        shutil.copytree(out / "models", d / "models")  # eval settings are not in a model's key
    base = ["run", str(suite), "--quiet", "--no-report"]
    monkeypatch.setenv("TOKBENCH_CACHE", str(tmp_path / "shared"))
    assert main([*base, "--out", str(runs["a"])]) == 0  # target_bytes 24: fills the cache
    assert main([*base, "--out", str(runs["b"]), "--set", "eval.target_bytes=8"]) == 0
    monkeypatch.setenv("TOKBENCH_CACHE", str(tmp_path / "fresh"))
    assert main([*base, "--out", str(runs["c"]), "--set", "eval.target_bytes=8"]) == 0
    rows_b, rows_c = read_rows(runs["b"]), read_rows(runs["c"])
    assert rows_b == rows_c and rows_b != read_rows(runs["a"])


def test_killed_run_resumes_without_losing_cells(finished: tuple[Path, Path], tmp_path: Path) -> None:
    suite, out = finished
    copy = tmp_path / "killed"
    shutil.copytree(out, copy)
    cells = sorted((copy / "cells").glob("*.json"))
    for c in cells[: len(cells) // 2]:  # the kill came halfway through scoring
        c.unlink()
    (copy / "results.csv").unlink()
    (copy / "cells" / "garbage.json.tmp").write_text("{half a fi")  # a torn write is ignored
    assert main(["run", str(suite), "--out", str(copy), "--quiet", "--no-report"]) == 0
    assert (copy / "results.csv").read_text() == (out / "results.csv").read_text()


def test_a_real_kill_mid_run_then_resume(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    # Scoring packs all cells of an eval set into one job, so cells land in bursts: the second
    # eval set gets enough documents (and a cache of its own, no perturbed texts from earlier
    # runs) that the kill after the first burst lands while it is still being scored.
    (tmp_path / "other.txt").write_text("".join(f"Ligne {i} en français, avec des accents — très bien.\n"
                                                for i in range(400)))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "harness.cli", "run", str(suite), "--out", str(out), "--quiet", "--no-report",
           "--set", "eval.max_docs=400"]
    env = {**os.environ, "TOKBENCH_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    import time

    deadline = time.time() + 120
    while time.time() < deadline and not list(out.glob("cells/*.json")):
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    assert list(out.glob("cells/*.json")), "no cell was finished before the kill"
    assert not (out / "results.csv").exists(), "the run finished before it could be killed"
    resumed = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert resumed.returncode == 0
    assert "loaded from cache" in resumed.stderr  # the trained model survived the kill
    rows = read_rows(out)
    assert len(rows) == 12
    # the same numbers as a run that was never killed (its own run directory and cache)
    fresh = tmp_path / "fresh"
    cmd[cmd.index(str(out))] = str(fresh)
    assert subprocess.run(cmd, capture_output=True, env={**env, "TOKBENCH_CACHE": str(tmp_path / "cache2")}
                          ).returncode == 0
    assert (fresh / "results.csv").read_text() == (out / "results.csv").read_text()


@pytest.mark.parametrize(
    "bad,needle",
    [("budget: {train_bytes: 6000, context_bytes: 64, batch_bytes: 512, warmup_bytes: 500, lrr: 1}", "did you mean 'lr'"),
     ("encoders:\n  - name: fuzytok", "did you mean 'fuzzytok'")],
)
def test_bad_suite_is_one_line_exit_2(tmp_path: Path, bad: str, needle: str) -> None:
    suite = make_suite(tmp_path)
    text = suite.read_text()
    key = bad.split(":")[0]
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(key + ":"))
    end = next((i for i in range(start + 1, len(lines)) if lines[i] and not lines[i].startswith(" ")), len(lines))
    suite.write_text("\n".join(lines[:start] + bad.splitlines() + lines[end:]) + "\n")
    r = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(suite), "--out", str(tmp_path / "o")],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "tiny.yaml:" in r.stderr  # names the file (and line)


def test_missing_suite_file_is_one_line_exit_2(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(tmp_path / "nope.yaml")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "nope.yaml" in r.stderr and "Traceback" not in r.stderr


def test_match_flops_trains_every_encoder_to_the_reference_flops(tmp_path: Path) -> None:
    suite = make_suite(tmp_path)
    text = suite.read_text().replace(
        "encoders:\n  - name: bytes\n",
        "encoders:\n  - name: bytes\n  - {name: bytes, id: wide, backbone: {dim: 32, heads: 2}}\n",
    ).replace("warmup_bytes: 500}", "warmup_bytes: 500, match: flops}")
    suite.write_text(text)
    out = tmp_path / "out"
    assert main(["run", str(suite), "--out", str(out), "--quiet", "--no-report", "--limit", "2"]) == 0
    enc = json.loads((out / "run.json").read_text())["encoders"]
    ref, wide = enc["bytes"]["seeds"]["0"], enc["wide"]["seeds"]["0"]
    assert ref["train"]["bytes"] == 6000  # the reference trains on the byte budget
    # the wider model spends more FLOPs per byte, so it sees fewer bytes for the same FLOPs
    assert wide["train"]["bytes"] < ref["train"]["bytes"]
    # ... and stops at the first step that reaches the reference's FLOPs (granularity: one step)
    one_step = wide["train"]["flops"] / wide["train"]["steps"]
    assert ref["total_flops"] <= wide["total_flops"] < ref["total_flops"] + one_step


def test_dry_run_lists_models_and_cells_and_trains_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = make_suite(tmp_path)
    suite.write_text(suite.read_text().replace("  - name: bytes\n", "  - name: bytes\n  - {name: bpe, vocab_size: 300}\n"))
    assert main(["run", str(suite), "--out", str(tmp_path / "o"), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "bytes" in out and "bpe" in out and "cells to score: 24" in out
    assert not (tmp_path / "o" / "models").exists()


# --- the dry run's estimate against the run (issue 16)

ESTIMATE_PHASES = ("data", "fits", "training", "perturbation", "analyses", "scoring", "per_seed")


def test_dry_run_then_run_reports_estimated_vs_actual(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = make_suite(tmp_path)
    out = tmp_path / "o"
    assert main(["run", str(suite), "--out", str(out), "--dry-run", "--device", "cpu"]) == 0
    text = capsys.readouterr().out
    assert "estimate per seed:" in text and "peak mem" in text
    est = json.loads((out / "estimate.json").read_text())
    assert set(ESTIMATE_PHASES) <= set(est["seconds_per_seed"]) and est["seconds_per_seed"]["training"] > 0
    assert not (out / "models").exists()
    assert main(["run", str(suite), "--out", str(out), "--quiet", "--no-report", "--device", "cpu"]) == 0
    err = capsys.readouterr().err
    assert "[time] total" in err and err.count("estimated vs actual per seed") == 1
    assert not (out / "estimate.json").exists()  # used once: a later run resumes from caches
    run = json.loads((out / "run.json").read_text())
    eva = run["estimate_vs_actual"]
    assert set(ESTIMATE_PHASES) <= set(eva["actual"]) and eva["ratio_per_seed"] > 0
    assert eva["actual"]["per_seed"] == pytest.approx(run["timings"]["total_seconds"], rel=0.05)
    sp = run["speed"]
    assert sp["gemm_bf16_tflops"] is None  # no MFU ceiling on CPU
    tr = sp["train"]["bytes s0"]
    assert tr["bytes_per_s"] > 0 and "mfu" not in tr
    sc = sp["score"]["bytes"]
    assert sc["scored_bytes"] > 0 and sc["forward_flops"] > 0 and sc["mb_per_s"] > 0
    # per mode: scored bytes and windows exact, FLOPs and seconds shares of the packed jobs;
    # windows count every window delivered, duplicate_windows those served from another's forward
    modes = sc["modes"]
    assert set(modes) == {"full", "clean_target"}
    assert 0 <= sc["duplicate_windows"] < sc["windows"]
    for k in ("scored_bytes", "windows", "duplicate_windows"):
        assert sum(m[k] for m in modes.values()) == sc[k]
    for k in ("forward_flops", "seconds"):
        assert sum(m[k] for m in modes.values()) == pytest.approx(sc[k], rel=1e-9)
    # a clean_target window scores target_bytes of it, a full-mode window up to the stride
    assert modes["full"]["scored_bytes"] / modes["full"]["windows"] > (
        modes["clean_target"]["scored_bytes"] / modes["clean_target"]["windows"])
    stats = run["encoders"]["bytes"]["seeds"]["0"]["train"]
    # causal attention counted at half: less than the full count, by the attention share
    assert 0 < stats["flops_causal_attn_half"] < stats["flops"]
    # the first step's share: one step's FLOPs (the steps are equal but for the last)
    first = stats["first_step_flops_causal_attn_half"]
    assert stats["steps"] > 1 and 0 < first < stats["flops_causal_attn_half"]
    assert first == pytest.approx(stats["flops_causal_attn_half"] / stats["steps"], rel=0.5)
    t = run["timings"]
    assert {"perturb_seconds", "score_forward_seconds"} <= set(t)
    # scoring's parts: the packed jobs and the cells made from their scores lie inside it
    assert {"score_items_seconds", "score_cells_seconds", "analyses_prepare_seconds"} <= set(t)
    assert 0 < t["score_items_seconds"] + t["score_cells_seconds"] <= t["score_forward_seconds"] + 1e-6
    assert t["analyses_prepare_seconds"] <= t["perturb_seconds"] + 1e-6
    table = phase_table(t, run["encoders"])
    assert "packed jobs (forwards)" in table and "cells from scores" in table
    # the models' phase in parts: what the fits and training loops clock, building and saving
    # the models, and the rest, which adds up to the phase
    parts = ("model_fit_train_seconds", "model_build_seconds", "model_save_seconds", "model_other_seconds")
    assert all(t[k] >= 0 for k in parts) and t["model_build_seconds"] > 0 and t["model_save_seconds"] > 0
    assert sum(t[k] for k in parts) == pytest.approx(t["train_seconds"], abs=1e-6)
    assert "saving them" in table and "the rest between them" in table
    # a later run into the directory (from caches) is not read against that estimate, nor is a
    # run of another suite against a fresh one
    assert main(["run", str(suite), "--out", str(out), "--quiet", "--no-report", "--device", "cpu"]) == 0
    assert "estimated vs actual" not in capsys.readouterr().err
    assert json.loads((out / "run.json").read_text()).get("estimate_vs_actual") is None
    est["key"] = "another suite"
    (out / "estimate.json").write_text(json.dumps(est))
    assert main(["run", str(suite), "--out", str(out), "--quiet", "--no-report", "--device", "cpu"]) == 0
    assert "estimated vs actual" not in capsys.readouterr().err
