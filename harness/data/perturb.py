"""Applying a perturbation to one document: the per-document rng (HELM pattern) and ``apply``.

The rng depends only on (suite seed, perturbation id, its params, document id), hashed with
sha256 — never Python's salted ``hash()`` — so a document's perturbed text is the same whatever
the document order, batching, thread or process:

    random.Random(int.from_bytes(sha256(f"{seed}|{perturbation_id}|{params_json}|{doc_id}")[:8], "big"))

``params_json`` is ``json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``
(values that JSON cannot encode are written with ``str``), so key order never matters.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from perturbations.base import Perturbation


def params_json(params: dict[str, Any]) -> str:
    """Canonical JSON of a perturbation's parameters (sorted keys, no spaces)."""
    return json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def rng_for(seed: int, perturbation_id: str, params: dict[str, Any], doc_id: str) -> random.Random:
    """A fresh ``random.Random`` for one (seed, perturbation, params, document)."""
    key = f"{seed}|{perturbation_id}|{params_json(params)}|{doc_id}".encode("utf-8", "surrogatepass")
    return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))


def apply(
    perturbation: Perturbation,
    text: str,
    seed: int,
    perturbation_id: str,
    params: dict[str, Any],
    doc_id: str,
) -> str:
    """Perturb one document's text with its own rng; returns the perturbed text.

    perturbation: the instance for this document's language (``Perturbation.for_language``).
    ``params`` should be the perturbation's resolved fields without ``lang`` (severity included),
    as in ``PerturbationSpec.params``: they seed the rng.
    """
    try:
        out = perturbation.perturb(text, rng_for(seed, perturbation_id, params, doc_id))
    except (Exception, SystemExit) as e:  # a plugin's bug: one line naming it, not a traceback
        from harness.infra.plugins import plugin_failed

        raise plugin_failed(perturbation, "perturb", e, f"on document {doc_id!r}") from e
    if not isinstance(out, str):
        name = getattr(type(perturbation), "registry_name", type(perturbation).__qualname__)
        raise TypeError(f"perturbation {name!r} returned {type(out).__name__}, expected str")
    return out
