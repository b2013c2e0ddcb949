"""Compiling ahead (``harness.overlap.compileahead``): a spawned process warms torch.compile's disk caches
with every model's training and scoring graphs, so the run compiles them from the cache; the
run's numbers are the same as without it, and its failures never fail the run.

The run-level test compiles on the CPU (inductor's C++ backend, as
tests/harness/infra/test_compile_shapes.py does) with private, empty caches: about a minute on 2 cores."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.overlap.compileahead import (
    AHEAD_MEMORY_SHARE,
    BIG_GPU_BYTES,
    MID_GPU_SHARE,
    WARM_WINDOWS,
    ahead_workers,
    assign,
    compile_ahead_wanted,
    cuda_index,
    memory_share,
    warm_windows,
)

ROOT = Path(__file__).resolve().parents[3]


def test_wanted_default_and_setting() -> None:
    assert compile_ahead_wanted("auto", "cuda", True, 16)
    assert not compile_ahead_wanted("auto", "cuda", True, 2)  # too few CPUs to compile beside the run
    assert not compile_ahead_wanted("auto", "cpu", True, 16)  # a CPU run's cores are busy training
    assert not compile_ahead_wanted("auto", "cuda", False, 16)  # nothing compiled, nothing to warm
    assert compile_ahead_wanted(True, "cpu", True, 2)
    assert not compile_ahead_wanted(True, "cpu", False, 2)
    assert not compile_ahead_wanted(False, "cuda", True, 16)


def test_warm_windows() -> None:
    assert warm_windows(256, BIG_GPU_BYTES) == 256  # a large GPU: the run's own batch
    assert warm_windows(256, BIG_GPU_BYTES - 1) == WARM_WINDOWS  # no estimate: a few windows
    h100 = 80 * 2**30
    fits = int(MID_GPU_SHARE * h100)
    assert warm_windows(256, h100, fits) == 128  # every model fits beside the run: half the batch
    assert warm_windows(255, h100, fits) == 128  # rounded up
    assert warm_windows(256, h100, fits + 1) == WARM_WINDOWS  # a model too large to share the GPU
    assert warm_windows(12, h100, fits) == WARM_WINDOWS  # half of a small batch: never below a few
    assert warm_windows(4, h100, fits) == 4
    assert warm_windows(256, None) == WARM_WINDOWS  # the CPU
    assert warm_windows(4, None) == 4  # never more than the run's
    assert warm_windows(256, None, setting=0) == 256
    assert warm_windows(256, BIG_GPU_BYTES, setting=32) == 32 and warm_windows(16, None, setting=32) == 16


def test_workers() -> None:
    assert ahead_workers(16, 6) == 2 and ahead_workers(8, 6) == 2
    assert ahead_workers(7, 6) == 1  # few CPUs: one process
    assert ahead_workers(16, 2) == 1  # one model to warm for training: one process
    assert ahead_workers(16, 1) == 1
    assert ahead_workers(4, 6, 3) == 3 and ahead_workers(4, 3, 3) == 2


def test_assign_deals_the_models_in_training_order() -> None:
    std = ["bytes", "fuzzytok", "blt", "bpe-1024", "bpe-4096", "bpe-16384"]
    # one process: every later model's training, then every model's scoring (as before)
    assert assign(std, 1) == [(std[1:], std)]
    # two: the second and third models at once; the first model's scoring to the one with fewer
    assert assign(std, 2) == [(["fuzzytok", "bpe-1024", "bpe-16384"], ["fuzzytok", "bpe-1024", "bpe-16384"]),
                              (["blt", "bpe-4096"], ["bytes", "blt", "bpe-4096"])]
    # equal shares: the last process scores the first model
    assert assign(std[:5], 2) == [(["fuzzytok", "bpe-1024"], ["fuzzytok", "bpe-1024"]),
                                  (["blt", "bpe-4096"], ["bytes", "blt", "bpe-4096"])]
    three = assign(std, 3)
    assert [t for t, _ in three] == [["fuzzytok", "bpe-4096"], ["blt", "bpe-16384"], ["bpe-1024"]]
    assert three[2][1] == ["bytes", "bpe-1024"]
    for k in (1, 2, 3):  # every model trained ahead once (but the first) and scored ahead once
        parts = assign(std, k)
        assert sorted(sum((t for t, _ in parts), [])) == sorted(std[1:])
        assert sorted(sum((sc for _, sc in parts), [])) == sorted(std)


def test_memory_share_leaves_the_run_its_largest_model() -> None:
    h100 = 80 * 2**30
    assert memory_share(h100, 40 * 2**30, 1) == AHEAD_MEMORY_SHARE  # one process: as before
    assert memory_share(h100, 40 * 2**30, 2) == pytest.approx(0.25)  # (1 - 1/2) / 2
    assert memory_share(h100, 8 * 2**30, 2) == AHEAD_MEMORY_SHARE  # never more than one process had
    assert memory_share(h100, None, 2) == pytest.approx(AHEAD_MEMORY_SHARE / 2)  # no estimate
    assert memory_share(h100, 90 * 2**30, 2) == 0.0  # nothing left (it then warms a few windows)
    # two processes and the run's largest model never claim more than the device
    for need in (10, 30, 44):
        assert 2 * memory_share(h100, need * 2**30, 2) * h100 + need * 2**30 <= h100


SUITE_EDIT = (("  - name: bytes\n", "  - name: bytes\n  - {name: bpe, vocab_size: 300}\n"
                                    "  - {name: bpe, id: bpe-b, vocab_size: 320, backbone: {dim: 32}}\n"),
              ("budget: {", "budget: {compile: true, "),
              ("eval: {max_docs: 5", "eval: {modes: [full], max_docs: 3"))


def _run(suite: Path, out: Path, cache: Path, ahead: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOKBENCH_CACHE": str(cache.parent / "data"),
           "TORCHINDUCTOR_CACHE_DIR": str(cache / "inductor"), "TRITON_CACHE_DIR": str(cache / "triton"),
           "TMPDIR": str(cache / "tmp")}
    on = "true" if ahead == "1" else "false"
    (cache / "tmp").mkdir(parents=True)
    return subprocess.run([sys.executable, "-m", "harness.cli", "run", str(suite), "--out", str(out), "--quiet",
                           "--no-report", "--device", "cpu", "--set", f"overlap.compile_ahead={on}",
                           "--set", f"overlap.compile_ahead_wait={on}", "--set", "overlap.compile_ahead_workers=2"],
                          env=env, capture_output=True, text=True,
                          cwd=suite.parent, timeout=1500)


def _rows(run: Path) -> list[dict[str, str]]:
    with open(run / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_compile_ahead_warms_the_caches_and_changes_no_number(tmp_path: Path) -> None:
    """Two compiled CPU runs from empty caches: without compile-ahead, and with it in two
    processes (the run waiting for each model's warm-up, so the order is fixed on a slow
    machine). With it, the second and third models train and every model scores from the cache
    (hits, no misses), the results are the same to the last digit, and no semaphore is left for
    the resource tracker to clean up."""
    from test_run import SUITE, make_suite

    suite = make_suite(tmp_path)
    text = SUITE
    for a, b in SUITE_EDIT:
        text = text.replace(a, b)
    suite.write_text(text)
    plain = _run(suite, tmp_path / "plain", tmp_path / "c0", "0")
    assert plain.returncode == 0, plain.stderr[-2000:]
    ahead = _run(suite, tmp_path / "ahead", tmp_path / "c1", "1")
    assert ahead.returncode == 0, ahead.stderr[-2000:]
    assert _rows(tmp_path / "plain") == _rows(tmp_path / "ahead")
    # the processes' compiles leave no named semaphore to the resource tracker (a spawned
    # process's locks were named ones, its os._exit skipped their unlinking, and every GPU run
    # ended with the tracker's "leaked semaphore objects" warning)
    assert "leaked semaphore" not in ahead.stderr, ahead.stderr[-2000:]
    # the job file handed to the process and its scratch directory are gone
    assert not [p.name for p in (tmp_path / "c1" / "tmp").iterdir() if "compile-ahead" in p.name]
    rj = json.loads((tmp_path / "ahead" / "run.json").read_text())
    facts = rj["compile_ahead"]
    assert facts["on"] and facts["error"] is None
    # the first model's training graphs are the run's own (compiled as the process starts);
    # every model's scoring graphs and the later models' training graphs are warmed
    assert facts["models"]["bytes"].keys() == {"score"}
    assert facts["models"]["bpe"].keys() == facts["models"]["bpe-b"].keys() == {"train", "score"}
    assert facts["ready_when_trained"] == {"bytes": False, "bpe": True, "bpe-b": True}
    # two processes, one later model each; the first model's scoring went to the second
    assert facts["workers"] == 2 and facts["errors"] == [None, None]
    assert facts["assigned"] == [{"train": ["bpe"], "score": ["bpe"]}, {"train": ["bpe-b"], "score": ["bytes", "bpe-b"]}]
    assert len(facts["finished"]["workers_seconds"]) == 2
    assert rj["timings"]["compile_ahead_seconds"] > 0
    train = {label: f["seeds"]["0"]["train"] for label, f in rj["encoders"].items()}
    cache = {label: t["compile_cache"] for label, t in train.items()}
    assert cache["bpe"]["fxgraph_cache_hit"] > 0 and cache["bpe"]["fxgraph_cache_miss"] == 0
    assert cache["bytes"]["fxgraph_cache_miss"] > 0  # compiled here, cold
    plain_rj = json.loads((tmp_path / "plain" / "run.json").read_text())
    # bpe-b (another width, warmed by the second process): its graphs come from that process's
    # work, but for those of its last, one-window batch (the tiny corpus's 1-token tail: a batch
    # of one is compiled apart), which the process's few warm-up steps never reach
    plain_b = plain_rj["encoders"]["bpe-b"]["seeds"]["0"]["train"]["compile_cache"]
    assert cache["bpe-b"]["fxgraph_cache_hit"] > 0
    assert cache["bpe-b"]["fxgraph_cache_miss"] < plain_b["fxgraph_cache_miss"]
    assert plain_rj["compile_ahead"] == {"on": False}
    assert plain_rj["encoders"]["bpe"]["seeds"]["0"]["train"]["compile_cache"]["fxgraph_cache_miss"] > 0
    # scoring's inference graphs: all from the cache with it
    assert rj["score_compile_cache"]["fxgraph_cache_miss"] == 0
    assert rj["score_compile_cache"]["fxgraph_cache_hit"] > 0


def test_a_failure_over_there_is_one_log_line_and_the_run_goes_on(tmp_path: Path) -> None:
    """The process fails (here: it is told to use a CUDA device this machine lacks): the run's
    side logs one line, keeps the error for run.json, waits for nothing and stops cleanly."""
    from test_run import make_suite

    from harness.config import load_suite
    from harness.overlap.compileahead import CompileAhead, CompileAheadGroup

    suite = load_suite(make_suite(tmp_path), ())
    lines: list[str] = []
    ahead = CompileAhead({"suite": suite, "device": "cuda", "cache_dir": None, "specs": list(suite.encoders),
                          "seed": 0, "fit_docs": [], "train_docs": [], "sample": [], "windows": 2}, lines.append)
    for _ in range(120):  # the process imports torch first: up to a minute on a busy machine
        ahead.poll(timeout=1.0)
        if ahead.error is not None:
            break
    assert ahead.error is not None and "no CUDA device" in ahead.error
    assert lines == [f"[compile] compiling ahead stopped ({ahead.error}); the run compiles as before"]
    assert not ahead.ready(suite.encoders[0].label, "train")
    ahead.stop()
    facts = CompileAheadGroup([(ahead, [], [])]).facts()  # run.json's, as the run makes it
    assert facts["error"] == ahead.error and facts["models"] == {}
    assert not os.path.exists(ahead.job_path)


def test_standard_suite_warms_half_the_batch_on_an_80_gib_gpu() -> None:
    """The standard suite's largest estimate (bpe-16384, 40.3 GiB in bf16) fits ``MID_GPU_SHARE``
    of an H100's 80 GiB, so its compile-ahead process trains on half the run's 256 windows."""
    import torch

    from harness.config.build import load_suite
    from harness.infra.memory import suite_estimates

    suite = load_suite(ROOT / "suites" / "standard.yaml")
    need = max(est.total for *_, est in suite_estimates(suite, torch.device("cuda")))
    assert 40 * 2**30 < need < 41 * 2**30
    run = suite.budget.windows_per_micro_batch
    assert run == 256
    assert warm_windows(run, 80 * 2**30, need) == 128
    assert warm_windows(run, 48 * 2**30, need) == WARM_WINDOWS  # a 48 GiB card: a few windows


def test_out_of_memory_warms_on_a_few_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the process's memory cap a model is warmed again on ``few`` windows a step; an
    out-of-memory error at ``few`` already is not retried."""
    import dataclasses

    import torch

    from harness.config.build import load_suite
    from harness.pipeline import compileahead_child

    calls: list[int] = []

    def train_calls(enc, docs, small, dev, seed, permuter) -> None:  # noqa: ANN001
        calls.append(small.batch_bytes // small.context_bytes)
        if calls[-1] > 8:
            raise torch.OutOfMemoryError("CUDA out of memory (a stand-in)")

    monkeypatch.setattr(compileahead_child, "_train_calls", train_calls)
    b = load_suite(ROOT / "suites" / "standard.yaml").budget
    half = dataclasses.replace(b, batch_bytes=128 * b.context_bytes)
    enc = torch.nn.Linear(2, 2)
    assert compileahead_child._warm_training(enc, [], half, 8, torch.device("cpu"), 0, None) == 8
    assert calls == [128, 8]
    few = dataclasses.replace(b, batch_bytes=16 * b.context_bytes)
    calls.clear()
    with pytest.raises(torch.OutOfMemoryError):
        compileahead_child._warm_training(enc, [], few, 16, torch.device("cpu"), 0, None)
    assert calls == [16]


def test_cuda_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bare "cuda" device resolves to the current device's index; an explicit one is kept.
    (torch.cuda.set_per_process_memory_fraction refuses a device without an index.)"""
    import torch

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 3)
    assert cuda_index(torch.device("cuda")) == 3
    assert cuda_index(torch.device("cuda", 1)) == 1
