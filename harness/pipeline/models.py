"""A run's models: each encoder of a seed loaded from the model cache, or built, fitted and
trained by the one loop (resuming a partial checkpoint) and written to the cache behind the run.
"""

from __future__ import annotations

import copy
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import torch
from tqdm import tqdm

from encoders.base import Encoder
from harness.config.pretrained import is_trained_elsewhere
from harness.config.suite import EncoderSpec
from harness.data.load import DataPart, training_windows
from harness.infra import plugins
from harness.infra.accel import compile_backbones, want_compile
from harness.pipeline.ahead import fit_ahead_state
from harness.score.fragility import permuter_for
from harness.score.pretrained import admit
from harness.train.loop import Checkpointer, fit_context, train_encoder

if TYPE_CHECKING:
    from harness.pipeline.run import Runner


@dataclass(frozen=True)
class TrainedModel:
    """An encoder trained (or loaded) for one seed, with its run.json facts and suite entry."""

    enc: Encoder
    meta: dict[str, Any]
    spec: EncoderSpec


def progress_bar(on: bool, desc: str, total: int) -> Callable[[int, int, float], None] | None:
    """A tqdm progress callback ``(bytes seen, bytes in all, loss in bits per byte)`` for
    ``train_encoder`` over ``total`` bytes (None when ``on`` is false)."""
    if not on:
        return None
    bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, leave=False, file=sys.stderr, mininterval=1.0)

    def update(seen: int, n: int, loss: float) -> None:
        bar.update(seen - bar.n)
        bar.set_postfix_str(f"loss {loss:.3f} bpb", refresh=False)
        if seen >= n:
            bar.close()

    return update


def get_model(runner: Runner, spec: EncoderSpec, seed: int, train: DataPart,
              flops_target: float | None) -> tuple[Encoder, dict[str, Any]]:
    """Load the cached model, or build, fit and train it (resuming a partial checkpoint);
    returns the encoder on the run's device and its run.json facts. ``flops_target``: under
    ``match: flops``, the FLOPs (fit included) this encoder may spend."""
    extra: dict[str, Any] = {"flops_target": flops_target} if flops_target else {}
    if not spec.permutation.is_identity:  # a model of the permuted stream is another model
        extra["permutation"] = asdict(spec.permutation)
    key = runner.model_key(spec, seed, train.fingerprint, extra or None)
    t_build = time.perf_counter()
    enc = runner.build(spec, seed)
    if is_trained_elsewhere(enc):  # loaded with its weights, never fitted or trained here
        key = runner.model_key(spec, seed, "trained elsewhere", {"checkpoint": enc.describe().get("checkpoint_sha256")})
        return enc, admit(enc, spec.label, key, runner.device, seed, log=runner.log)
    cached = runner.rd.load_model(key)
    if cached is not None:
        state, meta = cached
        enc.load_state_dict(state)
        enc.to(runner.device).eval()
        if want_compile(runner.budget.compile, runner.device):
            compile_backbones(enc)
        runner.log(f"[model] {spec.label} seed {seed}: loaded from cache {runner.rd.model_path(key).name}")
        return enc, meta
    runner.log(f"[model] {spec.label} seed {seed}: fit + train on {runner.budget.train_bytes:,} bytes ({runner.device})")
    enc.to(runner.device)
    runner._add_time("model_build_seconds", t_build)
    fit = _fit(runner, enc, spec, seed, train)
    stats = _train(runner, enc, spec, seed, train, key, flops_target, fit)
    runner.timings["model_fit_train_seconds"] = (runner.timings.get("model_fit_train_seconds", 0.0)
                                                 + fit["wall_seconds"] + stats["seconds"])
    runner.timings["model_setup_seconds"] = runner.timings.get("model_setup_seconds", 0.0) + stats["setup_seconds"]
    meta = model_meta(enc, key, fit, stats)
    if runner.writes_models:  # one writer per model (data parallel: rank 0)
        _save_behind(runner, enc, key, meta)
    runner.log(
        f"[model] {spec.label} seed {seed}: {stats['bytes']:,} bytes in {stats['seconds']:.1f}s, "
        f"final loss {stats['final_loss_bpb']:.3f} bpb"
    )
    return enc, meta


def _fit(runner: Runner, enc: Encoder, spec: EncoderSpec, seed: int, train: DataPart) -> dict[str, Any]:
    """``enc.fit`` on the training part (with the state fitted ahead, if any); its facts, with
    ``seconds`` and ``wall_seconds``."""
    t0 = time.perf_counter()
    ctx = fit_context(train.docs, runner.budget, runner.device, seed, log=runner.log,
                      progress=lambda what, n: runner._bar(f"{spec.label} ({what})", n),
                      permuter=permuter_for(spec.permutation, runner.budget.context_bytes, seed))
    ahead = fit_ahead_state(runner, spec, seed) if enc.host_fit else None
    if ahead:
        enc.set_extra_state(ahead)  # fitted in the fit-ahead process: fit() below finds it
    try:
        fit = enc.fit(ctx) or {}
        if ahead:
            fit["fitted_ahead"] = True
    except (Exception, SystemExit) as e:  # one line naming the encoder
        if isinstance(e, (OSError, MemoryError)):
            raise  # disk full and friends keep their own messages
        raise plugins.plugin_failed(enc, "fit", e) from e
    fit.setdefault("seconds", time.perf_counter() - t0)
    fit["wall_seconds"] = time.perf_counter() - t0
    return fit


def _train(runner: Runner, enc: Encoder, spec: EncoderSpec, seed: int, train: DataPart, key: str,
           flops_target: float | None, fit: dict[str, Any]) -> dict[str, Any]:
    """``train_encoder`` on the budget's bytes, or under ``flops_target`` until the encoder has
    spent it; the loop's stats."""
    b = runner.budget
    permuter = permuter_for(spec.permutation, b.context_bytes, seed)
    n_bytes = b.train_bytes
    max_flops = None
    if flops_target is not None:
        # match: flops — train until this encoder has spent the reference's FLOPs (fit
        # included); the schedule runs over the bytes that budget is estimated to buy.
        probe = list(training_windows(train.docs, 8 * b.batch_bytes, b.context_bytes, seed))
        batch = enc.collate(probe, [0] * len(probe))
        per_byte = 3.0 * enc.flops(batch) / max(1, batch.scored_bytes)
        max_flops = max(0.0, flops_target - float(fit.get("flops", 0.0)))
        n_bytes = max(b.context_bytes, int(max_flops / per_byte))
    windows = training_windows(train.docs, n_bytes if max_flops is None else 10 * n_bytes, b.context_bytes, seed)
    return train_encoder(
        enc, windows, n_bytes, b, runner.device, max_flops=max_flops,
        checkpoint=Checkpointer(runner.rd.partial_path(key), runner.opts.checkpoint_seconds, log=runner.log),
        progress=runner._bar(f"train {spec.label} s{seed}", n_bytes), permuter=permuter, dp=runner.dp,
    )


def model_meta(enc: Encoder, key: str, fit: dict[str, Any], stats: dict[str, Any]) -> dict[str, Any]:
    """A trained model's facts (its model file's meta, run.json's ``encoders.*.seeds.*``)."""
    total = sum(p.numel() for p in enc.parameters())
    emb = enc.embedding_parameters()
    return {
        "key": key,
        "fit": fit,
        "train": stats,
        "params_total": total,
        "params_embedding": emb,
        "params_non_embedding": total - emb,
        "flops_per_byte_train": stats["flops"] / max(1, stats["bytes"]),
        "flops_per_byte_infer": stats["forward_flops"] / max(1, stats["bytes"]),
        "total_flops": stats["flops"] + float(fit.get("flops", 0.0)),
        "describe": enc.describe(),
    }


def _save_behind(runner: Runner, enc: Encoder, key: str, meta: dict[str, Any]) -> None:
    """Write the model file in ``runner.saves``' thread while the next model trains; the weights
    are copied to the host first, so what is written is the model as trained."""
    t0 = time.perf_counter()
    state = {k: v.detach().to("cpu", copy=True) if isinstance(v, torch.Tensor) else copy.deepcopy(v)
             for k, v in enc.state_dict().items()}
    saved = copy.deepcopy(meta)  # run.json's copy gains keys later; the file keeps these
    runner.saves.submit(lambda: runner.rd.save_model(key, state, saved), lambda: None)
    runner._add_time("model_save_seconds", t0)
