"""Scoring as a batch job: packing windows of several cells into one job changes no cell's
numbers (BPE and BLT pad), the plan cache round-trips and rejects corrupt files, and
perturbation in several processes gives the texts of one process."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
import torch

from encoders.backbone import BackboneConfig
from encoders.base import FitContext
from encoders.blt import BltConfig, BltEncoder
from encoders.bpe import BpeConfig, BpeEncoder
from harness.batchscore import PlanCache, perturb_many
from harness.score import plan_clean_target, plan_full, score_items

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
    from harness.batchscore import code_hash
    from perturbations.base import Perturbation

    class A(Perturbation):
        pass

    assert code_hash(A) == code_hash(A) and len(code_hash(None)) == 16
    assert code_hash(None) != code_hash(PlanCache)  # a different module file, a different key
