"""GPU smoke check of the whole FuzzyTok encoder on the Triton path (not a test; needs CUDA).

    python benchmarks/fuzzytok_gpu_smoke.py

1. fp32 (TF32 kernels) loss and gradients of every parameter vs the reference path (impl=torch),
   for each Triton variant: store (recompute unset, the default), recompute, fused block.
2. bf16 autocast (the harness's GPU training mode): the custom ops run on bf16 operands; loss
   vs the fp32 loss, and one timed training step, each Triton variant vs reference.
3. torch.compile(fullgraph=True) of the logits with the custom ops inside: same output as eager;
   and of a training loss (AOTAutograd traces the custom backward ops): same gradients as eager.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from encoders.backbone import BackboneConfig  # noqa: E402
from encoders.fuzzytok import FuzzyTokConfig, FuzzyTokEncoder  # noqa: E402


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


VARIANTS = {"store": dict(), "recompute": dict(recompute=True), "fused": dict(fused_block=True)}


def build(impl: str, variant: str = "store") -> FuzzyTokEncoder:
    torch.manual_seed(0)
    cfg = FuzzyTokConfig(dim=256, impl=impl, **VARIANTS[variant])  # type: ignore[arg-type]
    return FuzzyTokEncoder(cfg, BackboneConfig(layers=2, dim=256, heads=4)).cuda()


def step(m: FuzzyTokEncoder, batch, autocast: bool) -> torch.Tensor:  # noqa: ANN001
    m.zero_grad(set_to_none=True)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        loss = m(batch).nll.sum() / batch.scored_bytes
    loss.backward()
    return loss.detach()


def main() -> None:
    g = torch.Generator().manual_seed(0)
    windows = [bytes(torch.randint(0, 256, (2048,), generator=g).tolist()) for _ in range(16)]
    ok = True
    ref = build("torch")
    batch = ref.collate(windows, [0] * len(windows)).to("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    loss_ref = step(ref, batch, autocast=False)
    for variant in VARIANTS:
        m = build("triton", variant)
        loss = step(m, batch, autocast=False)
        worst = max((rel(p.grad, q.grad), n) for (n, p), q in zip(m.named_parameters(), ref.parameters()))
        good = rel(loss, loss_ref) < 1e-3 and worst[0] < 2e-2
        ok &= good
        print(f"fp32 {variant}: loss {loss.item():.5f} vs ref {loss_ref.item():.5f}; "
              f"worst grad rel err {worst[0]:.1e} ({worst[1]}) {'ok' if good else 'FAIL'}", flush=True)
    for impl, variant in (("triton", "store"), ("triton", "recompute"), ("triton", "fused"), ("torch", "store")):
        m = build(impl, variant)
        loss = step(m, batch, autocast=True)
        good = rel(loss, loss_ref) < 1e-2 and all(torch.isfinite(p.grad).all() for p in m.parameters())
        ok &= good
        for _ in range(3):
            step(m, batch, autocast=True)
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(10):
            step(m, batch, autocast=True)
        torch.cuda.synchronize()
        print(f"bf16 autocast impl={impl} {variant if impl == 'triton' else ''}: loss {loss.item():.5f} (fp32 ref {loss_ref.item():.5f}) "
              f"{'ok' if good else 'FAIL'}; train step {(time.perf_counter() - t) / 10 * 1e3:.2f} ms "
              f"(B=16, T=2048, dim 256, 9 conv layers + 2-layer backbone)", flush=True)
    m = build("triton").eval()
    with torch.no_grad():
        eager = m.logits(batch["inputs"])
        compiled = torch.compile(m.logits, fullgraph=True)(batch["inputs"])
    good = rel(compiled, eager) < 1e-3
    ok &= good
    print(f"torch.compile(fullgraph=True): rel diff to eager {rel(compiled, eager):.1e} {'ok' if good else 'FAIL'}")
    for variant in ("store", "recompute"):
        m = build("triton", variant).train()

        def loss_fn(inputs: torch.Tensor, m: FuzzyTokEncoder = m) -> torch.Tensor:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return m.logits(inputs).float().logsumexp(-1).mean()

        eager_loss = loss_fn(batch["inputs"])
        eager_grads = torch.autograd.grad(eager_loss, list(m.parameters()))
        comp_loss = torch.compile(loss_fn, fullgraph=True)(batch["inputs"])
        comp_grads = torch.autograd.grad(comp_loss, list(m.parameters()))
        worst = max(rel(a, b) for a, b in zip(comp_grads, eager_grads))
        good = rel(comp_loss, eager_loss) < 1e-3 and worst < 1e-2
        ok &= good
        print(f"torch.compile training loss ({variant}): loss rel diff {rel(comp_loss, eager_loss):.1e}, "
              f"worst grad rel diff {worst:.1e} {'ok' if good else 'FAIL'}", flush=True)
    print("ALL OK" if ok else "SOME FAILED")


if __name__ == "__main__":
    main()
