"""Scoring throughput of a checkpoint trained elsewhere: tokbench's ``hf`` encoder through the one
scoring function (``harness.score.items.score_items``) against a plain ``transformers`` loop on the same
windows, in the same dtype — MB/s of scored text and MFU for both.

    python benchmarks/bench_hf_score.py                          # GPU: ~110 M GPT-2-small-like model, 16 MB, bf16
    python benchmarks/bench_hf_score.py --tiny --device cpu      # the plumbing at toy size (the test runs this)

The model is built here from a config (random weights: speed does not depend on them; GPT-2 small's
shape, 12 x 768, with 2048 positions) with a byte-level BPE tokenizer trained in seconds on the first
2 MB of the text (``tools/make_tiny_hf_model.build``), saved with ``save_pretrained`` and loaded
through the encoder's own loading path. The text is the running Python's standard library
(``.py`` files, sorted), so nothing is downloaded.

Both sides score the same windows (``plan_full``: ``--context-bytes`` windows, each scoring the
``--stride`` bytes after the previous one, the rest its context) in batches of ``--batch-windows``
windows, timed from the first window to the last NLL on the host, tokenization included:

* tokbench — ``score_items`` (collation in worker processes on CUDA, one forward in flight, NLL
  spread onto bytes);
* plain — for each batch: the tokenizer's batch ``__call__`` on the contexts and the scored parts,
  BOS + ids padded, ``model(input_ids).logits``, ``cross_entropy(..., ignore_index=-100,
  reduction="sum")`` on the scored positions, as a user's own loop would.

Their total NLLs agree to bf16 rounding (printed). FLOPs, the same count for both: per window of n
positions fed, 2 · P · n + 2 · layers · n² · hidden (P: the parameters of matrix products, every
weight but the embedding lookups with the output head counted once; causal attention at half: QKᵀ
and AV, 2 · 2 · n² · hidden / 2 per layer). Padding is not counted. MFU divides by the dense bf16
rate of an 8192³ GEMM measured in the same process (on CPU: a float32 1024³ one).
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from encoders.hf import HfConfig, HfEncoder  # noqa: E402
from harness.score.items import plan_full, score_items  # noqa: E402


def stdlib_text(n_bytes: int) -> list[bytes]:
    """Documents (one per ``.py`` file of the standard library, sorted, tests skipped) until
    ``n_bytes`` bytes; repeated if the library is smaller."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in root.rglob("*.py") if "test" not in p.parts and "site-packages" not in p.parts)
    docs: list[bytes] = []
    total = 0
    while total < n_bytes and files:
        for f in files:
            data = f.read_bytes()[: n_bytes - total]
            if data:
                docs.append(data)
                total += len(data)
            if total >= n_bytes:
                break
    return docs


def make_model(folder: Path, tiny: bool, text: list[bytes]) -> Path:
    """The checkpoint: ``tools/make_tiny_hf_model.build`` at GPT-2 small's shape (or toy size)."""
    spec = importlib.util.spec_from_file_location("make_tiny_hf_model", ROOT / "tools" / "make_tiny_hf_model.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    sample = [d.decode("utf-8", "replace") for d in text]
    sample = sample[: max(1, len(sample))]
    budget, kept = 2_000_000, []
    for d in sample:  # the tokenizer learns on the first 2 MB
        kept.append(d)
        budget -= len(d)
        if budget <= 0:
            break
    if tiny:
        return tool.build(folder, "gpt2", vocab_size=600, dim=64, layers=2, heads=2, positions=2048, texts=kept)
    return tool.build(folder, "gpt2", vocab_size=32000, dim=768, layers=12, heads=12, positions=2048, texts=kept)


def gemm_rate(device: torch.device) -> float:
    """Measured dense matrix-product rate, FLOP/s: bf16 8192³ on CUDA, float32 1024³ on CPU."""
    n, dtype = (8192, torch.bfloat16) if device.type == "cuda" else (1024, torch.float32)
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(2):
        a @ b
    times = []
    for _ in range(7 if device.type == "cuda" else 3):
        sync(device)
        t = time.perf_counter()
        a @ b
        sync(device)
        times.append(time.perf_counter() - t)
    return 2.0 * n**3 / sorted(times)[len(times) // 2]


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def window_flops(enc: HfEncoder, n: int) -> float:
    """Forward FLOPs of one window of ``n`` positions (module docstring)."""
    return 2.0 * enc.matmul_parameters() * n + 2.0 * enc.layers * n * n * enc.width


def plain_loop(enc: HfEncoder, tok: object, windows: list[tuple[bytes, int]], batch: int,
               device: torch.device) -> tuple[float, float, int]:
    """(total NLL nats, FLOPs, scored bytes) of the windows by a plain transformers loop."""
    model, bos = enc.model, enc.bos
    total, flops, scored = 0.0, 0.0, 0
    for b0 in range(0, len(windows), batch):
        chunk = windows[b0 : b0 + batch]
        ctx = tok([w[:s].decode("utf-8", "replace") for w, s in chunk], add_special_tokens=False)["input_ids"]
        tgt = tok([w[s:].decode("utf-8", "replace") for w, s in chunk], add_special_tokens=False)["input_ids"]
        rows = [[bos, *c, *t] for c, t in zip(ctx, tgt)]
        N = max(len(r) for r in rows)
        ids = torch.full((len(rows), N), bos, dtype=torch.long)
        labels = torch.full((len(rows), N), -100, dtype=torch.long)
        for i, (r, c, t) in enumerate(zip(rows, ctx, tgt)):
            ids[i, : len(r)] = torch.tensor(r)
            labels[i, len(c) : len(c) + len(t)] = torch.tensor(t)  # logits at p predict token p + 1 of ``r``
            flops += window_flops(enc, len(r) - 1)
        ids, labels = ids.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        with torch.inference_mode():
            logits = model(input_ids=ids, use_cache=False).logits
            total += float(F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100,
                                           reduction="sum"))
        scored += sum(len(w) - s for w, s in chunk)
    return total, flops, scored


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiny", action="store_true", help="a toy model and 50 kB of text (CPU test)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--mb", type=float, help="MB of text scored (default 16; --tiny: 0.05)")
    ap.add_argument("--context-bytes", type=int, default=2048)
    ap.add_argument("--stride", type=int, default=1536, help="scored bytes per window (the rest is context)")
    ap.add_argument("--batch-windows", type=int, default=32)
    ap.add_argument("--dtype", choices=["float32", "bfloat16"], help="default: bfloat16 on CUDA, float32 on CPU")
    a = ap.parse_args()
    device = torch.device(a.device)
    dtype = a.dtype or ("bfloat16" if device.type == "cuda" else "float32")
    mb = a.mb if a.mb is not None else (0.05 if a.tiny else 16.0)
    docs = stdlib_text(int(mb * 1e6))
    items = [plan_full(d, a.context_bytes, a.stride) for d in docs]
    windows = [(it.data[w.start : w.end], w.score_from) for it in items for w in it.windows]
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        folder = make_model(Path(tmp) / "model", a.tiny, docs)
        enc = HfEncoder(HfConfig(path=str(folder), dtype=dtype)).to(device).eval()
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(folder)
        print(f"model: {type(enc.model).__name__} {sum(p.numel() for p in enc.parameters()) / 1e6:.1f} M params "
              f"({enc.matmul_parameters() / 1e6:.1f} M in matrix products), {enc.layers} x {enc.width}, "
              f"vocab {enc.V}, {dtype}, built + loaded in {time.perf_counter() - t0:.1f} s")
    peak = gemm_rate(device)
    n_bytes = sum(len(w) - s for w, s in windows)
    print(f"text: {n_bytes / 1e6:.2f} MB scored in {len(windows)} windows of <= {a.context_bytes} bytes "
          f"(stride {a.stride}), {a.batch_windows} a batch; device {device}; "
          f"GEMM {'bf16' if device.type == 'cuda' else 'fp32'} {peak / 1e12:.3g} TFLOP/s")
    warm = items[: max(1, len(items) // 20)]
    score_items(enc, warm, device, batch_windows=a.batch_windows)  # warm-up: kernels, allocator, workers
    plain_loop(enc, tok, windows[: a.batch_windows], a.batch_windows, device)

    # the same FLOP count for both: the positions each window feeds (BOS + its tokens but the last)
    bt = enc.tokenizer
    flops = sum(window_flops(enc, len(bt.encode(w[:s], True).ids) + len(bt.encode(w[s:], s == 0).ids))
                for w, s in windows)
    sync(device)
    t = time.perf_counter()
    scores = score_items(enc, items, device, batch_windows=a.batch_windows)
    sync(device)
    t_tb = time.perf_counter() - t
    nll_tb = sum(s.nll for s in scores)
    sync(device)
    t = time.perf_counter()
    nll_plain, flops_plain, scored = plain_loop(enc, tok, windows, a.batch_windows, device)
    sync(device)
    t_plain = time.perf_counter() - t
    assert scored == n_bytes
    print(f"{'path':<10} {'seconds':>8} {'MB/s':>8} {'TFLOP/s':>8} {'MFU':>7} {'BPB':>8}")
    for name, sec, nll, f in (("tokbench", t_tb, nll_tb, flops), ("plain", t_plain, nll_plain, flops_plain)):
        print(f"{name:<10} {sec:8.2f} {n_bytes / sec / 1e6:8.3f} {f / sec / 1e12:8.3g} {f / sec / peak:7.1%} "
              f"{nll / (math.log(2) * n_bytes):8.4f}")
    print(f"tokbench / plain: {t_plain / t_tb:.2f}x the throughput; NLL differs by "
          f"{abs(nll_tb - nll_plain) / max(abs(nll_plain), 1e-9):.2e} (relative); FLOPs counted "
          f"{flops / max(flops_plain, 1.0):.4f}x the plain loop's")


if __name__ == "__main__":
    main()
