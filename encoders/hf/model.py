"""The ``hf`` encoder: a causal LM trained elsewhere, loaded with ``transformers``, scored like any encoder.

    encoders:
      - {name: hf, path: ./my-model}            # a save_pretrained folder (config.json, weights, tokenizer.json)
      - {name: hf, path: org/name, dtype: bfloat16}   # a hub id already in the local Hugging Face cache

Never trained by the suite (``trained_elsewhere``): the run loads it, checks that it is causal
(``harness.score.causality.probe_causality``) and scores it through the same ``score_items`` as every other
encoder. Nothing is downloaded: a hub id must be in the local cache.

Windows to tensors (``collate``), the same contract as ``bpe``: the context ``window[:score_from]``
and the scored part ``window[score_from:]`` are tokenized separately, so no token straddles the
boundary and the scored units cover exactly the scored bytes. The scored part is encoded as a
continuation (no "▁" prefix added, ``encoders/hf/tokenize.py``); a window scored from byte 0 is
encoded as a text's beginning, as the tokenizer encodes any text. Inputs are BOS (the tokenizer's
``bos_token``, else its ``eos_token``) then the tokens shifted right; each token's NLL is
``cross_entropy`` of the model's logits, and the tokens of a unit are summed into it.

Shapes: B windows, N = most tokens in a window + 1 (BOS), V = the model's output vocabulary.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

import numpy as np
import torch
import torch.nn.functional as F

from core.errors import field_error
from encoders.backbone import BackboneConfig
from encoders.base import Encoder, TensorBatch, UnitNLL, batch_scored_index, unit_index
from encoders.hf.tokenize import ByteSpanTokenizer
from encoders.registry import register

INSTALL = "pip install 'tokbench[hf]'"
_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
_FINGERPRINTS: dict[str, str] = {}  # folder -> sha256 of its files, once per process


def require_transformers() -> Any:
    """The ``transformers`` module, or a one-line ValueError that says how to install it."""
    try:
        import transformers
    except ImportError:
        raise field_error("hf", "name", f"needs the transformers package: {INSTALL}",
                          f"the hf encoder needs the transformers package: {INSTALL}") from None
    return transformers


def resolve_folder(path: str) -> Path:
    """The local folder of ``path``: a folder itself, or a hub id's snapshot in the local Hugging
    Face cache. Never downloads; a one-line ValueError (``field_error``) when neither exists."""
    local = Path(path).expanduser()
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise field_error("hf", "path", f"no config.json in {local} (a save_pretrained folder is expected)")
        return local
    parts = path.split("/")
    if len(parts) == 2 and all(parts) and not path.startswith((".", "~")):
        from huggingface_hub import snapshot_download

        try:
            return Path(snapshot_download(path, local_files_only=True))
        except Exception:  # not cached (or a malformed id): the same answer, offline
            pass
        raise field_error("hf", "path", f"{path!r} is not a local folder and not in the Hugging Face cache; "
                          "tokbench never downloads: fetch it where there is network "
                          f"(hf download {path}) or give the model's local folder")
    raise field_error("hf", "path", f"folder not found: {local}")


def fingerprint(folder: Path) -> str:
    """sha256 over the names and contents of the files in ``folder`` (recursively, sorted): the
    model's identity in cache keys, so a checkpoint rewritten in place is scored again."""
    key = str(folder.resolve())
    if key not in _FINGERPRINTS:
        h = hashlib.sha256()
        for f in sorted(p for p in folder.rglob("*") if p.is_file() and ".cache" not in p.parts):
            h.update(str(f.relative_to(folder)).encode() + b"\0")
            with open(f, "rb") as fh:
                while chunk := fh.read(1 << 24):
                    h.update(chunk)
        _FINGERPRINTS[key] = h.hexdigest()
    return _FINGERPRINTS[key]


def _cat(parts: list[np.ndarray]) -> torch.Tensor:
    """(Σ n,) long tensor of the concatenated int64 arrays (empty when there are none)."""
    return torch.from_numpy(np.concatenate(parts)) if parts else torch.zeros(0, dtype=torch.long)


@dataclass(frozen=True, kw_only=True)
class HfConfig:
    """path: a local ``save_pretrained`` folder (absolute or relative to the working directory),
    or a hub id ``org/name`` already in the local Hugging Face cache (never downloaded).
    dtype: float32 | bfloat16 — the weights' dtype (the suite's ``eval`` autocast applies on top).
    trust_remote_code: run model code shipped in the folder (off: only ``transformers``' own
    architectures load)."""

    path: str
    dtype: Literal["float32", "bfloat16"] = "float32"
    trust_remote_code: bool = False

    def __post_init__(self) -> None:
        """Checked when the suite is validated: transformers importable, the model's folder there."""
        require_transformers()
        if self.dtype not in _DTYPES:
            raise field_error("hf", "dtype", f"must be one of {', '.join(_DTYPES)}, got {self.dtype!r}")
        resolve_folder(self.path)


@register("hf")
class HfEncoder(Encoder):
    """A ``transformers`` causal LM and its tokenizer. One prediction unit per run of tokens that
    covers whole bytes (usually one token; ``encoders/hf/tokenize.py``)."""

    Config = HfConfig
    unit = "token"
    segment = "token"
    trained_elsewhere: ClassVar[bool] = True  # the harness never fits or trains it (harness/config/pretrained.py)

    def __init__(self, config: HfConfig, backbone: BackboneConfig | None = None) -> None:
        super().__init__(config, None)  # its own architecture: the suite's backbone does not apply
        # collation runs in forked worker processes (harness.infra.accel): the Rust tokenizer's thread
        # pool must not start in the parent (it encodes one string at a time here anyway)
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        transformers = require_transformers()
        transformers.utils.logging.disable_progress_bar()  # run logs are tokbench's own lines
        self.folder = resolve_folder(config.path)
        code = config.trust_remote_code
        hf_tok = transformers.AutoTokenizer.from_pretrained(self.folder, local_files_only=True, trust_remote_code=code)
        self.tokenizer = ByteSpanTokenizer(hf_tok)
        self.model = transformers.AutoModelForCausalLM.from_pretrained(
            self.folder, local_files_only=True, trust_remote_code=code, dtype=_DTYPES[config.dtype])
        self.model.to(_DTYPES[config.dtype]).eval()  # a transformers before 4.56 ignores ``dtype=``
        bos = hf_tok.bos_token_id if hf_tok.bos_token_id is not None else hf_tok.eos_token_id
        if bos is None:
            raise ValueError(f"hf model {config.path}: its tokenizer has neither a bos_token nor an eos_token "
                             "to start a window with")
        self.bos = int(bos)
        cfg = self.model.config
        self.V = int(self.model.get_output_embeddings().weight.shape[0])
        self.max_tokens = getattr(cfg, "max_position_embeddings", None)
        self.layers = int(cfg.num_hidden_layers)
        self.width = int(cfg.hidden_size)

    # -- training and scoring ---------------------------------------------------------------------
    def collate(self, windows: Sequence[bytes], score_from: Sequence[int]) -> TensorBatch:
        """Tokenize context and scored part of each window separately (module docstring).

        tensors: ``inputs`` (B, N) long — BOS then the tokens shifted right (BOS as padding, after
        the last token: causal attention never lets a real position see it); ``targets`` (B, N)
        long — token ids, -1 for context tokens and padding; ``unit`` (B, N) long — the scored
        token's unit, numbered over the batch (-1 elsewhere); ``unit_window``/``unit_start``/
        ``unit_end`` (Un,) long — each unit's window and byte span. meta ``segments``: per window
        the byte lengths of its units."""
        tok = self.tokenizer
        rows = []
        for w, s in zip(windows, score_from):
            ctx = tok.encode(w[:s], start=True).ids if s else np.zeros(0, dtype=np.int64)
            tgt = tok.encode(w[s:], start=s == 0)
            rows.append((ctx, tgt, s))
        B = len(rows)
        N = max((len(c) + len(t.ids) for c, t, _ in rows), default=0)
        if self.max_tokens is not None and N > self.max_tokens:
            raise ValueError(f"a window of {N} tokens exceeds the model's max_position_embeddings "
                             f"({self.max_tokens}): lower eval.context_bytes")
        inputs = np.full((B, N), self.bos, dtype=np.int64)
        targets = np.full((B, N), -1, dtype=np.int64)
        unit = np.full((B, N), -1, dtype=np.int64)
        u_win, u_start, u_end, segments = [], [], [], []
        n_units = 0
        for i, (ctx, tgt, s) in enumerate(rows):
            seq = np.concatenate((ctx, tgt.ids))
            inputs[i, 1 : len(seq)] = seq[:-1]
            targets[i, len(ctx) : len(seq)] = tgt.ids
            unit[i, len(ctx) : len(seq)] = tgt.unit + n_units
            ends = tgt.unit_end + s
            starts = np.concatenate(([s], ends[:-1]))
            u_win.append(np.full(len(ends), i, dtype=np.int64))
            u_start.append(starts)
            u_end.append(ends)
            segments.append((ends - starts).tolist())
            n_units += len(ends)
        t_targets = torch.from_numpy(targets)
        tensors = {"inputs": torch.from_numpy(inputs), "targets": t_targets, "unit": torch.from_numpy(unit),
                   "units_window": _cat(u_win), "units_start": _cat(u_start), "units_end": _cat(u_end),
                   **unit_index(t_targets)}
        scored = sum(len(w) - s for w, s in zip(windows, score_from))
        return TensorBatch(tensors, {"segments": segments, "units": int((targets >= 0).sum())}, scored)

    def logits(self, inputs: torch.Tensor) -> torch.Tensor:
        """inputs (B, N) long -> (B, N, V) logits; position n sees inputs <= n, i.e. tokens < n.
        No attention mask: padding sits after every real token, which causal attention never shows it."""
        return self.model(input_ids=inputs, use_cache=False).logits

    def forward(self, batch: TensorBatch) -> UnitNLL:  # type: ignore[override]
        """NLL (nats) of each scored unit: the sum of its tokens' cross-entropy (fp32)."""
        logits = self.logits(batch["inputs"])
        b, t = batch_scored_index(batch)
        nll_tok = F.cross_entropy(logits[b, t].float(), batch["targets"][b, t], reduction="none")  # (U_tok,)
        win = batch["units_window"]
        nll = torch.zeros(win.shape[0], dtype=torch.float32, device=nll_tok.device)
        nll.index_add_(0, batch["unit"][b, t], nll_tok)  # (U,) tokens summed into their units
        return UnitNLL(nll=nll, window=win, start=batch["units_start"], end=batch["units_end"],
                       segments=batch.meta.get("segments"))

    def flops(self, batch: TensorBatch) -> float:
        """Forward FLOPs: 2 · P · tokens for the P weights of matrix products (every parameter but
        the input lookups — the output head counted once, tied or not) plus causal attention,
        2 · layers · n² · hidden per row of n positions (QKᵀ and AV, half the square each)."""
        inputs = batch["inputs"]
        B, N = inputs.shape
        P = self.matmul_parameters()
        return 2.0 * P * B * N + 2.0 * self.layers * B * N * N * self.width

    def matmul_parameters(self) -> int:
        """Parameters that multiply activations: all but the embedding lookups, plus the output
        head (which a tied model shares with the input embedding)."""
        seen = {id(p) for p in self.model.parameters()}
        lookups = {id(m.weight) for m in self.model.modules() if isinstance(m, torch.nn.Embedding)}
        head = self.model.get_output_embeddings().weight
        total = sum(p.numel() for p in self.model.parameters() if id(p) not in lookups)
        return total + (head.numel() if id(head) in lookups and id(head) in seen else 0)

    @torch.no_grad()
    def predict_logprobs(self, data: bytes, positions: Sequence[int]) -> dict[int, torch.Tensor]:
        """(V,) log-probs of the token starting at byte p, with BOS + every token of ``data`` fed.

        Reported only where the tokens of ``data`` (encoded as a text's beginning) have a token
        starting at p and the tokens before it equal those of ``data[:p]`` alone, as ``bpe`` does:
        elsewhere the tokenizer's own look-ahead, not the network, decides the context."""
        piece = self.tokenizer.encode(data, start=True)
        ids = piece.ids
        # a token starts at p when it opens a unit there (a unit's first byte is its tokens' first)
        first = np.flatnonzero(np.diff(np.concatenate(([-1], piece.unit))))
        unit_start = np.concatenate(([0], piece.unit_end[:-1]))
        index = {int(unit_start[piece.unit[i]]): int(i) for i in first}
        dev = next(self.model.parameters()).device
        inputs = torch.tensor([[self.bos, *ids.tolist()]], dtype=torch.long, device=dev)  # (1, n + 1)
        logp = torch.log_softmax(self.logits(inputs)[0].float(), dim=-1)  # (n + 1, V)
        out: dict[int, torch.Tensor] = {}
        for p in positions:
            i = index.get(p)
            if i is not None and np.array_equal(self.tokenizer.encode(data[:p], start=True).ids, ids[:i]):
                out[p] = logp[i].cpu()
        return out

    # -- facts for run.json -----------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        cfg = self.model.config
        total = sum(p.numel() for p in self.model.parameters())
        return {
            "trained_elsewhere": True,
            "path": self.config.path,
            "checkpoint_sha256": fingerprint(self.folder),
            "model_type": getattr(cfg, "model_type", None),
            "architecture": type(self.model).__name__,
            "dtype": self.config.dtype,
            "vocab_size": self.V,
            "bos_id": self.bos,
            "layers": self.layers,
            "hidden_size": self.width,
            "max_position_embeddings": self.max_tokens,
            "params_matmul": self.matmul_parameters(),
            "embedding_share": self.embedding_parameters() / total if total else 0.0,
        }
