"""Scoring as a batch job: packing windows of several cells into one job changes no cell's
numbers (BPE and BLT pad), the plan cache round-trips and rejects corrupt files, and
perturbation in several processes gives the texts of one process."""

from __future__ import annotations

import gzip
import os
import re
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from _procs import children

from encoders.backbone import BackboneConfig
from encoders.base import FitContext
from encoders.blt import BltConfig, BltEncoder
from encoders.bpe import BpeConfig, BpeEncoder
from harness.data.batchscore import PlanCache, perturb_many
from harness.score.items import plan_clean_target, plan_full, score_items

CPU = torch.device("cpu")
TEXTS = [(f"Document {i}: the quick brown fox jumps over {i} lazy dogs, naïve café. " * (2 + i % 5)).encode()
         for i in range(12)]


def fit(enc: torch.nn.Module) -> torch.nn.Module:
    def sub(e: torch.nn.Module, n: int) -> dict:  # a sub-model (BLT entropy model): leave it at init
        return {"bytes": 0, "flops": 0.0, "seconds": 0.0}

    enc.fit(FitContext(train_docs=lambda: iter(TEXTS), train_bytes=4000, context_bytes=96, seed=0, device=CPU,
                       train=sub, log=lambda s: None))
    return enc.eval()


def bpe() -> torch.nn.Module:
    torch.manual_seed(0)
    return fit(BpeEncoder(BpeConfig(vocab_size=300), BackboneConfig(layers=1, dim=16, heads=2)))


def blt() -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = BltConfig(**{**BltEncoder.sanity_config().__dict__, "threshold_fit_bytes": 2048})
    return fit(BltEncoder(cfg, BackboneConfig(layers=1, dim=16, heads=2)))


@pytest.mark.parametrize("make", [bpe, blt], ids=["bpe", "blt"])
def test_packing_cells_changes_no_cells_numbers(make) -> None:  # noqa: ANN001
    enc = make()
    # two "cells": full-document windows of different lengths, and clean_target windows
    cell_a = [plan_full(t, 96, 48) for t in TEXTS[:6]]
    cell_b = [plan_clean_target(t[: len(t) // 2], t[len(t) // 2 :], 96, 40) for t in TEXTS[6:]]
    alone_a = score_items(enc, cell_a, CPU, batch_windows=4)
    alone_b = score_items(enc, cell_b, CPU, batch_windows=4)
    packed = score_items(enc, cell_a + cell_b, CPU, batch_windows=7)
    for x, y in zip(alone_a + alone_b, packed):
        assert x is not None and y is not None
        assert x.n_units == y.n_units and x.segments == y.segments
        # padding sits after a window's last byte and attention is causal: the same function of
        # the window's bytes; only float rounding of differently shaped batches can differ
        np.testing.assert_allclose(x.byte_nll, y.byte_nll, rtol=1e-5, atol=1e-6)
        assert x.nll == pytest.approx(y.nll, rel=1e-6)


def test_needed_skips_batches_but_keeps_the_others_numbers() -> None:
    enc = bpe()
    items = [plan_full(t, 96, 48) for t in TEXTS]
    full = score_items(enc, items, CPU, batch_windows=5)
    needed = [i % 3 == 0 for i in range(len(items))]
    part = score_items(enc, items, CPU, batch_windows=5, needed=needed)
    for f, p, n in zip(full, part, needed):
        if n:
            assert p is not None and f is not None and np.array_equal(f.byte_nll, p.byte_nll)  # same batches: bit-equal
        else:
            assert p is None


def test_bpe_takes_four_times_the_windows_a_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    """``eval.batch_windows`` counts a byte model's windows; an AR BPE model forwards 4x as many
    (its sequences are a third to a quarter as long), with the numbers of smaller batches."""
    from encoders.byte_baseline import ByteConfig, ByteEncoder

    items = [plan_full(t, 96, 48) for t in TEXTS]
    n_windows = sum(len(it.windows) for it in items)  # all distinct: every document differs
    sizes: dict[str, list[int]] = {}
    torch.manual_seed(0)
    byte_model = ByteEncoder(ByteConfig(), BackboneConfig(layers=1, dim=16, heads=2)).eval()
    for name, enc in (("bytes", byte_model), ("bpe", bpe())):
        forward = type(enc).forward

        def counted(self, batch, _name=name, _fwd=forward):  # noqa: ANN001, ANN202
            sizes.setdefault(_name, []).append(int(batch.tensors["inputs"].shape[0]))
            return _fwd(self, batch)

        monkeypatch.setattr(type(enc), "forward", counted)
        score_items(enc, items, CPU, batch_windows=3, dedup=False)
    assert sum(sizes["bytes"]) == sum(sizes["bpe"]) == n_windows
    assert max(sizes["bytes"]) == 3 and max(sizes["bpe"]) == 12
    assert len(sizes["bpe"]) == -(-n_windows // 12)
    # and the numbers are those of batches of 3 windows, to float rounding
    enc = bpe()
    big = score_items(enc, items, CPU, batch_windows=3)
    monkeypatch.setattr(BpeEncoder, "SCORE_BATCH_FACTOR", 1)
    small = score_items(enc, items, CPU, batch_windows=3)
    for x, y in zip(big, small):
        assert x is not None and y is not None and x.n_units == y.n_units
        np.testing.assert_allclose(x.byte_nll, y.byte_nll, rtol=1e-5, atol=1e-6)


def test_plan_cache_round_trip_and_corruption(tmp_path: Path) -> None:
    cache = PlanCache(tmp_path)
    key = cache.key(data="fp", id="typo", seed=0)
    rows = [("caf\udce9 text", 0.25, 2), None, ("", 0.0, 0)]  # a lone surrogate from an undecodable byte
    assert cache.get(key) is None
    cache.put(key, rows)
    assert cache.get(key) == rows
    path = cache.path(key)
    assert path is not None
    raw = gzip.decompress(path.read_bytes()).replace(b"0.25", b"0.75")  # tampered payload
    path.write_bytes(gzip.compress(raw))
    assert cache.get(key) is None  # checksum mismatch: recomputed by the caller
    path.write_bytes(b"not gzip")
    assert cache.get(key) is None
    assert PlanCache(None).get(key) is None  # caching off


def _work(task: int) -> list:
    return [(f"text {task} {i}", task / 10, i) for i in range(3)]


def test_perturb_many_in_processes_matches_one_process() -> None:
    tasks = list(range(5))
    assert perturb_many(tasks, _work, processes=2) == perturb_many(tasks, _work, processes=1)


PERTURBED = ["The quick brown fox jumps over the lazy dog.", "Ça coûte cher: naïve café owners in Zürich.",
             "Tokenizer-free models read raw bytes, so a typo changes one byte."] * 20


def _perturb_task(task: tuple[str, float]) -> list:
    """Plan rows as ``harness.pipeline.plans.plan_rows`` makes them (perturbed text, edit rate, word count), of
    real registered perturbations; tasks differ in cost, so they finish out of order."""
    from harness.data.perturb import apply
    from harness.infra.plugins import resolve
    from harness.score.metrics import count_words
    from perturbations.measure import edit_rate

    name, severity = task
    inst = resolve("perturbation", name)(severity=severity)
    if name == "typo.random":
        time.sleep(0.5)  # the first task finishes last
    out = []
    for i, text in enumerate(PERTURBED):
        p = apply(inst, text, 0, name, {"severity": severity}, f"doc/{i}")
        out.append((p, edit_rate(text, p), count_words(text)))
    return out


def test_perturb_many_gives_the_serial_results_in_task_order() -> None:
    tasks = [("typo.random", 0.2), ("case.random", 0.5), ("unicode.nfd", 1.0), ("typo.keyboard", 0.05),
             ("space.random", 0.1)]
    serial = [_perturb_task(t) for t in tasks]
    assert perturb_many(tasks, _perturb_task, processes=3) == serial
    assert perturb_many(tasks, _perturb_task, processes=1) == serial
    assert serial[2][1][0] != PERTURBED[1] and serial[2][0][0] == PERTURBED[0]  # NFD changes only accents


def _pid(task: int) -> int:
    time.sleep(0.2)  # long enough that every worker gets a task
    return os.getpid()


def test_perturb_many_spreads_tasks_over_processes() -> None:
    pids = perturb_many(list(range(4)), _pid, processes=2)  # type: ignore[arg-type]
    assert len(set(pids)) == 2 and os.getpid() not in pids


def _killed_at(task: tuple[int, str]) -> list:
    i, how = task
    if i == 2:
        if how == "sigkill":  # as the kernel's out-of-memory killer does
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(3)  # e.g. a C extension that exits
    time.sleep(0.1)
    return [(f"text {i}", 0.0, 1)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork")
@pytest.mark.parametrize("how,code", [("sigkill", -9), ("exit", 3)])
def test_a_dead_perturbation_worker_is_a_one_line_error(how: str, code: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # The stall limit bounds the test if the death went unnoticed (a TimeoutError would fail it);
    # ProcessPoolExecutor could wait for ever on a worker killed mid-send.
    monkeypatch.setenv("TOKBENCH_STALL_SECONDS", "20")
    from harness.infra.accel import WorkerDied

    before = children()
    t0 = time.perf_counter()
    with pytest.raises(WorkerDied) as err:
        perturb_many([(i, how) for i in range(6)], _killed_at, processes=3)
    assert time.perf_counter() - t0 < 10
    msg = str(err.value)
    assert re.fullmatch(rf"perturbation: worker \d \(pid \d+\) died \(exit code {code}\) before sending its result", msg)
    assert isinstance(err.value, OSError)  # the CLI's one line, exit 2 (tests/reliability/test_plugin_safety.py)
    deadline = time.time() + 10  # the other workers were ended, not left running
    while children() - before and time.time() < deadline:
        time.sleep(0.05)
    assert not children() - before


def _raises_at_3(i: int) -> list:
    if i == 3:
        raise ValueError("bad document 3")
    return []


def test_an_error_in_a_perturbation_worker_keeps_its_type() -> None:
    with pytest.raises(ValueError, match="bad document 3"):
        perturb_many(list(range(6)), _raises_at_3, processes=2)  # type: ignore[arg-type]


def _stalls_at_1(i: int) -> list:
    if i == 1:
        time.sleep(120)
    return []


def test_a_stalled_perturbation_worker_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKBENCH_STALL_SECONDS", "2")
    t0 = time.perf_counter()
    with pytest.raises(TimeoutError, match=r"perturbation: worker \d \(pid \d+\) sent no result in 2 s"):
        perturb_many(list(range(4)), _stalls_at_1, processes=2)  # type: ignore[arg-type]
    assert time.perf_counter() - t0 < 30  # the sleeping worker was killed, not waited for




def test_bf16_switch_is_cuda_only() -> None:
    """bf16 scoring is autocast on CUDA only; on CPU the flag leaves the fp32 numbers untouched
    (the GPU's |ΔBPB| against fp32 is a benchmark: BENCHMARKS.md)."""
    enc = bpe()
    items = [plan_full(t, 96, 48) for t in TEXTS[:4]]
    a = score_items(enc, items, CPU, batch_windows=3, bf16=False)
    b = score_items(enc, items, CPU, batch_windows=3, bf16=True)
    for x, y in zip(a, b):
        assert x is not None and y is not None and np.array_equal(x.byte_nll, y.byte_nll)


def test_plan_cache_key_follows_the_perturbation_code() -> None:
    from harness.data.batchscore import code_hash
    from perturbations.base import Perturbation

    class A(Perturbation):
        pass

    assert code_hash(A) == code_hash(A) and len(code_hash(None)) == 16
    assert code_hash(None) != code_hash(PlanCache)  # a different module file, a different key


def test_plan_cache_key_covers_every_module_of_the_perturbations_package(tmp_path: Path) -> None:
    # case.random's perturb is in chartable.py, not case.py: an edit there must change the key.
    # Every built-in perturbation hashes the whole package (so two of them share it); a plugin
    # hashes every module under its own directory.
    import importlib
    import sys

    from harness.data.batchscore import _files_hash, code_hash
    from perturbations.case import RandomCase
    from perturbations.typo import KeyboardTypo

    assert code_hash(RandomCase) == code_hash(KeyboardTypo) != code_hash(None)
    pkg = tmp_path / "tbplug"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text("def up(s):\n    return s.upper()\n")
    (pkg / "mod.py").write_text(
        "from perturbations.base import Perturbation\nfrom tbplug.helper import up\n\n\n"
        "class Shout(Perturbation):\n    def perturb(self, text, rng):\n        return up(text)\n")
    sys.path.insert(0, str(tmp_path))
    try:
        cls = importlib.import_module("tbplug.mod").Shout
        before = code_hash(cls)
        (pkg / "helper.py").write_text("def up(s):\n    return s.lower()\n")
        code_hash.cache_clear()  # a new process, as the next run is
        _files_hash.cache_clear()
        assert code_hash(cls) != before
    finally:
        sys.path.remove(str(tmp_path))
        for m in ("tbplug", "tbplug.mod", "tbplug.helper"):
            sys.modules.pop(m, None)
        code_hash.cache_clear()
        _files_hash.cache_clear()
