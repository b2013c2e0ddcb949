"""``tokbench run``: suite → data → encoders trained by one loop → perturbed scoring → results → report.

    Runner(load_suite("suites/smoke.yaml"), RunOptions()).run()

Everything finished is kept: models and cells are written atomically as they finish, and a
re-run of the same command skips them (a killed run resumes; new perturbations do not retrain).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from encoders.base import Encoder, config_to_dict
from harness import plugins
from harness.config import build_perturbation
from harness.data import (
    DataPart,
    load_source,
    prepare_sources,
    select_part,
    source_key,
    stable_unit,
    training_windows,
)
from harness.fragility import (
    BaselineDoc,
    baseline_metrics,
    compressor_dictionary,
    permutation_columns,
    permuter_for,
)
from harness.metrics import CellTotals, cell_metrics, count_words
from harness.permutation import Permutation, variant_label
from harness.perturb import apply
from harness.provenance import git_sha, hardware, package_versions, tokbench_version
from harness.results import (
    BUCKET_COLUMNS,
    RESULT_COLUMNS,
    RunDir,
    atomic_torch_save,
    atomic_write_json,
    stable_hash,
    write_csv,
    write_jsonl,
)
from harness.score import (
    ScoreItem,
    plan_clean_target,
    plan_full,
    plan_partition,
    score_items,
    split_for_target,
)
from harness.sources.base import Document, SourceContext
from harness.sources.fetch import default_cache_dir
from harness.sources.script import detect_script
from harness.suite import SCHEMA_VERSION, EncoderSpec, PerturbationSpec, Suite
from harness.train import Checkpointer, fit_context, train_encoder
from perturbations.base import Perturbation
from perturbations.measure import edit_rate

CLEAN = PerturbationSpec(name="identity", id="clean", severity=0.0, params={})
TEXT_LIMIT = 20_000  # characters of each text kept in samples.jsonl


@dataclass
class RunOptions:
    """Command-line options of ``tokbench run``."""

    out: Path | None = None
    device: str = "auto"
    limit: int | None = None
    prepare: bool = True  # let sources fetch/build their data first (idempotent)
    report: bool = True
    progress: bool = True
    cache_dir: Path | None = None
    checkpoint_seconds: float = 120.0
    log: Callable[[str], None] = field(default=lambda s: print(s, file=sys.stderr))


def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("--device cuda: no CUDA device is available")
    return torch.device(name)


def decode(data: bytes) -> str:
    """Bytes → str losslessly: invalid UTF-8 bytes become lone surrogates (surrogateescape)."""
    return data.decode("utf-8", "surrogateescape")


def encode(text: str) -> bytes:
    """str → bytes, inverting ``decode``; surrogates a perturbation made itself pass through."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def dominant_script(docs: list[Document], scripts: list[str]) -> str | None:
    """The dataset's script: the byte-weighted majority of its documents' scripts if it covers
    >= 80 %, else Mixd."""
    weights: Counter[str] = Counter()
    for d, script in zip(docs, scripts):
        weights[script] += len(d.data)
    if not weights:
        return None
    script, w = weights.most_common(1)[0]
    return script if w >= 0.8 * sum(weights.values()) else "Mixd"


def dataset_language(docs: list[Document], default: str | None) -> str:
    langs = {d.language for d in docs}
    if len(langs) == 1:
        return next(iter(langs)) or default or ""
    return "mul"


# ---------------------------------------------------------------------------------------------


class Runner:
    """One run of one suite. Public entry: ``run()``."""

    def __init__(self, suite: Suite, opts: RunOptions) -> None:
        self.suite = suite
        self.opts = opts
        self.log = opts.log
        self.device = pick_device(opts.device)
        self.rd = RunDir(opts.out or Path("runs") / suite.name)
        self.ctx = SourceContext(
            base_dir=Path(suite.path).resolve().parent if suite.path else Path.cwd(),
            cache_dir=opts.cache_dir or default_cache_dir(),
            log=self.log,
        )
        self.budget = suite.budget
        self.timings: dict[str, float] = {}
        self.encoder_facts: dict[str, dict[str, Any]] = {}
        self.data_facts: dict[str, Any] = {}
        self.analysis_facts: dict[str, Any] = {}

    # -- data ---------------------------------------------------------------------------------
    def load_data(self) -> tuple[DataPart, list[DataPart]]:
        s = self.suite.data
        t0 = time.perf_counter()
        if self.opts.prepare:
            prepare_sources(self.suite, self.ctx)
        cache: dict[str, tuple[list[Document], dict[str, Any]]] = {}

        def docs_of(spec: Any) -> tuple[list[Document], dict[str, Any]]:
            key = source_key(spec)
            if key not in cache:
                cache[key] = load_source(spec, self.ctx)
            return cache[key]

        all_train, prov = docs_of(s.train)
        train_docs = select_part(all_train, s.train.part or "train", s.valid_fraction, s.test_fraction)
        if not train_docs:
            raise ValueError(
                f"data.train: the train part of the source is empty ({len(all_train)} document(s) in all, "
                f"split by document id {1 - s.valid_fraction - s.test_fraction:.0%} train); cut files into more "
                "documents with `docs: paragraph` or `docs: line`, or set `part: all`")
        train = DataPart("train", s.train.part or "train", train_docs, s.train.language, prov)
        passes = self.budget.train_bytes / max(1, train.n_bytes)
        if passes > 1000:
            raise ValueError(
                f"data.train: the train part holds {train.n_bytes:,} bytes, so budget.train_bytes="
                f"{self.budget.train_bytes:,} would repeat it {passes:,.0f} times; add text or lower budget.train_bytes")
        if passes > 1:
            self.log(f"[data] note: the train part ({train.n_bytes:,} bytes) is repeated {passes:.1f} times "
                     f"to reach budget.train_bytes={self.budget.train_bytes:,}")
        train_hashes = {hashlib.sha256(d.data).digest() for d in train_docs}
        evals = []
        for spec in s.eval:
            docs, prov = docs_of(spec)
            part = spec.part or ("test" if source_key(spec) == source_key(s.train) else "all")
            chosen = select_part(docs, part, s.valid_fraction, s.test_fraction)
            chosen = [d for d in chosen if len(d.data) >= self.suite.eval.min_doc_bytes]
            # No evaluated document may also be a training document (same bytes).
            in_train = [hashlib.sha256(d.data).digest() in train_hashes for d in chosen]
            overlap = [d for d, t in zip(chosen, in_train) if t]
            chosen = [d for d, t in zip(chosen, in_train) if not t]
            chosen.sort(key=lambda d: stable_unit("eval", d.id))
            limit = min(x for x in (self.suite.eval.max_docs, self.opts.limit, 10**12) if x is not None)
            chosen = chosen[:limit]
            if not chosen:
                raise ValueError(
                    f"data.eval '{spec.name}': no documents left (part={part}: {len(docs)} document(s) in the source, "
                    f"{len(overlap)} also in training, min_doc_bytes={self.suite.eval.min_doc_bytes}); give the eval "
                    "set its own files, or cut them into more documents with `docs: paragraph` or `docs: line`")
            ep = DataPart(spec.name or spec.source, part, chosen, spec.language, prov)
            evals.append(ep)
            self.data_facts[f"eval:{ep.name}"] = {**ep.summary(), "dropped_train_overlap": len(overlap)}
        self.data_facts["train"] = {**train.summary(), "source": s.train.source, "passes": passes}
        self.timings["data_seconds"] = time.perf_counter() - t0
        return train, evals

    # -- models -------------------------------------------------------------------------------
    def model_key(self, spec: EncoderSpec, seed: int, train_fp: str, extra: dict[str, Any] | None = None) -> str:
        return stable_hash({
            "encoder": spec.name, "config": config_to_dict(spec.config),
            "backbone": config_to_dict(spec.backbone), "budget": asdict(self.budget),
            "train": train_fp, "seed": seed, "version": tokbench_version(), **(extra or {}),
        }) + f"-{spec.label}-s{seed}"

    def build(self, spec: EncoderSpec, seed: int) -> Encoder:
        cls = plugins.resolve("encoder", spec.name, search_paths=[self.ctx.base_dir, Path.cwd()])
        torch.manual_seed(seed)  # same seed → same initial weights for identical shapes
        return cls(spec.config, spec.backbone)

    def _bar(self, desc: str, total: int) -> Callable[[int, int, float], None] | None:
        """A tqdm progress callback for ``train_encoder`` (None when progress is off)."""
        if not self.opts.progress:
            return None
        bar = tqdm(total=total, desc=desc, unit="B", unit_scale=True, leave=False, file=sys.stderr, mininterval=1.0)

        def update(seen: int, n: int, loss: float) -> None:
            bar.update(seen - bar.n)
            bar.set_postfix_str(f"loss {loss:.3f} bpb", refresh=False)
            if seen >= n:
                bar.close()

        return update

    def get_model(self, spec: EncoderSpec, seed: int, train: DataPart, flops_target: float | None) -> tuple[Encoder, dict[str, Any]]:
        """Load the cached model, or build, fit and train it (resuming a partial checkpoint)."""
        extra: dict[str, Any] = {"flops_target": flops_target} if flops_target else {}
        if not spec.permutation.is_identity:  # a model of the permuted stream is another model
            extra["permutation"] = asdict(spec.permutation)
        key = self.model_key(spec, seed, train.fingerprint, extra or None)
        permuter = permuter_for(spec.permutation, self.budget.context_bytes, seed)
        path, meta_path = self.rd.model_path(key), self.rd.model_meta_path(key)
        enc = self.build(spec, seed)
        if path.exists() and meta_path.exists():
            meta = json.loads(meta_path.read_text())
            enc.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
            enc.to(self.device).eval()
            self.log(f"[model] {spec.label} seed {seed}: loaded from cache {path.name}")
            return enc, meta
        self.log(f"[model] {spec.label} seed {seed}: fit + train on {self.budget.train_bytes:,} bytes ({self.device})")
        enc.to(self.device)
        t0 = time.perf_counter()
        ctx = fit_context(train.docs, self.budget, self.device, seed, log=self.log,
                          progress=lambda what, n: self._bar(f"{spec.label} ({what})", n),
                          permuter=permuter)
        fit = enc.fit(ctx) or {}
        fit.setdefault("seconds", time.perf_counter() - t0)
        n_bytes = self.budget.train_bytes
        max_flops = None
        if flops_target is not None:
            # match: flops — train until this encoder has spent the reference's FLOPs (fit
            # included); the schedule runs over the bytes that budget is estimated to buy.
            probe = list(training_windows(train.docs, 8 * self.budget.batch_bytes, self.budget.context_bytes, seed))
            b = enc.collate(probe, [0] * len(probe))
            per_byte = 3.0 * enc.flops(b) / max(1, b.scored_bytes)
            max_flops = max(0.0, flops_target - float(fit.get("flops", 0.0)))
            n_bytes = max(self.budget.context_bytes, int(max_flops / per_byte))
        windows = training_windows(train.docs, n_bytes if max_flops is None else 10 * n_bytes, self.budget.context_bytes, seed)
        stats = train_encoder(
            enc, windows, n_bytes, self.budget, self.device, max_flops=max_flops,
            checkpoint=Checkpointer(self.rd.partial_path(key), self.opts.checkpoint_seconds),
            progress=self._bar(f"train {spec.label} s{seed}", n_bytes), permuter=permuter,
        )
        total = sum(p.numel() for p in enc.parameters())
        emb = enc.embedding_parameters()
        meta = {
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
        atomic_torch_save(enc.state_dict(), path)
        atomic_write_json(meta_path, meta)
        self.log(
            f"[model] {spec.label} seed {seed}: {stats['bytes']:,} bytes in {stats['seconds']:.1f}s, "
            f"final loss {stats['final_loss_bpb']:.3f} bpb"
        )
        return enc, meta

    # -- perturbations ------------------------------------------------------------------------
    def perturbation_instances(self, train: DataPart) -> dict[tuple[str, float], Any]:
        """One instance per (perturbation id, severity). ``fit`` runs once per id on the training
        text; the other severities are shallow copies that share what it learned."""
        out: dict[tuple[str, float], Any] = {}
        fitted: dict[str, Any] = {}
        texts: list[str] | None = None
        for spec in self.suite.perturbations:
            inst = build_perturbation(spec)
            if type(inst).fit is not Perturbation.fit:
                if spec.id not in fitted:
                    if texts is None:
                        texts = [decode(d.data) for d in train.docs]
                    inst.fit(texts)
                    fitted[spec.id] = inst
                else:
                    inst = copy.copy(fitted[spec.id])
                    object.__setattr__(inst, "severity", spec.severity)
            out[(spec.id, spec.severity)] = inst
        return out

    def perturbed(self, inst: Any, spec: PerturbationSpec, seed: int, doc: Document, text: str) -> str:
        """The perturbed text of one document; its rng depends only on (seed, id, params, doc id)."""
        if spec.id == "clean":
            return text
        return apply(inst, text, seed, spec.id, spec.params, doc.id, doc.language)  # params hold severity

    # -- the run ------------------------------------------------------------------------------
    def run_json(self, status: str, extra: dict[str, Any] | None = None) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "tokbench_version": tokbench_version(),
            "status": status,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join(sys.argv),
            "suite": self.suite.raw,
            "suite_path": self.suite.path,
            "git_sha": git_sha(),
            "packages": package_versions(),
            "hardware": hardware(self.device),
            "data": self.data_facts,
            "encoders": self.encoder_facts,
            "analyses": self.analysis_facts,
            "timings": self.timings,
            **(extra or {}),
        }

    def run(self) -> Path:
        t_start = time.perf_counter()
        train, evals = self.load_data()
        self.rd.root.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.rd.root / "run.json", self.run_json("running"))
        perts = self.perturbation_instances(train)
        analyses = [a.config for a in self.suite.analyses]
        specs_p = [CLEAN] + [p for p in self.suite.perturbations]
        modes = self.suite.eval.modes
        ev = self.suite.eval
        stride = ev.stride_bytes or max(1, self.budget.context_bytes // 2)
        # Per eval set, computed once: decoded texts and each document's script.
        texts = {e.name: [decode(d.data) for d in e.docs] for e in evals}
        scripts = {e.name: [d.script or detect_script(t) for d, t in zip(e.docs, texts[e.name])] for e in evals}
        lang_script = {e.name: (dataset_language(e.docs, e.language), dominant_script(e.docs, scripts[e.name]))
                       for e in evals}
        cell_keys: list[str] = []
        dictionaries: dict[tuple[Permutation, int], bytes] = {}  # compressor priming, made once
        t_train = t_score = 0.0
        for seed in self.suite.seeds:
            # ---- train (or load) every encoder for this seed
            models: dict[str, tuple[Encoder, dict[str, Any], EncoderSpec]] = {}
            t0 = time.perf_counter()
            flops_target = None
            order = list(self.suite.encoders)
            if self.budget.match == "flops":
                ref = self.budget.flops_reference or order[0].label
                order.sort(key=lambda s: s.label != ref)
            for spec in order:
                enc, meta = self.get_model(spec, seed, train, flops_target)
                if self.budget.match == "flops" and flops_target is None:
                    flops_target = float(meta["total_flops"])
                models[spec.label] = (enc, meta, spec)
                facts = self.encoder_facts.setdefault(spec.label, {"name": spec.name, "config": config_to_dict(spec.config),
                                                                   "backbone": config_to_dict(spec.backbone), "seeds": {}})
                facts["seeds"][str(seed)] = meta
                for k in ("params_total", "params_embedding", "params_non_embedding", "flops_per_byte_train",
                          "flops_per_byte_infer", "describe"):
                    facts[k] = meta[k]
            t_train += time.perf_counter() - t0
            for a in analyses:
                a.fit(train.docs, {label: m[0] for label, m in models.items()})
                describe = getattr(a, "describe", None)
                self.analysis_facts[a.registry_name] = describe() if callable(describe) else {}
            # ---- score every cell
            t0 = time.perf_counter()
            n_cells = len(evals) * len(specs_p) * len(modes) * len(models)
            bar = tqdm(total=n_cells, desc=f"score seed {seed}", unit="cell", leave=False, file=sys.stderr,
                       disable=not self.opts.progress, mininterval=1.0)
            for ep in evals:
                fp = ep.fingerprint
                for pspec in specs_p:
                    inst = perts.get((pspec.id, pspec.severity))
                    plans: dict[str, list[tuple[Document, ScoreItem, str, str, int, float, int] | None]] = {}
                    for mode in modes:
                        keys = {label: self.cell_key(m[1]["key"], fp, pspec, mode, seed) for label, m in models.items()}
                        todo = [label for label, k in keys.items() if not self.rd.cell_path(k).exists()]
                        cell_keys.extend(keys.values())
                        if not todo:
                            bar.update(len(keys))
                            continue
                        if mode not in plans:
                            plans[mode] = self.plan(ep, texts[ep.name], pspec, inst, seed, mode, stride)
                        for label in todo:
                            enc, meta, spec = models[label]
                            cell = self.score_cell(enc, spec, ep, pspec, mode, seed, plans[mode], lang_script[ep.name],
                                                   scripts[ep.name], analyses)
                            cell["row"]["fingerprint"] = fp
                            self.rd.save_cell(keys[label], cell)
                        bar.update(len(keys))
                    # compressor baselines on the same plans (docs/fragility.md)
                    for mode in modes:
                        for name, perm in self.baseline_cells():
                            k = self.baseline_key(name, perm, fp, pspec, mode, seed, train.fingerprint)
                            cell_keys.append(k)
                            if self.rd.cell_path(k).exists():
                                continue
                            if mode not in plans:
                                plans[mode] = self.plan(ep, texts[ep.name], pspec, inst, seed, mode, stride)
                            if (perm, seed) not in dictionaries:
                                n_dict = self.suite.baselines.dictionary_bytes
                                dictionaries[(perm, seed)] = compressor_dictionary(
                                    training_windows(train.docs, n_dict, self.budget.context_bytes, seed),
                                    perm, self.budget.context_bytes, seed, n_dict)
                            cell = self.baseline_cell(name, perm, ep, pspec, mode, seed, plans[mode],
                                                      lang_script[ep.name], dictionaries[(perm, seed)])
                            cell["row"]["fingerprint"] = fp
                            self.rd.save_cell(k, cell)
            bar.close()
            t_score += time.perf_counter() - t0
            del models
        self.timings.update({"train_seconds": t_train, "score_seconds": t_score})
        self.assemble(cell_keys)
        # bytes per token / patch / byte on each clean eval set (BPE's "multilingual inequity")
        for r in self.rows:
            if r["perturbation_id"] == "clean" and r["mode"] == modes[0] and r["encoder"] in self.encoder_facts:
                per = self.encoder_facts[r["encoder"]].setdefault("bytes_per_segment_by_eval", {})
                per[f"{r['dataset']} (seed {r['seed']})"] = r["bytes_per_segment"]
        self.timings["total_seconds"] = time.perf_counter() - t_start
        atomic_write_json(self.rd.root / "run.json", self.run_json("finished"))
        if self.opts.report:
            self.render_report()
        return self.rd.root

    def cell_key(self, model_key: str, fp: str, pspec: PerturbationSpec, mode: str, seed: int) -> str:
        ev = self.suite.eval
        return stable_hash({
            "model": model_key, "data": fp, "perturbation": pspec.name, "id": pspec.id, "severity": pspec.severity,
            "params": pspec.params, "mode": mode, "seed": seed, "context": self.budget.context_bytes,
            "stride": ev.stride_bytes, "fraction": ev.context_fraction, "target": ev.target_bytes,
            "sample_docs": ev.sample_docs, "texts": [ev.keep_texts, self.suite.encoders[0].label], "analyses": [config_to_dict(a.config) for a in self.suite.analyses],
            **({"windows": "partition"} if self.suite.permutations else {}),
        })

    # -- compressor baselines (docs/fragility.md) -----------------------------------------------
    def baseline_cells(self) -> list[tuple[str, Permutation]]:
        """(compressor, permutation) of every baseline cell per (eval set, perturbation, mode)."""
        perms = [Permutation(), *self.suite.permutations]
        return [(c, p) for c in self.suite.baselines.compressors for p in perms]

    def baseline_key(self, name: str, perm: Permutation, fp: str, pspec: PerturbationSpec, mode: str,
                     seed: int, train_fp: str) -> str:
        n_dict = self.suite.baselines.dictionary_bytes
        return stable_hash({
            "baseline": name, "permutation": asdict(perm), "data": fp, "perturbation": pspec.name,
            "id": pspec.id, "severity": pspec.severity, "params": pspec.params, "mode": mode,
            "seed": seed, "context": self.budget.context_bytes, "stride": self.suite.eval.stride_bytes,
            "fraction": self.suite.eval.context_fraction, "target": self.suite.eval.target_bytes,
            "dictionary": [n_dict, train_fp if n_dict else None, "training-stream"],
            "windows": bool(self.suite.permutations),
            "version": tokbench_version(),
        })

    def baseline_cell(self, name: str, perm: Permutation, ep: DataPart, pspec: PerturbationSpec, mode: str,
                      seed: int, plan: list[Any], lang_script: tuple[str, str | None],
                      dictionary: bytes) -> dict[str, Any]:
        """One compressor cell: a results row only (no samples, no buckets)."""
        docs = [BaselineDoc(p[1], p[4], p[6], p[5]) for p in plan if p is not None]
        m = baseline_metrics(name, perm, docs, self.budget.context_bytes, seed, dictionary, lang_script[1])
        row = {"encoder": variant_label(name, perm), "encoder_name": name, "seed": seed, "dataset": ep.name,
               "language": lang_script[0], "script": lang_script[1] or "", "perturbation": pspec.name,
               "perturbation_id": pspec.id, "severity": pspec.severity, "mode": mode, **m,
               "kind": "baseline", **permutation_columns(perm)}
        return {"row": row, "samples": [], "buckets": []}

    def plan(self, ep: DataPart, texts: list[str], pspec: PerturbationSpec, inst: Any, seed: int, mode: str,
             stride: int) -> list[Any]:
        """Perturb and cut every document of an eval set once per (perturbation, mode); the plan
        is shared by all encoders, so they score exactly the same bytes."""
        ev = self.suite.eval
        out: list[Any] = []
        for doc, text in zip(ep.docs, texts):
            if mode == "full":
                ptext = self.perturbed(inst, pspec, seed, doc, text)
                pbytes = encode(ptext)
                item = (plan_partition(pbytes, self.budget.context_bytes) if self.suite.permutations
                        else plan_full(pbytes, self.budget.context_bytes, stride))
                er = edit_rate(text, ptext) if pspec.id != "clean" else 0.0
                out.append((doc, item, text, ptext, len(doc.data), er, count_words(text)))
            else:
                prefix, cont = split_for_target(text, ev.context_fraction)
                pprefix = self.perturbed(inst, pspec, seed, doc, prefix)
                item = plan_clean_target(encode(pprefix), encode(cont), self.budget.context_bytes, ev.target_bytes)
                if item is None:
                    out.append(None)
                    continue
                target = item.scored_bytes
                er = edit_rate(prefix, pprefix) if pspec.id != "clean" else 0.0
                out.append((doc, item, text, pprefix + decode(target), len(target), er, count_words(decode(target))))
        return out

    def score_cell(self, enc: Encoder, spec: EncoderSpec, ep: DataPart, pspec: PerturbationSpec, mode: str,
                   seed: int, plan: list[Any], lang_script: tuple[str, str | None], scripts: list[str],
                   analyses: list[Any]) -> dict[str, Any]:
        ev = self.suite.eval
        doc_scripts = dict(zip((d.id for d in ep.docs), scripts))
        live = [p for p in plan if p is not None]
        scores = score_items(enc, [p[1] for p in live], self.device, ev.batch_windows, self.budget.dtype == "bfloat16",
                             permuter=permuter_for(spec.permutation, self.budget.context_bytes, seed))
        totals = CellTotals()
        samples = []
        buckets: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0, 0, 0.0])
        keys = {"encoder": spec.label, "encoder_name": spec.name, "seed": seed, "dataset": ep.name,
                "language": lang_script[0], "script": lang_script[1] or "", "perturbation": pspec.name,
                "perturbation_id": pspec.id, "severity": pspec.severity, "mode": mode}
        for i, ((doc, item, text, ptext, n_clean, er, n_words), sc) in enumerate(zip(live, scores)):
            scored = item.scored_bytes
            totals.add(sc.nll, len(scored), n_clean, sc.n_units, n_words, sc.segments, er)
            row = {**keys, "doc_id": doc.id, "doc_language": doc.language, "doc_script": doc_scripts[doc.id],
                   "nll_nats": sc.nll, "n_bytes": len(scored),
                   "n_bytes_clean": n_clean, "n_tokens": sc.n_units, "n_words": n_words, "edit_rate": er}
            # The texts are the same for every encoder: store them once, on the first encoder's row.
            if ev.keep_texts and spec.label == self.suite.encoders[0].label:
                row.update(text=text[:TEXT_LIMIT], text_perturbed=ptext[:TEXT_LIMIT],
                           truncated=len(text) > TEXT_LIMIT or len(ptext) > TEXT_LIMIT)
            if i < ev.sample_docs:
                row["scored_text"] = decode(scored)
                row["byte_nll"] = [round(float(x), 5) for x in sc.byte_nll]
                row["segments"] = sc.segments
            samples.append(row)
            for a in analyses:
                if a.datasets and ep.name not in a.datasets:
                    continue
                for r in a.rows(doc, scored, sc.byte_nll):
                    b = buckets[(a.registry_name, r.bucket)]
                    b[0] += r.n_words
                    b[1] += r.n_bytes
                    b[2] += r.nll_nats
        m = cell_metrics(totals, lang_script[1])
        row = {**keys, **m, "token_unit": enc.unit, "segment_unit": enc.segment, "kind": "model",
               **permutation_columns(spec.permutation)}
        brows = [{**keys, "analysis": a, "bucket": b, "n_words": v[0], "n_bytes": v[1], "nll_nats": v[2],
                  "bpb": v[2] / (math.log(2) * v[1]) if v[1] else math.nan} for (a, b), v in sorted(buckets.items())]
        return {"row": row, "samples": samples, "buckets": brows}

    def assemble(self, cell_keys: list[str]) -> None:
        """results.csv / samples.jsonl / buckets.csv from this suite's cells, in a stable order."""
        rows, samples, buckets = [], [], []
        seen: set[str] = set()
        for k in cell_keys:
            if k in seen:
                continue
            seen.add(k)
            cell = self.rd.load_cell(k)
            if cell is None:
                raise RuntimeError(f"cell {k} is missing after scoring")
            rows.append(cell["row"])
            samples.extend(cell["samples"])
            buckets.extend(cell.get("buckets", []))
        write_csv(self.rd.root / "results.csv", rows, RESULT_COLUMNS)
        write_jsonl(self.rd.root / "samples.jsonl", samples)
        if buckets:
            write_csv(self.rd.root / "buckets.csv", buckets, BUCKET_COLUMNS)
        self.rows = rows

    def render_report(self) -> None:
        from reports import render_run

        try:
            path = render_run(self.rd.root)
        except Exception as e:  # the results are complete and kept; a report bug must not lose them
            self.log(f"[report] failed ({type(e).__name__}: {e}); results are complete — "
                     f"re-render with: tokbench report {self.rd.root}")
            return
        self.log(f"[report] {path}")


def summary_table(rows: list[dict[str, Any]]) -> str:
    """A short terminal table per encoder, eval set and mode: clean BPB and the worst ΔBPB under
    perturbation — of ``bpb`` in clean_target mode (scored bytes identical to the clean cell),
    of ``bpb_clean`` in full mode (NLL per clean byte, so byte-count changes cannot move it)."""
    if not rows:
        return "(no results)"
    by: dict[tuple[str, str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        metric = "bpb" if r["mode"] == "clean_target" else "bpb_clean"
        by[(r["encoder"], r["dataset"], r["mode"])][f"{r['perturbation_id']}@{r['severity']:g}"].append(float(r[metric]))
    lines = [f"{'encoder':<22} {'dataset':<16} {'mode':<13} {'clean bpb':>9} {'worst Δ':>8}  worst perturbation"]
    for (enc, ds, mode), cells in sorted(by.items()):
        clean = float(np.mean(cells.get("clean@0", [math.nan])))
        worst, wname = -math.inf, "-"
        for k, v in cells.items():
            if not k.startswith("clean@") and float(np.mean(v)) - clean > worst:
                worst, wname = float(np.mean(v)) - clean, k
        ws = f"{worst:+.3f}" if math.isfinite(worst) else "-"
        lines.append(f"{enc:<22} {ds:<16} {mode:<13} {clean:9.3f} {ws:>8}  {wname}")
    lines.append("(Δ: bpb in clean_target mode, bpb_clean in full mode; lower is better)")
    return "\n".join(lines)
