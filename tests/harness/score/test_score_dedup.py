"""Each distinct window scored once (``score_items(dedup=True)``, issue 16): duplicated windows
— documents a perturbation left as they were, clean_target windows whose prefix came out
unchanged, equal windows inside one document — get the numbers of a run that forwards every
window, with fewer windows fed to the model; stats still count every window delivered."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
import torch

from encoders.backbone import BackboneConfig
from encoders.base import Encoder, FitContext
from encoders.blt import BltConfig, BltEncoder
from encoders.bpe import BpeConfig, BpeEncoder
from encoders.byte_baseline import ByteConfig, ByteEncoder
from harness.config.permutation import Permutation, WindowPermuter
from harness.data.load import Window
from harness.score.items import (
    DocScore,
    ScoreItem,
    flatten_windows,
    plan_clean_target,
    plan_full,
    plan_partition,
    score_items,
)

CPU = torch.device("cpu")
TINY = BackboneConfig(layers=1, dim=16, heads=2)
WORDS = "the a quick brown fox jumps over lazy dog naïve café river stone seven light runs slowly and or".split()
# documents of random words: no window of one repeats another by chance, only by construction
TEXTS = [" ".join(random.Random(i).choices(WORDS, k=30 + 12 * (i % 5))).encode() for i in range(12)]


def fit(enc: Encoder) -> Encoder:
    def sub(e: torch.nn.Module, n: int) -> dict:  # a sub-model (BLT entropy model): leave it at init
        return {"bytes": 0, "flops": 0.0, "seconds": 0.0}

    enc.fit(FitContext(train_docs=lambda: iter(TEXTS), train_bytes=4000, context_bytes=96, seed=0, device=CPU,
                       train=sub, log=lambda s: None))
    return enc.eval()


def byte_ar() -> Encoder:
    torch.manual_seed(0)
    return ByteEncoder(ByteConfig(), TINY).eval()


def byte_mdm() -> Encoder:
    """Large random weights: predictions depend strongly on the masks (tests/encoders/test_mdm.py)."""
    torch.manual_seed(0)
    enc = ByteEncoder(ByteConfig(objective="mdm"), TINY)
    with torch.no_grad():
        enc.embed.weight.normal_(0, 1.0)
        enc.head.weight.normal_(0, 0.5)
    return enc.eval()


def bpe() -> Encoder:
    torch.manual_seed(0)
    return fit(BpeEncoder(BpeConfig(vocab_size=300), TINY))


def blt() -> Encoder:
    torch.manual_seed(0)
    cfg = BltConfig(**{**BltEncoder.sanity_config().__dict__, "threshold_fit_bytes": 2048})
    return fit(BltEncoder(cfg, TINY))


ENCODERS = [byte_ar, byte_mdm, bpe, blt]
IDS = ["bytes", "bytes-mdm", "bpe", "blt"]


def perturb(t: bytes) -> bytes:
    return t.upper()  # changes every window (ASCII letters only: UTF-8 stays valid)


def cells() -> tuple[list[ScoreItem], list[str], int]:
    """Items of five "cells" as the harness packs them, their modes, and the number of windows
    that duplicate an earlier one (counted by construction, not by hashing)."""
    clean = [plan_full(t, 96, 48) for t in TEXTS[:6]]
    # the perturbation leaves documents 0, 2 and 4 as they were: all their windows are duplicates
    pert = [plan_full(perturb(t) if i % 2 else t, 96, 48) for i, t in enumerate(TEXTS[:6])]
    heads = [(t[: len(t) // 2], t[len(t) // 2 :]) for t in TEXTS[6:10]]
    ct_clean = [plan_clean_target(p, c, 96, 40) for p, c in heads]
    # clean_target with prefixes 0 and 2 unchanged: one duplicated window each
    ct_pert = [plan_clean_target(perturb(p) if i % 2 else p, c, 96, 40) for i, (p, c) in enumerate(heads)]
    # one document whose two windows are the same bytes and score_from
    half = TEXTS[11][:80]
    rep = [ScoreItem(half + half, [Window(0, 0, 80), Window(80, 80, 160)])]
    items = [*clean, *pert, *ct_clean, *ct_pert, *rep]  # type: ignore[list-item]
    modes = ["full"] * 12 + ["clean_target"] * 8 + ["full"]
    dups = sum(len(clean[i].windows) for i in (0, 2, 4)) + 2 + 1
    return items, modes, dups


def counting(enc: Encoder) -> list[int]:
    """Wrap ``enc.collate`` (it forms each forward's batch): returns the list of windows per batch."""
    seen: list[int] = []
    collate = enc.collate

    def wrapper(windows: Sequence[bytes], score_from: Sequence[int]) -> Any:
        seen.append(len(windows))
        return collate(windows, score_from)

    enc.collate = wrapper  # type: ignore[method-assign]
    return seen


def score(enc: Encoder, items: Sequence[ScoreItem], dedup: bool, **kw: Any) -> tuple[list[DocScore | None], dict]:
    stats: dict[str, Any] = {}
    out = score_items(enc, items, CPU, batch_windows=5, stats=stats, mc_samples=4, dedup=dedup, **kw)
    return out, stats


def assert_same(x: DocScore | None, y: DocScore | None, exact: bool) -> None:
    assert x is not None and y is not None
    assert x.n_units == y.n_units and x.segments == y.segments
    if exact:
        assert np.array_equal(x.byte_nll, y.byte_nll) and x.nll == y.nll and x.nll_var == y.nll_var
    else:  # differently filled batches: float rounding only (as packing cells, test_batchscore.py)
        np.testing.assert_allclose(x.byte_nll, y.byte_nll, rtol=1e-5, atol=1e-6)
        assert x.nll == pytest.approx(y.nll, rel=1e-6)
        assert x.nll_var == pytest.approx(y.nll_var, rel=1e-4, abs=1e-9)


@pytest.mark.parametrize("make", ENCODERS, ids=IDS)
def test_dedup_gives_every_windows_numbers_with_fewer_windows_fed(make: Callable[[], Encoder]) -> None:
    enc = make()
    items, modes, dups = cells()
    n_windows = sum(len(it.windows) for it in items)
    fed = counting(enc)
    off, st_off = score(enc, items, dedup=False, groups=modes)
    fed_off = sum(fed)
    fed.clear()
    on, st_on = score(enc, items, dedup=True, groups=modes)
    # (b) the model is fed each distinct window once
    assert fed_off == n_windows and sum(fed) == n_windows - dups
    # (a) the numbers of every document, duplicates included; batches hold other windows, so
    # float rounding may differ (test_one_window_a_forward_is_bit_identical)
    for x, y in zip(off, on):
        assert_same(x, y, exact=False)
    # (e) a duplicate's numbers are its original's, to the bit, in copies of their own
    for a, b in [(0, 6), (2, 8), (4, 10), (12, 16), (14, 18)]:  # clean / unchanged perturbed
        x, y = on[a], on[b]
        assert_same(x, y, exact=True)
        assert x is not None and y is not None and x.byte_nll is not y.byte_nll
        if x.segments is not None:
            assert x.segments is not y.segments
    x = on[20]  # one document, its two windows equal
    assert x is not None and np.array_equal(x.byte_nll[:80], x.byte_nll[80:])
    assert (x.segments is not None) == (make in (bpe, blt))  # BPE: tokens, BLT: patches
    if x.segments is not None:  # each window's segments, twice
        assert x.segments[: len(x.segments) // 2] == x.segments[len(x.segments) // 2 :]
    if make is byte_mdm:  # the two equal windows are one estimate: 2² times its variance, not 2
        half = items[20].data[:80]  # (tests/harness/score/test_mdm_se_repeats.py)
        (one,) = score_items(enc, [ScoreItem(half, [Window(0, 0, 80)])], CPU, mc_samples=4)
        assert one is not None and one.nll_var > 0 and x.nll_var == pytest.approx(4 * one.nll_var, rel=1e-4)
    # (c) stats: every window delivered, the duplicates counted, fewer FLOPs computed
    assert st_on["windows"] == st_off["windows"] == n_windows
    assert st_on["scored_bytes"] == st_off["scored_bytes"] == sum(len(it.scored_bytes) for it in items)
    assert st_on["duplicate_windows"] == dups and st_off["duplicate_windows"] == 0
    assert 0 < st_on["forward_flops"] < st_off["forward_flops"]
    for st in (st_on, st_off):
        g = st["groups"]
        for k in ("windows", "scored_bytes", "duplicate_windows"):
            assert sum(m[k] for m in g.values()) == st[k]
        assert sum(m["forward_flops"] for m in g.values()) == pytest.approx(st["forward_flops"], rel=1e-9)
    assert st_on["groups"]["clean_target"]["duplicate_windows"] == 2


@pytest.mark.parametrize("make", [byte_ar, byte_mdm, blt], ids=["bytes", "bytes-mdm", "blt"])
def test_one_window_a_forward_is_bit_identical(make: Callable[[], Encoder]) -> None:
    """With the batches packed, dedup on and off differ by float rounding only, and on the CPU
    they do differ: a batch's padded length changes the kernels' blocking (measured here: 1 to 2
    of 21 documents off by one float32 ulp, 4.8e-7 nats, for bytes, MDM bytes and BLT; BPE
    bit-equal). Forwarded one window at a time, the same window is the same computation: every
    number equal to the bit."""
    enc = make()
    items, _, _ = cells()
    off = score_items(enc, items, CPU, batch_windows=1, mc_samples=4, dedup=False)
    on = score_items(enc, items, CPU, batch_windows=1, mc_samples=4, dedup=True)
    for x, y in zip(off, on):
        assert_same(x, y, exact=True)


def test_results_are_not_shared_mutable() -> None:
    enc = byte_ar()
    items, _, _ = cells()
    on, _ = score(enc, items, dedup=True)
    a, b = on[0], on[6]  # document 0, clean and "perturbed" (unchanged)
    assert a is not None and b is not None
    before = b.byte_nll.copy()
    a.byte_nll[:] += 1.0  # a consumer that edits its document's array
    assert np.array_equal(b.byte_nll, before)


def test_groups_split_a_shared_forward_evenly() -> None:
    enc = bpe()
    cell = [plan_full(t, 96, 48) for t in TEXTS[:4]]
    _, st = score(enc, [*cell, *cell], dedup=True, groups=["a"] * 4 + ["b"] * 4)
    a, b = st["groups"]["a"], st["groups"]["b"]
    n = sum(len(it.windows) for it in cell)
    assert a["forward_flops"] == pytest.approx(b["forward_flops"], rel=1e-12)
    assert a["forward_flops"] + b["forward_flops"] == pytest.approx(st["forward_flops"], rel=1e-12)
    assert (a["windows"], b["windows"]) == (n, n)
    assert (a["duplicate_windows"], b["duplicate_windows"]) == (0, n)  # the first occurrence is forwarded


@pytest.mark.parametrize("make", [bpe, blt], ids=["bpe", "blt"])
def test_needed_with_duplicates(make: Callable[[], Encoder]) -> None:
    enc = make()
    items, _, _ = cells()
    full, _ = score(enc, items, dedup=True)
    # (d) the unchanged perturbed documents are needed, their clean twins (same windows) are not,
    # and the other way round for the clean_target cells; nothing else is needed
    needed = [False] * len(items)
    for i in (6, 8, 10, 12, 14):
        needed[i] = True
    fed = counting(enc)
    part, st = score(enc, items, dedup=True, needed=needed)
    for i, (f, p) in enumerate(zip(full, part)):
        if needed[i]:
            # the same batches as the full run: bit-equal
            assert p is not None and f is not None and np.array_equal(f.byte_nll, p.byte_nll)
            assert f.segments == p.segments and f.n_units == p.n_units
        else:
            assert p is None
    assert sum(fed) < sum(len(it.windows) for it in items)  # batches without a needed window skipped
    assert st["windows"] >= sum(len(items[i].windows) for i in range(len(items)) if needed[i])


def test_progress_reaches_every_window() -> None:
    enc = byte_ar()
    items, _, dups = cells()
    ticks: list[int] = []
    score_items(enc, items, CPU, batch_windows=5, progress=ticks.append)
    n = sum(len(it.windows) for it in items)
    assert sum(ticks) == n and len(ticks) == math.ceil((n - dups) / 5)  # one call a forward


def test_module_switch_turns_dedup_off(monkeypatch: pytest.MonkeyPatch) -> None:
    enc = byte_ar()
    items, _, _ = cells()
    fed = counting(enc)
    import harness.score.items

    monkeypatch.setattr(harness.score.items, "DEDUP", False)
    _, st = score(enc, items, dedup=True)
    assert sum(fed) == sum(len(it.windows) for it in items) and st["duplicate_windows"] == 0


@pytest.mark.parametrize("make", [byte_ar, bpe], ids=["bytes", "bpe"])
def test_dedup_under_a_permutation(make: Callable[[], Encoder]) -> None:
    """A window is permuted by its bytes alone, so duplicates are fed the same stream."""
    enc = make()
    docs = [TEXTS[i][:400] for i in range(4)]
    items = [plan_partition(d, 96) for d in docs] + [plan_partition(d, 96) for d in docs[:2]]
    wp = WindowPermuter(Permutation(kind="inter_block", block_bytes=8), 96, seed=1)
    fed: list[int] = []
    collate = wp.collate

    def counted(encoder: object, windows: Sequence[bytes]) -> Any:
        fed.append(len(windows))
        return collate(encoder, windows)

    object.__setattr__(wp, "collate", counted)  # a frozen dataclass: wrap on the instance
    off, _ = score(enc, items, dedup=False, permuter=wp)
    assert sum(fed) == sum(len(it.windows) for it in items)
    fed.clear()
    on, st = score(enc, items, dedup=True, permuter=wp)
    assert sum(fed) == sum(len(it.windows) for it in items[:4]) == sum(len(it.windows) for it in items) - st[
        "duplicate_windows"]
    for x, y in zip(off, on):
        assert_same(x, y, exact=False)


@pytest.mark.parametrize("make", ENCODERS, ids=IDS)
def test_collation_in_worker_processes_changes_no_number(make: Callable[[], Encoder]) -> None:
    """On CUDA batches are collated in forked workers (``collate_workers``); the batches are the
    same, so every number is the same as collating in the thread, to the bit (here on CPU)."""
    enc = make()
    items, modes, _ = cells()
    here, st_here = score(enc, items, dedup=True, groups=modes, collate_workers=0)
    pool, st_pool = score(enc, items, dedup=True, groups=modes, collate_workers=2)
    for x, y in zip(here, pool):
        assert_same(x, y, exact=True)
    assert st_pool["forward_flops"] == st_here["forward_flops"]
    assert st_pool["groups"].keys() == st_here["groups"].keys()


def test_collation_in_workers_under_a_permutation() -> None:
    """The permuted stream's source order comes back from the worker with its batch."""
    enc = byte_ar()
    docs = [TEXTS[i][:400] for i in range(4)]
    items = [plan_partition(d, 96) for d in docs]
    wp = WindowPermuter(Permutation(kind="inter_block", block_bytes=8), 96, seed=1)
    here, _ = score(enc, items, dedup=True, permuter=wp, collate_workers=0)
    pool, _ = score(enc, items, dedup=True, permuter=wp, collate_workers=2)
    for x, y in zip(here, pool):
        assert_same(x, y, exact=True)


def test_the_loops_wall_is_split_into_its_parts() -> None:
    """``loop_*_seconds``: the scoring loop's thread waiting for batches, launching forwards,
    waiting for results (none on the CPU: results are there when the forward returns) and
    finishing them; with the time before the first batch and the assembly after the loop, they
    fit inside the job's ``seconds`` (measured around them all)."""
    enc = bpe()
    items, _, _ = cells()
    _, st = score(enc, items, dedup=True)
    parts = [st[f"loop_{k}_seconds"] for k in ("wait", "launch", "sync", "finish")]
    assert all(p >= 0.0 for p in parts)
    assert st["loop_sync_seconds"] == 0.0  # no device to wait for
    assert st["loop_launch_seconds"] > 0.0 and st["loop_finish_seconds"] > 0.0
    inside = sum(parts) + st["first_batch_seconds"] + st["assemble_seconds"]
    assert inside <= st["seconds"] + 1e-6
    # what is left is the loop's own Python between the timers: a small part of the wall
    assert st["seconds"] - inside < 0.5 * st["seconds"]
    # beside the walls, the threads' CPU seconds: the loop thread's within each part's wall
    # (a thread's CPU clock cannot run faster than the wall), the prefetch thread's measured
    for k in ("launch", "finish"):
        assert 0.0 < st[f"loop_{k}_cpu_seconds"] <= st[f"loop_{k}_seconds"] + 0.05
    assert st["loop_sync_cpu_seconds"] == 0.0
    assert st["prefetch_cpu_seconds"] > 0.0  # collation ran in that thread (a CPU device)


@pytest.mark.parametrize("dedup", [True, False])
def test_windows_flattened_once_serve_every_model(dedup: bool) -> None:
    """A run flattens an eval set's items once and hands the result to every model's job
    (``flat``): each model's numbers are those of flattening them itself, bit for bit."""
    items, modes, _ = cells()
    fw = flatten_windows(items, dedup)
    for make in (byte_ar, bpe):
        enc = make()
        own, st_own = score(enc, items, dedup=dedup, groups=modes)
        shared, st_shared = score(enc, items, dedup=dedup, groups=modes, flat=fw)
        for x, y in zip(own, shared):
            assert_same(x, y, exact=True)
        for k in ("windows", "duplicate_windows", "scored_bytes", "forward_flops"):
            assert st_own[k] == st_shared[k]
    with pytest.raises(ValueError, match="`flat` was not made from these items"):
        score(byte_ar(), items[:-1], dedup=dedup, flat=fw)  # other items
    with pytest.raises(ValueError, match="`flat` was not made from these items"):
        score(byte_ar(), items, dedup=not dedup, flat=fw)  # other dedup
