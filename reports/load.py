"""Read a run directory's results files (docs/results.md) into tables.

Only ``results.csv`` is required. ``samples.jsonl`` (per-document NLL: confidence intervals,
paired tests, surprisal text), ``buckets.csv`` (morphology) and ``run.json`` (efficiency,
provenance) are optional; missing optional columns get neutral defaults so older or partial runs
still render. Units as in the files: NLL in nats, sizes in UTF-8 bytes.
"""

from __future__ import annotations

import json
import math
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from core.metrics import bpb
from core.schema import (
    CELL_KEYS,
    CLEAN_ID,
    MODES,
    NUMERIC_COLUMNS,
    REQUIRED_RESULTS,
    STRING_COLUMNS,
)
from reports.fragility import fill_columns, split_baselines

# Sample fields kept as table columns; texts and per-byte lists are kept only for displayed samples.
SAMPLE_SCALARS = CELL_KEYS + [
    "doc_id",
    "language",
    "script",
    "perturbation",
    "nll_nats",
    "n_bytes",
    "n_bytes_clean",
    "n_tokens",
    "n_words",
    "edit_rate",
]


@dataclass
class RunData:
    """One run (or several merged by ``merge_runs``).

    results: one row per cell (results.csv) with ``metric_bytes`` added: the denominator used for
        robustness (``n_bytes`` in clean_target mode, ``n_bytes_clean`` in full mode).
    samples: one row per (cell, document) with the scalar fields; may be empty.
    texts: the samples that carry ``scored_text`` + ``byte_nll`` (full dicts), for surprisal text.
    buckets: buckets.csv or an empty frame. run: run.json or {} (several under ``runs`` if merged).
    """

    path: Path
    results: pd.DataFrame
    samples: pd.DataFrame
    texts: list[dict[str, Any]] = field(default_factory=list)
    buckets: pd.DataFrame = field(default_factory=pd.DataFrame)
    run: dict[str, Any] = field(default_factory=dict)
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)  # run name -> run.json
    warnings: list[str] = field(default_factory=list)
    # rows with kind = baseline (compressors), kept apart from ``results`` so that no table,
    # winner statement or pairwise test treats them as encoders (reports.fragility)
    baselines: pd.DataFrame = field(default_factory=pd.DataFrame)


def _numeric(df: pd.DataFrame, col: str, fname: str) -> pd.Series:
    """Column ``col`` as floats ("" is missing); a value that is not a finite number (``abc``,
    ``inf``, ``1e400``) is an error naming the file, the column and the row (its line)."""
    raw = df[col]
    out = pd.to_numeric(raw.replace("", np.nan), errors="coerce")
    bad = out.isna() & raw.notna() & (raw.astype(str).str.strip() != "")
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise ValueError(f"{fname}: column {col!r} row {row + 2}: not a number: {raw.iloc[row]!r}")
    inf = np.isinf(out.to_numpy(dtype=float))
    if inf.any():
        row = int(np.flatnonzero(inf)[0])
        raise ValueError(f"{fname}: column {col!r} row {row + 2}: not a finite number: {raw.iloc[row]!r}")
    return out.astype(float)


def _first_row(mask: pd.Series) -> int:
    """The CSV line of the first True row of ``mask`` (line 1 is the header)."""
    return int(np.flatnonzero(mask.to_numpy())[0]) + 2


def read_table(path: Path, required: list[str]) -> pd.DataFrame:
    """Read a results CSV with every field as text first (so a language code ``na`` stays a
    string), then convert the known numeric columns, naming the file/column/row on bad input."""
    try:
        # surrogateescape: the harness may carry undecodable input bytes into CSV cells
        df = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8",
                         encoding_errors="surrogateescape")
    except pd.errors.ParserError as e:
        raise ValueError(f"{path}: not a valid CSV: {e}") from e
    except pd.errors.EmptyDataError as e:
        raise ValueError(f"{path}: empty file") from e
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
    for col in df.columns:
        if col in NUMERIC_COLUMNS:
            df[col] = _numeric(df, col, str(path))
        else:  # the writer's OWASP prefix before a formula character (harness.infra.writes.csv_text)
            df[col] = df[col].str.replace(r"^'(?=[=+\-@\t\r])", "", regex=True)
    return df


def _fill_results(df: pd.DataFrame, fname: str) -> pd.DataFrame:
    if not len(df):
        raise ValueError(f"{fname}: no rows (a header without cells)")
    df = df.copy()
    for col in STRING_COLUMNS:
        if col not in df.columns:
            df[col] = ""
    if (df["encoder_name"] == "").all():
        df["encoder_name"] = df["encoder"]
    df.loc[df["perturbation"] == "", "perturbation"] = df["perturbation_id"]
    for col in ("seed", "n_bytes", "nll_nats"):
        if df[col].isna().any():
            row = int(np.flatnonzero(df[col].isna().to_numpy())[0])
            raise ValueError(f"{fname}: column {col!r} row {row + 2}: empty")
    whole = df["seed"] == df["seed"].round()
    if not (whole & (df["seed"] >= 0)).all():
        row = _first_row(~(whole & (df["seed"] >= 0)))
        raise ValueError(f"{fname}: column 'seed' row {row}: not a seed (an integer >= 0): {df['seed'].iloc[row - 2]:g}")
    df["seed"] = df["seed"].astype(int)
    if "severity" not in df.columns:
        df["severity"] = 0.0
    df["severity"] = df["severity"].fillna(0.0)
    if "n_bytes_clean" not in df.columns:
        df["n_bytes_clean"] = df["n_bytes"]
    df["n_bytes_clean"] = df["n_bytes_clean"].fillna(df["n_bytes"])
    for col in NUMERIC_COLUMNS:
        if col not in df.columns:
            df[col] = np.nan
    # Runs before issue #18 trained every encoder autoregressively and scored exactly.
    df.loc[df["objective"] == "", "objective"] = "ar"
    df.loc[df["objective"] == "ar", "bpb_se"] = df.loc[df["objective"] == "ar", "bpb_se"].fillna(0.0)
    bad_mode = ~df["mode"].isin(MODES)
    if bad_mode.any():
        raise ValueError(
            f"{fname}: column 'mode' has {df['mode'][bad_mode].iloc[0]!r}; "
            f"expected one of {', '.join(MODES)}"
        )
    for col in ("n_bytes", "n_bytes_clean"):
        if (df[col] <= 0).any():
            raise ValueError(f"{fname}: column {col!r} row {_first_row(df[col] <= 0)}: must be > 0, "
                             f"got {df[col][df[col] <= 0].iloc[0]:g}")
    df["bpb"] = bpb(df["nll_nats"], df["n_bytes"])
    df["bpb_clean"] = bpb(df["nll_nats"], df["n_bytes_clean"])
    df["metric_bytes"] = np.where(df["mode"] == "full", df["n_bytes_clean"], df["n_bytes"])
    df["family"] = df["perturbation"].str.split(".").str[0]
    dup = df.duplicated(CELL_KEYS)
    if dup.any():
        key = df.loc[dup, CELL_KEYS].iloc[0].to_dict()
        raise ValueError(f"{fname}: duplicate cell {key}")
    return df


# First word of a letter's Unicode name -> ISO 15924 code (enough to label documents of a mixed
# eval set; the harness has the full detector, but reports must not import harness).
_SCRIPT_WORDS = {
    "LATIN": "Latn", "CYRILLIC": "Cyrl", "GREEK": "Grek", "ARABIC": "Arab", "HEBREW": "Hebr",
    "DEVANAGARI": "Deva", "BENGALI": "Beng", "GURMUKHI": "Guru", "GUJARATI": "Gujr",
    "TAMIL": "Taml", "TELUGU": "Telu", "KANNADA": "Knda", "MALAYALAM": "Mlym", "SINHALA": "Sinh",
    "THAI": "Thai", "LAO": "Laoo", "KHMER": "Khmr", "MYANMAR": "Mymr", "TIBETAN": "Tibt",
    "GEORGIAN": "Geor", "ARMENIAN": "Armn", "ETHIOPIC": "Ethi", "CJK": "Hani",
    "HIRAGANA": "Hira", "KATAKANA": "Kana", "HANGUL": "Hang", "SYRIAC": "Syrc", "THAANA": "Thaa",
}


def dominant_script(text: str, max_chars: int = 4000) -> str:
    """ISO 15924 code of the most frequent script among the letters of ``text`` ("" if none);
    Han mixed with kana is Japanese (Jpan), Han with Hangul Korean (Kore)."""
    counts: dict[str, int] = {}
    for ch in text[:max_chars]:
        if not ch.isalpha():
            continue
        word = unicodedata.name(ch, "").split(" ", 1)[0]
        code = _SCRIPT_WORDS.get(word)
        if code:
            counts[code] = counts.get(code, 0) + 1
    if not counts:
        return ""
    top = max(counts, key=lambda c: counts[c])
    kana = counts.get("Hira", 0) + counts.get("Kana", 0)
    if top in ("Hani", "Hira", "Kana") and kana:
        return "Jpan"
    if top in ("Hani", "Hang") and counts.get("Hang", 0) and counts.get("Hani", 0):
        return "Kore"
    return top


# samples.jsonl is parsed in forked processes from this size on, a task per PARSE_CHUNK_BYTES
# (at least): a standard seed's 295 MB (252,000 rows, per-byte lists in the displayed ones) took
# 5.8 s of JSON parsing on one core of the H200 host, a quarter of its report (BENCHMARKS.md);
# a small file is not worth a fork.
PARALLEL_PARSE_BYTES = 32 * 2**20
PARSE_CHUNK_BYTES = 16 * 2**20


class _BadLine(ValueError):
    """A bad samples.jsonl line: "PATH: line N: WHAT", with N and WHAT kept apart (a forked
    parser numbers lines within its chunk; the parent renumbers them for the whole file)."""

    def __init__(self, path: Path, lineno: int, what: str) -> None:
        super().__init__(f"{path}: line {lineno}: {what}")
        self.lineno, self.what = lineno, what


class _Parsed:
    """One chunk of samples.jsonl, parsed: ``columns`` (``SAMPLE_SCALARS`` of each line, a list
    per column; equal strings are one object, so a chunk crosses a pipe as references, not
    copies), texts (the lines with ``scored_text`` and ``byte_nll``, whole), lines read, and the
    rows whose script comes from their document's text (mixed sets): ``pending`` (row index,
    text index or -1, document key, the row's own script) and ``firsts`` (per document key, the
    script of its first row in the chunk). ``_resolve`` fills those scripts in with each
    document's first row in the whole file, as one pass over the file would."""

    def __init__(self) -> None:
        self.columns: dict[str, list[Any]] = {k: [] for k in SAMPLE_SCALARS}
        self.n_rows = 0
        self.texts: list[dict[str, Any]] = []
        self.n_lines = 0
        self.pending: list[tuple[int, int, tuple, str]] = []
        self.firsts: dict[tuple, str] = {}


def _is_number(v: Any) -> bool:
    return type(v) in (int, float) and math.isfinite(v)


_NUMBER_TYPES = {int, float, type(None)}


def _numbers_or_nulls(v: list[Any]) -> bool:
    """Every item a finite number or null, checked at C speed (a per-byte list holds up to 64 Ki)."""
    if not set(map(type, v)) <= _NUMBER_TYPES:
        return False
    return not np.isinf(np.asarray(v, dtype=float)).any()  # null -> nan


# samples.jsonl keys -> (check, what the value must be); a missing optional key is not checked
_SAMPLE_TYPES: dict[str, tuple[Any, str]] = {
    "encoder": (lambda v: type(v) is str, "a string"),
    "perturbation_id": (lambda v: type(v) is str, "a string"),
    "doc_id": (lambda v: type(v) in (str, int), "a string"),
    "mode": (lambda v: v in MODES, f"one of {', '.join(MODES)}"),
    "seed": (lambda v: type(v) is int and v >= 0, "an integer >= 0"),
    "nll_nats": (_is_number, "a finite number"),
    "n_bytes": (lambda v: _is_number(v) and v > 0, "a finite number > 0"),
    "n_bytes_clean": (lambda v: v is None or _is_number(v) and v > 0, "a finite number > 0 or null"),
    "n_tokens": (lambda v: v is None or _is_number(v), "a finite number or null"),
    "n_words": (lambda v: v is None or _is_number(v), "a finite number or null"),
    "edit_rate": (lambda v: v is None or _is_number(v), "a finite number or null"),
    "severity": (lambda v: v is None or _is_number(v), "a finite number or null"),
    "scored_text": (lambda v: v is None or type(v) is str, "a string or null"),
    # non-finite per-byte NLLs are written as null (harness.infra.writes._clean_floats)
    "byte_nll": (lambda v: v is None or type(v) is list and _numbers_or_nulls(v),
                 "a list of numbers (or nulls) or null"),
}


def _sample_problem(obj: dict[str, Any]) -> str | None:
    """Why a samples.jsonl object does not hold the types the report reads (None when it does),
    naming the key and the value."""
    for key, (ok, what) in _SAMPLE_TYPES.items():
        if key in obj and not ok(obj[key]):
            v = obj[key]
            shown = repr(v) if not isinstance(v, (list, dict)) else f"a {type(v).__name__}"
            if isinstance(v, list):
                bad = next((x for x in v if not (x is None or _is_number(x))), None)
                shown = f"a list holding {bad!r}" if key == "byte_nll" else shown
            return f"key {key!r}: expected {what}, got {shown[:80]}"
    return None


def _parse_sample_lines(lines: Any, path: Path) -> _Parsed:
    """Parse an iterable of samples.jsonl lines (numbered from 1 in errors: a bad line is a
    ``_BadLine`` naming the file and its line)."""
    out = _Parsed()
    strings: dict[str, str] = {}
    cols = [out.columns[k] for k in SAMPLE_SCALARS]
    for n, line in enumerate(lines, 1):
        out.n_lines = n
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise _BadLine(path, n, f"invalid JSON ({e.msg})") from e
        except RecursionError:
            raise _BadLine(path, n, "JSON nested too deeply") from None
        if not isinstance(obj, dict):
            raise _BadLine(path, n, "expected a JSON object")
        missing = [k for k in ("encoder", "seed", "perturbation_id", "doc_id", "nll_nats",
                               "n_bytes", "mode") if k not in obj]
        if missing:
            raise _BadLine(path, n, f"missing key(s) {', '.join(missing)}")
        problem = _sample_problem(obj)
        if problem:
            raise _BadLine(path, n, problem)
        row = {k: obj.get(k) for k in SAMPLE_SCALARS}
        has_text = obj.get("scored_text") is not None and obj.get("byte_nll") is not None
        # Per-document script: the harness records the eval set's script (Mixd for mixed
        # sets); a document's own script comes from doc_script or, for mixed sets, from the text
        # of the document's first row (``_resolve``).
        if obj.get("doc_script"):
            row["script"] = obj["doc_script"]
        elif (row.get("script") or "") in ("", "Mixd", "Zyyy"):
            key = (obj.get("dataset"), obj.get("doc_id"))
            if key not in out.firsts:
                out.firsts[key] = dominant_script(str(obj.get("text") or obj.get("scored_text") or ""))
            out.pending.append((out.n_rows, len(out.texts) if has_text else -1, key, row.get("script") or ""))
        for col, v in zip(cols, row.values()):  # row's keys are SAMPLE_SCALARS, in order
            col.append(strings.setdefault(v, v) if type(v) is str else v)
        out.n_rows += 1
        if has_text:
            out.texts.append({**obj, "script": row["script"]})
    return out


def _resolve(parts: list[_Parsed]) -> tuple[dict[str, list[Any]], list[dict[str, Any]]]:
    """The columns and texts of ``parts`` (chunks in file order), pending scripts filled in from
    each document's first row in the file."""
    first: dict[tuple, str] = {}
    for part in parts:
        for key, script in part.firsts.items():
            first.setdefault(key, script)
    columns: dict[str, list[Any]] = {k: [] for k in SAMPLE_SCALARS}
    texts: list[dict[str, Any]] = []
    for part in parts:
        scripts = part.columns["script"]
        for i, t, key, own in part.pending:
            scripts[i] = first[key] or own
            if t >= 0:
                part.texts[t]["script"] = scripts[i]
        for k in SAMPLE_SCALARS:
            columns[k].extend(part.columns[k])
        texts.extend(part.texts)
    return columns, texts


def _line_chunks(path: Path, size: int, chunk: int) -> list[tuple[int, int]]:
    """Byte ranges [a, b) that cover the file, each starting at a line's start (after a b"\n")
    and about ``chunk`` bytes long."""
    bounds = [0]
    with path.open("rb") as f:
        while bounds[-1] + chunk < size:
            f.seek(bounds[-1] + chunk)
            f.readline()  # to the end of the line the cut fell in
            if f.tell() >= size:
                break
            bounds.append(f.tell())
    bounds.append(size)
    return list(zip(bounds, bounds[1:]))


def _read_samples(path: Path, processes: int | None = None) -> tuple[pd.DataFrame, list[dict[str, Any]]]:
    """samples.jsonl as (rows, texts); in forked processes (``reports.pool.fork_map``, one task
    per line-aligned chunk, results put back in file order) when the file is at least
    ``PARALLEL_PARSE_BYTES`` and ``processes`` (default ``report_processes()``) is above 1 — the
    same rows, texts and errors as one process (tests/reports/test_report_load.py)."""
    import io

    size = path.stat().st_size
    if processes is None:
        from reports.pool import report_processes

        processes = report_processes()
    if processes <= 1 or size < PARALLEL_PARSE_BYTES:
        with path.open(encoding="utf-8", errors="surrogateescape") as f:
            columns, texts = _resolve([_parse_sample_lines(f, path)])
    else:
        from reports.pool import fork_map

        chunks = _line_chunks(path, size, max(PARSE_CHUNK_BYTES, -(-size // (4 * processes))))

        def parse(i: int) -> _Parsed | tuple[int, str]:
            a, b = chunks[i]
            with path.open("rb") as f:
                f.seek(a)
                raw = f.read(b - a)
            # text mode as the serial reader's (universal newlines): the same lines, so the same
            # numbers; a chunk starts after a b"\n", which ends a line in text mode too
            lines = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8", errors="surrogateescape")
            try:
                return _parse_sample_lines(lines, path)
            except _BadLine as e:  # numbered within the chunk: the parent renumbers it
                return e.lineno, e.what

        parts = fork_map(parse, len(chunks), processes, what="samples.jsonl parsing")
        before = 0
        for part in parts:
            if isinstance(part, tuple):  # the file's first bad line, numbered in the whole file
                raise _BadLine(path, before + part[0], part[1])
            before += part.n_lines
        columns, texts = _resolve(parts)  # type: ignore[arg-type]  # no error among them
    df = pd.DataFrame(columns, columns=SAMPLE_SCALARS)
    if len(df):
        for col in ("dataset", "language", "script", "perturbation", "doc_id"):
            df[col] = df[col].fillna("").astype(str)
        df["seed"] = df["seed"].astype(int)
        df["severity"] = pd.to_numeric(df["severity"]).fillna(0.0).astype(float)
        for col in ("nll_nats", "n_bytes", "n_bytes_clean", "n_tokens", "n_words", "edit_rate"):
            df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
        df["n_bytes_clean"] = df["n_bytes_clean"].fillna(df["n_bytes"])
        df["metric_bytes"] = np.where(df["mode"] == "full", df["n_bytes_clean"], df["n_bytes"])
    else:
        df["metric_bytes"] = pd.Series(dtype=float)
    return df, texts


def load_run(run_dir: Path, processes: int | None = None) -> RunData:
    """Load a run directory. Raises ValueError naming the file and key on bad input.
    processes: how many processes may parse a large samples.jsonl (``_read_samples``)."""
    run_dir = Path(run_dir)
    res_path = run_dir / "results.csv"
    if not res_path.is_file():
        raise ValueError(f"{res_path}: not found (is {run_dir} a tokbench run directory?)")
    results = _fill_results(read_table(res_path, REQUIRED_RESULTS), str(res_path))
    results, baselines = split_baselines(fill_columns(results))
    warnings: list[str] = []

    samples_path = run_dir / "samples.jsonl"
    if samples_path.is_file():
        samples, texts = _read_samples(samples_path, processes)
    else:
        samples, texts = pd.DataFrame(columns=SAMPLE_SCALARS + ["metric_bytes"]), []
        warnings.append("samples.jsonl not found: no confidence intervals or paired tests.")
    buckets = pd.DataFrame()
    b_path = run_dir / "buckets.csv"
    if b_path.is_file():
        buckets = read_table(b_path, ["encoder", "bucket", "n_words", "nll_nats", "n_bytes"])
        for col in ("perturbation_id", "mode", "analysis", "dataset"):
            if col not in buckets.columns:
                buckets[col] = {"perturbation_id": CLEAN_ID, "mode": "full"}.get(col, "")

    run: dict[str, Any] = {}
    r_path = run_dir / "run.json"
    if r_path.is_file():
        try:
            run = json.loads(r_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise ValueError(f"{r_path}: invalid JSON ({e.msg} at line {e.lineno})") from e
        except RecursionError:
            raise ValueError(f"{r_path}: JSON nested too deeply") from None
        if not isinstance(run, dict):
            raise ValueError(f"{r_path}: expected a JSON object")
    else:
        warnings.append("run.json not found: no efficiency table or provenance.")
    name = _run_name(run_dir)
    return RunData(run_dir, results, samples, texts, buckets, run, {name: run}, warnings, baselines)


def _run_name(run_dir: Path) -> str:
    return Path(run_dir).resolve().name or str(run_dir)


def _fingerprint_of(run: dict[str, Any], dataset: str) -> str | None:
    """The fingerprint run.json records for an eval set, or None. The harness writes
    ``data["eval:<name>"]``; older or hand-made files use ``data[<name>]`` or
    ``data["eval"][<name>]``."""
    data = run.get("data")
    if not isinstance(data, dict):
        return None
    nested = data.get("eval")
    for entry in (data.get(f"eval:{dataset}"), data.get(dataset),
                  nested.get(dataset) if isinstance(nested, dict) else None):
        if isinstance(entry, dict) and entry.get("fingerprint"):
            return str(entry["fingerprint"])
    return None


def eval_fingerprints(run: RunData) -> dict[str, str | None]:
    """Eval set name -> fingerprint of its documents (None where the run records none).

    results.csv's ``fingerprint`` column (docs/results.md) comes first: it is written with every
    cell, so it is what was scored; run.json's ``data`` section is the fallback. Several values
    for one eval set (cells from different data) are joined, so they match no single one."""
    frames = [f for f in (run.results, run.baselines, run.samples) if "dataset" in f.columns]
    datasets = list(dict.fromkeys(str(d) for f in frames for d in f["dataset"]))
    rows = [f for f in (run.results, run.baselines) if {"dataset", "fingerprint"} <= set(f.columns)]
    out: dict[str, str | None] = {}
    for ds in datasets:
        fps = sorted({str(x) for f in rows for x in f.loc[f["dataset"] == ds, "fingerprint"]
                      if isinstance(x, str) and x})
        out[ds] = ",".join(fps) if fps else _fingerprint_of(run.run, ds)
    return out


def _short(fp: str | None) -> str:
    return "none recorded" if not fp else fp.split(":", 1)[-1][:12] + "…"


def unpaired_eval_sets(names: list[str], runs: list[RunData]
                       ) -> tuple[dict[str, dict[str, str]], list[str]]:
    """Eval sets that must not be paired across runs, and a warning for each.

    An eval set name shared by runs pairs their documents by (seed, eval set, doc id); that is
    only honest when the runs scored the same documents, i.e. the same fingerprint. Where the
    fingerprints differ, or a run records none (nothing shows the text is the same), runs are
    grouped by fingerprint (a run without one is a group of its own) and every group's copy of
    the eval set is renamed ``<run>[+<run>…]/<eval set>``, so no document pairs across groups.
    Returns (run name -> {eval set -> new name}, warnings)."""
    fps = {n: eval_fingerprints(r) for n, r in zip(names, runs)}
    rename: dict[str, dict[str, str]] = {n: {} for n in names}
    warnings: list[str] = []
    for ds in dict.fromkeys(ds for n in names for ds in fps[n]):
        holders = [n for n in names if ds in fps[n]]
        groups: dict[str, list[str]] = {}
        for n in holders:
            fp = fps[n][ds]
            groups.setdefault(fp if fp else f"\0{n}", []).append(n)  # no fingerprint: alone
        if len(holders) < 2 or len(groups) == 1:
            continue
        shown = []
        for members in groups.values():
            label = "+".join(members) + "/" + ds
            shown.append(label)
            for n in members:
                rename[n][ds] = label
        which = ", ".join(f"{n}: {_short(fps[n][ds])}" for n in holders)
        warnings.append(
            f"Runs {', '.join(holders)} evaluate eval set '{ds}' on different or unverifiable "
            f"data (fingerprints {which}). Its documents are NOT paired across these runs: it is "
            f"shown as {', '.join(repr(s) for s in shown)}, and encoders of different runs are "
            "not compared on it (no shared documents).")
    return rename, warnings


def merge_runs(runs: list[RunData]) -> RunData:
    """Merge runs for ``tokbench compare``: encoder labels become ``<run>/<label>`` so the same
    encoder in two runs stays two lines; documents pair by (seed, dataset, doc_id) only where the
    runs scored the same data (``unpaired_eval_sets``: an eval set whose fingerprints differ is
    renamed per run, with a warning first in ``warnings``)."""
    if not runs:
        raise ValueError("compare: no run directories given")
    names = [_run_name(r.path) for r in runs]
    # Disambiguate equal directory names (e.g. a/run and b/run) by their parent.
    if len(set(names)) < len(names):
        names = [f"{r.path.resolve().parent.name}-{n}" for r, n in zip(runs, names)]
    if len(set(names)) < len(names):
        names = [f"{n}#{i + 1}" for i, n in enumerate(names)]
    rename, data_warn = unpaired_eval_sets(names, runs)
    res, sam, buc, texts, warn, base = [], [], [], [], list(data_warn), []
    for name, r in zip(names, runs):
        def relabel(df: pd.DataFrame, name: str = name) -> pd.DataFrame:
            df = df.copy()
            if "encoder" in df.columns and len(df):
                df["encoder"] = name + "/" + df["encoder"].astype(str)
            if rename[name] and "dataset" in df.columns and len(df):
                df["dataset"] = df["dataset"].astype(str).replace(rename[name])
            return df

        res.append(relabel(r.results).assign(run=name))
        if len(r.baselines):
            base.append(relabel(r.baselines).assign(run=name))
        sam.append(relabel(r.samples))
        if len(r.buckets):
            buc.append(relabel(r.buckets))
        for t in r.texts:
            t = {**t, "encoder": f"{name}/{t['encoder']}"}
            if str(t.get("dataset")) in rename[name]:
                t["dataset"] = rename[name][str(t["dataset"])]
            texts.append(t)
        warn += [f"{name}: {w}" for w in r.warnings]
    run_objs = {n: r.run for n, r in zip(names, runs)}
    encoders = {}
    for n, r in run_objs.items():
        for label, e in (r.get("encoders") or {}).items():
            encoders[f"{n}/{label}"] = e
    merged_run = {"encoders": encoders}
    samples = pd.concat([s for s in sam if len(s)], ignore_index=True) if any(
        len(s) for s in sam) else sam[0]
    return RunData(
        path=runs[0].path,
        results=pd.concat(res, ignore_index=True),
        samples=samples,
        texts=texts,
        buckets=pd.concat(buc, ignore_index=True) if buc else pd.DataFrame(),
        run=merged_run,
        runs=run_objs,
        warnings=warn,
        baselines=pd.concat(base, ignore_index=True) if base else pd.DataFrame(),
    )
