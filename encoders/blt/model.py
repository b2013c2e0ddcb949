"""``blt``: a small Byte Latent Transformer with entropy patching.

    stream (B, T+1) = BOS + window bytes
      -> byte + hash n-gram embeddings -> local encoder (causal)      u (B, T+1, D)
      -> patches of bytes (entropy / space / static boundaries)
      -> cross-attention pooling: patch p's query (max of its bytes) attends to its bytes only
      -> latent transformer = the shared backbone, causal over patches     g (B, N, L)
      -> local decoder: the state predicting byte t (u at stream position t: bytes < t)
         cross-attends to latent states of patches that end before byte t, then local layers
      -> 256-way next-byte head                                              (B, T, 256)

Causality, the reason behind every index below. Byte t's prediction may use bytes < t only.
  * u at stream position t sees stream[0..t] = BOS + bytes < t; u at position t+1 encodes byte t.
  * Whether byte t starts a patch depends on bytes < t (see ``patching``).
  * Patch p = bytes [s, e): its pooled vector depends on bytes < e and on its boundaries, which
    depend on bytes < e as well; the latent state g_p also on earlier patches.
  * So byte t may use g_p iff e <= t, i.e. p < (patch of byte t). ``layers.decoder_mask``.
Without a backbone (``backbone: null``) there is no latent transformer: the decoder attends to
the pooled patch vectors directly, a local-only model.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import nn

from core.errors import field_error
from encoders.backbone import Backbone, BackboneConfig, OutputHead, backbone_flops
from encoders.base import (
    BOS,
    UNIT_POS,
    UNIT_WINDOW,
    Encoder,
    FitContext,
    TensorBatch,
    UnitNLL,
    byte_unit_nll,
    collate_bytes,
)
from encoders.blt.layers import CrossAttention, decoder_mask, max_pool_patches, pooling_mask
from encoders.blt.ngrams import hash_ngram_ids_multi
from encoders.blt.patching import (
    entropy_nats,
    fit_threshold,
    mean_patch_size,
    patch_ids,
    patch_sizes,
    patch_starts,
    space_patch_starts,
    static_patch_starts,
)
from encoders.byte_baseline import ByteConfig, ByteEncoder
from encoders.registry import register

ENTROPY_TRAIN_FRACTION = 0.2  # entropy model bytes = this × train_bytes when entropy_train_bytes is null
# The patch axis is padded to a multiple of this. Entropy patching gives a different patch count
# every batch, and cuDNN attention plans a kernel per new shape (~0.1-0.3 s each on an H200,
# measured): without buckets most training steps would pay it. Padded patches lie after every
# real patch, so causal layers never let a real byte see them.
PATCH_BUCKET = 32


def padded_patch_count(starts: torch.Tensor) -> int:
    """N for a batch: the most patches in one window, rounded up to a multiple of PATCH_BUCKET."""
    n = int(starts.sum(1).max()) if starts.numel() else 0
    return max(1, -(-n // PATCH_BUCKET)) * PATCH_BUCKET


class PatchUnitNLL(UnitNLL):
    """BLT's ``UnitNLL``: ``segments`` (patch sizes clipped to the scored spans, ``patch_sizes``)
    are computed from the patch starts when first read. Scoring reads them; training never does,
    and computing them copies to the host, which would make every training step wait for the
    device. Assigning ``segments`` (the harness un-permutes them) replaces them as on UnitNLL."""

    def __init__(self, units: UnitNLL, starts: torch.Tensor, lengths: torch.Tensor,
                 score_from: torch.Tensor) -> None:
        super().__init__(units.nll, units.window, units.start, units.end, None, units.window_var)
        self._pending: tuple[torch.Tensor, ...] | None = (starts, lengths, score_from)

    @property  # type: ignore[override]
    def segments(self) -> list[list[int]] | None:
        pending = self.__dict__.get("_pending")
        if pending is not None:
            self.__dict__["_segments"] = patch_sizes(*pending)
            self.__dict__["_pending"] = None
        return self.__dict__.get("_segments")

    @segments.setter
    def segments(self, value: list[list[int]] | None) -> None:
        self.__dict__["_segments"] = value
        self.__dict__["_pending"] = None

    def to(self, device: torch.device | str, non_blocking: bool = False) -> UnitNLL:
        """As ``UnitNLL.to``, the patch starts moved too and the segments still not computed (so
        moving to the host asynchronously does not wait for the device)."""
        pending = self.__dict__.get("_pending")
        if pending is None:
            return super().to(device, non_blocking)
        base = UnitNLL(self.nll, self.window, self.start, self.end, None, self.window_var).to(device, non_blocking)
        starts, lengths, score_from = (t.to(device, non_blocking=non_blocking) for t in pending)
        return PatchUnitNLL(base, starts, lengths, score_from)


@dataclass(frozen=True, kw_only=True)
class BltConfig:
    """BLT encoder settings (the keys of a ``name: blt`` entry in a suite; docs/blt.md).

    patching: entropy (BLT) | space (patch after whitespace) | static (fixed size).
    threshold: θ in nats for entropy patching; null = auto: fit on training windows so patches
        average ``target_patch_size`` bytes. static patching uses round(target_patch_size) bytes.
    monotonic: approximate-monotonicity rule (H_t − H_{t−1} > θ) instead of H_t > θ.
    max_patch_bytes: cap on patch length (all patchings), null = none.
    ngram_sizes, ngram_table_size: hash n-gram embeddings, one table of that many rows per n.
    local_dim/local_heads/encoder_layers/decoder_layers: the byte-level local transformers.
    entropy_dim/entropy_layers/entropy_heads: the entropy model (a ``bytes`` encoder); it is
        trained in ``fit`` on entropy_train_bytes bytes (null = 0.2 × the suite's train_bytes).
    threshold_fit_bytes: training bytes (spread over the split) used to fit θ and to measure
        patch sizes in ``fit``.
    entropy_dtype: the entropy model's precision when it computes entropies (fitting θ,
        training, scoring), whatever the run's dtype: auto = bfloat16 on CUDA, float32 elsewhere.
    """

    patching: Literal["entropy", "space", "static"] = "entropy"
    threshold: float | None = None
    target_patch_size: float = 4.0
    monotonic: bool = False
    max_patch_bytes: int | None = None
    ngram_sizes: tuple[int, ...] = (3, 4, 5, 6, 7, 8)
    ngram_table_size: int = 4096
    local_dim: int = 64
    local_heads: int = 4
    encoder_layers: int = 1
    decoder_layers: int = 1
    entropy_dim: int = 64
    entropy_layers: int = 2
    entropy_heads: int = 4
    entropy_train_bytes: int | None = None
    threshold_fit_bytes: int = 262_144
    entropy_dtype: Literal["auto", "float32", "bfloat16"] = "auto"

    def __post_init__(self) -> None:
        def bad(key: str, value: Any, need: str) -> ValueError:
            # located at the key's own line by the suite loader (core.errors)
            return field_error("blt", key, f"{need}, got {value!r}",
                               f"blt: {key}={value!r} is invalid: {need}")

        if self.patching not in ("entropy", "space", "static"):
            raise bad("patching", self.patching, "use entropy, space or static")
        if not self.target_patch_size >= 1:
            raise bad("target_patch_size", self.target_patch_size, "must be >= 1 byte")
        if self.max_patch_bytes is not None and self.max_patch_bytes < 1:
            raise bad("max_patch_bytes", self.max_patch_bytes, "must be >= 1 or null")
        if any(n < 1 for n in self.ngram_sizes):
            raise bad("ngram_sizes", self.ngram_sizes, "every n must be >= 1")
        for key in ("ngram_table_size", "local_dim", "local_heads", "entropy_dim", "entropy_heads", "threshold_fit_bytes"):
            if getattr(self, key) < 1:
                raise bad(key, getattr(self, key), "must be >= 1")
        for key in ("encoder_layers", "decoder_layers", "entropy_layers"):
            if getattr(self, key) < 0:
                raise bad(key, getattr(self, key), "must be >= 0")
        if self.local_dim % self.local_heads:
            raise bad("local_dim", self.local_dim, f"must be divisible by local_heads={self.local_heads}")
        if self.entropy_layers and self.entropy_dim % self.entropy_heads:
            raise bad("entropy_dim", self.entropy_dim, f"must be divisible by entropy_heads={self.entropy_heads}")
        if self.entropy_train_bytes is not None and self.entropy_train_bytes < 1:
            raise bad("entropy_train_bytes", self.entropy_train_bytes, "must be >= 1 or null")
        if self.entropy_dtype not in ("auto", "float32", "bfloat16"):
            raise bad("entropy_dtype", self.entropy_dtype, "use auto, float32 or bfloat16")


def collate_stream(windows: Sequence[bytes], score_from: Sequence[int]) -> TensorBatch:
    """BLT collation: ``collate_bytes`` tensors plus the full byte stream.

    tensors: ``stream`` (B, T+1) long — BOS, then all bytes of the window, BOS on padding;
    ``targets`` (B, T) long — bytes, -1 where padded or not scored; ``lengths`` (B,) long;
    ``score_from`` (B,) long. ``stream[:, :T]`` equals collate_bytes' ``inputs``.
    """
    base = collate_bytes(windows, score_from)
    B, T = base["targets"].shape
    stream = torch.full((B, T + 1), BOS, dtype=torch.long)
    stream[:, :T] = base["inputs"]
    for i, w in enumerate(windows):  # the last byte of each window, which `inputs` drops
        if w:
            stream[i, len(w)] = w[-1]
    tensors = {
        "stream": stream,
        "targets": base["targets"],
        "lengths": torch.tensor([len(w) for w in windows], dtype=torch.long),
        "score_from": torch.tensor(list(score_from), dtype=torch.long),
        UNIT_WINDOW: base[UNIT_WINDOW],  # the scored bytes' positions (``unit_index``)
        UNIT_POS: base[UNIT_POS],
    }
    return TensorBatch(tensors, {}, base.scored_bytes)


def sample_windows(docs: Callable[[], Iterator[bytes]], size: int, max_bytes: int) -> list[bytes]:
    """About ``max_bytes`` bytes of ``size``-byte windows spread evenly over the whole split.

    Every document is cut into consecutive windows; an evenly spaced subset of them is kept, so
    θ and the patch statistics describe the whole training split — sources list documents in a
    fixed order (e.g. by module name), and its first documents can patch very differently (a
    4.0-byte target fitted on the first 262 kB of the smoke split gave 1.9 bytes per patch on
    the rest). ``docs`` is called twice (a count pass, then a cut pass).
    """
    n_windows = n_bytes = 0
    for doc in docs():
        n_windows += -(-len(doc) // size)
        n_bytes += len(doc)
    if n_windows == 0:
        return []
    keep = min(n_windows, -(-max_bytes * n_windows // n_bytes))  # windows for ~max_bytes bytes
    out: list[bytes] = []
    j = 0
    for doc in docs():
        for i in range(0, len(doc), size):
            if (j * keep) % n_windows < keep:  # exactly `keep` of them, the first one included
                out.append(doc[i : i + size])
            j += 1
    return out


@register("blt")
class BltEncoder(Encoder):
    """Byte Latent Transformer: entropy-patched bytes -> shared backbone over patches -> bytes."""

    Config = BltConfig
    unit = "byte"
    segment = "patch"

    def __init__(self, config: BltConfig, backbone: BackboneConfig | None) -> None:
        super().__init__(config, backbone)
        c = config
        D = c.local_dim
        self.latent_dim = backbone.dim if backbone is not None else D
        self.enc_cfg = BackboneConfig(layers=c.encoder_layers, dim=D, heads=c.local_heads)
        self.dec_cfg = BackboneConfig(layers=c.decoder_layers, dim=D, heads=c.local_heads)
        self.embed = nn.Embedding(257, D)  # 256 = BOS (and padding)
        # One table per n-gram size, stored as one embedding (size k owns rows k·table .. (k+1)·table)
        # so all sizes are looked up and summed in one call.
        self.ngram_embed = nn.Embedding(len(c.ngram_sizes) * c.ngram_table_size, D) if c.ngram_sizes else None
        self.register_buffer(
            "ngram_offsets", torch.arange(len(c.ngram_sizes), dtype=torch.long) * c.ngram_table_size, persistent=False
        )
        self.local_encoder = Backbone(self.enc_cfg)
        self.pool = CrossAttention(D, D, c.local_heads)
        self.up = nn.Linear(D, self.latent_dim, bias=False) if backbone is not None else None
        self.latent = Backbone(backbone) if backbone is not None else None
        self.null_patch = nn.Parameter(torch.zeros(self.latent_dim))  # "no patch yet" decoder slot
        self.dec_xattn = CrossAttention(D, self.latent_dim, c.local_heads)
        self.local_decoder = Backbone(self.dec_cfg)
        self.head = OutputHead(D, 256, bias=False)
        for emb in (self.embed, self.ngram_embed):
            if emb is not None:
                nn.init.normal_(emb.weight, std=0.02)
        for p in (self.head.weight, self.null_patch, *([self.up.weight] if self.up is not None else [])):
            nn.init.normal_(p, std=0.02)
        self.entropy_model: ByteEncoder | None = None
        if c.patching == "entropy":
            ecfg = BackboneConfig(layers=c.entropy_layers, dim=c.entropy_dim, heads=c.entropy_heads)
            self.entropy_model = ByteEncoder(ByteConfig(dim=c.entropy_dim), ecfg if c.entropy_layers else None)
            if self.entropy_model.backbone is not None:
                # Left eager: the collation thread runs it (FLOP counts patch the batch) while the
                # main thread may be tracing a compile, and a compiled module called during
                # another thread's FX trace raises ("FX to symbolically trace a dynamo-optimized
                # function": the H200 standard run, BENCHMARKS.md).
                self.entropy_model.backbone.compilable = False
        self.threshold: float | None = c.threshold
        self.fit_stats: dict[str, Any] = {}

    @classmethod
    def sanity_config(cls) -> BltConfig:
        """Small settings for ``tokbench sanity``: the probes test wiring, not quality."""
        return BltConfig(
            local_dim=32, local_heads=2, ngram_sizes=(3, 4, 5), ngram_table_size=1024,
            entropy_dim=32, entropy_layers=1, entropy_heads=2, threshold_fit_bytes=65_536,
        )

    # -- patching -----------------------------------------------------------------------------
    def entropy_bf16(self, device: torch.device) -> bool:
        """Whether the entropy model runs under bf16 autocast on ``device``: ``entropy_dtype``,
        where ``auto`` is bf16 on CUDA and float32 elsewhere (CPU bf16 is slow, and keeps the CPU
        numbers the tests pin)."""
        dt = self.config.entropy_dtype
        return dt == "bfloat16" or (dt == "auto" and device.type == "cuda")

    @torch.no_grad()
    def entropies(self, inputs: torch.Tensor) -> torch.Tensor:
        """inputs (B, T) = BOS + bytes shifted right -> H (B, T) nats (float32), H_t from bytes < t.

        The entropy model's precision is its own (``entropy_bf16``), never the caller's
        autocast, so patches are the same in training, in bf16 scoring and in fp32 scoring on
        one device. bf16 on CUDA: in fp32 the model's attention and matmuls took ≈ 12 % of a
        standard-suite BLT training step's device time and 36 % of a scoring forward's on an
        H200 (BENCHMARKS.md); the entropy itself is computed in float32 from the
        logits."""
        assert self.entropy_model is not None
        dev = next(self.entropy_model.parameters()).device
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=self.entropy_bf16(dev)):
            logits = self.entropy_model.logits(inputs.to(dev))
        return entropy_nats(logits.float()).to(inputs.device)

    def patch_starts(self, stream: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """stream (B, T+1), lengths (B,) -> starts (B, T) bool, False on padding, True at byte 0."""
        c = self.config
        B, T = stream.shape[0], stream.shape[1] - 1
        if c.patching == "entropy":
            if self.threshold is None:
                raise RuntimeError("blt: threshold is auto but fit() has not run (no threshold fitted yet)")
            starts = patch_starts(self.entropies(stream[:, :T]), self.threshold, c.monotonic, c.max_patch_bytes)
        elif c.patching == "space":
            starts = space_patch_starts(stream[:, 1:], c.max_patch_bytes)
        else:
            starts = static_patch_starts(B, T, self.static_size, stream.device)
        valid = torch.arange(T, device=stream.device)[None, :] < lengths[:, None].to(stream.device)
        return starts & valid

    @property
    def static_size(self) -> int:
        size = max(1, round(self.config.target_patch_size))
        return min(size, self.config.max_patch_bytes) if self.config.max_patch_bytes else size

    def _patches(self, batch: TensorBatch) -> tuple[torch.Tensor, int]:
        """(starts (B, T) bool on the model's device, N = ``padded_patch_count(starts)``) of a
        batch, computed once: ``flops`` and ``forward`` share them through ``batch.meta`` (the
        same dict after ``.to``).

        Patching runs where the model lives, whatever device the batch is on, and its only host
        read is N, a shape. In training the harness counts FLOPs in its prefetch thread before
        the step, so that read waits there, a few steps ahead, and the training step itself
        never waits for the device on patching's account (before, the entropies went to the
        host and the starts back every step). Without a prior ``flops`` call (scoring without
        stats, ``predict_logprobs``) the read happens here, once per batch.
        """
        dev = self.head.weight.device
        key = (id(self), self.threshold, dev)  # a model moved since then patches again
        hit = batch.meta.get("blt_patches")
        if hit is not None and hit[0] == key:
            return hit[1], hit[2]
        starts = self.patch_starts(batch["stream"].to(dev), batch["lengths"].to(dev))
        n = padded_patch_count(starts)
        batch.meta["blt_patches"] = (key, starts, n)
        return starts, n

    # -- model --------------------------------------------------------------------------------
    def logits(self, batch: TensorBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (logits (B, T, 256) for byte t from bytes < t, starts (B, T) bool)."""
        stream, lengths = batch["stream"], batch["lengths"]
        B, T = stream.shape[0], stream.shape[1] - 1
        starts, N = self._patches(batch)
        valid = torch.arange(T, device=stream.device)[None, :] < lengths[:, None]
        pid = patch_ids(starts)  # (B, T)

        x = self.embed(stream)  # (B, T+1, D)
        if self.ngram_embed is not None:
            ids = hash_ngram_ids_multi(stream, self.config.ngram_sizes, self.config.ngram_table_size)  # (B, T+1, K)
            x = x + self.ngram_embed(ids + self.ngram_offsets).sum(dim=2)
        u = self.local_encoder(x)  # (B, T+1, D); u[:, t] sees bytes < t

        byte_states = u[:, 1:]  # (B, T, D): state of byte t (bytes <= t)
        q0 = max_pool_patches(byte_states, pid, valid, N)  # (B, N, D)
        z = q0 + self.pool(q0, byte_states, pooling_mask(pid, valid, N))
        if self.latent is not None and self.up is not None:
            z = self.latent(self.up(z))  # (B, N, L), causal over patches
        memory = torch.cat([self.null_patch.to(z.dtype).expand(B, 1, -1), z], dim=1)  # (B, N+1, L)

        h = u[:, :T]  # (B, T, D): predicts byte t from bytes < t
        h = h + self.dec_xattn(h, memory, decoder_mask(pid, N))
        return self.head(self.local_decoder(h)), starts

    def forward(self, batch: TensorBatch) -> UnitNLL:  # type: ignore[override]
        logits, starts = self.logits(batch)
        units = byte_unit_nll(logits, batch["targets"], batch.scored_bytes,
                              index=(batch[UNIT_WINDOW], batch[UNIT_POS]) if UNIT_WINDOW in batch.tensors else None)
        return PatchUnitNLL(units, starts, batch["lengths"], batch["score_from"])

    def collate(self, windows: Sequence[bytes], score_from: Sequence[int]) -> TensorBatch:
        return collate_stream(windows, score_from)

    def flops(self, batch: TensorBatch) -> float:
        """Analytic forward FLOPs (2 per MAC) for this batch at its padded sizes: entropy model,
        local encoder over T+1 positions, pooling over N patches (padded to PATCH_BUCKET, as run),
        latent backbone, decoder, head.
        Embedding lookups, norms, softmax and max pooling are not counted (< 1 %)."""
        B, T = batch["targets"].shape
        N = self._patches(batch)[1]
        D, L = self.config.local_dim, self.latent_dim
        f = self.frozen_flops(batch)
        f += backbone_flops(self.enc_cfg, B, T + 1)
        f += self.pool.flops(B, N, T)
        if self.latent is not None and self.backbone_config is not None:
            f += 2.0 * B * N * D * L + backbone_flops(self.backbone_config, B, N)
        f += self.dec_xattn.flops(B, T, N + 1)
        f += backbone_flops(self.dec_cfg, B, T)
        return f + 2.0 * B * T * D * 256

    def frozen_flops(self, batch: TensorBatch) -> float:
        """The part of ``flops(batch)`` spent in frozen sub-models (the entropy model): forward
        only in training too, so a training step costs 3·flops − 2·frozen_flops, not 3·flops."""
        if self.entropy_model is None:
            return 0.0
        T = batch["targets"].shape[1]
        return self.entropy_model.flops(TensorBatch({"inputs": batch["stream"][:, :T]}))

    @torch.no_grad()
    def predict_logprobs(self, data: bytes, positions: Sequence[int]) -> dict[int, torch.Tensor]:
        dev = next(self.parameters()).device
        logits, _ = self.logits(collate_stream([data], [0]).to(dev))
        logp = torch.log_softmax(logits[0].float(), dim=-1)
        return {p: logp[p].cpu() for p in positions if 0 <= p < len(data)}

    # -- fit: entropy model, threshold, patch statistics -------------------------------------
    def fit(self, ctx: FitContext) -> dict[str, Any]:
        """Train the entropy model with the harness loop (entropy patching), fit θ when auto,
        and measure patch sizes on training windows. Returns bytes/FLOPs to add to BLT's budget."""
        c = self.config
        t0 = time.perf_counter()
        out: dict[str, Any] = {"bytes": 0, "flops": 0.0, "seconds": 0.0}
        if self.entropy_model is not None:
            n = c.entropy_train_bytes or max(1, int(ENTROPY_TRAIN_FRACTION * ctx.train_bytes))
            ctx.log(f"blt: training the entropy model on {n} bytes")
            self.entropy_model.requires_grad_(True)
            stats = ctx.train(self.entropy_model, n)
            self.entropy_model.requires_grad_(False).eval()  # frozen: the main optimizer skips it
            for p in self.entropy_model.parameters():
                p.grad = None  # the sub-loop's last gradients are stale from here on
            out["bytes"] = int(stats["bytes"])
            out["flops"] = float(stats["flops"])
            out["entropy_model"] = {
                "params": sum(p.numel() for p in self.entropy_model.parameters()),
                **{k: stats[k] for k in ("bytes", "flops", "seconds", "final_loss_bpb") if k in stats},
            }
        windows = sample_windows(ctx.train_docs, ctx.context_bytes, c.threshold_fit_bytes)
        if not windows:
            raise ValueError("blt: the training split is empty; cannot fit patching")
        batch = collate_stream(windows, [0] * len(windows))
        T = batch["targets"].shape[1]
        valid = torch.arange(T)[None, :] < batch["lengths"][:, None]
        if self.entropy_model is not None:
            H = torch.cat([self.entropies(batch["stream"][i : i + 64, :T]).cpu() for i in range(0, len(windows), 64)])
            out["flops"] += self.entropy_model.flops(TensorBatch({"inputs": batch["stream"][:, :T]}))
            if self.threshold is None:
                self.threshold, achieved = fit_threshold(H, valid, c.target_patch_size, c.monotonic, c.max_patch_bytes)
                ctx.log(f"blt: threshold {self.threshold:.4f} nats -> {achieved:.3f} bytes/patch on "
                        f"{len(windows)} training windows (target {c.target_patch_size}; "
                        "evaluation text patches differently: see results.csv bytes_per_segment)")
            starts = patch_starts(H, self.threshold, c.monotonic, c.max_patch_bytes) & valid
        else:
            starts = self.patch_starts(batch["stream"], batch["lengths"])
        sizes = torch.tensor([s for w in patch_sizes(starts, batch["lengths"]) for s in w], dtype=torch.float64)
        self.fit_stats = {
            "threshold_fit_bytes": int(valid.sum()),
            "mean_patch_bytes_train": mean_patch_size(starts, valid),
            "patch_bytes_quantiles_train": {
                str(q): float(torch.quantile(sizes, q)) for q in (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)
            },
            "max_patch_bytes_train": int(sizes.max()),
        }
        out.update(self.fit_stats)
        if "entropy_model" in out:
            self.fit_stats["entropy_model"] = dict(out["entropy_model"])
        out["threshold"] = self.threshold
        out["seconds"] = time.perf_counter() - t0
        return out

    # -- facts and state ----------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        c = self.config
        d: dict[str, Any] = {
            "patching": c.patching,
            "threshold_nats": self.threshold,
            "threshold_rule": "H_t - H_{t-1} > θ" if c.monotonic else "H_t > θ",
            "target_patch_size": c.target_patch_size,
            "static_patch_bytes": self.static_size if c.patching == "static" else None,
            "max_patch_bytes": c.max_patch_bytes,
            "latent": "backbone" if self.latent is not None else "none (local-only)",
            "local_params": sum(
                p.numel() for n, p in self.named_parameters() if not n.startswith(("latent.", "entropy_model."))
            ),
            "vocab_size": 256,
            **self.fit_stats,
        }
        if self.entropy_model is not None:
            # forward FLOPs per byte of the entropy model at a 1 x 256 window
            one = TensorBatch({"inputs": torch.zeros(1, 256, dtype=torch.long)})
            d["entropy_model_params"] = sum(p.numel() for p in self.entropy_model.parameters())
            d["entropy_model_flops_per_byte"] = self.entropy_model.flops(one) / 256
        return d

    def get_extra_state(self) -> dict[str, Any]:
        # float('nan') stands for "no threshold" so the state holds plain floats only.
        return {
            "threshold": math.nan if self.threshold is None else float(self.threshold),
            "fit_stats": self.fit_stats,
        }

    def set_extra_state(self, state: dict[str, Any]) -> None:
        th = float(state["threshold"])
        self.threshold = None if math.isnan(th) else th
        self.fit_stats = dict(state.get("fit_stats", {}))
        if self.entropy_model is not None and self.threshold is not None:
            self.entropy_model.requires_grad_(False)
