"""A cell from its documents' scores: its results row, samples.jsonl rows and analysis buckets;
and the compressor baseline cells (docs/fragility.md), a results row each.

A cell is a dict ``{"row": {...}, "samples": [...], "buckets": [...]}`` as ``RunDir.save_cell``
stores it; NLL in nats, lengths in bytes.
"""

from __future__ import annotations

from typing import Any

from core.forkpool import usable_cpus
from core.metrics import bpb
from harness.config.permutation import Permutation, variant_label
from harness.config.suite import PerturbationSpec, Suite
from harness.data.evalsets import EvalSet, decode
from harness.data.load import DataPart, char_boundary, training_windows
from harness.pipeline.models import TrainedModel
from harness.pipeline.plans import edit_method
from harness.score.fragility import (
    BaselineDoc,
    baseline_metrics,
    compressor_dictionary,
    permutation_columns,
)
from harness.score.items import PlanRow
from harness.score.metrics import CellTotals, cell_metrics

TEXT_LIMIT = 20_000  # characters of each text kept in samples.jsonl
SAMPLE_BYTES = 65_536  # scored bytes of a sampled document kept with their per-byte NLL


def cell_processes() -> int:
    """Forked processes that make a model's cells from its scores (rows, samples, buckets;
    CPU work): at most 4 — on an H200 host 16 made 50-document cells no faster (BENCHMARKS.md)."""
    return min(4, usable_cpus())


def score_cell(suite: Suite, model: TrainedModel, es: EvalSet, pspec: PerturbationSpec, mode: str,
               seed: int, plan: list[PlanRow | None], scores: list[Any]) -> dict[str, Any]:
    """One cell: its results row, its samples.jsonl rows and its analysis buckets, from its
    documents' scores (``score_items``, in the order of the plan's live rows)."""
    ev = suite.eval
    enc, spec = model.enc, model.spec
    doc_scripts = dict(zip((d.id for d in es.part.docs), es.scripts))
    live = [p for p in plan if p is not None]
    totals = CellTotals()
    samples = []
    keys = {"encoder": spec.label, "encoder_name": spec.name, "seed": seed, "dataset": es.part.name,
            "language": es.language, "script": es.script or "", "perturbation": pspec.name,
            "perturbation_id": pspec.id, "severity": pspec.severity, "mode": mode}
    for i, (p, sc) in enumerate(zip(live, scores)):
        doc, scored = p.doc, p.item.scored_bytes
        totals.add(sc.nll, len(scored), p.n_bytes_clean, sc.n_units, p.n_words, sc.segments, p.edit_rate,
                   nll_var=sc.nll_var)
        row = {**keys, "doc_id": doc.id, "doc_language": doc.language, "doc_script": doc_scripts[doc.id],
               "nll_nats": sc.nll, "n_bytes": len(scored),
               "n_bytes_clean": p.n_bytes_clean, "n_tokens": sc.n_units, "n_words": p.n_words,
               "edit_rate": p.edit_rate,
               "edit_rate_method": edit_method(suite, p, pspec, mode)}
        # The texts are the same for every encoder: store them once, on the first encoder's row.
        if ev.keep_texts and spec.label == suite.encoders[0].label:
            row.update(text=p.text[:TEXT_LIMIT], text_perturbed=p.ptext[:TEXT_LIMIT],
                       truncated=len(p.text) > TEXT_LIMIT or len(p.ptext) > TEXT_LIMIT)
        if i < ev.sample_docs:
            _add_byte_nll(row, scored, sc)
        samples.append(row)
    m = cell_metrics(totals, es.script)
    row = {**keys, **m, "token_unit": enc.unit, "segment_unit": enc.segment, "kind": "model",
           "objective": getattr(enc, "objective", "ar"), **permutation_columns(spec.permutation)}
    return {"row": row, "samples": samples, "buckets": _buckets(suite, es, keys, live, scores)}


def _add_byte_nll(row: dict[str, Any], scored: bytes, sc: Any) -> None:
    """A sampled document's per-byte NLL (at most SAMPLE_BYTES bytes: a 10 MB line must not make
    a 100 MB cell), its scored text and its segments, into its samples.jsonl ``row``."""
    cut = len(scored) if len(scored) <= SAMPLE_BYTES else char_boundary(scored, SAMPLE_BYTES)
    row["scored_text"] = decode(scored[:cut])
    row["byte_nll"] = [round(float(x), 5) for x in sc.byte_nll[:cut]]
    row["segments"] = sc.segments if cut == len(scored) else None
    if cut < len(scored):
        row["byte_nll_truncated"] = True


def _buckets(suite: Suite, es: EvalSet, keys: dict[str, Any], live: list[PlanRow],
             scores: list[Any]) -> list[dict[str, Any]]:
    """buckets.csv rows of one cell: each analysis's buckets summed over the documents in plan order."""
    buckets: dict[tuple[str, str], list[float]] = {}
    spans = [(p.doc, p.item.scored_bytes, sc.byte_nll) for p, sc in zip(live, scores)]
    for a in (spec.config for spec in suite.analyses):
        if a.datasets and es.part.name not in a.datasets:
            continue
        for b, v in a.cell_buckets(spans).items():
            buckets[(a.registry_name, b)] = list(v)
    return [{**keys, "analysis": a, "bucket": b, "n_words": v[0], "n_bytes": v[1], "nll_nats": v[2],
             "bpb": bpb(v[2], v[1])} for (a, b), v in sorted(buckets.items())]


def baseline_cells(suite: Suite) -> list[tuple[str, Permutation]]:
    """(compressor, permutation) of every baseline cell per (eval set, perturbation, mode)."""
    perms = [Permutation(), *suite.permutations]
    return [(c, p) for c in suite.baselines.compressors for p in perms]


def baseline_dictionary(suite: Suite, train: DataPart, perm: Permutation, seed: int) -> bytes:
    """The compressors' priming text under ``perm``: ``baselines.dictionary_bytes`` of the
    training stream of ``train``."""
    n, context = suite.baselines.dictionary_bytes, suite.budget.context_bytes
    wins = training_windows(train.docs, n, context, seed) if n else iter(())
    try:
        return compressor_dictionary(wins, perm, context, seed, n)
    except ValueError as e:  # the stream's own error names no key
        raise ValueError(f"baselines.dictionary_bytes = {n:,}: {e} "
                         f"(the train part holds {train.n_bytes:,} bytes)") from None


def baseline_cell(suite: Suite, name: str, perm: Permutation, es: EvalSet, pspec: PerturbationSpec, mode: str,
                  seed: int, plan: list[PlanRow | None], dictionary: bytes) -> dict[str, Any]:
    """One compressor cell primed with ``dictionary``: a results row only (no samples, no buckets)."""
    docs = [BaselineDoc(p.item, p.n_bytes_clean, p.n_words, p.edit_rate) for p in plan if p is not None]
    m = baseline_metrics(name, perm, docs, suite.budget.context_bytes, seed, dictionary, es.script)
    row = {"encoder": variant_label(name, perm), "encoder_name": name, "seed": seed,
           "dataset": es.part.name, "language": es.language, "script": es.script or "",
           "perturbation": pspec.name, "perturbation_id": pspec.id, "severity": pspec.severity,
           "mode": mode, **m, "kind": "baseline", **permutation_columns(perm)}
    return {"row": row, "samples": [], "buckets": []}
