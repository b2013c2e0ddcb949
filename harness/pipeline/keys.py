"""The cache keys of a run: a model's, a model cell's and a compressor baseline cell's.

A key is a ``stable_hash`` of everything its file depends on; file names come from these hashes
only, never from user text (labels, ids). A re-run with the same key finds the file and skips
the work.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from encoders.base import config_to_dict
from harness.config.permutation import Permutation
from harness.config.suite import EncoderSpec, PerturbationSpec, Suite
from harness.infra.provenance import tokbench_version
from harness.infra.writes import stable_hash

# budget keys that change speed, memory or what is measured, not the model
SPEED_KEYS = ("compile", "micro_batch_bytes", "cuda_graphs", "idle_steps")


def cache_budget(budget: Any) -> dict[str, Any]:
    """The budget as it enters the model cache key: without the speed-only keys, so turning
    compile, micro-batching or the idle meter on reuses the models trained without them (and old
    caches); and ``data_parallel`` and ``deterministic`` only when true, so the keys (and caches)
    of earlier runs did not change when those keys were added."""
    out = {k: v for k, v in asdict(budget).items() if k not in SPEED_KEYS}
    for key in ("data_parallel", "deterministic"):
        if not out.get(key):
            out.pop(key, None)
    return out


def model_key(budget: Any, spec: EncoderSpec, seed: int, train_fp: str, extra: dict[str, Any] | None = None) -> str:
    """The key of one trained model: encoder, configs, budget (``cache_budget``), training
    data fingerprint ``train_fp``, seed, tokbench version, and ``extra`` (FLOP target,
    permutation, grid point)."""
    return stable_hash({
        "encoder": spec.name, "config": config_to_dict(spec.config),
        "backbone": config_to_dict(spec.backbone), "budget": cache_budget(budget),
        "train": train_fp, "seed": seed, "version": tokbench_version(), **(extra or {}),
    })


def cell_key(suite: Suite, model: str, fp: str, pspec: PerturbationSpec, mode: str, seed: int,
             mc: bool = False) -> str:
    """The key of one model cell: model key ``model``, eval set fingerprint ``fp``, perturbation,
    mode, seed and the eval settings. mc: the encoder's score is a Monte Carlo estimate (MDM),
    so eval.mc_samples is part of the key (left out otherwise, so exact cells keep their keys).
    The scoring precision is part of it where it differs from the training's (``budget.dtype``
    is in the model key)."""
    ev, budget = suite.eval, suite.budget
    own_dtype = suite.score_dtype != budget.dtype
    return stable_hash({**({"mc_samples": ev.mc_samples} if mc else {}),
        **({"score_dtype": suite.score_dtype} if own_dtype else {}),
        "model": model, "data": fp, "perturbation": pspec.name, "id": pspec.id, "severity": pspec.severity,
        "params": pspec.params, "mode": mode, "seed": seed, "context": budget.context_bytes,
        "stride": ev.stride_bytes, "fraction": ev.context_fraction, "target": ev.target_bytes,
        "sample_docs": ev.sample_docs, "texts": [ev.keep_texts, suite.encoders[0].label],
        "analyses": [config_to_dict(a.config) for a in suite.analyses],
        **({"windows": "partition"} if suite.permutations else {}),
    })


def baseline_key(suite: Suite, train_fp: str | None, name: str, perm: Permutation, fp: str,
                 pspec: PerturbationSpec, mode: str, seed: int) -> str:
    """The key of one compressor cell (docs/fragility.md); ``train_fp``: the training part's
    fingerprint (it primes the dictionary; None before the data is loaded)."""
    ev, n_dict = suite.eval, suite.baselines.dictionary_bytes
    return stable_hash({
        "baseline": name, "permutation": asdict(perm), "data": fp, "perturbation": pspec.name,
        "id": pspec.id, "severity": pspec.severity, "params": pspec.params, "mode": mode,
        "seed": seed, "context": suite.budget.context_bytes, "stride": ev.stride_bytes,
        "fraction": ev.context_fraction, "target": ev.target_bytes,
        "dictionary": [n_dict, train_fp if n_dict else None, "training-stream"],
        "windows": bool(suite.permutations), "version": tokbench_version(),
    })
