"""Perturbation plans: what every encoder scores, the same bytes for all of them.

A plan of one eval set and cell (perturbation, severity, mode) is a list of ``PlanRow``s, one a
document (None where nothing is scored). The run, the dry run and the compile-ahead process make
them with these functions from the suite alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.config.suite import PerturbationSpec, Suite
from harness.data.batchscore import CachedRow, PlanCache, code_hash, perturb_many
from harness.data.evalsets import CLEAN, EvalSet, decode, encode
from harness.data.load import DataPart
from harness.data.perturb import apply
from harness.infra import plugins
from harness.infra.provenance import tokbench_version
from harness.overlap.planahead import FitOnDemand
from harness.score.items import (
    PlanRow,
    plan_clean_target,
    plan_full,
    plan_partition,
    split_for_target,
)
from harness.score.metrics import count_words
from perturbations.base import Perturbation
from perturbations.measure import edit_rate, edit_rate_method
from sources.base import Document

# (perturbation id, severity) -> {document language: the instance for it}; None = language unknown
Instances = dict[tuple[str, float], dict[str | None, Perturbation]]
Plans = dict[tuple[str, float, str], list[PlanRow | None]]


def perturbation_instances(suite: Suite, train: DataPart, evals: Sequence[DataPart]) -> Instances:
    """The instances the loader built (one per perturbation id and severity), fitted, and
    their variants for every document language of the eval sets ``evals``. ``fit`` runs once
    per id on the training text; the other severities share what it learned."""
    languages = {d.language for e in evals for d in e.docs if d.language is not None}
    out: Instances = {}
    fitted: dict[str, Perturbation] = {}
    texts: list[str] | None = None
    for spec in suite.perturbations:
        inst: Perturbation = spec.perturbation
        if type(inst).fit is not Perturbation.fit:
            if spec.id not in fitted:
                if texts is None:
                    texts = [decode(d.data) for d in train.docs]
                try:
                    inst.fit(texts)
                except (Exception, SystemExit) as e:  # one line naming the plugin
                    raise plugins.plugin_failed(inst, "fit", e) from e
                fitted[spec.id] = inst
            else:
                inst.share_fit(fitted[spec.id])
        out[(spec.id, spec.severity)] = {
            None: inst, **{lang: inst.for_language(lang) for lang in sorted(languages)}
        }
    return out


def plan_cells(suite: Suite) -> list[tuple[PerturbationSpec, str]]:
    """Every (perturbation, mode) of an eval set, clean first, in results.csv order."""
    return [(pspec, mode) for pspec in [CLEAN, *suite.perturbations] for mode in suite.eval.modes]


def perturbed(insts: dict[str | None, Perturbation] | None, spec: PerturbationSpec,
              seed: int, doc: Document, text: str) -> str:
    """The perturbed text of one document; its rng depends only on (seed, id, params, doc id)."""
    if spec.id == "clean" or insts is None:
        return text
    return apply(insts[doc.language], text, seed, spec.id, spec.params, doc.id)  # params hold severity


def try_perturbations(suite: Suite, perts: Instances, evals: list[DataPart]) -> None:
    """Perturb the start of the first eval document with every perturbation before training,
    so a plugin that raises in ``perturb()`` fails in seconds, not after training."""
    doc = evals[0].docs[0]
    sample = decode(doc.data[:2000])
    for spec in suite.perturbations:
        perturbed(perts.get((spec.id, spec.severity)), spec, suite.seeds[0], doc, sample)


def plan_rows(suite: Suite, es: EvalSet, pspec: PerturbationSpec, insts: dict[str | None, Perturbation] | None,
              seed: int, mode: str) -> list[CachedRow]:
    """Per document (perturbed text — the prefix in clean_target mode —, edit rate, words
    scored), or None when clean_target leaves nothing to score."""
    ev, context = suite.eval, suite.budget.context_bytes
    out: list[CachedRow] = []
    for doc, text in zip(es.part.docs, es.texts):
        if mode == "full":
            ptext = perturbed(insts, pspec, seed, doc, text)
            er = edit_rate(text, ptext) if pspec.id != "clean" else 0.0
            out.append((ptext, er, count_words(text)))
            continue
        prefix, cont = split_for_target(text, ev.context_fraction)
        pprefix = perturbed(insts, pspec, seed, doc, prefix)
        item = plan_clean_target(encode(pprefix), encode(cont), context, ev.target_bytes)
        if item is None:
            out.append(None)
            continue
        er = edit_rate(prefix, pprefix) if pspec.id != "clean" else 0.0
        out.append((pprefix, er, count_words(decode(item.scored_bytes))))
    return out


def plan_items(suite: Suite, es: EvalSet, mode: str, rows: list[CachedRow]) -> list[PlanRow | None]:
    """Cached plan rows -> ``PlanRow``s (windows cut again: cheap and deterministic)."""
    ev, context = suite.eval, suite.budget.context_bytes
    stride = ev.stride_bytes or max(1, context // 2)
    out: list[PlanRow | None] = []
    for doc, text, r in zip(es.part.docs, es.texts, rows):
        if r is None:
            out.append(None)
            continue
        ptext, er, n_words = r
        if mode == "full":
            # a permuted suite scores context-free windows, every cell alike (docs/fragility.md)
            item = (plan_partition(encode(ptext), context) if suite.permutations
                    else plan_full(encode(ptext), context, stride))
            out.append(PlanRow(doc, item, text, ptext, len(doc.data), er, n_words))
            continue
        _, cont = split_for_target(text, ev.context_fraction)
        target_item = plan_clean_target(encode(ptext), encode(cont), context, ev.target_bytes)
        assert target_item is not None
        target = target_item.scored_bytes
        out.append(PlanRow(doc, target_item, text, ptext + decode(target), len(target), er, n_words))
    return out


def make_plans(suite: Suite, es: EvalSet, cells: list[tuple[PerturbationSpec, str]], perts: Instances | FitOnDemand,
               seed: int, *, cache_dir: Path | None, train_fp: str, processes: int | None) -> Plans:
    """Perturb and cut every document of an eval set once per (perturbation, mode); the plan
    is shared by all encoders, so they score exactly the same bytes. Perturbed texts come from
    the plan cache in ``cache_dir`` (keyed by content and code; None: no cache) or are computed
    in ``processes`` processes (None: every usable CPU) and stored. ``train_fp``: the training
    part's fingerprint (a fitted perturbation learned from it)."""
    ev = suite.eval
    cache = PlanCache(cache_dir)
    keys: dict[tuple[str, float, str], str] = {}
    for pspec, mode in cells:
        keys[(pspec.id, pspec.severity, mode)] = cache.key(
            data=es.part.fingerprint, perturbation=pspec.name, id=pspec.id, severity=pspec.severity,
            params=pspec.params, seed=seed, mode=mode, fraction=ev.context_fraction if mode != "full" else None,
            # clean_target cuts the scored continuation by these: its word count and whether
            # a document has anything to score are in the cached rows
            target=(ev.target_bytes, suite.budget.context_bytes) if mode != "full" else None,
            train=train_fp, version=tokbench_version(),
            # the instance's class (the suite's own object: no fit needed for the key)
            code=code_hash(type(pspec.perturbation) if (pspec.id, pspec.severity) in perts else None))
    rows = {k: cache.get(key) for k, key in keys.items()}
    missing = list({(p.id, p.severity, m): (p, m) for p, m in cells if rows[(p.id, p.severity, m)] is None}.values())
    if missing and isinstance(perts, FitOnDemand):
        perts = perts.fitted()  # fit here, once, not in each forked process below

    def work(task: tuple[PerturbationSpec, str]) -> list[CachedRow]:
        pspec, mode = task
        return plan_rows(suite, es, pspec, perts.get((pspec.id, pspec.severity)), seed, mode)

    for (pspec, mode), r in zip(missing, perturb_many(missing, work, processes)):
        k = (pspec.id, pspec.severity, mode)
        rows[k] = r
        cache.put(keys[k], r)
    return {k: plan_items(suite, es, k[2], r) for k, r in rows.items() if r is not None}


def clean_cells(suite: Suite, sample: list[EvalSet], seed: int) -> list[tuple[EvalSet, str, list[Any]]]:
    """(eval set, mode, plan) of the clean cells of ``sample``, every mode: the scoring the dry
    run times and the compile-ahead process warms."""
    return [(es, mode, plan_items(suite, es, mode, plan_rows(suite, es, CLEAN, None, seed, mode)))
            for es in sample for mode in suite.eval.modes]


def edit_method(suite: Suite, p: PlanRow, pspec: PerturbationSpec, mode: str) -> str:
    """"exact" or "windowed": how the row's edit rate was measured (perturbations/measure.py),
    from the lengths of the texts compared (the whole text in full mode, the prefix in
    clean_target mode)."""
    if pspec.id == "clean":
        return "exact"
    if mode == "full":
        return edit_rate_method(len(p.text), len(p.ptext))
    prefix, _ = split_for_target(p.text, suite.eval.context_fraction)
    return edit_rate_method(len(prefix), len(p.ptext) - len(decode(p.item.scored_bytes)))
