"""The one interface every encoder implements, so one training loop and one scoring function serve all.

Vocabulary (units):
  * a **window** is a byte string the harness cuts from a document (at most ``context_bytes``);
    the first ``score_from`` bytes are context only, bytes ``[score_from, len)`` are *scored*.
  * a **prediction unit** is what the model puts a distribution on: one byte (bytes, FuzzyTok,
    BLT) or one token (BPE). Its NLL is in **nats**.
  * a **segment** is what the encoder's sequence model steps over: bytes, tokens or patches.

The harness never divides by tokens: it sums unit NLLs and divides by UTF-8 bytes. An encoder
returns, for every scored byte, exactly one unit that covers it (``UnitNLL`` spans tile the scored
bytes of each window; the harness checks this), so BPB = ΣNLL / (ln 2 · Σ bytes) whatever the unit.

Life cycle, driven by ``harness``:
  1. ``Encoder(config, backbone)`` — build from a frozen config dataclass (``Config`` class attr).
  2. ``fit(ctx)`` — optional stage on the training split (BPE merges, BLT entropy model). It may
     train a sub-model with ``ctx.train`` (the harness's one training loop).
  3. training: ``collate(windows, score_from)`` → ``.to(device)`` → ``forward(batch)`` → loss =
     ``nll.sum() / scored bytes``.
  4. scoring: the same calls under ``torch.no_grad()``; per-byte NLL comes from ``UnitNLL.byte_nll``.
  5. ``predict_logprobs`` for the causality probe.
"""

from __future__ import annotations

from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from encoders.backbone import BackboneConfig

BOS = 256  # input id of the beginning-of-window symbol for byte-level encoders (inputs: 257 ids)


@dataclass
class TensorBatch:
    """A collated batch: named tensors (moved by ``to``) plus plain-Python metadata (kept on CPU).

    Encoders put whatever they need in ``tensors`` (e.g. ``ids`` (B, T) long, ``mask`` (B, T) bool)
    and in ``meta`` (e.g. the token byte spans); the harness only calls ``to`` and ``scored_bytes``.
    """

    tensors: dict[str, torch.Tensor]
    meta: dict[str, Any] = field(default_factory=dict)
    scored_bytes: int = 0  # Σ over windows of len(window) - score_from

    def to(self, device: torch.device | str) -> TensorBatch:
        return TensorBatch(
            {k: v.to(device, non_blocking=True) for k, v in self.tensors.items()},
            self.meta,
            self.scored_bytes,
        )

    def __getitem__(self, key: str) -> torch.Tensor:
        return self.tensors[key]


@dataclass
class UnitNLL:
    """NLL of every scored prediction unit in a batch.

    nll:    (U,) float, nats, differentiable during training.
    window: (U,) long, index of the window in the batch.
    start:  (U,) long, first byte of the unit, offset inside its window.
    end:    (U,) long, one past the last byte. Spans of one window tile [score_from, len) exactly.
    segments: per window, the byte lengths of the encoder's segments (tokens / patches) that hold
        scored bytes, each clipped to the scored span, so they tile [score_from, len) exactly (a
        patch starting in the context counts with its scored bytes; the harness checks the sum).
        Bytes per token / patch come from these (``core.segments``).
    window_var: (W,) float64 nats², or None for exact scores: the Monte Carlo variance of each
        window's total NLL when it is an estimate (masked diffusion's NELBO, ``encoders/mdm.py``).
    """

    nll: torch.Tensor
    window: torch.Tensor
    start: torch.Tensor
    end: torch.Tensor
    segments: list[list[int]] | None = None
    window_var: torch.Tensor | None = None

    def to(self, device: torch.device | str, non_blocking: bool = False) -> UnitNLL:
        """The same units with their tensors on ``device``. From a GPU to the host with
        ``non_blocking``, the copies are asynchronous (into pinned memory): wait for the stream
        (an event) before reading them. Scoring uses this to read a batch's results while the
        next batch runs."""

        nll, window, start, end = (t.to(device, non_blocking=non_blocking)
                                   for t in (self.nll, self.window, self.start, self.end))
        var = None if self.window_var is None else self.window_var.to(device, non_blocking=non_blocking)
        return UnitNLL(nll, window, start, end, self.segments, var)

    def byte_nll(self, lengths: Sequence[int], score_from: Sequence[int]) -> list[torch.Tensor]:
        """Spread each unit's NLL evenly over its bytes.

        Returns per window a (len - score_from,) float64 tensor of nats per scored byte, summing
        (to fp64 rounding) to the NLL of that window's units. Raises if the units do not tile the
        scored bytes exactly once — a unit missing or counted twice would bias BPB silently.
        """
        return [torch.from_numpy(v) for v in self.byte_nll_arrays(lengths, score_from)]

    def byte_nll_arrays(self, lengths: Sequence[int], score_from: Sequence[int]) -> list[np.ndarray]:
        """``byte_nll`` as numpy arrays (views of one flat float64 array), for the scoring loop's
        thread: each window's tensor turned back into an array after ``np.split`` cost a 512-window
        BPE-like batch 1.94 ms on the VM, these views 1.06 ms (``benchmarks/bench_byte_nll.py``,
        ``benchmarks/results/byte_nll_arrays_cpu_s26.log``)."""
        # numpy, not torch CPU ops: on an H200 this ran on the scoring loop's thread at 20-30 ms a
        # batch of 256 windows as torch ops, longer than the batch's forward (BENCHMARKS.md).
        # Same arithmetic, same float64 numbers.
        if not lengths:
            return []
        n_scored = np.array([ln - s for ln, s in zip(lengths, score_from)], dtype=np.int64)
        total = int(n_scored.sum())
        offset = np.cumsum(n_scored) - n_scored  # (W,) first flat index of each window
        sf = np.asarray(score_from, dtype=np.int64)
        win, st, en = (t.cpu().long().numpy() for t in (self.window, self.start, self.end))
        length = en - st  # (U,)
        if length.size and int(length.min()) <= 0:
            raise AssertionError("encoder returned an empty or negative unit span")
        first = offset[win] + st - sf[win]  # (U,) flat index of each unit's first byte
        nll = self.nll.detach().cpu().double().numpy()
        if length.size == total and bool((length == 1).all()) and np.array_equal(first, np.arange(total)):
            # one unit per byte, in byte order (byte-level encoders): the units are the bytes,
            # each byte's share is its unit's NLL (x / 1), and the tiling holds by construction
            return _sections(nll.copy(), n_scored)
        share = np.repeat(nll / length, length)  # (Σ length,) each byte's share, in unit order
        ends = first + length
        if length.size and first[0] == 0 and ends[-1] == total and np.array_equal(first[1:], ends[:-1]):
            # units in byte order, each starting where the one before ended (BPE's tokens): they
            # tile the scored bytes exactly once, and the shares in unit order are the bytes'
            # NLL — the numbers the general path below sums into zeros (0 + x = x), without its
            # index arrays and counts over every byte (a BPE-like batch of 256 windows on the
            # VM: 2.06 -> 1.01 ms, benchmarks/results/byte_nll_cpu_s17.log)
            return _sections(share, n_scored)
        idx = np.repeat(first, length) + (np.arange(int(length.sum())) - np.repeat(np.cumsum(length) - length, length))
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= total):
            raise AssertionError("encoder returned a unit outside the scored span of its window")
        # with every byte covered once (checked below), each sum is 0 + one share: exact
        flat = np.bincount(idx, weights=share, minlength=total).astype(np.float64, copy=False)
        count = np.bincount(idx, minlength=total)
        if total and not bool((count == 1).all()):
            raise AssertionError(
                "encoder units do not tile the scored bytes exactly once "
                f"(per-byte coverage min={int(count.min())}, max={int(count.max())})"
            )
        return _sections(flat, n_scored)


def _sections(flat: np.ndarray, sizes: np.ndarray) -> list[np.ndarray]:
    """``flat`` cut into consecutive views of ``sizes`` elements each (``np.split`` without its
    per-section bookkeeping)."""
    ends = np.cumsum(sizes).tolist()
    return [flat[a:b] for a, b in zip([0, *ends[:-1]], ends)]


def collate_bytes(windows: Sequence[bytes], score_from: Sequence[int]) -> TensorBatch:
    """Byte-level collation shared by byte encoders.

    tensors: ``inputs`` (B, T) long — BOS then the window's bytes shifted right by one, so
    position t sees bytes < t only; ``targets`` (B, T) long — the window's bytes, -1 where padded
    or not scored (t < score_from). T = longest window.
    """
    T = max((len(w) for w in windows), default=0)
    B = len(windows)
    inputs = torch.full((B, T), BOS, dtype=torch.long)
    targets = torch.full((B, T), -1, dtype=torch.long)
    for i, (w, s) in enumerate(zip(windows, score_from)):
        if not w:
            continue
        t = torch.frombuffer(bytearray(w), dtype=torch.uint8).long()
        inputs[i, 1 : len(w)] = t[:-1]
        targets[i, s : len(w)] = t[s:]
    scored = sum(len(w) - s for w, s in zip(windows, score_from))
    # every scored byte is one unit: its count lets the forward skip nonzero's host sync
    return TensorBatch({"inputs": inputs, "targets": targets, **unit_index(targets)}, {"units": scored}, scored)


UNIT_WINDOW, UNIT_POS = "unit_window", "unit_pos"  # batch tensors: where the scored units are


def unit_index(targets: torch.Tensor) -> dict[str, torch.Tensor]:
    """Collation's half of ``scored_index``: the row and column (each (U,) long) of every scored
    target (``targets`` (B, T) >= 0) in row-major order, made on the host where collation runs
    (``nonzero``: no device there to wait for), as batch tensors ``unit_window``/``unit_pos``.
    The forward then takes them as they are (``batch_scored_index``) instead of finding them
    on the device every step (a dozen ops: the cumsum, scatter and divisions of
    ``scored_index``); the same indices, so the same numbers."""
    b, t = (targets >= 0).nonzero(as_tuple=True)
    return {UNIT_WINDOW: b, UNIT_POS: t}


def batch_scored_index(batch: TensorBatch, targets: str = "targets") -> tuple[torch.Tensor, torch.Tensor]:
    """Row and column of every scored unit of ``batch``: collation's ``unit_index`` when the
    batch has it, else ``scored_index(batch[targets] >= 0, meta["units"])`` on the batch's device."""
    if UNIT_WINDOW in batch.tensors:
        return batch.tensors[UNIT_WINDOW], batch.tensors[UNIT_POS]
    return scored_index(batch[targets] >= 0, batch.meta.get("units"))


def scored_index(mask: torch.Tensor, n: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Row and column (each (n,) long) of every True of ``mask`` (B, T), in row-major order:
    ``mask.nonzero(as_tuple=True)``. With ``n``, the number of Trues known on the host from
    collation (``TensorBatch.meta["units"]``), nothing waits for the device: ``nonzero`` must
    copy its output size to the host, which stalls the training loop once a step. Same indices,
    so the same numbers (tests/encoders/test_scored_index.py)."""
    if n is None:
        return mask.nonzero(as_tuple=True)
    flat = mask.reshape(-1)
    pos = torch.cumsum(flat, 0) - 1  # rank of each True among the Trues
    if flat.device.type == "cpu":  # on the host the check costs no sync
        have = int(pos[-1]) + 1 if flat.numel() else 0
        if have != n:
            raise AssertionError(f"batch says {n} scored units, its targets hold {have}")
    # A stable partition: the Trues to slots 0..n-1 in order, the Falses after them; every slot
    # is written once, so the scatter is deterministic.
    src = torch.arange(flat.numel(), device=flat.device)
    dest = torch.where(flat, pos, n + src - pos - 1)  # a False's slot: n + Falses before it
    idx = torch.empty_like(src).scatter_(0, dest, src)[:n]
    T = mask.shape[1]
    return idx // T, idx % T


def byte_unit_nll(logits: torch.Tensor, targets: torch.Tensor, n_units: int | None = None,
                  index: tuple[torch.Tensor, torch.Tensor] | None = None) -> UnitNLL:
    """Per-byte NLL from next-byte logits.

    logits: (B, T, 256) — logits[b, t] predicts byte t of window b.
    targets: (B, T) long, -1 where not scored. Returns one unit per scored byte.
    n_units: the number of scored bytes when the caller knows it (``meta["units"]`` of
    ``collate_bytes``): the units are then found without a host-device sync (``scored_index``).
    index: the scored positions (rows, columns), (U,) long each, when collation made them
    (``unit_index``); then neither is computed here.
    """
    b, t = index if index is not None else scored_index(targets >= 0, n_units)
    # -log_softmax(logits)[target]: cross_entropy is log_softmax then nll_loss, which picks and
    # negates the same entries (bit for bit, forward and backward: tests/encoders/
    # test_scored_index.py) in 2 ops where log_softmax, gather, (un)squeeze and neg took 5
    nll = F.cross_entropy(logits[b, t].float(), targets[b, t], reduction="none")  # (U,)
    return UnitNLL(nll=nll, window=b, start=t, end=t + 1)


@dataclass
class FitContext:
    """What the harness hands an encoder's ``fit`` stage. Encoders never see suites or files."""

    train_docs: Callable[[], Iterator[bytes]]  # the training split, documents in training order
    train_bytes: int  # the suite's byte budget for the main model
    context_bytes: int
    seed: int
    device: torch.device
    # Run the harness's one training loop on a sub-model (e.g. BLT's entropy model) for n bytes.
    # Returns the loop's stats: {"bytes", "flops", "seconds", "final_loss", ...}.
    train: Callable[[Encoder, int], dict[str, Any]]
    log: Callable[[str], None] = print


class Encoder(nn.Module, metaclass=ABCMeta):
    """Base class of all encoders. Subclasses set ``Config`` (a frozen dataclass) and implement
    the abstract ``collate``, ``forward``, ``flops`` and ``predict_logprobs``; ``fit``,
    ``frozen_flops`` and ``describe`` are optional.

    ``backbone`` is the suite's shared backbone config, or None when the encoder runs without one.
    """

    Config: ClassVar[type]
    unit: ClassVar[str] = "byte"  # name of the prediction unit, for token perplexity: byte | token
    segment: ClassVar[str] = "byte"  # name of the segment the sequence model steps over
    # fit() reads only the training text and touches no device (a tokenizer's merges), and
    # get_extra_state() holds all it learned: the harness may then fit a copy in another CPU
    # process while other models train and hand the result over with set_extra_state(); fit()
    # must recognise learned state of the same key and not learn it again.
    host_fit: ClassVar[bool] = False
    # Comes with its weights (``encoders/hf``): the harness never fits or trains it, probes its
    # causality when it loads it and keeps it out of compute-matched claims (harness/config/pretrained.py).
    trained_elsewhere: ClassVar[bool] = False

    def __init__(self, config: Any, backbone: BackboneConfig | None) -> None:
        super().__init__()
        self.config = config
        self.backbone_config = backbone

    # -- optional stage before training -------------------------------------------------------
    def fit(self, ctx: FitContext) -> dict[str, Any]:
        """Fit non-gradient parts on the training split. Returns facts for run.json
        (must include ``bytes`` read and ``flops`` spent, 0 when nothing is fitted)."""
        return {"bytes": 0, "flops": 0.0, "seconds": 0.0}

    # -- training and scoring -----------------------------------------------------------------
    @abstractmethod
    def collate(self, windows: Sequence[bytes], score_from: Sequence[int]) -> TensorBatch:
        """Turn byte windows into tensors on CPU. ``score_from[i]`` is where scoring starts."""
        raise NotImplementedError

    @abstractmethod
    def forward(self, batch: TensorBatch) -> UnitNLL:  # type: ignore[override]
        """NLL (nats) of every scored unit; differentiable."""
        raise NotImplementedError

    @abstractmethod
    def flops(self, batch: TensorBatch) -> float:
        """Analytic forward FLOPs of ``forward(batch)`` (2 per multiply-add), from module shapes.
        Training FLOPs are counted as 3x forward by the harness."""
        raise NotImplementedError

    # -- optional training fast path (harness.data.pretokenize) ------------------------------------
    def can_pretokenize(self) -> bool:
        """Whether training batches may come from ``tokenize_windows`` + ``collate_tokenized``
        instead of ``collate`` (False by default: byte encoders collate cheaply already)."""
        return False

    def tokenize_windows(self, windows: Sequence[bytes]) -> Any:
        """Windows scored whole (``score_from`` 0), tokenized in bulk: pure CPU, a picklable
        result (worker processes make it many steps ahead of training)."""
        raise NotImplementedError

    def collate_tokenized(self, block: Any, lo: int, hi: int) -> TensorBatch:
        """The batch ``collate(windows[lo:hi], [0] * (hi - lo))`` would give, for the windows
        ``block = tokenize_windows(windows)`` was made from — equal tensor for tensor."""
        raise NotImplementedError

    def frozen_flops(self, batch: TensorBatch) -> float:
        """The part of ``flops(batch)`` spent in frozen sub-modules (no backward pass: BLT's
        entropy model), so a training step costs 3·flops − 2·frozen_flops. 0 by default."""
        return 0.0

    @abstractmethod
    def predict_logprobs(self, data: bytes, positions: Sequence[int]) -> dict[int, torch.Tensor]:
        """For the causality probe: log-probabilities (V,) of the unit that starts at byte ``p``,
        as computed with the whole of ``data`` fed to the model. Positions where no unit starts
        (e.g. inside a BPE token) are left out of the result."""
        raise NotImplementedError

    def score_windows_per_batch(self, batch_windows: int) -> int:
        """Windows per scoring forward for a suite's ``eval.batch_windows``, which counts the
        windows of a model that steps over every byte. An encoder whose sequence is several times
        shorter than its windows' bytes (BPE tokens) may take more windows a forward, so that a
        forward holds about as many positions as a byte model's: its forwards are otherwise too
        small to keep a GPU busy. A window's numbers do not depend on its batch (beyond float
        rounding), and the answer must be the same in a fresh and a resumed run. Default:
        ``batch_windows``."""
        return batch_windows

    # -- static permutations (harness.config.permutation; context-fragility study) ------------------
    def unit_lengths(self, window: bytes) -> list[int]:
        """Byte lengths of the prediction units ``window`` is cut into, in order; a permutation
        moves whole units. Default: one unit per byte, right for every ``unit == "byte"``
        encoder. Token-level encoders override this and ``collate_units``."""
        if self.unit != "byte":
            raise NotImplementedError(
                f"{type(self).__name__} predicts {self.unit}s and does not implement "
                "unit_lengths/collate_units, so it cannot be permuted")
        return [1] * len(window)

    def collate_units(self, fed: Sequence[Any]) -> TensorBatch:
        """``collate`` for permuted windows, every byte scored. Each item has ``.data`` (bytes:
        the fed stream) and ``.units`` (its units as byte strings, in the fed order; together
        ``data``) — ``harness.config.permutation.PermutedWindow``. The units must be used as given,
        never re-segmented; UnitNLL spans index ``.data``. Default: ``collate`` the fed bytes."""
        return self.collate([w.data for w in fed], [0] * len(fed))

    @classmethod
    def permutable(cls, config: Any = None) -> bool:
        """Whether ``unit_lengths``/``collate_units`` serve this encoder (with ``config``, when
        given): byte units, or hooks of its own."""
        return cls.unit == "byte" or cls.collate_units is not Encoder.collate_units

    # -- facts for run.json -------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """Encoder-specific facts for run.json (receptive field, vocab size, threshold, ...)."""
        return {}

    def embedding_parameters(self) -> int:
        """Parameters in lookup tables (nn.Embedding), reported as the embedding share."""
        return sum(m.weight.numel() for m in self.modules() if isinstance(m, nn.Embedding))


class ByteLevelEncoder(Encoder):
    """Base for encoders that predict every byte from the bytes before it: subclasses implement
    ``logits(inputs (B, T) long) -> (B, T, 256)`` where position t sees inputs <= t (bytes < t);
    collation, the loss units and the causality-probe hook come from here."""

    unit: ClassVar[str] = "byte"
    segment: ClassVar[str] = "byte"

    @abstractmethod
    def logits(self, inputs: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def collate(self, windows: Sequence[bytes], score_from: Sequence[int]) -> TensorBatch:
        return collate_bytes(windows, score_from)

    def forward(self, batch: TensorBatch) -> UnitNLL:  # type: ignore[override]
        return byte_unit_nll(self.logits(batch["inputs"]), batch["targets"], index=batch_scored_index(batch))

    @torch.no_grad()
    def predict_logprobs(self, data: bytes, positions: Sequence[int]) -> dict[int, torch.Tensor]:
        dev = next(self.parameters()).device
        batch = collate_bytes([data], [0]).to(dev)
        logp = torch.log_softmax(self.logits(batch["inputs"])[0].float(), dim=-1)
        return {p: logp[p].cpu() for p in positions if 0 <= p < len(data)}


def config_to_dict(cfg: Any) -> Any:
    """Frozen config dataclasses (nested) -> plain JSON-able dicts, for run.json and cache keys."""
    if is_dataclass(cfg) and not isinstance(cfg, type):
        return {f.name: config_to_dict(getattr(cfg, f.name)) for f in fields(cfg)}
    if isinstance(cfg, (list, tuple)):
        return [config_to_dict(v) for v in cfg]
    if isinstance(cfg, dict):
        return {str(k): config_to_dict(v) for k, v in cfg.items()}
    return cfg
