"""One training step of a byte-level or BPE model replayed as a CUDA graph (``budget.cuda_graphs``).

    step = GraphStep(encoder, opt, budget, device, params)      # opt from make_optimizer(..., capturable=True)
    if step.accepts(batches): loss = step(batches[0], lr, step_bytes)   # else harness.train.loop.train_step

A scaling sweep's small models spend 6-9 ms a step in eager mode on an H100, almost all of it the
host launching a few hundred small kernels (docs/scaling.md); replaying the step as one graph
leaves the host a few copies and one launch. The step is ``train_step``'s math: the forward under
the same autocast (its weight-cast cache off, as capture requires), the loss Σ NLL / the step's
scored bytes, gradient clipping over the same parameters, the same AdamW (fused, ``capturable``:
its step count and learning rate live on the device). One difference in order only: the NLL is
summed over every position with unscored targets ignored (``cross_entropy(ignore_index=-1)``)
rather than gathered at the scored positions first, because the number of scored bytes varies
from step to step and a graph has fixed shapes; the terms and their gradients are the same, their
sum is rounded in another order. BPE's head likewise runs on every position, not on the scored
ones only: the same rows, more of them (FLOPs are counted as the eager step counts them).

Shapes: a batch's length is padded up to a multiple of ``PAD`` (inputs 0, targets -1: under
causal attention no real position sees the padding), one graph per (windows, padded length), at
most ``MAX_GRAPHS``; other steps run eagerly through ``train_step`` on the same optimizer. Capturing warms up on a side stream with
the learning rate at 0, then puts the weights and the optimizer state back bit for bit, so the
trained model is the one the eager loop trains (tests/harness/train/test_graph_step.py runs the same
code without capture on CPU). Byte-level and BPE encoders with the autoregressive objective and
one micro-batch a step qualify.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from encoders.base import ByteLevelEncoder, TensorBatch

MAX_GRAPHS = 3  # shapes: (windows, padded length); a step of other windows or length is rare

PAD = 64  # a batch's length is padded up to a multiple of this: a few shapes, a few graphs
BATCH_KEYS = {"inputs", "targets", "unit_window", "unit_pos", "start", "end"}  # what collation makes


def graph_capable(encoder: nn.Module) -> bool:
    """Autoregressive byte-level and BPE models: logits at every position of (B, T) inputs,
    targets -1 where nothing is scored."""
    from encoders.bpe.model import BpeEncoder

    return isinstance(encoder, (ByteLevelEncoder, BpeEncoder)) and getattr(encoder, "objective", "ar") == "ar"


def dense_logits(encoder: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    """inputs (B, T) long -> logits (B, T, V) at every position (BPE's own forward runs its head
    on the scored positions only; the rows are the same)."""
    if isinstance(encoder, ByteLevelEncoder):
        return encoder.logits(inputs)
    return encoder.head(encoder.hidden(inputs))


def load_padded(s: dict[str, Any], batch: TensorBatch, step_bytes: int) -> None:
    """Copy ``batch`` into the static buffers ``s``: ``inputs`` and ``targets`` (B, T_pad) long
    get the batch's (B, T) in their first T columns, then 0 and -1 past T; ``bytes`` (0-d float32)
    gets ``step_bytes``, the step's scored bytes. Causal attention: the padding changes no real
    position's output, and its loss terms are 0."""
    t = batch["inputs"].shape[1]
    s["inputs"][:, :t].copy_(batch["inputs"], non_blocking=True)
    s["targets"][:, :t].copy_(batch["targets"], non_blocking=True)
    s["inputs"][:, t:].zero_()
    s["targets"][:, t:].fill_(-1)
    s["bytes"].fill_(float(step_bytes))


class GraphStep:
    """``train_step`` for one micro-batch a step, captured as a CUDA graph per batch shape (on
    CPU the same body runs eagerly: what the tests check)."""

    def __init__(self, encoder: nn.Module, opt: torch.optim.Optimizer, budget: Any, device: torch.device,
                 params: list[torch.Tensor]) -> None:
        self.enc, self.opt, self.budget, self.device, self.params = encoder, opt, budget, device, params
        self.cuda = device.type == "cuda"
        # capture needs the weight-cast cache off; bf16 autocast is CUDA-only (as autocast_for)
        self.autocast = (torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)
                         if self.cuda and budget.dtype == "bfloat16" else contextlib.nullcontext())
        # device tensors under capturable AdamW on CUDA: the graph reads them (train_step, the
        # eager fallback, puts floats in the groups; each replay puts these back)
        self.lr_tensors = [g["lr"] if isinstance(g["lr"], torch.Tensor) else None for g in opt.param_groups]
        self.graphs: dict[tuple[int, ...], dict[str, Any]] = {}
        self.replays = 0

    @staticmethod
    def shape(batch: TensorBatch) -> tuple[int, int]:
        """(windows, length padded up to a multiple of PAD): the graph a batch replays."""
        b, t = batch["inputs"].shape
        return b, -(-t // PAD) * PAD

    def accepts(self, batches: list[TensorBatch]) -> bool:
        if len(batches) != 1 or set(batches[0].tensors) - BATCH_KEYS:
            return False
        return self.shape(batches[0]) in self.graphs or len(self.graphs) < MAX_GRAPHS

    def _set_lr(self, lr: float) -> None:
        for g, t in zip(self.opt.param_groups, self.lr_tensors):
            if t is not None:
                t.fill_(lr)  # a kernel on the device: no host sync, read by the replay
                g["lr"] = t
            else:
                g["lr"] = lr

    def _body(self, s: dict[str, Any]) -> torch.Tensor:
        """The step on the static buffers ``s``: loss (0-d, nats per scored byte of the step)."""
        with self.autocast:
            logits = dense_logits(self.enc, s["inputs"])  # (B, T, V)
            nll = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), s["targets"].reshape(-1),
                                  ignore_index=-1, reduction="sum")
            loss = nll / s["bytes"]
        loss.backward()
        if self.budget.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.params, self.budget.grad_clip)
        self.opt.step()
        return loss.detach()

    def _snapshot(self) -> tuple[list[torch.Tensor], dict[int, dict[str, torch.Tensor]]]:
        state = {id(p): {k: v.clone() for k, v in self.opt.state[p].items() if isinstance(v, torch.Tensor)}
                 for p in self.params if p in self.opt.state}
        return [p.detach().clone() for p in self.params], state

    def _restore(self, weights: list[torch.Tensor], state: dict[int, dict[str, torch.Tensor]]) -> None:
        """Weights and optimizer state as before the warm-up (state the warm-up created: zeros,
        which is what AdamW's first step creates)."""
        with torch.no_grad():
            for p, w in zip(self.params, weights):
                p.copy_(w)
            for p in self.params:
                for k, v in self.opt.state.get(p, {}).items():
                    if isinstance(v, torch.Tensor):
                        v.copy_(state[id(p)][k]) if id(p) in state else v.zero_()

    def _capture(self, batch: TensorBatch) -> dict[str, Any]:
        b, t = self.shape(batch)
        s: dict[str, Any] = {"inputs": torch.zeros((b, t), dtype=torch.long, device=self.device),
                             "targets": torch.full((b, t), -1, dtype=torch.long, device=self.device),
                             "bytes": torch.ones((), dtype=torch.float32, device=self.device)}
        load_padded(s, batch, batch.scored_bytes)
        weights, state = self._snapshot()
        self._set_lr(0.0)
        side = torch.cuda.Stream() if self.cuda else None
        if side is not None:
            side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side) if side is not None else contextlib.nullcontext():
            for _ in range(2):  # autograd, cuBLAS and the fused optimizer allocate their buffers
                self.opt.zero_grad(set_to_none=True)
                self._body(s)
        if side is not None:
            torch.cuda.current_stream().wait_stream(side)
        self._restore(weights, state)
        self.opt.zero_grad(set_to_none=True)
        if self.cuda:
            graph = torch.cuda.CUDAGraph()
            # other threads (the prefetch's pinning) may call the CUDA API while this captures
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                s["loss"] = self._body(s)
            s["graph"] = graph
            s["grads"] = [p.grad for p in self.params]  # the graph's own buffers, kept alive
        return s

    def __call__(self, batch: TensorBatch, lr: float, step_bytes: int) -> torch.Tensor:
        """One optimizer step on ``batch`` (host or device tensors); the detached loss on the
        device (nats per scored byte)."""
        key = self.shape(batch)
        s = self.graphs.get(key)
        if s is None:
            s = self.graphs[key] = self._capture(batch)
        load_padded(s, batch, step_bytes)
        self._set_lr(lr)
        self.replays += 1
        if self.cuda:
            s["graph"].replay()
            return s["loss"].clone()  # the next replay overwrites the static loss
        self.opt.zero_grad(set_to_none=True)
        return self._body(s)
