"""A small synthetic run directory in the results-file format of docs/results.md.

Values are realistic in scale (≈1–3 bits/byte, BPE degrading faster than bytes under typos) and
fully determined by ``seed``; per-document sums are consistent with results.csv.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

LN2 = math.log(2.0)

DOCS = {
    "en-docs": ("en", "Latn", [
        "The quick brown fox jumps over the lazy dog. <script>alert(1)</script> & friends.",
        "Tokenizer-free models read raw bytes, so a typo changes one byte, not a whole token.",
        "Robustness is measured in bits per byte; lower is better, and the clean text is the baseline.",
        "Unbelievably, the reconstruction of governments happened walking through kindnesses.",
        "Byte pair encoding merges frequent pairs; rare words split into many short pieces.",
    ]),
    "ru-fortunes": ("ru", "Cyrl", [
        "Съешь же ещё этих мягких французских булок, да выпей чаю.",
        "Москва не сразу строилась, а терпение и труд всё перетрут.",
        "Лучше поздно, чем никогда; тише едешь — дальше будешь.",
        "Без труда не выловишь и рыбку из пруда, говорит пословица.",
    ]),
    "mul-mixed": ("mul", "Mixd", [
        "東京は日本の首都です。人口は多い。",
        "ภาษาไทยไม่มีการเว้นวรรคระหว่างคำ",
        "हिन्दी भारत की एक प्रमुख भाषा है।",
        "مرحبا بالعالم، هذه جملة عربية.",
        "שלום עולם, זה משפט בעברית.",
    ]),
}
PERTURBATIONS = [  # (perturbation name, id, severities)
    ("identity", "clean", [0.0]),
    ("typo.keyboard", "typo.keyboard", [0.05, 0.1, 0.2]),
    ("case.random", "case.random", [0.1, 0.3]),
]
ENCODERS = {  # label -> (registry name, clean bits/byte, sensitivity per edit, bytes/segment)
    "bytes": ("bytes", 1.9, 4.0, None),
    "bpe-4096": ("bpe", 1.7, 9.0, 3.4),
    # close to bpe-4096 on clean text (not distinguishable on these few documents)
    "blt": ("blt", 1.71, 8.0, 4.0),
}
SEGMENT_UNIT = {"bytes": "byte", "bpe": "token", "blt": "patch"}


def perturb(text: str, severity: float, rng: random.Random) -> str:
    """Replace a fraction ``severity`` of letters with a neighbouring letter (deterministic)."""
    out = []
    for ch in text:
        if ch.isalpha() and rng.random() < severity:
            out.append("x" if ch != "x" else "y")
        else:
            out.append(ch)
    return "".join(out)


def _segments(n: int, rng: random.Random, mean: float) -> list[int]:
    segs, left = [], n
    while left > 0:
        s = min(left, max(1, round(rng.gauss(mean, 1.2))))
        segs.append(s)
        left -= s
    return segs


@dataclass
class _Knobs:
    """``write_synthetic_run``'s options that shape each document's row (documented there)."""

    sample_docs: int
    buckets: bool
    improves: tuple[str, str] | None
    doc_noise_per_seed: bool
    doc_noise_per_cell: bool


@dataclass
class _Cell:
    """One cell's running sums over its documents (results.csv's columns)."""

    nll: float = 0.0
    nb: int = 0
    nbc: int = 0
    nt: int = 0
    ns: int = 0
    nw: int = 0
    er: float = 0.0


def _doc_row(k: _Knobs, cell: dict, level0: float, d: int, text: str, bucket_rows: list[dict]) -> tuple[dict, int]:
    """samples.jsonl's row of document ``d`` of ``cell`` (``level0``: the model's clean bits per
    byte with its seed's offset) and its number of segments (a sample row keeps them only for
    the first ``sample_docs``); its morphology buckets are appended to ``bucket_rows``."""
    label, seed, pid, sev, mode = cell["encoder"], cell["seed"], cell["perturbation_id"], cell["severity"], cell["mode"]
    name, _, sens, bps = ENCODERS[label]
    doc_id = f"{cell['dataset']}/{d}"
    prng = random.Random(f"{seed}|{pid}|{sev}|{doc_id}")
    pert = perturb(text, sev, prng)
    edits = sum(a != b for a, b in zip(text, pert))
    er = edits / max(1, len(text))
    if mode == "full":
        scored = pert
        nbc = len(text.encode("utf-8"))
    else:
        cut = len(text) // 2
        scored = text[cut:]
        nbc = len(scored.encode("utf-8"))
    sb = scored.encode("utf-8")
    noise_seed = seed if k.doc_noise_per_seed else "all"
    noise_cell = f"{pid}|{sev}" if k.doc_noise_per_cell else "all"
    brng = random.Random(f"{label}|{noise_seed}|{noise_cell}|{mode}|{doc_id}")
    hard = 0.4 if cell["dataset"] != "en-docs" else 0.0
    eff = -0.5 * sens if k.improves == (label, pid) else sens
    level = level0 + hard + eff * er * (1.0 if mode == "full" else 0.6)
    byte_nll = [max(0.01, brng.gammavariate(2.0, level / 2.0)) * LN2 for _ in sb]
    nll = sum(byte_nll)
    segs = (_segments(len(sb), brng, bps) if bps else None)
    n_tokens = len(segs) if segs and name == "bpe" else len(sb)
    n_words = len(scored.split())
    row = dict(cell, doc_id=doc_id, nll_nats=nll, n_bytes=len(sb), n_bytes_clean=nbc, n_tokens=n_tokens,
               n_words=n_words, edit_rate=er, text=text, truncated=False, text_perturbed=pert)
    if d < k.sample_docs:
        row.update(scored_text=sb.decode("utf-8", "surrogateescape"), byte_nll=byte_nll)
        if segs:
            row["segments"] = segs
    if k.buckets and pid == "clean" and mode == "full":
        for bucket, share in (("1 morph", 0.5), ("2 morphs", 0.3), ("3+ morphs", 0.2)):
            bucket_rows.append(dict(
                cell, analysis="morphology", bucket=bucket, n_words=max(1, round(n_words * share)),
                n_bytes=max(1, round(len(sb) * share)),
                nll_nats=nll * share * (1 + 0.1 * len(bucket) * (bps or 1) / 3)))
    return row, len(segs) if segs else len(sb)


def _result_row(cell: dict, agg: _Cell, n_docs: int) -> dict:
    """results.csv's row of ``cell`` from its documents' sums."""
    name = cell["encoder_name"]
    bpb = agg.nll / (LN2 * agg.nb)
    return dict(
        cell, n_docs=n_docs, n_bytes=agg.nb, n_bytes_clean=agg.nbc, nll_nats=agg.nll, bpb=bpb,
        bpb_clean=agg.nll / (LN2 * agg.nbc), byte_ppl=2**bpb,
        word_ppl=math.exp(agg.nll / agg.nw) if agg.nw else "", token_ppl=math.exp(agg.nll / agg.nt),
        token_unit="token" if name == "bpe" else "byte", segment_unit=SEGMENT_UNIT[name], n_tokens=agg.nt,
        n_segments=agg.ns, bytes_per_segment=agg.nb / agg.ns, n_words=agg.nw, edit_rate=agg.er / n_docs,
        fingerprint="sha256:" + "ab" * 8)


def _write_buckets(path: Path, bucket_rows: list[dict]) -> None:
    """buckets.csv: the documents' bucket rows summed per cell and bucket."""
    agg_b: dict[tuple, dict] = {}
    for r in bucket_rows:
        key = tuple((k, r[k]) for k in ("encoder", "encoder_name", "seed", "dataset", "language", "script",
                                        "perturbation", "perturbation_id", "severity", "mode", "analysis",
                                        "bucket"))
        a = agg_b.setdefault(key, dict(n_words=0, n_bytes=0, nll_nats=0.0))
        for k in a:
            a[k] += r[k]
    rows = [dict(dict(k), **v, bpb=v["nll_nats"] / (LN2 * v["n_bytes"])) for k, v in agg_b.items()]
    _write_csv(path / "buckets.csv", rows)


def _run_json(encoders: tuple[str, ...], seeds: tuple[int, ...]) -> dict:
    """run.json's facts: per encoder its sizes, FLOPs and per-seed training facts."""
    enc = {}
    for label in encoders:
        name, base, sens, bps = ENCODERS[label]
        emb = 257 * 128 if bps is None else 4096 * 128
        seeds_facts = {}
        for seed in seeds:
            seeds_facts[str(seed)] = dict(
                fit={"bytes": 1_000_000, "flops": 0, "seconds": 0.7} if bps else {},
                train=dict(bytes=1_000_000, steps=122, seconds=40.0 / (bps or 1) * 2 + seed,
                           bytes_per_s=25_000.0 * (bps or 1) / 2, peak_mem_bytes=400 * 2**20,
                           peak_mem_kind="process_max_rss", final_loss_bpb=base,
                           loss_curve=[[i * 8192 * 10, base * (1 + 2.0 / (1 + i + seed))] for i in range(13)]))
        # the harness layout: per-seed training facts under "seeds"
        enc[label] = dict(
            name=name, config={"vocab_size": 4096} if bps else {}, seeds=seeds_facts,
            params_total=800_000 + emb, params_embedding=emb, params_non_embedding=800_000,
            flops_per_byte_train=3 * 1.6e6 / (bps or 1), flops_per_byte_infer=1.6e6 / (bps or 1),
            describe={"receptive_field_bytes": 256, "bytes_per_token_train": bps or 1.0})
    return dict(schema_version=1, tokbench_version="0.1.0", created="2026-11-30T03:00:00Z",
                suite={"name": "synthetic", "seeds": list(seeds),
                       "budget": {"train_bytes": 1_000_000, "context_bytes": 256},
                       "note": "<b>not bold</b>",
                       "description": "Synthetic fixture — <i>made-up</i> numbers."},
                git_sha="0123456789abcdef", packages={"numpy": "2.4.6"},
                hardware={"device": "cpu", "cpu_count": 2},
                data={"en-docs": {"fingerprint": "sha256:cafe", "n_docs": 5, "n_bytes": 420,
                                  "provenance": "synthetic <fixture>"}},
                encoders=enc, timings={"total_seconds": 93.5})


def write_synthetic_run(
    path: Path,
    *,
    encoders: tuple[str, ...] = ("bytes", "bpe-4096"),
    seeds: tuple[int, ...] = (0, 1),
    modes: tuple[str, ...] = ("full", "clean_target"),
    datasets: tuple[str, ...] = ("en-docs", "ru-fortunes", "mul-mixed"),
    samples: bool = True,
    buckets: bool = True,
    run_json: bool = True,
    sample_docs: int = 2,
    perturbations: list[tuple[str, str, list[float]]] | None = None,
    improves: tuple[str, str] | None = None,
    seed_sd: float = 0.03,
    doc_noise_per_seed: bool = True,
    doc_noise_per_cell: bool = True,
) -> Path:
    """Write results.csv, samples.jsonl, buckets.csv and run.json under ``path``.

    improves: (encoder label, perturbation id) whose perturbation *lowers* that encoder's NLL
    (an anomaly the report must flag). seed_sd: the sd of each trained model's offset (bits/byte),
    the training variance between seeds. doc_noise_per_seed: whether a document's byte-level noise
    is drawn anew for every seed (else it is the same in every seed: a document × encoder
    effect, as between well-trained models). doc_noise_per_cell: whether it is drawn anew for
    every perturbation and severity (else a document keeps its noise under every perturbation,
    scaled by the level: a hard document stays hard, so ΔBPB carries the perturbation's effect
    with little noise)."""
    path.mkdir(parents=True, exist_ok=True)
    k = _Knobs(sample_docs, buckets, improves, doc_noise_per_seed, doc_noise_per_cell)
    results: list[dict] = []
    sample_rows: list[dict] = []
    bucket_rows: list[dict] = []
    for label in encoders:
        name, base, _, _ = ENCODERS[label]
        for seed in seeds:
            seed_offset = random.Random(f"{label}|{seed}").gauss(0, seed_sd)
            for dataset in datasets:
                lang, script, texts = DOCS[dataset]
                for pname, pid, severities in perturbations or PERTURBATIONS:
                    for sev, mode in itertools.product(severities, modes):
                        cell = dict(encoder=label, encoder_name=name, seed=seed, dataset=dataset, language=lang,
                                    script=script, perturbation=pname, perturbation_id=pid, severity=sev, mode=mode)
                        agg = _Cell()
                        for d, text in enumerate(texts):
                            row, n_segments = _doc_row(k, cell, base + seed_offset, d, text, bucket_rows)
                            sample_rows.append(row)
                            agg.nll += row["nll_nats"]
                            agg.nb += row["n_bytes"]
                            agg.nbc += row["n_bytes_clean"]
                            agg.nt += row["n_tokens"]
                            agg.ns += n_segments
                            agg.nw += row["n_words"]
                            agg.er += row["edit_rate"]
                        results.append(_result_row(cell, agg, len(texts)))
    _write_csv(path / "results.csv", results)
    if samples:
        with (path / "samples.jsonl").open("w", encoding="utf-8") as f:
            for r in sample_rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
    if buckets and bucket_rows:
        _write_buckets(path, bucket_rows)
    if run_json:
        (path / "run.json").write_text(json.dumps(_run_json(encoders, seeds), indent=1, ensure_ascii=False),
                                       encoding="utf-8")
    return path


def _write_csv(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)


def write_simple_run(path: Path, encoders: list[str], seeds: list[int], n_docs: int,
               bpb_of: Callable[[str, int, str, int], float],
               cells: tuple[tuple[str, float], ...] = (("clean", 0.0),),
               doc_bytes: list[int] | None = None) -> Path:
    """results.csv and samples.jsonl of one eval set in full mode, every document 100 bytes (or
    ``doc_bytes[doc]``); ``bpb_of(encoder, seed, perturbation_id, doc)`` is a document's bits per
    byte (its NLL is that × ln 2 × its bytes)."""
    path.mkdir(parents=True)
    results, samples = [], []
    for enc in encoders:
        for seed in seeds:
            for pid, sev in cells:
                nll_sum = 0.0
                for d in range(n_docs):
                    nb = doc_bytes[d] if doc_bytes is not None else 100
                    nll = bpb_of(enc, seed, pid, d) * LN2 * nb
                    nll_sum += nll
                    samples.append(dict(
                        encoder=enc, seed=seed, dataset="ds", perturbation_id=pid,
                        perturbation="identity" if pid == "clean" else pid, severity=sev,
                        mode="full", doc_id=f"d{d}", nll_nats=nll, n_bytes=nb, n_bytes_clean=nb,
                        n_tokens=nb, n_words=20, edit_rate=sev, language="en", script="Latn"))
                n_bytes = sum(doc_bytes) if doc_bytes is not None else 100 * n_docs
                results.append(dict(
                    encoder=enc, encoder_name=enc, seed=seed, dataset="ds", language="en",
                    script="Latn", perturbation="identity" if pid == "clean" else pid,
                    perturbation_id=pid, severity=sev, mode="full", n_docs=n_docs,
                    n_bytes=n_bytes, n_bytes_clean=n_bytes, nll_nats=nll_sum,
                    bpb=nll_sum / (LN2 * n_bytes), edit_rate=sev, objective="ar",
                    n_tokens=n_bytes, n_segments=n_bytes))
    with open(path / "results.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(results[0]))
        w.writeheader()
        w.writerows(results)
    (path / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in samples),
                                        encoding="utf-8")
    return path


def set_fingerprint(run_dir: Path, fingerprint: str) -> Path:
    """Give every row of ``run_dir``'s results.csv the eval-set ``fingerprint`` (the column the
    harness writes, docs/results.md), so runs can be told to hold the same or different data."""
    path = Path(run_dir) / "results.csv"
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["fingerprint"] = fingerprint
    _write_csv(path, rows)
    return Path(run_dir)


if __name__ == "__main__":  # python -m tests.reports.synthetic OUT_DIR — for looking at a report
    import sys

    write_synthetic_run(Path(sys.argv[1]))
