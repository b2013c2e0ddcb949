"""FuzzyTok's kernels under torch's deterministic algorithms (tokbench's ``budget.deterministic``),
in Triton's interpreter on CPU: every new key launches the first config of its pruned list that
the device can run, untimed, instead of the autotuner's timed winner (a timed choice can differ
between runs and sums in another order), and the result is still the convolution."""

import os

# Triton decides interpreted vs compiled when a kernel is defined: set this before any import.
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

from encoders.fuzzytok import kernels as kn  # noqa: E402
from encoders.fuzzytok.ops import dilated_causal_conv  # noqa: E402
from encoders.fuzzytok.reference import dilated_causal_conv_ref  # noqa: E402

if torch.cuda.is_available():
    pytest.skip("CPU interpreter tests", allow_module_level=True)


@pytest.fixture
def deterministic():  # noqa: ANN201
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    kn.clear_tuning()
    yield
    torch.use_deterministic_algorithms(before)
    kn.clear_tuning()


def _two_configs(launcher: kn.ThinLauncher, monkeypatch: pytest.MonkeyPatch) -> list:
    """Give ``launcher``'s autotuner two configs (the interpreter has one): the same tiles, and a
    fake timer under which the second is faster. Returns the two."""
    import triton

    (c,) = launcher.tuner.configs
    two = [c, triton.Config(dict(c.kwargs), num_warps=2, num_stages=1)]
    monkeypatch.setattr(launcher.tuner, "configs", two)
    monkeypatch.setattr(launcher.tuner, "_bench", lambda *a, config, **k: [1.0 if config is two[0] else 0.5] * 3)
    return two


def _conv(shape: tuple[int, ...]) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(y, dx, dW, db) of the Triton path and of the reference for one seeded problem."""
    B, T, ci, co, K, d = shape
    g = torch.Generator().manual_seed(sum(shape))
    x = torch.randn(B, T, ci, generator=g).requires_grad_()
    w = (0.3 * torch.randn(co, ci, K, generator=g)).requires_grad_()
    b = torch.randn(co, generator=g).requires_grad_()
    dy = torch.randn(B, T, co, generator=g)
    y = dilated_causal_conv(x, w, b, d, impl="triton")
    got = [y.detach(), *torch.autograd.grad(y, [x, w, b], dy)]
    xr, wr, br = (t.detach().requires_grad_() for t in (x, w, b))
    yr = dilated_causal_conv_ref(xr, wr, br, d)
    return got, [yr.detach(), *torch.autograd.grad(yr, [xr, wr, br], dy)]


def test_prunes_do_not_depend_on_the_switch(deterministic: None) -> None:
    """The pruned list is the order of preference either way; the switch only changes how one
    is chosen from it (``first_that_runs``)."""
    import triton

    configs = [triton.Config({"BLOCK_T": 32, "BLOCK_N": n, "BLOCK_C": 32, "BLOCK_M": 32, "PER_SM": 1})
               for n in (32, 64)]
    for prune in (kn._prune_tma, kn._prune_fwd, kn._prune_dw):
        on = prune(configs, {}, CI=64, CO=64)
        torch.use_deterministic_algorithms(False)
        off = prune(configs, {}, CI=64, CO=64)
        torch.use_deterministic_algorithms(True)
        assert on == off == configs, prune.__name__


class _Refuses:
    """Stands in for an autotuner's ``fn``: a launch with ``num_warps == warps`` raises Triton's
    OutOfResources (what a config too big for the device's shared memory raises as it loads),
    any other goes to the real function; ``launched`` lists the num_warps of each launch."""

    def __init__(self, fn: object, warps: set[int]) -> None:
        self.fn, self.warps, self.launched = fn, warps, []

    def run(self, *args: object, **kwargs: object) -> object:
        from triton.runtime.errors import OutOfResources

        self.launched.append(kwargs["num_warps"])
        if kwargs["num_warps"] in self.warps:
            raise OutOfResources(262200, 232448, "shared memory")
        return self.fn.run(*args, **kwargs)  # type: ignore[attr-defined]

    def __getattr__(self, name: str) -> object:
        return getattr(self.fn, name)


SHAPES = {"tma": ((2, 45, 64, 32, 3, 2), "conv_tma"), "pointer": ((1, 37, 5, 7, 3, 1), "conv")}


@pytest.mark.parametrize("case", SHAPES)
def test_the_timed_winner_is_replaced_by_the_first_config_untimed(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    shape, name = SHAPES[case]
    launcher = kn.LAUNCHERS[name]
    two = _two_configs(launcher, monkeypatch)
    kn.clear_tuning()
    _conv(shape)  # timed: the fake timer makes the second config the winner
    assert launcher.tuner.best_config is two[1]
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        kn.clear_tuning()
        monkeypatch.setattr(launcher.tuner, "_bench", lambda *a, **k: pytest.fail("timed a config"))
        got, ref = _conv(shape)
        assert launcher.tuner.best_config is two[0]
        assert all(chosen is two[0] for chosen in launcher.tuner.cache.values())
    finally:
        torch.use_deterministic_algorithms(before)
        kn.clear_tuning()
    for what, a, c in zip(["y", "dx", "dW", "db"], got, ref):
        torch.testing.assert_close(a, c, atol=2e-5, rtol=1e-4, msg=what)


@pytest.mark.parametrize("case", SHAPES)
def test_a_config_the_device_refuses_gives_way_to_the_next(case: str, deterministic: None,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """An H200 refused the first TMA config of a float32 key (too much shared memory):
    under the switch the next config in the list is launched instead, untimed, and it stays the
    choice for that key."""
    shape, name = SHAPES[case]
    launcher = kn.LAUNCHERS[name]
    two = _two_configs(launcher, monkeypatch)
    refuses = _Refuses(launcher.tuner.fn, {two[0].num_warps})
    monkeypatch.setattr(launcher.tuner, "fn", refuses)
    monkeypatch.setattr(launcher.tuner, "_bench", lambda *a, **k: pytest.fail("timed a config"))
    got, ref = _conv(shape)
    assert launcher.tuner.best_config is two[1]
    assert all(chosen is two[1] for chosen in launcher.tuner.cache.values())
    # each key: the first config refused once, then the second launched (and kept)
    assert refuses.launched[:2] == [two[0].num_warps, two[1].num_warps]
    for what, a, c in zip(["y", "dx", "dW", "db"], got, ref):
        torch.testing.assert_close(a, c, atol=2e-5, rtol=1e-4, msg=what)


def test_when_every_config_is_refused_the_error_is_the_devices(deterministic: None,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from triton.runtime.errors import OutOfResources

    shape, name = SHAPES["tma"]
    launcher = kn.LAUNCHERS[name]
    two = _two_configs(launcher, monkeypatch)
    monkeypatch.setattr(launcher.tuner, "fn", _Refuses(launcher.tuner.fn, {c.num_warps for c in two}))
    with pytest.raises(OutOfResources, match="shared memory"):
        _conv(shape)
    assert not launcher.tuner.cache  # no choice is kept for the key


def test_the_fused_block_takes_the_first_config_it_can_run(deterministic: None,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``block_forward`` goes through its autotuner directly (no ``ThinLauncher``): the same rule."""
    import triton

    from encoders.fuzzytok.reference import conv_block_ref

    tuner = kn._block_kernel
    (c,) = tuner.configs
    two = [triton.Config(dict(c.kwargs), num_warps=1, num_stages=1), triton.Config(dict(c.kwargs), num_warps=2, num_stages=1)]
    monkeypatch.setattr(tuner, "configs", two)
    monkeypatch.setattr(tuner, "_bench", lambda *a, **k: pytest.fail("timed a config"))
    refuses = _Refuses(tuner.fn, {1})
    monkeypatch.setattr(tuner, "fn", refuses)
    tuner.cache.clear()
    g = torch.Generator().manual_seed(3)
    x = torch.randn(1, 40, 8, generator=g)
    w = 0.3 * torch.randn(2, 8, 8, 3, generator=g)
    b = torch.randn(2, 8, generator=g)
    try:
        y = kn.block_forward(x, w, b, [1, 2], "gelu")
        assert tuner.best_config is two[1] and refuses.launched == [1, 2]
    finally:
        tuner.cache.clear()
    torch.testing.assert_close(y, conv_block_ref(x, w, b, [1, 2], "gelu"), atol=2e-5, rtol=1e-4)
