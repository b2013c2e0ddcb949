"""BLT training through the harness's one loop: patching on the device vs the old host path.

    python benchmarks/blt_step.py                        # CUDA, standard-suite BLT (~2 min on an H200)
    python benchmarks/blt_step.py --tiny --device cpu    # a check of the script itself (seconds)

Trains the same BLT (suites/standard.yaml's encoder and backbone, 256 windows of 1 KB a step,
bf16 on CUDA) twice from the same initial weights with ``harness.train.loop.train_encoder``:
``device`` is the encoder as it is; ``host`` emulates the path it replaced — patch starts
computed on the host from entropies copied there, copied back each step, N read from the device
in the forward, unit count from ``nonzero``, segments computed per window on the host every step.
Prints per path: the host-device syncs CUDA reports in one training forward + backward
(``torch.cuda.set_sync_debug_mode``), MB/s over the whole run and after the first step (its cold compile), training
MFU (counted FLOPs with causal attention at half ÷ the bf16 8192³ GEMM rate measured here), GPU
idle share of steps 10–30 (torch profiler, ``budget.idle_steps``) and the mean patch size.

The text is Python stdlib source (no data cache needed). The entropy model is untrained: θ is
fitted on this text for 4 bytes per patch, which is what the speed depends on (patch counts set
the shapes), not the quality of the patches.
"""

from __future__ import annotations

import argparse
import itertools
import sysconfig
from pathlib import Path
from typing import Any

import torch

from encoders.backbone import BackboneConfig
from encoders.base import TensorBatch, UnitNLL, byte_unit_nll
from encoders.blt import BltConfig, BltEncoder
from encoders.blt.model import padded_patch_count
from encoders.blt.patching import fit_threshold, mean_patch_size, patch_sizes
from harness.config.suite import BudgetConfig
from harness.infra.accel import pin
from harness.infra.meters import gemm_tflops
from harness.train.loop import autocast_for, train_encoder

IDLE_STEPS = (10, 30)  # the GPU's idle share is measured over these training steps (budget.idle_steps)


class HostPatchingBlt(BltEncoder):
    """BLT with the host-side patching it had before (for this comparison only)."""

    def _patches(self, batch: TensorBatch) -> tuple[torch.Tensor, int]:
        starts = batch.meta.get("host_starts")
        if starts is None:  # the FLOP count's call, on the CPU batch: entropies come back here
            starts = self.patch_starts(batch["stream"], batch["lengths"])
            batch.meta["host_starts"] = starts
        starts = starts.to(batch["stream"].device)  # and to the device again in the forward
        return starts, padded_patch_count(starts)  # N read from the device

    def forward(self, batch: TensorBatch) -> UnitNLL:  # type: ignore[override]
        logits, starts = self.logits(batch)
        units = byte_unit_nll(logits, batch["targets"])  # nonzero: the device is asked for U
        units.segments = host_patch_sizes(starts, batch["lengths"])  # every step
        return units


def host_patch_sizes(starts: torch.Tensor, lengths: torch.Tensor) -> list[list[int]]:
    """The old per-window patch sizes on the host (whole windows scored)."""
    starts, lengths = starts.cpu(), lengths.cpu()
    segments = []
    for b in range(starts.shape[0]):
        n = int(lengths[b])
        pos = starts[b, :n].nonzero().squeeze(1)
        segments.append((torch.cat([pos[1:], torch.tensor([n])]) - pos).tolist())
    return segments


def count_syncs(model: BltEncoder, windows: list[bytes], budget: BudgetConfig, device: torch.device) -> list[str]:
    """Where CUDA reports a host-device synchronisation (``torch.cuda.set_sync_debug_mode``) in
    one training forward + backward, as "file:line" of the Python line that caused it, after
    ``flops`` has run on the CPU batch as the loop's prefetch thread does and the batch has been
    copied to the device. (Syncs inside torch's own backward kernels point at ``backward()``.)"""
    import warnings

    model.to(device).train()
    batch = model.collate(windows, [0] * len(windows))
    model.flops(batch)
    batch = pin(batch).to(device)
    torch.cuda.synchronize(device)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            with autocast_for(budget, device):
                units = model(batch)
                loss = units.nll.sum() / batch.scored_bytes
            loss.backward()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    model.zero_grad(set_to_none=True)
    return [f"{Path(w.filename).name}:{w.lineno}" for w in caught if "synchroniz" in str(w.message)]


def stdlib_text(n_bytes: int) -> bytes:
    """About n_bytes of Python stdlib source, files in sorted order."""
    out, total = [], 0
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        data = path.read_bytes()
        out.append(data)
        total += len(data)
        if total >= n_bytes:
            break
    return b"".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--train-bytes", type=int, default=16_000_000, help="per path (default 16 MB)")
    ap.add_argument("--tiny", action="store_true", help="small model and batch (a CPU check)")
    ap.add_argument("--paths", default="device,host", help="comma-separated: device, host")
    args = ap.parse_args()
    device = torch.device(args.device)
    if args.tiny:
        cfg = BltConfig(local_dim=32, local_heads=2, ngram_sizes=(3, 4), ngram_table_size=256,
                        entropy_dim=32, entropy_layers=1, entropy_heads=2)
        backbone = BackboneConfig(layers=1, dim=32, heads=2)
        budget = BudgetConfig(train_bytes=args.train_bytes, context_bytes=128, batch_bytes=2048,
                              warmup_bytes=1000, compile=False, idle_steps=IDLE_STEPS)
    else:  # suites/standard.yaml
        cfg = BltConfig(target_patch_size=4.0, entropy_dim=128, entropy_layers=2, local_dim=192,
                        local_heads=4, decoder_layers=2, ngram_table_size=16384)
        backbone = BackboneConfig(layers=6, dim=384, heads=6)
        budget = BudgetConfig(train_bytes=args.train_bytes, context_bytes=1024, batch_bytes=262_144,
                              lr=1e-3, warmup_bytes=1_000_000, min_lr_ratio=0.1,
                              dtype="bfloat16" if device.type == "cuda" else "float32", idle_steps=IDLE_STEPS)
    text = stdlib_text(4_000_000)
    ctx = budget.context_bytes
    windows = [text[i : i + ctx] for i in range(0, len(text) - ctx + 1, ctx)]
    if len(windows) < 64:
        raise SystemExit(f"blt_step: only {len(text)} bytes of stdlib source found; need {64 * ctx}")

    torch.manual_seed(0)
    init = BltEncoder(cfg, backbone).to(device)
    fit_batch = init.collate(windows[:64], [0] * 64).to(device)
    T = fit_batch["targets"].shape[1]
    H = init.entropies(fit_batch["stream"][:, :T]).cpu()
    valid = (torch.arange(T)[None] < fit_batch["lengths"].cpu()[:, None])
    theta, size = fit_threshold(H, valid, cfg.target_patch_size)
    # the same patches both ways on other windows: the rule on the device vs on the host
    init.threshold = theta
    check = init.collate(windows[64:128], [0] * 64)
    on_host = init.patch_starts(check["stream"], check["lengths"])  # entropies come to the CPU
    on_device = init._patches(check)[0]
    same = torch.equal(on_device.cpu(), on_host) and patch_sizes(on_device, check["lengths"]) == host_patch_sizes(
        on_host, check["lengths"])
    del init
    ceiling = gemm_tflops(device)
    print(f"device {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}), "
          f"torch {torch.__version__}, θ {theta:.4f} nats -> {size:.2f} bytes/patch on 64 windows, "
          f"bf16 GEMM {ceiling and round(ceiling, 1)} TFLOP/s; device patches and segments equal to "
          f"the host path's on 64 other windows: {same}")

    for name in args.paths.split(","):
        cls = {"device": BltEncoder, "host": HostPatchingBlt}[name]
        torch.manual_seed(0)  # the same initial weights as `init` and as the other path
        model = cls(cfg, backbone)
        model.threshold = theta
        model.entropy_model.requires_grad_(False).eval()  # frozen, as after fit
        if device.type == "cuda":
            try:  # a diagnostic: the timing below runs whatever it says
                where = count_syncs(model, windows[: budget.batch_bytes // ctx], budget, device)
                print(f"{name:<6} host-device syncs in one training forward + backward: {len(where)} "
                      f"{sorted(set(where))}")
            except Exception as e:  # noqa: BLE001
                print(f"{name:<6} sync count failed: {type(e).__name__}: {e}")
        n_windows = -(-args.train_bytes // ctx)
        stats: dict[str, Any] = train_encoder(model, itertools.islice(itertools.cycle(windows), n_windows),
                                              args.train_bytes, budget, device)
        steps, per_step = stats["steps"], stats["bytes"] / max(1, stats["steps"])
        steady = (stats["bytes"] - per_step) / max(1e-9, stats["seconds"] - stats["first_step_seconds"])
        mfu = (stats["flops_causal_attn_half"] / stats["seconds"] / (ceiling * 1e12)) if ceiling else float("nan")
        idle = stats.get("gpu_idle", {}).get("idle_fraction", float("nan"))
        batch = model.collate(windows[:64], [0] * 64)
        starts = model._patches(batch)[0].cpu()
        v = torch.arange(starts.shape[1])[None] < batch["lengths"][:, None]
        print(f"{name:<6} {stats['bytes'] / 1e6:.1f} MB in {steps} steps, {stats['seconds']:.1f} s "
              f"(first step {stats['first_step_seconds']:.1f} s): {stats['bytes_per_s'] / 1e6:.2f} MB/s, "
              f"after the first step {steady / 1e6:.2f} MB/s; MFU {mfu:.3f}; GPU idle {idle:.1%}; "
              f"{mean_patch_size(starts, v):.2f} bytes/patch; final loss {stats['final_loss_bpb']:.3f} bpb")
        del model


if __name__ == "__main__":
    main()
