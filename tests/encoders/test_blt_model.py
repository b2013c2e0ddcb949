"""BLT end to end: causality probe for every patching, fit (entropy model + auto θ), FLOPs, state."""

from __future__ import annotations

import io
import random
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from test_blt_patching import patch_sizes_ref  # the old per-window host path (same folder)
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from encoders.backbone import BackboneConfig
from encoders.base import Encoder, FitContext, byte_unit_nll
from encoders.blt import BltConfig, BltEncoder
from encoders.blt.model import PATCH_BUCKET, PatchUnitNLL, sample_windows
from encoders.blt.patching import mean_patch_size, patch_starts

BACKBONE = BackboneConfig(layers=1, dim=32, heads=2)
TINY = dict(
    local_dim=32,
    local_heads=2,
    ngram_sizes=(3, 4),
    ngram_table_size=64,
    entropy_dim=32,
    entropy_layers=1,
    entropy_heads=2,
)
WORDS = ["the", "cat", "sat", "on", "a", "mat", "dog", "ran", "far", "away", "quickly", "zebra"]


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Tiny tensors: intra-op threads only add contention (10x slower on a loaded 2-core box)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def corpus(n_docs: int = 40, seed: int = 0) -> list[bytes]:
    """Documents of words from a small vocabulary: predictable inside words, uncertain after spaces."""
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 40))).encode() + b".\n"
        for _ in range(n_docs)
    ]


def tiny_train(
    encoder: Encoder, n_bytes: int, docs: list[bytes], context: int = 64
) -> dict[str, Any]:
    """A plain AdamW loop standing in for the harness's: 8 windows per step until n_bytes."""
    windows = [d[i : i + context] for d in docs for i in range(0, len(d), context)]
    opt = torch.optim.AdamW([p for p in encoder.parameters() if p.requires_grad], lr=1e-2)
    encoder.train()
    seen, flops, i, t0 = 0, 0.0, 0, time.perf_counter()
    while seen < n_bytes:
        chunk = [windows[(i + k) % len(windows)] for k in range(8)]
        i += 8
        batch = encoder.collate(chunk, [0] * len(chunk))
        flops += 3 * encoder.flops(batch)
        loss = encoder(batch).nll.sum() / batch.scored_bytes
        opt.zero_grad()
        loss.backward()
        opt.step()
        seen += batch.scored_bytes
    encoder.eval()
    return {
        "bytes": seen,
        "flops": flops,
        "seconds": time.perf_counter() - t0,
        "final_loss": float(loss.detach()),
    }


def fit_context(docs: list[bytes], train_bytes: int = 60_000) -> FitContext:
    def docs_iter() -> Iterator[bytes]:
        return iter(docs)

    return FitContext(
        train_docs=docs_iter,
        train_bytes=train_bytes,
        context_bytes=64,
        seed=0,
        device=torch.device("cpu"),
        train=lambda enc, n: tiny_train(enc, n, docs),
        log=lambda msg: None,
    )


def scrambled(model: BltEncoder, std: float = 0.3) -> BltEncoder:
    """Large random weights, so a leak of a later byte would move log-probs far above 1e-5."""
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, std)
    return model.eval()


def make(backbone: BackboneConfig | None = BACKBONE, **kw: Any) -> BltEncoder:
    torch.manual_seed(0)
    return BltEncoder(BltConfig(**{**TINY, **kw}), backbone)


CASES = [
    dict(patching="entropy"),
    dict(patching="entropy", monotonic=True),
    dict(patching="entropy", max_patch_bytes=3),
    dict(patching="space", max_patch_bytes=5),
    dict(patching="static", target_patch_size=3.0),
    dict(patching="space", ngram_sizes=()),
]


@pytest.mark.parametrize("backbone", [BACKBONE, None], ids=["latent", "local-only"])
@pytest.mark.parametrize("kw", CASES, ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_causality_probe(kw: dict[str, Any], backbone: BackboneConfig | None) -> None:
    """log p(byte p | data) must not change when any byte >= p changes (|Δ| <= 1e-5)."""
    model = scrambled(make(backbone, **kw))
    data = b"the cat sat on a mat, the dog ran far away quickly!"
    if model.entropy_model is not None:
        # θ at the median of this text's entropies (or their differences) so patches are mixed.
        H = model.entropies(model.collate([data], [0])["stream"][:, :-1])
        score = H[:, 1:] - H[:, :-1] if model.config.monotonic else H
        model.threshold = float(score.median())
    rng = random.Random(0)
    patchings_differ = 0
    for p in (1, 5, 12, 25, 40, len(data) - 1):
        other = data[:p] + bytes(rng.randrange(256) for _ in range(len(data) - p))
        a = model.predict_logprobs(data, [p])[p]
        b = model.predict_logprobs(other, [p])[p]
        assert (a - b).abs().max() <= 1e-5, (
            f"byte {p} sees later bytes: {float((a - b).abs().max())}"
        )
        # the probe is sensitive: changing byte p-1 does move the prediction
        flip = data[: p - 1] + bytes([data[p - 1] ^ 0x55]) + data[p:]
        assert (model.predict_logprobs(flip, [p])[p] - a).abs().max() > 1e-3
        s1 = model.collate([data], [0])
        s2 = model.collate([other], [0])
        st1 = model.patch_starts(s1["stream"], s1["lengths"])
        st2 = model.patch_starts(s2["stream"], s2["lengths"])
        assert torch.equal(st1[:, : p + 1], st2[:, : p + 1])  # patching of the prefix is causal too
        patchings_differ += int(not torch.equal(st1, st2))
    if model.config.patching != "static":
        assert patchings_differ > 0  # later bytes did change later patches, and it did not leak


def test_forward_units_and_segments() -> None:
    model = make(patching="space")
    windows, score_from = [b"ab cd ef", b"xyz"], [3, 1]
    batch = model.collate(windows, score_from)
    units = model(batch)
    # window 0: [3,6) [6,8); window 1's only patch [0,3) holds its 2 scored bytes
    assert units.segments == [[3, 2], [2]]
    per_byte = units.byte_nll([len(w) for w in windows], score_from)
    assert [len(x) for x in per_byte] == [5, 2]
    assert float(sum(x.sum() for x in per_byte)) == pytest.approx(
        float(units.nll.detach().sum()), rel=1e-6
    )
    loss = units.nll.sum() / batch.scored_bytes
    loss.backward()
    assert model.latent is not None and model.latent.blocks[0].fc.weight.grad is not None


def test_units_to_keeps_segments_lazy_and_values_equal() -> None:
    """``to`` (scoring's asynchronous copy to the host) moves the patch starts, not the
    segments: they are computed where the units went, equal to the original's."""
    model = make(patching="space")
    windows, score_from = [b"ab cd ef", b"xyz"], [3, 1]
    with torch.inference_mode():
        units = model(model.collate(windows, score_from))
        moved = units.to("cpu")
    assert isinstance(moved, PatchUnitNLL) and moved.__dict__["_pending"] is not None
    assert moved.segments == units.segments == [[3, 2], [2]]
    for a, b in zip(moved.byte_nll([8, 3], score_from), units.byte_nll([8, 3], score_from)):
        assert torch.equal(a, b)
    units.segments = [[5], [2]]  # assigned (un-permuted): moved as they are
    assert units.to("cpu").segments == [[5], [2]]


def test_flops_match_flop_counter() -> None:
    """Analytic FLOPs vs torch's counter (SDPA forced to the math path, which it counts);
    agreement within 1 % (both skip norms, softmax and lookups)."""
    for kw in CASES[:1] + CASES[3:]:
        model = scrambled(make(**kw))
        if model.entropy_model is not None:
            model.threshold = 5.0
        batch = model.collate([b"the cat sat on a mat", b"a dog ran", b"quickly away"], [0, 2, 5])
        want = model.flops(batch)
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fc:
            model(
                model.collate([b"the cat sat on a mat", b"a dog ran", b"quickly away"], [0, 2, 5])
            )
        assert want == pytest.approx(fc.get_total_flops(), rel=0.01), kw
        if model.entropy_model is not None:  # the frozen share is the entropy model's forward
            with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fe:
                model.entropies(batch["stream"][:, :-1])
            assert model.frozen_flops(batch) == pytest.approx(fe.get_total_flops(), rel=0.01)
        else:
            assert model.frozen_flops(batch) == 0.0


def test_fit_auto_threshold_hits_target_and_freezes_entropy_model() -> None:
    docs = corpus()
    model = make(
        patching="entropy",
        target_patch_size=3.5,
        entropy_train_bytes=16_000,
        threshold_fit_bytes=20_000,
    )
    stats = model.fit(fit_context(docs))
    assert stats["bytes"] >= 16_000 and stats["flops"] > 0 and stats["entropy_model"]["params"] > 0
    assert model.threshold is not None and all(
        not p.requires_grad for p in model.entropy_model.parameters()
    )
    # recompute the mean patch size independently on the same training windows
    windows = sample_windows(lambda: iter(docs), 64, 20_000)
    batch = model.collate(windows, [0] * len(windows))
    T = batch["targets"].shape[1]
    valid = torch.arange(T)[None] < batch["lengths"][:, None]
    starts = patch_starts(model.entropies(batch["stream"][:, :T]), model.threshold) & valid
    size = mean_patch_size(starts, valid)
    assert abs(size / 3.5 - 1) <= 0.05, size
    assert stats["mean_patch_bytes_train"] == pytest.approx(size)
    # the trained entropy model is uncertain after spaces: patches start mostly at word starts
    after_space = starts[:, 1:][batch["stream"][:, 1:T] == ord(" ")].float().mean()
    assert float(after_space) > 0.8
    desc = model.describe()
    assert desc["threshold_nats"] == model.threshold and desc["entropy_model_flops_per_byte"] > 0
    # the main loss sends no gradient into the frozen entropy model
    units = model(model.collate(windows[:2], [0, 0]))
    units.nll.sum().backward()
    assert all(p.grad is None for p in model.entropy_model.parameters())


def test_fit_windows_spread_over_the_whole_split() -> None:
    docs = [bytes([65 + k]) * 100 for k in range(20)]  # doc k is 100 × one letter; 2 windows each
    got = sample_windows(lambda: iter(docs), 50, 500)
    assert len(got) == 10 and all(len(w) == 50 for w in got)
    letters = sorted({w[0] for w in got})
    assert letters == [65 + k for k in range(0, 20, 2)]  # every other document, first to last
    assert sample_windows(lambda: iter(docs), 64, 10**9) == [d[i : i + 64] for d in docs for i in (0, 64)]


def test_state_round_trip_keeps_threshold() -> None:
    model = make(patching="entropy")
    model.threshold = 4.25
    model.fit_stats = {"mean_patch_bytes_train": 4.0}
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    fresh = make(patching="entropy")
    fresh.load_state_dict(torch.load(buf, weights_only=True))
    assert fresh.threshold == 4.25 and fresh.describe()["mean_patch_bytes_train"] == 4.0
    data = b"the cat sat"
    assert torch.equal(model.predict_logprobs(data, [5])[5], fresh.predict_logprobs(data, [5])[5])


def test_unfitted_auto_threshold_and_bad_config_fail_clearly() -> None:
    model = make(patching="entropy")
    with pytest.raises(RuntimeError, match="fit"):
        model(model.collate([b"abc"], [0]))
    with pytest.raises(ValueError, match="target_patch_size"):
        BltConfig(target_patch_size=0.5)
    with pytest.raises(ValueError, match="local_dim"):
        BltConfig(local_dim=30, local_heads=4)


def test_entropies_keep_their_own_precision_whatever_the_callers_autocast() -> None:
    """float32 (CPU's auto): the same bits inside a bf16 autocast as outside it (patches do not
    depend on the scoring dtype); bfloat16: its own autocast, close to float32, and again the
    same bits whatever the caller's autocast."""
    x = torch.randint(0, 256, (3, 40))
    base = scrambled(make(patching="entropy"), std=0.1)
    assert base.config.entropy_dtype == "auto" and not base.entropy_bf16(torch.device("cpu"))
    assert base.entropy_bf16(torch.device("cuda"))
    h32 = base.entropies(x)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(base.entropies(x), h32)
    bf = make(patching="entropy", entropy_dtype="bfloat16")
    bf.load_state_dict(base.state_dict())
    h16 = bf.entropies(x)
    assert h16.dtype == torch.float32 and not torch.equal(h16, h32)
    assert torch.allclose(h16, h32, atol=0.05)
    with torch.autocast("cpu", enabled=False):
        assert torch.equal(bf.entropies(x), h16)
    with pytest.raises(ValueError, match="entropy_dtype"):
        BltConfig(entropy_dtype="float16")  # type: ignore[arg-type]


# -- patching on the model's device, no host reads in a training step ------------------------

# Tensor methods that make the host wait for a CUDA device: a value read into Python, a copy to
# the host, or an op whose output shape depends on the values.
HOST_READS = ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__",
              "nonzero", "unique", "masked_select", "repeat_interleave")
# Functions whose reads happen only when their tensors are on the CPU (a consistency check that a
# CUDA run skips): encoders.base.scored_index, where it exists, checks its unit count that way.
CPU_ONLY_CHECKS = frozenset({"scored_index"})


@contextmanager
def host_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Record every call of a ``HOST_READS`` method (and every boolean-mask index) while inside,
    except from ``CPU_ONLY_CHECKS``: a CPU stand-in for counting the host-device syncs the same
    code makes on a GPU."""
    calls: list[str] = []

    def record(name: str) -> None:
        if sys._getframe(2).f_code.co_name not in CPU_ONLY_CHECKS:  # 2: the wrapper's caller
            calls.append(name)

    with monkeypatch.context() as m:
        def recording(name: str) -> Any:
            method = getattr(torch.Tensor, name)

            def wrapped(self: torch.Tensor, *a: Any, **k: Any) -> Any:
                record(name)
                return method(self, *a, **k)

            return wrapped

        for name in HOST_READS:
            m.setattr(torch.Tensor, name, recording(name))
        getitem = torch.Tensor.__getitem__

        def indexed(self: torch.Tensor, idx: Any) -> Any:
            if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool
                   for i in (idx if isinstance(idx, tuple) else (idx,))):
                record("bool-index")
            return getitem(self, idx)

        def nonzero(*a: Any, _f: Any = torch.nonzero, **k: Any) -> Any:
            record("nonzero")
            return _f(*a, **k)

        m.setattr(torch.Tensor, "__getitem__", indexed)
        m.setattr(torch, "nonzero", nonzero)
        yield calls


def real_windows(size: int = 96) -> list[bytes]:
    """Windows of real text (this file's source, then corpus text), lengths 1 .. size."""
    text = Path(__file__).read_bytes()[:2000] + b"".join(corpus(5, seed=2))
    cuts = [size, size, 1, 2, 17, size - 1, 50, size]
    out, i = [], 0
    for n in cuts:
        out.append(text[i : i + n])
        i += n
    return out


def with_tie_threshold(model: BltEncoder, batch: Any) -> None:
    """θ = an observed entropy (or difference) of the batch: that byte sits exactly on θ."""
    T = batch["targets"].shape[1]
    H = model.entropies(batch["stream"][:, :T])
    score = H[:, 1:] - H[:, :-1] if model.config.monotonic else H
    model.threshold = float(score.flatten().sort().values[score.numel() * 2 // 3])


PATCHINGS = [
    dict(patching="entropy"),
    dict(patching="entropy", monotonic=True),
    dict(patching="entropy", max_patch_bytes=3),
    dict(patching="entropy", max_patch_bytes=1),
    dict(patching="space", max_patch_bytes=5),
    dict(patching="static", target_patch_size=3.0),
]


@pytest.mark.parametrize("kw", PATCHINGS, ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_device_patching_equals_the_host_path(kw: dict[str, Any]) -> None:
    """Patches, N and segments of ``_patches``/``forward`` equal the old host path: entropies to
    the host, patch rule there, per-window patch sizes (tests/encoders/test_blt_patching.py)."""
    model = scrambled(make(**kw))
    windows = real_windows()
    score_from = [0, 40, 0, 1, 16, 3, 49, 95]
    batch = model.collate(windows, score_from)
    T = batch["targets"].shape[1]
    valid = torch.arange(T)[None] < batch["lengths"][:, None]
    if model.entropy_model is not None:
        with_tie_threshold(model, batch)
        H = model.entropies(batch["stream"][:, :T]).cpu()
        want = patch_starts(H, model.threshold, model.config.monotonic, model.config.max_patch_bytes) & valid
    else:
        want = model.patch_starts(batch["stream"], batch["lengths"]).cpu()
    starts, n = model._patches(batch)
    assert torch.equal(starts, want)
    assert n == -(-int(want.sum(1).max()) // PATCH_BUCKET) * PATCH_BUCKET
    units = model(batch)
    assert units.segments == patch_sizes_ref(want, batch["lengths"], batch["score_from"])
    assert [sum(s) for s in units.segments] == [len(w) - s for w, s in zip(windows, score_from)]


@pytest.mark.parametrize("kw", PATCHINGS[:2] + PATCHINGS[4:], ids=lambda kw: "-".join(str(v) for v in kw.values()))
def test_training_step_reads_nothing_back(kw: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Once ``flops`` has run on the batch (the harness's prefetch thread does, before the step),
    a training forward and backward make no host read at all; without it, the one read is N."""
    model = scrambled(make(**kw)).train()
    batch = model.collate(real_windows(), [0] * 8)
    if model.entropy_model is not None:
        with_tie_threshold(model, batch)
    model.flops(batch)
    batch = batch.to("cpu")  # as train_step moves it: a new TensorBatch, the same meta
    with host_reads(monkeypatch) as calls:
        units = model(batch)
        (units.nll.sum() / batch.scored_bytes).backward()
    assert calls == []
    fresh = model.collate(real_windows(), [0] * 8)
    with host_reads(monkeypatch) as calls:
        model(fresh)
    assert calls == ["__int__"]  # padded_patch_count: N is a shape


def test_segments_cost_a_fixed_number_of_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reading segments (scoring) copies once per batch, however many windows it holds: on the
    device path one ``nonzero`` and one ``tolist``; host tensors (scoring reads segments after
    the batch's copy back) go to numpy, one ``numpy()`` per tensor."""
    from encoders.blt.patching import _patch_sizes_torch

    model = scrambled(make(patching="space")).eval()
    counts, device_path = [], []
    for n in (2, 8):
        batch = model.collate(real_windows()[:n], [0] * n)
        with torch.inference_mode():
            units = model(batch)
        pending = units.__dict__["_pending"]
        with host_reads(monkeypatch) as calls:
            assert len(units.segments) == n
            assert len(units.segments) == n  # computed once, then kept
        counts.append(list(calls))
        with host_reads(monkeypatch) as calls:
            assert _patch_sizes_torch(*pending) == units.segments
        device_path.append(list(calls))
    assert counts[0] == counts[1] == ["numpy", "numpy", "numpy"]
    assert device_path[0] == device_path[1] == ["nonzero", "tolist"]


def test_scored_bytes_is_the_unit_count() -> None:
    """forward takes the unit count from ``scored_bytes`` (no device read): it must be exact."""
    model = make(patching="space")
    batch = model.collate(real_windows(), [0, 40, 0, 1, 16, 3, 49, 95])
    assert batch.scored_bytes == int((batch["targets"] >= 0).sum())
    units = model(batch)
    assert units.nll.shape == (batch.scored_bytes,)
    ref = byte_unit_nll(model.logits(batch)[0], batch["targets"])  # nonzero, as before
    assert torch.equal(units.window, ref.window) and torch.equal(units.start, ref.start)
    assert torch.allclose(units.nll, ref.nll)


def test_cross_attention_follows_the_backends_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """BLT's pooling and decoder cross-attention call the backbone's ``_sdpa``: under the
    harness's "fixed" cuDNN mode (set on CUDA) they ask for every backend but cuDNN, whose
    host-side plan per patch count cost ≈ 35 ms a call on an H200; off it, the plain call.
    The same output either way on CPU (the math kernel in both)."""
    import torch.nn.attention as attention

    import encoders.backbone as backbone
    from encoders.blt.layers import CrossAttention

    torch.manual_seed(0)
    xa = CrossAttention(16, 24, 2)
    x, mem = torch.randn(2, 5, 16), torch.randn(2, 7, 24)
    mask = torch.rand(2, 5, 7) < 0.6
    mask[..., 0] = True  # every query sees a key (as pooling_mask and decoder_mask guarantee)
    plain = xa(x, mem, mask)
    asked: list[list[SDPBackend]] = []
    real = attention.sdpa_kernel

    def spy(backends, *a, **kw):  # type: ignore[no-untyped-def]
        asked.append(list(backends))
        return real(backends, *a, **kw)

    monkeypatch.setattr(attention, "sdpa_kernel", spy)
    xa(x, mem, mask)
    assert asked == []  # not in the fixed mode: torch's own choice
    monkeypatch.setattr(backbone, "CUDNN_FIXED", True)
    assert torch.equal(xa(x, mem, mask), plain)
    assert len(asked) == 1 and SDPBackend.CUDNN_ATTENTION not in asked[0] and SDPBackend.EFFICIENT_ATTENTION in asked[0]
