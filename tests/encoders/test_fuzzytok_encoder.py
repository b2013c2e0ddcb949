"""The ``fuzzytok`` encoder: causality, receptive field (formula vs gradient probe), FLOPs vs
torch's FlopCounterMode, Triton path vs reference path on a whole model, config errors."""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")  # before anything imports Triton kernels

import pytest  # noqa: E402
import torch  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from encoders.backbone import BackboneConfig  # noqa: E402
from encoders.fuzzytok import FuzzyTokConfig, FuzzyTokEncoder  # noqa: E402
from encoders.registry import REGISTRY  # noqa: E402

TINY_BB = BackboneConfig(layers=1, dim=16, heads=2)


def _model(backbone: BackboneConfig | None = None, seed: int = 0, **kw: object) -> FuzzyTokEncoder:
    torch.manual_seed(seed)
    cfg = FuzzyTokConfig(**{"dim": 16, "blocks": 2, "dilations": (1, 3), **kw})  # type: ignore[arg-type]
    return FuzzyTokEncoder(cfg, backbone).eval()


def test_registry_names_the_class() -> None:
    assert REGISTRY.lazy["fuzzytok"] == "encoders.fuzzytok:FuzzyTokEncoder"


def test_default_receptive_field_is_43_bytes() -> None:
    # 3 blocks x dilations (1, 2, 4) x (K - 1 = 2) = 42 bytes of reach, plus the position itself.
    m = FuzzyTokEncoder(FuzzyTokConfig(), None)
    assert m.describe()["receptive_field_bytes"] == 43
    assert m.describe()["context"] == "43 bytes"
    assert FuzzyTokEncoder(FuzzyTokConfig(), TINY_BB).describe()["context"] == "window"


@pytest.mark.parametrize(
    "cfg", [dict(), dict(kernel_size=4, dilations=(2, 5), blocks=1), dict(kernel_size=1)]
)
def test_receptive_field_matches_gradient_probe(cfg: dict) -> None:
    m = _model(**cfg)
    T, t = 64, 50
    inputs = torch.randint(0, 257, (1, T))
    h0 = m.embed(inputs).detach().requires_grad_()
    h = h0
    for blk in m.blocks:
        h = blk(h, "torch", True, True)
    out = m.head(m.proj(m.norm(h)))  # (1, T, 256)
    (grad,) = torch.autograd.grad(out[0, t].sum(), h0)
    reached = (grad[0].abs().sum(-1) > 0).nonzero().flatten().tolist()
    rf = m.config.receptive_field
    # The field spans exactly rf inputs ending at t; with gaps between taps (dilations without a 1)
    # some inputs inside the span are not reached, so only the ends and the bounds are exact.
    assert reached[0] == t - rf + 1 and reached[-1] == t
    if 1 in m.config.dilations or m.config.kernel_size == 1:
        assert reached == list(range(t - rf + 1, t + 1))


@pytest.mark.parametrize("backbone", [None, TINY_BB], ids=["conv-only", "backbone"])
@pytest.mark.parametrize("impl", ["torch", "triton"])
def test_causal_changing_later_bytes_leaves_earlier_predictions(
    backbone: BackboneConfig | None, impl: str
) -> None:
    m = _model(backbone, impl=impl)
    rng = torch.Generator().manual_seed(1)
    data = bytes(torch.randint(0, 256, (40,), generator=rng).tolist())
    positions = list(range(len(data)))
    base = m.predict_logprobs(data, positions)
    for t in (0, 17, 39):
        changed = data[:t] + bytes((b + 101) % 256 for b in data[t:])
        new = m.predict_logprobs(changed, positions)
        for p in range(t + 1):  # the prediction of byte p sees bytes < p only
            torch.testing.assert_close(new[p], base[p], atol=1e-6, rtol=0)
        if t + 1 < len(data):  # and byte t does reach the next prediction
            assert not torch.allclose(new[t + 1], base[t + 1])


@pytest.mark.parametrize("impl, recompute", [("torch", None), ("triton", True), ("triton", None)],
                         ids=["torch", "triton-recompute", "triton-default"])
def test_flops_match_flop_counter(impl: str, recompute: bool) -> None:
    m = _model(impl=impl, recompute=recompute)
    batch = m.collate([b"dilated causal convolutions", b"bytes"], [0, 2])
    with FlopCounterMode(display=False) as fc:
        m(batch)
    assert fc.get_total_flops() == m.flops(batch)
    # Training: the custom ops' backward formulas make fwd + bwd = 3 x forward, as the harness assumes.
    if impl == "triton":
        with FlopCounterMode(display=False) as fc:
            m(batch).nll.sum().backward()
        assert fc.get_total_flops() == 3 * m.flops(batch)


@pytest.mark.parametrize(
    "fused, recompute", [(False, True), (True, True), (False, False)], ids=["layers", "fused", "store"]
)
def test_triton_path_trains_like_reference_path(fused: bool, recompute: bool) -> None:
    batch = _model().collate([b"the quick brown fox", b"jumps over"], [0, 3])
    grads = {}
    for impl in ("torch", "triton"):
        m = _model(impl=impl, activation="silu", fused_block=fused, recompute=recompute).train()
        loss = m(batch).nll.sum() / batch.scored_bytes
        loss.backward()
        grads[impl] = (loss.detach(), {n: p.grad for n, p in m.named_parameters()})
    torch.testing.assert_close(grads["triton"][0], grads["torch"][0], atol=1e-5, rtol=1e-5)
    for name, g in grads["torch"][1].items():
        torch.testing.assert_close(grads["triton"][1][name], g, atol=1e-5, rtol=1e-4, msg=name)


def test_recompute_defaults_to_store_except_with_the_fused_block() -> None:
    assert FuzzyTokConfig().recompute_backward is False
    assert FuzzyTokConfig(fused_block=True).recompute_backward is True
    assert FuzzyTokConfig(recompute=True).recompute_backward is True


def test_same_seed_same_output() -> None:
    batch = _model().collate([b"determinism"], [0])
    a, b = _model(seed=3)(batch).nll, _model(seed=3)(batch).nll
    assert torch.equal(a, b)


@pytest.mark.parametrize(
    "kw, key",
    [
        ({"dim": 0}, "fuzzytok.dim"),
        ({"dilations": ()}, "fuzzytok.dilations"),
        ({"dilations": (1, 0)}, "fuzzytok.dilations"),
        ({"kernel_size": 0}, "fuzzytok.kernel_size"),
        ({"activation": "tanh"}, "fuzzytok.activation"),
        ({"impl": "cuda"}, "fuzzytok.impl"),
        ({"fused_block": True, "recompute": False}, "fuzzytok.recompute"),
    ],
)
def test_bad_config_names_the_key(kw: dict, key: str) -> None:
    with pytest.raises(ValueError, match=key):
        FuzzyTokConfig(**kw)
