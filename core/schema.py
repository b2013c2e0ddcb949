"""The results schema: the column lists of ``results.csv`` and ``buckets.csv``, in file order.

The harness writes exactly these columns (``harness.infra.results``); the reports read them
(``reports.load``), filling defaults for columns an older file lacks. Add a column here, once.
"""

from __future__ import annotations

# One row per cell (encoder × seed × dataset × perturbation × severity × mode).
RESULT_COLUMNS: list[str] = [
    "encoder", "encoder_name", "seed", "dataset", "language", "script", "perturbation",
    "perturbation_id", "severity", "mode", "n_docs", "n_bytes", "n_bytes_clean", "nll_nats", "bpb",
    "bpb_clean", "byte_ppl", "word_ppl", "token_ppl", "token_unit", "n_tokens", "n_segments",
    "bytes_per_segment", "segment_unit", "n_words", "edit_rate", "fingerprint",
    # docs/fragility.md: model | baseline (compressors); docs/mdm.md: objective, MC error of bpb;
    # docs/fragility.md: the stream's permutation and block size
    "kind", "objective", "bpb_se", "permutation", "block_bytes",
    # scaling sweeps (harness/config/scaling.py, docs/scaling.md); empty outside sweeps
    "flop_budget", "model_size", "params_non_embedding", "train_bytes", "train_flops",
    "train_flops_full_attn",
]
# One row per (cell, analysis, bucket).
BUCKET_COLUMNS: list[str] = [
    "encoder", "encoder_name", "seed", "dataset", "language", "perturbation", "perturbation_id",
    "severity", "mode", "analysis", "bucket", "n_words", "n_bytes", "nll_nats", "bpb",
]
# A cell is identified by these keys (language/script are properties of the dataset).
CELL_KEYS: list[str] = ["encoder", "seed", "dataset", "perturbation_id", "severity", "mode"]
# Text-valued columns of results.csv; every other column is numeric.
STRING_COLUMNS: list[str] = [
    "encoder", "encoder_name", "dataset", "language", "script", "perturbation", "perturbation_id",
    "mode", "token_unit", "segment_unit", "fingerprint", "objective", "model_size", "kind",
    "permutation",
]
NUMERIC_COLUMNS: list[str] = [c for c in RESULT_COLUMNS if c not in STRING_COLUMNS]
# Columns a results.csv must have to be read at all.
REQUIRED_RESULTS: list[str] = [
    "encoder", "seed", "dataset", "perturbation_id", "mode", "n_bytes", "nll_nats",
]
# Scoring modes, in order of preference for robustness summaries.
MODES: tuple[str, ...] = ("clean_target", "full")
CLEAN_ID = "clean"  # perturbation_id of the unperturbed cells
