"""FuzzyTok's thin launches (``kernels.ThinLauncher``) and the eager ``autograd.Function`` path,
in Triton's interpreter on CPU (fp32, small shapes): the same outputs and gradients as the path
through Triton's autotuner and heuristics wrappers, as the custom op and as the reference; a key
that covers what the config and the compiled kernel depend on; a new key goes back through the
autotuner. The GPU side (host µs per call, eager timings against cuDNN) is
``benchmarks/bench_fuzzytok.py --parts host,eager``."""

import os
import subprocess
import sys
from pathlib import Path

# Triton decides interpreted vs compiled when a kernel is defined: set this before any import.
os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from encoders.fuzzytok import kernels as kn  # noqa: E402
from encoders.fuzzytok import ops  # noqa: E402
from encoders.fuzzytok.ops import conv_flops, dilated_causal_conv  # noqa: E402
from encoders.fuzzytok.reference import dilated_causal_conv_ref  # noqa: E402

if torch.cuda.is_available():
    pytest.skip("CPU interpreter tests; the GPU is covered by benchmarks/bench_fuzzytok.py",
                allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]


def _inputs(B: int, T: int, ci: int, co: int, K: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(B, T, ci, generator=g).requires_grad_(), (0.3 * torch.randn(co, ci, K, generator=g)).requires_grad_(),
            torch.randn(co, generator=g).requires_grad_(), torch.randn(B, T, co, generator=g)]


def _out_and_grads(fn, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, dy: torch.Tensor) -> list[torch.Tensor]:  # noqa: ANN001
    y = fn(x, w, b)
    return [y.detach(), *torch.autograd.grad(y, [x, w, b], dy)]


def _calls() -> dict[str, tuple[int, int]]:
    return {name: (la.tuned_calls, la.direct_calls) for name, la in kn.LAUNCHERS.items()}


@pytest.mark.parametrize("shape", [(2, 45, 64, 32, 3, 2), (1, 37, 5, 7, 3, 1)], ids=["tma", "pointer"])
def test_thin_launch_matches_autotuned_path_and_reference(shape: tuple[int, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    B, T, ci, co, K, d = shape
    x, w, b, dy = _inputs(B, T, ci, co, K, seed=sum(shape))
    kn.clear_tuning()

    def conv(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return dilated_causal_conv(x, w, b, d, impl="triton")

    monkeypatch.setattr(kn, "THIN", False)
    before = _calls()
    wrapped = _out_and_grads(conv, x, w, b, dy)
    assert all(_calls()[n][1] == before[n][1] for n in before), "THIN=False launched directly"
    monkeypatch.setattr(kn, "THIN", True)
    first = _out_and_grads(conv, x, w, b, dy)  # records the keys (through the wrappers)
    before = _calls()
    thin = _out_and_grads(conv, x, w, b, dy)
    after = _calls()
    # The second call of every key skips the wrappers: forward and dx (one conv launcher), dW.
    assert all(after[n][0] == before[n][0] for n in after), (before, after)
    conv_name = "conv_tma" if kn.tma_fits(x.detach(), kn.gemm_weight(w.detach(), False, x.dtype)) else "conv"
    assert after[conv_name][1] - before[conv_name][1] == 2
    assert after["dw"][1] - before["dw"][1] == 1
    for name, a, c, e in zip(["y", "dx", "dW", "db"], wrapped, first, thin):
        assert torch.equal(a, e) and torch.equal(c, e), name  # the same config: bit for bit
    xr, wr, br = (t.detach().requires_grad_() for t in (x, w, b))
    ref = _out_and_grads(lambda x, w, b: dilated_causal_conv_ref(x, w, b, d), xr, wr, br, dy)
    for name, a, c in zip(["y", "dx", "dW", "db"], thin, ref):
        torch.testing.assert_close(a, c, atol=2e-5, rtol=1e-4, msg=name)


def test_new_key_goes_back_through_the_autotuner() -> None:
    kn.clear_tuning()
    g = torch.Generator().manual_seed(3)
    w = kn.gemm_weight(torch.randn(7, 5, 3, generator=g), False, torch.float32)  # pointer kernel (C = 5)
    la = kn.LAUNCHERS["conv"]

    def launch(x: torch.Tensor, **kw: object) -> torch.Tensor:
        return kn.launch_conv(x, w, None, 2, **kw)

    def tuned_after(fn) -> int:  # noqa: ANN001
        n, clock = la.tuned_calls, kn.tune_seconds()
        fn()
        # the tuning clock runs in tuned calls only (a direct launch adds nothing to it)
        assert (kn.tune_seconds() > clock) == (la.tuned_calls > n)
        return la.tuned_calls - n

    # (The interpreter's tiles are 32 rows high: T = 96 and 160 give 3 and 5 column-sum rows, no
    # integer that Triton specialises differently.)
    x = torch.randn(2, 96, 5, generator=g)
    assert tuned_after(lambda: launch(x)) == 1
    assert tuned_after(lambda: launch(x)) == 0  # same key
    assert tuned_after(lambda: launch(torch.randn(3, 160, 5, generator=g))) == 0  # B and T, still multiples of 16
    assert tuned_after(lambda: launch(torch.randn(2, 97, 5, generator=g))) == 1  # T % 16 changes Triton's specialisation
    assert tuned_after(lambda: launch(x, mode=kn.MODE_LAYER, act="gelu", res=x.new_zeros(2, 96, 7))) == 1  # MODE
    # A view one element into its storage: a pointer not 16-byte aligned, another compiled kernel.
    flat = torch.randn(2 * 96 * 5 + 1, generator=g)
    off = flat[1:].view(2, 96, 5)
    assert off.data_ptr() % 16 != 0
    assert tuned_after(lambda: launch(off)) == 1
    y_off = launch(off)
    torch.testing.assert_close(y_off, launch(off.clone()), atol=0, rtol=0)


def test_key_covers_dtype_alignment_integers_constexprs_and_device() -> None:
    la = kn.LAUNCHERS["conv"]
    x = torch.zeros(64)
    consts = dict(CI=4, CO=4, K=3, DIR=-1, HAS_BIAS=False, MODE=0, ACT=0)
    base = la.key(-1, (x, 32), consts)
    assert la.key(-1, (torch.zeros(64), 32), consts) == base  # another tensor, same properties
    different = {
        "dtype": la.key(-1, (x.double(), 32), consts),
        "alignment": la.key(-1, (x[1:], 32), consts),
        "integer % 16": la.key(-1, (x, 33), consts),
        "integer 1": la.key(-1, (x, 1), consts),
        "constexpr": la.key(-1, (x, 32), dict(consts, MODE=1)),
        "caller's static part": la.key(-1, (x, 32), consts, static=(torch.bfloat16,)),
        "device": la.key(0, (x, 32), consts),
    }
    for what, k in different.items():
        assert k != base, what


def test_key_specialises_each_argument_as_triton_does(monkeypatch: pytest.MonkeyPatch) -> None:
    # The key's specialisation is Triton's own function on every argument with that argument's
    # flags (the interpreter's @jit declares none, so flags are set here as a compiled one's are).
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.compiler import BaseBackend

    la = kn.LAUNCHERS["dw"]
    flags = [(True, True), (False, True), (True, False), (False, False)]
    monkeypatch.setattr(la, "specialize", [sp for sp, _ in flags])
    monkeypatch.setattr(la, "align", [al for _, al in flags])
    args = (torch.zeros(64), 1, torch.zeros(65)[1:], 48)
    want = tuple(native_specialize_impl(BaseBackend, a, False, sp, al) for a, (sp, al) in zip(args, flags))
    assert la.key(-1, args, {})[3] == want
    assert la.key(-1, (args[0], 2, args[2], 48), {}) == la.key(-1, args, {})  # not specialised on its value
    assert la.key(-1, (args[0], 1, args[2], 49), {}) == la.key(-1, args, {})
    assert la.key(-1, (torch.zeros(64)[1:], 1, args[2], 48), {}) != la.key(-1, args, {})  # alignment counts


def test_eager_function_path_matches_custom_op(monkeypatch: pytest.MonkeyPatch) -> None:
    x, w, b, dy = _inputs(2, 40, 64, 64, 3, seed=9)

    def conv(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return dilated_causal_conv(x, w, b, 4, impl="triton")

    y = conv(x, w, b)
    assert type(y.grad_fn).__name__ == "_ConvFunctionBackward"  # eager: the autograd.Function
    fast = _out_and_grads(conv, x, w, b, dy)
    monkeypatch.setattr(ops, "EAGER_FUNCTION", False)
    assert "_ConvFunction" not in type(conv(x, w, b).grad_fn).__name__
    op = _out_and_grads(conv, x, w, b, dy)
    for name, a, c in zip(["y", "dx", "dW", "db"], fast, op):
        assert torch.equal(a, c), name
    # Only the gradients asked for are computed, and no-grad calls skip autograd altogether.
    monkeypatch.setattr(ops, "EAGER_FUNCTION", True)
    (dw,) = torch.autograd.grad(conv(x.detach(), w, None), [w], dy)
    torch.testing.assert_close(dw, fast[2], atol=0, rtol=0)
    with torch.no_grad():
        assert torch.equal(conv(x, w, b), fast[0])


def test_dispatch_modes_and_compile_still_see_the_custom_op() -> None:
    x, w, b, _ = _inputs(1, 16, 4, 3, 2, seed=4)
    with FlopCounterMode(display=False) as counter:
        dilated_causal_conv(x, w, b, 2, impl="triton")
    assert counter.get_total_flops() == conv_flops(x.shape, w.shape)

    def f(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return dilated_causal_conv(x, w, b, 2, impl="triton")

    got = torch.compile(f, backend="aot_eager", fullgraph=True)(x, w, b)
    torch.testing.assert_close(got, f(x, w, b), atol=0, rtol=0)


def test_small_channel_counts_get_their_own_configs() -> None:
    # The GPU config lists exist only when the kernels are compiled (not interpreted): check them
    # in a child process that defines the kernels with TRITON_INTERPRET=0 (no GPU needed to prune).
    code = (
        "from encoders.fuzzytok import kernels as kn\n"
        "def ids(cs): return {id(c) for c in cs}\n"
        "for name, prune, allc, small in (('tma', kn._prune_tma, kn._TMA_CONFIGS, kn._TMA_SMALL),\n"
        "                                 ('ptr', kn._prune_fwd, kn._FWD_CONFIGS, kn._FWD_SMALL),\n"
        "                                 ('dw', kn._prune_dw, kn._DW_CONFIGS, kn._DW_SMALL)):\n"
        "    for c in (32, 64, 96, 128):\n"
        "        got = prune(allc, {}, CI=c, CO=c)\n"
        "        assert got and ids(got) <= small, (name, c)\n"
        "    for c in (256, 512):\n"
        "        got = prune(allc, {}, CI=c, CO=c)\n"
        "        assert got and not ids(got) & small, (name, c)\n"
        "assert [c.kwargs['BLOCK_N'] for c in kn._prune_tma(kn._TMA_CONFIGS, {}, CI=32, CO=32)] == [32, 32]\n"
        "assert any(c.kwargs['BLOCK_T'] == 64 for c in kn._prune_tma(kn._TMA_CONFIGS, {}, CI=64, CO=64))\n"
        "assert all(c.kwargs['BLOCK_N'] <= 64 for c in kn._prune_dw(kn._DW_CONFIGS, {}, CI=64, CO=64))\n"
        "assert kn._tma_shape_fits(32, 32) and kn._tma_shape_fits(96, 96) and not kn._tma_shape_fits(160, 160)\n"
        "assert len(kn._prune_tma(kn._TMA_CONFIGS, {}, CI=256, CO=256)) == 6\n"
    )
    env = dict(os.environ, TRITON_INTERPRET="0", PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_parallel_compile_switch_changes_no_number(monkeypatch: pytest.MonkeyPatch) -> None:
    """FUZZYTOK_PARALLEL_COMPILE only compiles ahead (on a GPU); under the interpreter there is
    nothing to compile, so it submits nothing, and every number is the one without it."""
    x, w, b, dy = _inputs(2, 45, 64, 32, 3, seed=3)

    def conv(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return dilated_causal_conv(x, w, b, 2, impl="triton")

    kn.clear_tuning()
    plain = _out_and_grads(conv, x, w, b, dy)
    monkeypatch.setattr(kn, "PARALLEL_COMPILE", 4)
    assert kn.LAUNCHERS["conv"]._precompile(lambda m: (1,), lambda m: (), {}, 4) == 0
    kn.clear_tuning()
    ahead = _out_and_grads(conv, x, w, b, dy)
    for name, a, c in zip(["y", "dx", "dW", "db"], plain, ahead):
        assert torch.equal(a, c), name


def test_parallel_compile_threads_default_and_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    """On by default with min(8, usable CPUs) threads; FUZZYTOK_PARALLEL_COMPILE=N sets N (0 off);
    a value that is no whole number is a one-line error naming the variable."""
    monkeypatch.delenv("FUZZYTOK_PARALLEL_COMPILE", raising=False)
    assert kn._parallel_compile_threads() == min(8, len(os.sched_getaffinity(0)))
    monkeypatch.setenv("FUZZYTOK_PARALLEL_COMPILE", "0")
    assert kn._parallel_compile_threads() == 0
    monkeypatch.setenv("FUZZYTOK_PARALLEL_COMPILE", " 3 ")
    assert kn._parallel_compile_threads() == 3
    monkeypatch.setenv("FUZZYTOK_PARALLEL_COMPILE", "lots")
    with pytest.raises(ValueError, match=r"FUZZYTOK_PARALLEL_COMPILE='lots' is not a whole number"):
        kn._parallel_compile_threads()


def _fake_cuda_launcher(signature: dict, desc_meta: list | None, monkeypatch: pytest.MonkeyPatch,
                        scratch: int = 0) -> tuple[object, list, list]:
    """A Triton 3.6 ``CudaLauncher`` built as its ``__init__`` builds it, around a recording
    stand-in for the compiled C launch; descriptors encoded by a stand-in for
    ``make_tensordesc_arg`` (no driver on CPU) that counts its calls. Returns (launcher, the C
    launch's recorded calls, the encoder's recorded calls)."""
    from triton.backends.nvidia import driver as nv

    calls: list = []
    encoded: list = []

    class CLaunch:  # a callable without Python code, as the compiled C function is
        def __call__(self, *args: object) -> None:
            calls.append(args)

    c_launch = CLaunch()

    def encode(arg: object, meta: dict) -> list:
        encoded.append(meta)
        return [("map", arg.base.data_ptr(), meta["block_size"], *arg.shape), *arg.shape, *arg.strides]

    monkeypatch.setattr(nv, "make_tensordesc_arg", encode)
    launcher = nv.CudaLauncher.__new__(nv.CudaLauncher)
    launcher.num_ctas = 1
    launcher.launch = nv.wrap_handle_tensordesc(c_launch, signature, desc_meta)
    launcher.global_scratch_size = launcher.profile_scratch_size = scratch
    launcher.global_scratch_align = launcher.profile_scratch_align = 1
    launcher.launch_cooperative_grid, launcher.launch_pdl = False, True
    return launcher, calls, encoded


def test_raw_launch_passes_what_tritons_launcher_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    # The C launch gets the same arguments through RawLaunch as through CudaLauncher.__call__ and
    # its descriptor wrapper, for a kernel with tensor descriptors among pointers, ints and
    # constexprs; an encoded tensor map is reused only for the same memory and layout.
    from triton.tools.tensor_descriptor import TensorDescriptor

    sig = {"x_desc": "tensordesc<bf16[1, 64, 32]>", "b_ptr": "*bf16", "y_desc": "tensordesc<bf16[1, 64, 32]>",
           "T": "i32", "BLOCK": "constexpr"}
    metas = [{"block_size": [1, 64, 32], "tag": "x"}, {"block_size": [1, 64, 32], "tag": "y"}]
    launcher, calls, encoded = _fake_cuda_launcher(sig, metas, monkeypatch)
    raw = kn.RawLaunch.of(launcher)
    assert raw is not None and set(raw.desc_meta) == {0, 2}
    x, y, b = torch.zeros(2, 96, 32), torch.zeros(2, 96, 32), torch.zeros(32)

    def descs(t: torch.Tensor) -> TensorDescriptor:
        return kn._desc(t, [t.shape[0], t.shape[1], t.shape[2]], [t.shape[1] * t.shape[2], t.shape[2], 1], [1, 64, 32])

    args, tail = (descs(x), b, descs(y), 96), (64,)
    launcher((3, 1, 1)[0], 1, 1, 7, 11, "packed", None, None, None, *args, *tail)
    raw((3,), 7, 11, "packed", args, tail)
    assert len(calls) == 2 and calls[0] == calls[1]
    assert calls[0][:13] == (3, 1, 1, 7, 11, False, True, None, None, "packed", None, None, None)
    assert calls[0][13][0] == "map" and calls[0][13][1] == x.data_ptr()
    n = len(encoded)
    raw((3,), 7, 11, "packed", args, tail)  # same memory and layout: the maps are reused
    assert len(encoded) == n and calls[-1] == calls[0]
    z = torch.zeros(2, 96, 32)
    raw((3,), 7, 11, "packed", (descs(z), b, descs(y), 96), tail)  # new memory: encoded again
    assert len(encoded) == n + 1 and calls[-1][13][1] == z.data_ptr()
    launcher(3, 1, 1, 7, 11, "packed", None, None, None, descs(z), b, descs(y), 96, *tail)
    assert calls[-1] == calls[-2]


def test_raw_launch_declines_launchers_it_does_not_know(monkeypatch: pytest.MonkeyPatch) -> None:
    sig = {"x_ptr": "*fp32", "T": "i32"}
    plain, calls, _ = _fake_cuda_launcher(sig, None, monkeypatch)
    raw = kn.RawLaunch.of(plain)  # no descriptors: the C launch itself, arguments as given
    assert raw is not None and raw.desc_meta == {}
    t = torch.zeros(4)
    raw((2, 3), 5, 6, "p", (t, 4), ())
    plain(2, 3, 1, 5, 6, "p", None, None, None, t, 4)
    assert calls[0] == calls[1]
    scratch, _, _ = _fake_cuda_launcher(sig, None, monkeypatch, scratch=64)
    assert kn.RawLaunch.of(scratch) is None  # needs a scratch allocation per launch
    host_desc, _, _ = _fake_cuda_launcher({"x_desc": "tensordesc<fp32[4]>", "T": "i32"}, None, monkeypatch)
    assert kn.RawLaunch.of(host_desc) is None  # descriptors decomposed on the host
    assert kn.RawLaunch.of(lambda *a: None) is None and kn.RawLaunch.of(object()) is None
    plain.launch = lambda *a: None  # a Python wrapper it does not know
    assert kn.RawLaunch.of(plain) is None
