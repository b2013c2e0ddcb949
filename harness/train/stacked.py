"""K same-shape models trained as one stacked model (``scaling.stack``): one step, K optimizer steps.

    stack = Stack.of([m.encoder for m in members], template, device)
    step = StackedStep(stack, template, budget, device)     # CUDA graph per shape under budget.cuda_graphs
    losses = step(batch, lrs, step_bytes, steps_done)       # (K,) nats per scored byte, on the device

A scaling sweep's rung (one backbone shape, one encoder) appears at every budget; with one seed its
points start from the same weights (``build_encoder`` seeds them alike) and read the same windows in
the same order (``training_windows``: a shorter budget's batches are a prefix of a longer one's).
They differ only in their learning-rate schedule and in when they stop. So they are trained as
one model whose parameters carry a leading K axis:

* Weights, gradients and AdamW's two moments are four (K, N) float32 buffers (N: one model's
  parameters); each parameter is a strided view (K, *shape) of its columns, a leaf whose
  ``.grad`` is the matching view of the gradient buffer (autograd adds into a defined gradient in
  place). Clipping and AdamW are then a dozen whole-buffer ops with the models on the rows: a
  per-model gradient norm is one row sum, a per-model learning rate a (K, 1) column.
* The forward is the encoder's own code under ``torch.vmap`` of ``torch.func.functional_call``
  over the stacked views, the shared input batch broadcast (``in_dims=None``): each linear layer
  becomes one batched GEMM over the K weight matrices, autograd records plain batched kernels,
  and the whole step is capturable as one CUDA graph. Why not a hand-written batched backbone with
  ``bmm``: a second implementation of the model to keep equal to the first, for the same kernels.
* Loss: each model's Σ NLL over the step's scored targets / the step's scored bytes (nats per
  byte), summed over the K models before ``backward`` — no model's loss depends on another's
  weights, so each model's gradient is exactly its own.
* AdamW as ``torch.optim.AdamW`` computes it (decoupled decay on matrices only, bias corrections
  from the shared step count, computed on the host in double precision), with each model's own
  learning rate; clipping as ``clip_grad_norm_`` per model.

The step is ``harness.train.graph_step``'s dense form (logits at every position, unscored targets
-1, inputs padded to a multiple of ``PAD``), so the eager step (CPU, the tests) and the replayed
graph (CUDA) run the same code. tests/harness/train/test_stacked.py checks the per-step losses and final
weights against the same points trained alone by ``train_step``.
"""

from __future__ import annotations

import contextlib
import math
import re
import warnings
from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from encoders.base import ByteLevelEncoder, TensorBatch
from harness.train.graph_step import BATCH_KEYS, PAD, dense_logits, load_padded

MAX_GRAPHS = 4  # captured shapes (windows, padded length) per stack; other shapes run eagerly


def fixed_shape(template: nn.Module) -> bool:
    """Whether every training batch of this encoder has one shape (byte-level: windows of
    ``context_bytes``), the only case a stack replays as CUDA graphs. BPE's lengths vary, so its
    stack captures several graphs and runs the rest eagerly; on an H100 that ended in an illegal
    memory access (BENCHMARKS.md, "Sweep engine"). The likely cause, a RoPE table freed while
    graphs of shorter lengths still read it, is fixed (``Backbone.rope``); BPE stacks step
    eagerly until a GPU run shows the mix works."""
    return isinstance(template, ByteLevelEncoder)


class _Dense(nn.Module):
    """``dense_logits`` as a module call, for ``functional_call``: inputs (B, T) -> logits (B, T, V)."""

    def __init__(self, enc: nn.Module) -> None:
        super().__init__()
        self.enc = enc

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        return dense_logits(self.enc, inputs)


class Stack:
    """The K models' state as (K, N) float32 buffers on one device: ``weights``, ``grads``,
    ``exp_avg``, ``exp_avg_sq`` (AdamW's moments); ``steps`` optimizer steps taken (shared: all
    rows started together). ``params`` are the (K, *shape) views of ``weights``, in the order of
    ``template.named_parameters()``."""

    def __init__(self, template: nn.Module, weights: torch.Tensor, exp_avg: torch.Tensor,
                 exp_avg_sq: torch.Tensor, steps: int) -> None:
        self.names = [n for n, _ in template.named_parameters()]
        self.shapes = [tuple(p.shape) for _, p in template.named_parameters()]
        sizes = [math.prod(s) for s in self.shapes]
        self.offsets = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
        self.weights, self.exp_avg, self.exp_avg_sq, self.steps = weights, exp_avg, exp_avg_sq, steps
        self.grads = torch.zeros_like(weights)
        # AdamW's decay on matrices only (make_optimizer: p.dim() >= 2), as a (1, N) row of 0 / 1
        mask = torch.zeros(1, self.offsets[-1], dtype=weights.dtype)
        for (a, b), s in zip(zip(self.offsets, self.offsets[1:]), self.shapes):
            mask[0, a:b] = 1.0 if len(s) >= 2 else 0.0
        self.decay_mask = mask.to(weights.device)
        self.params: list[torch.Tensor] = []
        for (a, b), s in zip(zip(self.offsets, self.offsets[1:]), self.shapes):
            v = self.weights[:, a:b].view(len(weights), *s)  # a leaf view: the buffer needs no grad
            v.requires_grad_(True)
            v.grad = self.grads[:, a:b].view(len(weights), *s)
            self.params.append(v)

    @property
    def k(self) -> int:
        return int(self.weights.shape[0])

    @classmethod
    def of(cls, models: Sequence[nn.Module], template: nn.Module, device: torch.device) -> Stack:
        """A fresh stack (zero moments, no steps) of ``models``' current weights."""
        rows = [torch.cat([p.detach().reshape(-1).float() for p in m.parameters()]) for m in models]
        weights = torch.stack(rows).to(device)
        return cls(template, weights, torch.zeros_like(weights), torch.zeros_like(weights), 0)

    def keep(self, rows: Sequence[int], template: nn.Module) -> Stack:
        """A new stack of ``rows`` only, weights and optimizer state carried over (fresh buffers:
        a captured graph of this stack keeps reading the old ones)."""
        idx = torch.tensor(list(rows), device=self.weights.device)
        return Stack(template, self.weights.index_select(0, idx), self.exp_avg.index_select(0, idx),
                     self.exp_avg_sq.index_select(0, idx), self.steps)

    def write_into(self, row: int, model: nn.Module) -> None:
        """Row ``row``'s weights into ``model``'s parameters (the un-stacked model)."""
        with torch.no_grad():
            for p, (a, b) in zip(model.parameters(), zip(self.offsets, self.offsets[1:])):
                p.copy_(self.weights[row, a:b].view(p.shape).to(p.dtype))

    def state(self) -> dict[str, Any]:
        """Weights and optimizer state on the CPU, for a checkpoint."""
        return {"weights": self.weights.cpu(), "exp_avg": self.exp_avg.cpu(), "exp_avg_sq": self.exp_avg_sq.cpu(),
                "steps": self.steps}

    @classmethod
    def from_state(cls, state: dict[str, Any], template: nn.Module, device: torch.device) -> Stack:
        return cls(template, state["weights"].to(device), state["exp_avg"].to(device),
                   state["exp_avg_sq"].to(device), int(state["steps"]))


class StackedStep:
    """One optimizer step of every model of a ``Stack`` on one shared batch, eager or (CUDA,
    ``budget.cuda_graphs``) replayed as a CUDA graph per (windows, padded length)."""

    def __init__(self, stack: Stack, template: nn.Module, budget: Any, device: torch.device,
                 graphs: bool = False) -> None:
        self.stack, self.budget, self.device = stack, budget, device
        self.wrap = _Dense(template)
        self.cuda = device.type == "cuda"
        self.use_graphs = graphs and self.cuda and fixed_shape(template)
        self.autocast = (torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)
                         if self.cuda and budget.dtype == "bfloat16" else contextlib.nullcontext())
        self.graphs: dict[tuple[int, int], dict[str, Any]] = {}  # (windows, padded length) -> buffers, graph
        self.eager: dict[tuple[int, int], dict[str, Any]] = {}  # buffers of the steps run eagerly
        self.replays = 0
        self.fallbacks: set[str] = set()

    def shrink(self, rows: Sequence[int]) -> None:
        """Keep only ``rows`` of the stack (a member finished): fresh buffers, so the graphs
        captured on the old ones are dropped and the next step captures anew."""
        self.stack = self.stack.keep(rows, self.wrap.enc)
        self.graphs, self.eager = {}, {}  # the hyper-parameter buffers are sized by the stack

    @staticmethod
    def accepts(batches: list[TensorBatch]) -> bool:
        """One micro-batch of a byte-level or BPE collation (what the dense step reads)."""
        return len(batches) == 1 and not set(batches[0].tensors) - BATCH_KEYS

    def _forward_loss(self, inputs: torch.Tensor, targets: torch.Tensor, step_bytes: torch.Tensor) -> torch.Tensor:
        """(K,) losses: each model's Σ NLL (nats) over targets != -1 / ``step_bytes``."""
        st = self.stack
        names = ["enc." + n for n in st.names]

        def one(params: tuple[torch.Tensor, ...], x: torch.Tensor) -> torch.Tensor:
            return torch.func.functional_call(self.wrap, dict(zip(names, params)), (x,))

        with self.autocast, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            logits = torch.vmap(one, in_dims=(0, None))(tuple(st.params), inputs)  # (K, B, T, V)
            v = logits.shape[-1]
            nll = F.cross_entropy(logits.float().reshape(-1, v), targets.reshape(-1).repeat(st.k),
                                  ignore_index=-1, reduction="none")
        # ops vmap ran one model at a time (no batching rule: SDPA's CPU kernel in torch 2.13);
        # run.json names them (``stack.vmap_fallback``) rather than a warning every step
        for w in caught:
            m = re.search(r"batching rule for (\S+?)\.", str(w.message))
            if m is None:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
            else:
                self.fallbacks.add(m.group(1))
        return nll.view(st.k, -1).sum(1) / step_bytes

    def _body(self, s: dict[str, torch.Tensor]) -> torch.Tensor:
        """The step on static buffers ``s`` (inputs, targets, bytes, hyper): the (K,) losses."""
        st, b = self.stack, self.budget
        st.grads.zero_()
        loss = self._forward_loss(s["inputs"], s["targets"], s["bytes"])
        with warnings.catch_warnings():
            # the gradient views are strided like their parameters but not dense (rows of a
            # (K, N) buffer): autograd warns, then adds into them in place, which is the point
            warnings.filterwarnings("ignore", message="grad and param do not obey")
            loss.sum().backward()  # Σ over models: each model's gradient is its own loss's
        with torch.no_grad():
            g = st.grads
            if b.grad_clip > 0:  # clip_grad_norm_ per model: its gradient's 2-norm is its row's
                norm = g.pow(2).sum(1, keepdim=True).sqrt()
                g.mul_((b.grad_clip / (norm + 1e-6)).clamp(max=1.0))
            k = st.k
            lr, step_size, bc2_sqrt = s["hyper"][:k, None], s["hyper"][k:2 * k, None], s["hyper"][2 * k]
            st.weights.mul_(1.0 - lr * (b.weight_decay * st.decay_mask))
            st.exp_avg.lerp_(g, 1.0 - b.beta1)
            st.exp_avg_sq.mul_(b.beta2).addcmul_(g, g, value=1.0 - b.beta2)
            denom = (st.exp_avg_sq.sqrt() / bc2_sqrt).add_(1e-8)  # torch.optim.AdamW's default eps
            st.weights.sub_(st.exp_avg / denom * step_size)
        return loss.detach()

    def _hyper(self, lrs: Sequence[float], steps_done: int) -> torch.Tensor:
        """Host values of step ``steps_done + 1``: lr (K), lr / bias correction 1 (K), √(bias
        correction 2) (1) — in double precision, as AdamW computes them, then float32."""
        b, n = self.budget, steps_done + 1
        bc1, bc2 = 1.0 - b.beta1 ** n, 1.0 - b.beta2 ** n
        return torch.tensor([*lrs, *(lr / bc1 for lr in lrs), math.sqrt(bc2)], dtype=torch.float32,
                            pin_memory=self.cuda)

    def _buffers(self, b: int, t: int) -> dict[str, torch.Tensor]:
        dev = self.device
        return {"inputs": torch.zeros((b, t), dtype=torch.long, device=dev),
                "targets": torch.full((b, t), -1, dtype=torch.long, device=dev),
                "bytes": torch.ones((), dtype=torch.float32, device=dev),
                "hyper": torch.zeros(2 * self.stack.k + 1, dtype=torch.float32, device=dev)}

    @staticmethod
    def _load(s: dict[str, torch.Tensor], batch: TensorBatch, step_bytes: int, hyper: torch.Tensor) -> None:
        """The batch into the buffers as ``load_padded`` copies it, and ``hyper`` (2K + 1,)
        float32 into ``s["hyper"]``."""
        load_padded(s, batch, step_bytes)
        s["hyper"].copy_(hyper, non_blocking=True)

    def _capture(self, s: dict[str, torch.Tensor]) -> None:
        """Capture the step on ``s`` into ``s["graph"]``: two warm-up steps on a side stream (with
        the learning rates at 0) allocate autograd's and cuBLAS's buffers, then the weights and
        moments are put back bit for bit, so the capture changes no model."""
        st = self.stack
        saved = [t.clone() for t in (st.weights, st.exp_avg, st.exp_avg_sq)]
        hyper = s["hyper"].clone()
        s["hyper"].zero_()
        s["hyper"][-1] = 1.0
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                self._body(s)
        torch.cuda.current_stream().wait_stream(side)
        for t, v in zip((st.weights, st.exp_avg, st.exp_avg_sq), saved):
            t.copy_(v)
        s["hyper"].copy_(hyper)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            s["loss"] = self._body(s)
        s["graph"] = graph  # type: ignore[assignment]

    def __call__(self, batch: TensorBatch, lrs: Sequence[float], step_bytes: int, steps_done: int) -> torch.Tensor:
        """One step of the K models on ``batch`` (host or device tensors) with learning rates
        ``lrs`` (K floats, the models' own schedules): the detached (K,) losses on the device,
        nats per scored byte."""
        b, t = batch["inputs"].shape
        key = (b, -(-t // PAD) * PAD)
        hyper = self._hyper(lrs, steps_done)
        s = self.graphs.get(key)
        graphed = self.use_graphs and (s is not None or len(self.graphs) < MAX_GRAPHS)
        if s is None:
            s = self.eager.get(key) or self._buffers(*key)
            (self.graphs if graphed else self.eager)[key] = s
        self._load(s, batch, step_bytes, hyper)
        self.stack.steps += 1
        if graphed:
            if "graph" not in s:
                self._capture(s)
            s["graph"].replay()  # type: ignore[attr-defined]
            self.replays += 1
            return s["loss"].clone()  # the next replay overwrites the static loss
        return self._body(s)
