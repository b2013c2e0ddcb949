"""The ``bpe`` encoder: BPE token ids (B, N) -> embedding (B, N, dim) -> shared backbone -> (B, N, V) head.

The baseline every tokenizer-free encoder is compared against. Merges are learned in ``fit`` on the
suite's training split (or read from a local ``.tiktoken`` file), then frozen; the network trains
with the harness's one loop on the same byte windows as the byte encoders, and its token NLL is
summed per window and divided by the window's bytes, so BPB is comparable.

Shapes: ``V`` = vocabulary size (token ids 0..V-1, the head's outputs), input id ``V`` = BOS
(embedding has V + 1 rows). N = tokens in the longest window of a batch (<= context bytes).

``objective: mdm`` (``encoders/mdm.py``): a bidirectional backbone predicts masked tokens. The
scored part of a window is padded to a FIXED number of slots — one per scored byte, the most
tokens it can hold — with a PAD unit (id V; BOS = V + 1, MASK = V + 2; the head has V + 1 outputs).
PAD slots are masked and scored like tokens, so the model is told the byte length of the span
(exactly what the byte-level MDM is told) but never the token count, and pays in NLL for where
the text ends. A window's PAD NLL is added to its last real token's unit, so BPB = ΣNLL (tokens +
PADs) / (ln 2 · Σ bytes). The slots cost compute: the backbone runs over context tokens + scored
bytes, not tokens.

Construction order (the harness builds the optimizer after ``fit``): all parameters are created in
``__init__`` — the embedding and head are sized from ``vocab_size`` (or from the rank file when
``file`` is given) — so ``fit`` only learns merges and never re-creates parameters. A corpus too
small to reach ``vocab_size`` leaves the top ids unused (``describe()['vocab_trained']``).
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from core.errors import field_error
from encoders.backbone import (
    Backbone,
    BackboneConfig,
    OutputHead,
    backbone_flops,
    backbone_flops_rows,
)
from encoders.base import Encoder, FitContext, TensorBatch, UnitNLL, batch_scored_index, unit_index
from encoders.bpe.tokenizer import BpeTokenizer, merge_key, resolve_pattern
from encoders.mdm import MaskedDiffusion, MdmUnits
from encoders.registry import register

# merge key → (tokenizer, fit facts) of fits made in this process. A sweep or a multi-seed run
# builds many BPE encoders with the same merge key (same sample, vocabulary, pattern); learning
# the merges and re-encoding the sample again for each took ~3 s per model on the H200 host.
# The key hashes the sample's content, so a hit is the same tokenizer the fit would learn.
_FITTED: dict[str, tuple[BpeTokenizer, dict[str, Any]]] = {}
_FITTED_MAX = 4


@dataclass(frozen=True, kw_only=True)
class BpeConfig:
    """vocab_size: tokens including the 256 single bytes, so >= 256 (ignored when ``file`` is
    given).
    pattern: pre-tokenizer regex, by name (``gpt2``, ``cl100k``) or as a regex; a regex that does
    not compile is refused when the suite is validated.
    file: a local ``.tiktoken`` rank file (e.g. cl100k_base) to use instead of training merges;
    absolute or relative to the working directory; it must exist when the suite is validated.
    Never downloaded.
    dim: embedding width when the encoder runs without a backbone (else the backbone's); >= 1.
    min_frequency: a pair must occur this often (>= 1) in the training sample to be merged.
    fit_bytes: bytes (> 0) of the training split the merges are learned on (None: the suite's
    ``train_bytes``; set it to cap merge training on very large budgets).
    objective: ar (next-token prediction, causal) | mdm (masked diffusion, bidirectional).
    mdm_schedule: linear | cosine — masking schedule α(t) of the MDM objective.
    mdm_span: masked-span length in slots during MDM training (>= 1; 1 = independent masks)."""

    vocab_size: int = 512
    pattern: str = "gpt2"
    file: str | None = None
    dim: int = 64
    min_frequency: int = 2
    fit_bytes: int | None = None
    objective: Literal["ar", "mdm"] = "ar"
    mdm_schedule: Literal["linear", "cosine"] = "linear"
    mdm_span: int = 1

    def __post_init__(self) -> None:
        """Every check that needs no training data runs here, when the suite is validated
        (``tokbench validate``), not in ``BpeEncoder.__init__``: a bad value used to surface only
        when the run reached this encoder, after training the ones before it, and without the
        suite key. Each error carries ``field`` so the loader names ``encoders[i].<field>``."""
        if self.file is None and self.vocab_size < 256:
            raise field_error("bpe", "vocab_size", f"must be >= 256 (the single bytes are tokens), "
                               f"got {self.vocab_size}",
                               f"bpe.vocab_size={self.vocab_size} is below 256 (the single bytes)")
        try:
            resolve_pattern(self.pattern)
        except ValueError as e:
            raise field_error("bpe", "pattern", str(e), str(e)) from None
        if self.file is not None and not Path(self.file).expanduser().is_file():
            raise field_error("bpe", "file", f"BPE rank file not found: {Path(self.file).expanduser()} "
                               "(a local .tiktoken file; tokbench never downloads one)")
        for key in ("dim", "min_frequency", "mdm_span"):
            if getattr(self, key) < 1:
                raise field_error("bpe", key, f"must be >= 1, got {getattr(self, key)}")
        if self.fit_bytes is not None and self.fit_bytes <= 0:
            raise field_error("bpe", "fit_bytes", f"must be > 0 or null (the suite's train_bytes), "
                               f"got {self.fit_bytes}")


@dataclass(frozen=True)
class TokenizedWindows:
    """Windows tokenized whole, in flat per-token arrays: window i's token ids are
    ``ids[offsets[i]:offsets[i + 1]]``, its length ``nbytes[i]`` bytes. Plain numpy (int32 per
    token), so it pickles compactly from a worker process."""

    ids: np.ndarray  # (T,) int32, T = Σ tokens
    offsets: np.ndarray  # (W + 1,) int64
    nbytes: np.ndarray  # (W,) int64
    end: np.ndarray  # (T,) int32: one past its last byte in the window
    start: np.ndarray  # (T,) int32: its first byte


class TokenLengths(Sequence[list[int]]):
    """Per window, the byte length of each token (``UnitNLL.segments``), read from flat arrays
    on access: building 256 Python lists per step would cost more than the whole collation."""

    def __init__(self, lens: np.ndarray, ids: np.ndarray, offsets: np.ndarray) -> None:
        self._lens, self._ids, self._offsets = lens, ids, offsets

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self._lens[self._ids[self._offsets[i] : self._offsets[i + 1]]].tolist()

    def flat(self) -> tuple[np.ndarray, np.ndarray]:
        """(lengths (S,) int64 of every window's tokens in order, offsets (W + 1,)): window j's
        are ``lengths[offsets[j]:offsets[j + 1]]`` — all windows at once
        (``core.segments.window_segments``)."""
        lo, hi = int(self._offsets[0]), int(self._offsets[-1])
        return self._lens[self._ids[lo:hi]], self._offsets - lo

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


@register("bpe")
class BpeEncoder(MaskedDiffusion, Encoder):
    """Token embedding -> shared backbone -> V-way next-token head (a token bigram model without
    a backbone). One prediction unit per BPE token, covering that token's bytes."""

    Config = BpeConfig
    unit = "token"
    segment = "token"
    host_fit = True  # merges from the training text; fit() reuses merges of the same key

    def __init__(self, config: BpeConfig, backbone: BackboneConfig | None) -> None:
        super().__init__(config, backbone)
        # vocab_size, pattern, file and fit_bytes were checked by BpeConfig.__post_init__
        self.tokenizer: BpeTokenizer | None = None
        self.fit_facts: dict[str, Any] = {}  # key, fingerprint, bytes_per_token_train, ...
        if config.file is not None:
            self.tokenizer = BpeTokenizer.from_file(Path(config.file).expanduser(), config.pattern)
            V = self.tokenizer.n_vocab
        else:
            V = config.vocab_size
        dim = backbone.dim if backbone is not None else config.dim
        self.objective = config.objective
        mdm = config.objective == "mdm"
        # AR: row V = BOS. MDM: V = PAD (also a head output), V + 1 = BOS, V + 2 = MASK.
        self.V, self.bos, self.dim = V, V + 1 if mdm else V, dim
        self.pad = V
        self.embed = nn.Embedding(V + 3 if mdm else V + 1, dim)
        self.backbone = Backbone(backbone, causal=not mdm) if backbone is not None else None
        self.head = OutputHead(dim, V + 1 if mdm else V, bias=False)
        nn.init.normal_(self.embed.weight, std=0.02)
        nn.init.normal_(self.head.weight, std=0.02)
        if mdm:
            self.mdm_setup(config.mdm_schedule, config.mdm_span, mask_id=V + 2, n_out=V + 1)

    # -- merges -----------------------------------------------------------------------------------
    def fit(self, ctx: FitContext) -> dict[str, Any]:
        """Learn merges on the first ``fit_bytes`` (default ``ctx.train_bytes``) bytes of the
        training split; reuse them if this model already holds merges for the same corpus
        fingerprint, vocab size and pattern. Returns bytes read, flops (0: no gradient work),
        seconds, and bytes/token on that sample."""
        t0 = time.perf_counter()
        cfg = self.config
        budget = ctx.train_bytes if cfg.fit_bytes is None else min(cfg.fit_bytes, ctx.train_bytes)
        sample: list[bytes] = []
        n = 0
        h = hashlib.sha256()
        for doc in ctx.train_docs():
            if n >= budget:
                break
            d = doc[: budget - n]
            sample.append(d)
            n += len(d)
            h.update(len(d).to_bytes(8, "little"))
            h.update(d)
        fingerprint = h.hexdigest()
        if cfg.file is not None:
            key = "file:" + hashlib.sha256(Path(cfg.file).expanduser().read_bytes()).hexdigest()
        else:
            key = merge_key(fingerprint, cfg.vocab_size, cfg.pattern, cfg.min_frequency)
        # A file's merges are loaded at construction; learned ones are reused when this model
        # (or an earlier fit in this process, ``_FITTED``) holds them for the same key.
        cached = self.tokenizer is not None and self.fit_facts.get("key") == key
        if not cached and cfg.file is None:
            if key in _FITTED:
                self.tokenizer, facts = _FITTED[key]
                self.fit_facts = dict(facts)
                cached = True
            else:
                ctx.log(f"bpe: learning {cfg.vocab_size} tokens on {n:,} bytes")
                self.tokenizer = BpeTokenizer.train(
                    sample, cfg.vocab_size, cfg.pattern, cfg.min_frequency
                )
        tok = self._tok()
        if not (cached and "bytes_per_token_train" in self.fit_facts):  # cached: facts of this key
            n_tokens = sum(len(tok.encode(d)) for d in sample)
            self.fit_facts = {
                "key": key,
                "fingerprint": fingerprint,
                "sample_bytes": n,
                "bytes_per_token_train": n / n_tokens if n_tokens else 0.0,
            }
        if cfg.file is None:
            _FITTED.pop(key, None)
            _FITTED[key] = (tok, dict(self.fit_facts))
            while len(_FITTED) > _FITTED_MAX:
                _FITTED.pop(next(iter(_FITTED)))
        return {
            "bytes": n,
            "flops": 0.0,
            "seconds": time.perf_counter() - t0,
            "cached": cached,
            "vocab_trained": len(tok.ranks),
            "bytes_per_token_train": self.fit_facts["bytes_per_token_train"],
        }

    def get_extra_state(self) -> dict[str, Any]:
        """Merges and fit facts as plain types (``torch.load(weights_only=True)`` reads them)."""
        if self.tokenizer is None:
            return {}
        return {"version": 1, "tokenizer": self.tokenizer.state(), "facts": dict(self.fit_facts)}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        if not state:
            return
        tok = BpeTokenizer.from_state(state["tokenizer"])
        if tok.n_vocab > self.V:
            raise ValueError(
                f"checkpoint BPE vocabulary ({tok.n_vocab}) exceeds the model's ({self.V})"
            )
        self.tokenizer = tok
        self.fit_facts = dict(state["facts"])

    def _tok(self) -> BpeTokenizer:
        if self.tokenizer is None:
            raise RuntimeError(
                "bpe encoder has no merges yet: call fit() (or load a checkpoint) first"
            )
        return self.tokenizer

    # -- training and scoring ---------------------------------------------------------------------
    def collate(self, windows: Sequence[bytes], score_from: Sequence[int]) -> TensorBatch:
        """Tokenize ``window[:score_from]`` and ``window[score_from:]`` separately (no token
        straddles ``score_from``, and the context's tokens never depend on scored bytes).

        tensors (all (B, N) long, N = most tokens in a window): ``inputs`` — BOS then the tokens
        shifted right (padding BOS); ``targets`` — token ids, -1 for context tokens and padding;
        ``start``/``end`` — byte span of each scored token in its window (-1 elsewhere).
        meta ``segments``: per window, byte lengths of the scored tokens.
        """
        if self.objective == "mdm":
            return self.mdm_collate(windows, score_from)
        tok = self._tok()
        rows = []
        for w, s in zip(windows, score_from):
            ctx_ids = tok.encode(w[:s])
            tgt_ids = tok.encode(w[s:])
            rows.append((ctx_ids, tgt_ids, s))
        return self._collate_rows(rows, sum(len(w) - s for w, s in zip(windows, score_from)))

    def _collate_rows(self, rows: list[tuple[list[int], list[int], int]], scored: int) -> TensorBatch:
        """Tensors of ``collate`` from per-window (context ids, scored ids, first scored byte)."""
        # numpy, not per-row torch.tensor(list): collation is on the training step's host path
        lens = self._token_len_np()
        B = len(rows)
        N = max((len(c) + len(t) for c, t, _ in rows), default=0)
        inputs = np.full((B, N), self.bos, dtype=np.int64)
        targets = np.full((B, N), -1, dtype=np.int64)
        start = np.full((B, N), -1, dtype=np.int64)
        end = np.full((B, N), -1, dtype=np.int64)
        segments: list[list[int]] = []
        for i, (c, t, s) in enumerate(rows):
            n = len(c) + len(t)
            if n > 1:
                inputs[i, 1:n] = (c + t)[:-1]
            if t:
                k = len(c)
                tt = np.asarray(t, dtype=np.int64)
                targets[i, k:n] = tt
                ln = lens[tt]  # (len(t),) bytes per token; tokens tile w[s:] from s on
                e = s + np.cumsum(ln)
                start[i, k:n] = e - ln
                end[i, k:n] = e
                segments.append(ln.tolist())
            else:
                segments.append([])
        tensors = {k: torch.from_numpy(v) for k, v in
                   (("inputs", inputs), ("targets", targets), ("start", start), ("end", end))}
        tensors.update(unit_index(tensors["targets"]))  # the scored tokens' positions
        units = sum(len(t) for _, t, _ in rows)  # scored tokens: the forward needs no host sync
        lengths = [len(c) + len(t) for c, t, _ in rows]  # real tokens per row (FLOPs skip the padding)
        return TensorBatch(tensors, {"segments": segments, "units": units, "lengths": lengths}, scored)

    # -- training fast path (harness.data.pretokenize): tokenize in bulk, collate by array slicing -----
    def can_pretokenize(self) -> bool:
        """Next-token training batches can be cut from ``tokenize_windows`` blocks (not MDM,
        whose slots and masks are drawn per batch)."""
        return self.objective == "ar"

    def tokenize_windows(self, windows: Sequence[bytes]) -> TokenizedWindows:
        """Every window tokenized whole (``score_from`` 0), as ``collate`` tokenizes it, into
        flat per-token arrays (ids and byte spans); pure CPU, so worker processes can run it many
        steps ahead."""
        tok = self._tok()
        enc = [tok.encode(w) for w in windows]
        counts = np.fromiter((len(e) for e in enc), dtype=np.int64, count=len(enc))
        total = int(counts.sum())
        ids = np.fromiter(itertools.chain.from_iterable(enc), dtype=np.int32, count=total)
        offsets = np.zeros(len(enc) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        ln = self._token_len_np()[ids]  # (T,) bytes per token; a window's tokens tile it from 0
        end = np.cumsum(ln)
        end = (end - np.repeat(np.concatenate(([0], end))[offsets[:-1]], counts)).astype(np.int32)
        nbytes = np.fromiter((len(w) for w in windows), dtype=np.int64, count=len(windows))
        return TokenizedWindows(ids, offsets, nbytes, end, (end - ln).astype(np.int32))

    def collate_tokenized(self, block: TokenizedWindows, lo: int, hi: int) -> TensorBatch:
        """``collate(windows[lo:hi], [0] * (hi - lo))`` of the windows ``block`` was made from,
        equal tensor for tensor, from a few masked array writes (no tokenization, no Python loop
        over windows or tokens). Segments are read from the arrays when asked for (training never asks)."""
        a, b = int(block.offsets[lo]), int(block.offsets[hi])
        counts = block.offsets[lo + 1 : hi + 1] - block.offsets[lo:hi]  # (B,) tokens per window
        B = hi - lo
        N = int(counts.max()) if B else 0
        valid = np.arange(N)[None, :] < counts[:, None]  # (B, N): real tokens, row-major = flat order
        ids = block.ids[a:b]
        arrays = {}
        for k, flat in (("targets", ids), ("start", block.start[a:b]), ("end", block.end[a:b])):
            arrays[k] = np.full((B, N), -1, dtype=np.int64)
            arrays[k][valid] = flat
        inputs = np.full((B, N), self.bos, dtype=np.int64)  # BOS, then the tokens shifted right
        np.copyto(inputs[:, 1:], arrays["targets"][:, :-1], where=valid[:, 1:])
        tensors = {k: torch.from_numpy(v) for k, v in (("inputs", inputs), *arrays.items())}
        tensors.update(unit_index(tensors["targets"]))  # the scored tokens' positions, as collate's
        segments = TokenLengths(self._token_len_np(), ids, block.offsets[lo : hi + 1] - a)
        return TensorBatch(tensors, {"segments": segments, "units": b - a, "lengths": counts.tolist()},
                           int(block.nbytes[lo:hi].sum()))

    # -- static permutations (harness.config.permutation): tokens are the units that move ------------
    def unit_lengths(self, window: bytes) -> list[int]:
        """Byte length of each token of ``window`` (tokenized whole), in order."""
        return [b - a for a, b in self._tok().encode_with_offsets(window)[1]]

    def collate_units(self, fed: Sequence[Any]) -> TensorBatch:
        """Permuted windows (``.units``: their tokens' bytes in the fed order), all scored: each
        unit becomes its own token id, never re-tokenized; spans index the fed stream. Under
        ``objective: mdm`` the tokens fill MDM slots (PAD to one slot per byte) as in ``collate``."""
        ranks = self._tok().ranks
        if self.objective == "mdm":
            units = []
            for w in fed:
                ids = [ranks[u] for u in w.units]
                ends = list(itertools.accumulate(len(u) for u in w.units))
                spans = [(e - len(u), e) for u, e in zip(w.units, ends)]
                units.append(self.mdm_units_from_tokens([], ids, spans, 0, len(w.data)))
            # masks seeded by the fed bytes, like mdm_collate seeds them by the scored bytes
            return self.mdm_collate_units(units, [w.data for w in fed], sum(len(w.data) for w in fed))
        rows = [([], [ranks[u] for u in w.units], 0) for w in fed]
        return self._collate_rows(rows, sum(len(w.data) for w in fed))

    def mdm_units(self, window: bytes, score_from: int) -> MdmUnits:
        """BOS, the context's tokens, the scored part's tokens, then PAD up to one slot per
        scored byte (a fixed count that does not reveal how many tokens the span has)."""
        tok = self._tok()
        ctx_ids = tok.encode(window[:score_from])
        tgt_ids, spans = tok.encode_with_offsets(window[score_from:])
        return self.mdm_units_from_tokens(ctx_ids, tgt_ids, spans, score_from, len(window) - score_from)

    def mdm_units_from_tokens(self, ctx_ids: Sequence[int], tgt_ids: Sequence[int],
                              spans: Sequence[tuple[int, int]], offset: int, n_bytes: int) -> MdmUnits:
        """MDM units from given token ids: BOS, context tokens, scored tokens (byte ``spans``
        relative to the scored part, which starts at window byte ``offset`` and has ``n_bytes``
        bytes), then PAD up to ``n_bytes`` slots."""
        n_pad = n_bytes - len(tgt_ids)
        slots: list[tuple[int, int] | None] = [(offset + a, offset + b) for a, b in spans]
        slots += [None] * n_pad
        ids = [self.bos, *ctx_ids, *tgt_ids] + [self.pad] * n_pad
        return MdmUnits(ids, 1 + len(ctx_ids), slots, [b - a for a, b in spans])

    def _token_len_np(self) -> np.ndarray:
        """Bytes per token id as an array, built once per tokenizer."""
        tok = self._tok()
        cached = getattr(self, "_lens_cache", None)
        if cached is None or cached[0] is not tok:
            cached = (tok, np.asarray(tok.token_len, dtype=np.int64))
            self._lens_cache = cached
        return cached[1]

    def hidden(self, inputs: torch.Tensor) -> torch.Tensor:
        """inputs (B, N) long -> (B, N, dim); position n sees inputs <= n, i.e. tokens < n."""
        x = self.embed(inputs)
        return self.backbone(x) if self.backbone is not None else x

    def forward(self, batch: TensorBatch) -> UnitNLL:  # type: ignore[override]
        """NLL (nats) of each scored token; the head runs on scored positions only: (U, dim) -> (U, V)."""
        if self.objective == "mdm":
            return self.mdm_forward(batch)
        targets = batch["targets"]
        h = self.hidden(batch["inputs"])
        b, t = batch_scored_index(batch)  # collation's (no ops here), else no host sync when units is known
        logits = self.head(h[b, t])  # (U, V)
        nll = F.cross_entropy(logits.float(), targets[b, t], reduction="none")
        return UnitNLL(
            nll=nll,
            window=b,
            start=batch["start"][b, t],
            end=batch["end"][b, t],
            segments=batch.meta.get("segments"),
        )

    # BPE's windows hold 2.5-4.1 bytes a token in the standard suite (run.json's bytes_per_token_train), so a scoring
    # forward of ``eval.batch_windows`` windows had a quarter of a byte model's positions: on an
    # H200 its forwards were short enough for the host to pace them (the GPU 60-80 % busy in
    # BPE's scoring). A constant, not the fitted bytes per token: batches must be the
    # same in a resumed run, whose model comes from its checkpoint.
    SCORE_BATCH_FACTOR = 4

    def score_windows_per_batch(self, batch_windows: int) -> int:
        """``SCORE_BATCH_FACTOR`` times the suite's windows a forward for the autoregressive
        objective; masked diffusion's rows multiply by its Monte Carlo samples already."""
        return batch_windows * self.SCORE_BATCH_FACTOR if self.objective == "ar" else batch_windows

    def flops(self, batch: TensorBatch) -> float:
        """Head 2·U·dim·V on the U scored tokens + the backbone on each window's own tokens
        (``meta["lengths"]``, from collation; a batch without it counts (B, N), padding included);
        the lookup is free."""
        if self.objective == "mdm":
            R, N = batch["ids"].shape
            f = self.mdm_head_flops(batch, self.dim)
            if self.backbone_config is not None:
                f += backbone_flops(self.backbone_config, R, N, causal=False)
            return f
        B, N = batch["inputs"].shape
        U = batch.meta.get("units")  # scored tokens, counted at collation (training's prefetch thread)
        if U is None:
            U = int((batch["targets"] >= 0).sum())
        f = 2.0 * U * self.dim * self.V
        if self.backbone_config is not None:
            lengths = batch.meta.get("lengths")
            f += (backbone_flops_rows(self.backbone_config, lengths) if lengths is not None
                  else backbone_flops(self.backbone_config, B, N))
        return f

    @torch.no_grad()
    def predict_logprobs(self, data: bytes, positions: Sequence[int]) -> dict[int, torch.Tensor]:
        """(V,) log-probs of the token starting at byte p, with BOS + every token of ``data`` fed in.

        Reported only where the tokenization of all of ``data`` has a token starting at p *and*
        its tokens before p equal the tokenization of ``data[:p]`` alone. Where they differ, BPE's
        own look-ahead (the regex's ``\\s+(?!\\S)``, merges inside a pre-token) made the context
        tokens depend on bytes >= p; leaving those positions out keeps the probe a test of the
        model: any remaining change when bytes >= p change is a leak in the network.
        """
        if self.objective == "mdm":
            raise NotImplementedError("objective: mdm has no next-token distribution; see the MDM leak probe")
        tok = self._tok()
        ids, spans = tok.encode_with_offsets(data)
        index = {a: i for i, (a, _) in enumerate(spans)}
        dev = self.head.weight.device
        inputs = torch.tensor([[self.bos, *ids]], dtype=torch.long, device=dev)  # (1, len + 1)
        logp = torch.log_softmax(self.head(self.hidden(inputs)[0]).float(), dim=-1)  # (len + 1, V)
        out: dict[int, torch.Tensor] = {}
        for p in positions:
            i = index.get(p)
            if i is not None and tok.encode(data[:p]) == ids[:i]:
                out[p] = logp[i].cpu()
        return out

    # -- facts for run.json -----------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        total = sum(p.numel() for p in self.parameters())
        emb = self.embedding_parameters()
        head = self.head.weight.numel()
        tok = self.tokenizer
        return {
            "vocab_size": self.V,
            **({"objective": "mdm", "mdm_schedule": self.mdm_schedule, "mdm_span": self.mdm_span,
                "pad_id": self.pad, "mask_id": self.mask_id} if self.objective == "mdm" else {}),
            "vocab_trained": len(tok.ranks) if tok is not None else None,
            "bos_id": self.bos,
            "pattern": self.config.pattern,
            "file": self.config.file,
            "bytes_per_token_train": self.fit_facts.get("bytes_per_token_train"),
            "merge_key": self.fit_facts.get("key"),
            "params_embedding": emb,
            "params_head": head,
            "embedding_share": emb / total if total else 0.0,
            "embedding_and_head_share": (emb + head) / total if total else 0.0,
        }
