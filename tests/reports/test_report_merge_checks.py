"""Merged reports (``tokbench compare``): runs are paired only on the same data, a comparison
without shared documents claims no difference, seeds are counted per encoder, and AR vs MDM
pairs stay within one run."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from synthetic_run import set_fingerprint, write_simple_run
from test_report_mdm import _write_run as write_mdm_run

from reports import render_compare
from reports.load import load_run, merge_runs
from reports.mdm import ar_vs_mdm, pairs
from reports.tables import compute_tables

FAST = dict(n_boot=50, n_perm=100, svg=False, processes=1)


def _runs(root: Path, seeds: tuple[int, int] = (0, 0), fps: tuple[str | None, str | None]
          = ("sha256:aaaa", "sha256:aaaa"), cells: tuple[tuple[str, float], ...]
          = (("clean", 0.0),)) -> tuple[Path, Path]:
    """Two one-encoder runs over the same document ids, run B 1 bit/byte worse everywhere."""
    a = write_simple_run(root / "runA", ["bytes"], [seeds[0]], 20,
                         lambda e, s, p, d: 1.0 + 0.01 * d, cells)
    b = write_simple_run(root / "runB", ["bytes"], [seeds[1]], 20,
                         lambda e, s, p, d: 2.0 + 0.01 * d, cells)
    for run, fp in zip((a, b), fps):
        if fp:
            set_fingerprint(run, fp)
    return a, b


def test_different_data_is_not_paired_and_warned(tmp_path: Path) -> None:
    # the auditor's scenario: same eval set name, seed and doc ids; fingerprints only in run.json
    a, b = _runs(tmp_path, fps=(None, None))
    (a / "run.json").write_text(json.dumps({"suite": {"name": "smoke"}, "encoders": {},
                                            "data": {"eval:ds": {"fingerprint": "aaaa"}}}))
    (b / "run.json").write_text(json.dumps({"suite": {"name": "other"}, "encoders": {},
                                            "data": {"eval:ds": {"fingerprint": "bbbb"}}}))
    merged = merge_runs([load_run(a), load_run(b)])
    assert set(merged.samples.dataset) == {"runA/ds", "runB/ds"}
    assert "eval set 'ds'" in merged.warnings[0] and "runA, runB" in merged.warnings[0]
    t = compute_tables(merged, n_boot=20, n_perm=50)
    assert (t.comparisons.n_units == 0).all() and t.comparisons["diff"].isna().all()
    render_compare([a, b], tmp_path / "out", **FAST)
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    summary = md.split("## ", 2)[1]
    assert "significantly" not in summary  # the summary claims no difference
    # and ranks nothing across the two runs' different documents
    assert "did not all score the same documents" in summary
    assert "Lowest clean BPB (full) among runA/bytes: runA/bytes" in summary
    assert "Lowest clean BPB (full) among runB/bytes: runB/bytes" in summary
    assert "lower than" not in summary and "not tested against" not in summary
    # the warning is first, above the summary, in both formats
    assert md.index("NOT paired across these runs") < md.index("## Summary")
    assert html.index("NOT paired across these runs") < html.index('id="summary"')


def test_missing_fingerprint_is_not_paired(tmp_path: Path) -> None:
    a, b = _runs(tmp_path, fps=("sha256:aaaa", None))
    merged = merge_runs([load_run(a), load_run(b)])
    assert set(merged.samples.dataset) == {"runA/ds", "runB/ds"}
    assert "runB: none recorded" in merged.warnings[0]


def test_same_data_still_pairs(tmp_path: Path) -> None:
    a, b = _runs(tmp_path)
    merged = merge_runs([load_run(a), load_run(b)])
    assert set(merged.samples.dataset) == {"ds"}
    assert not any("NOT paired" in w for w in merged.warnings)
    t = compute_tables(merged, n_boot=20, n_perm=50)
    (row,) = t.comparisons.itertuples()
    assert row.n_units == 20 and math.isclose(row.diff, -1.0)
    assert row.untested == ""
    lowest = next(f for f in t.verdict_lines if f.text.startswith("Lowest clean BPB"))
    assert lowest.status == "significant"


def test_runs_sharing_a_fingerprint_pair_among_themselves(tmp_path: Path) -> None:
    a, b = _runs(tmp_path)
    c = set_fingerprint(write_simple_run(tmp_path / "runC", ["bytes"], [0], 20,
                                         lambda e, s, p, d: 3.0 + 0.01 * d), "sha256:cccc")
    merged = merge_runs([load_run(a), load_run(b), load_run(c)])
    assert set(merged.samples.dataset) == {"runA+runB/ds", "runC/ds"}
    t = compute_tables(merged, n_boot=20, n_perm=50)
    cmp = t.comparisons.set_index(["a", "b"])
    assert cmp.loc[("runA/bytes", "runB/bytes")].n_units == 20
    assert cmp.loc[("runA/bytes", "runC/bytes")].n_units == 0


def test_no_shared_seeds_shows_no_difference(tmp_path: Path) -> None:
    cells = (("clean", 0.0), ("typo", 0.1))
    a, b = _runs(tmp_path, seeds=(0, 1), cells=cells)
    render_compare([a, b], tmp_path / "out", **FAST)
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "NOT paired" not in md  # same data: the runs just share no seed
    matrix = md[md.index("Clean BPB matrix"):]
    matrix = matrix[:matrix.index("\n\n", matrix.index("| row"))]
    assert "no shared documents" in matrix and "−1.00" not in matrix and "-1.00" not in matrix
    assert "not distinguishable" not in matrix
    rows = [r for r in md.splitlines() if r.startswith("| runA/bytes | runB/bytes |")]
    assert rows and all("| — | no shared documents | 0 |" in r for r in rows)
    # one seed per encoder, though the runs hold two between them
    assert "pooled over 2 seeds" not in md and "One seed per encoder" in md
    summary = md.split("## ", 2)[1]
    assert "not tested against runB/bytes (no shared documents)" in summary
    assert "no per-document samples" not in summary


def test_without_samples_the_reason_is_kept(tmp_path: Path) -> None:
    a, b = _runs(tmp_path)
    (b / "samples.jsonl").unlink()
    t = compute_tables(merge_runs([load_run(a), load_run(b)]), n_boot=20, n_perm=50)
    lowest = next(f for f in t.verdict_lines if f.text.startswith("Lowest clean BPB"))
    assert "(no per-document samples)" in lowest.text and lowest.status == "untested"


def test_seeds_note_counts_seeds_per_encoder(tmp_path: Path) -> None:
    a = set_fingerprint(write_simple_run(tmp_path / "runA", ["bytes"], [0, 1], 20,
                                         lambda e, s, p, d: 1.0 + 0.01 * d + 0.1 * s), "f")
    b = set_fingerprint(write_simple_run(tmp_path / "runB", ["bytes"], [0], 20,
                                         lambda e, s, p, d: 2.0 + 0.01 * d), "f")
    render_compare([a, b], tmp_path / "out", **FAST)
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "runA/bytes: 2, runB/bytes: 1" in md and "pooled over 2 seeds" not in md


def test_ar_vs_mdm_pairs_within_each_merged_run(tmp_path: Path) -> None:
    a, b = write_mdm_run(tmp_path / "runA"), write_mdm_run(tmp_path / "runB")
    merged = merge_runs([load_run(a), load_run(b)])
    assert pairs(merged) == [("runA/b|ar", "runA/b|mdm"), ("runB/b|ar", "runB/b|mdm")]
    df = ar_vs_mdm(merged)
    assert len(df) == 2 and (df.n_docs == 3).all()
    assert all(re.match(r"(run[AB])/", r.ar).group(1) == r.mdm.split("/")[0]
               for r in df.itertuples())


def test_ar_vs_mdm_never_pairs_across_runs(tmp_path: Path) -> None:
    # run A holds only the AR encoder, run B only the MDM: nothing to pair
    a, b = write_mdm_run(tmp_path / "runA"), write_mdm_run(tmp_path / "runB")
    ra, rb = load_run(a), load_run(b)
    ra.results = ra.results[ra.results.encoder == "b|ar"]
    rb.results = rb.results[rb.results.encoder == "b|mdm"]
    assert pairs(merge_runs([ra, rb])) == []


def test_different_perturbations_are_named_as_the_reason(tmp_path: Path) -> None:
    # same data and seed, but run A perturbed with typo and run B with case: the mean degradations
    # cannot be tested against each other, and the reason is not "no per-document samples"
    a = write_simple_run(tmp_path / "runA", ["bytes"], [0], 20, lambda e, s, p, d: 1.0 + 0.01 * d,
                         (("clean", 0.0), ("typo", 0.1)))
    b = write_simple_run(tmp_path / "runB", ["bytes"], [0], 20, lambda e, s, p, d: 1.5 + 0.01 * d,
                         (("clean", 0.0), ("case", 0.1)))
    for run in (a, b):
        set_fingerprint(run, "sha256:aaaa")
    t = compute_tables(merge_runs([load_run(a), load_run(b)]), n_boot=20, n_perm=50)
    smallest = next(f for f in t.verdict_lines if f.text.startswith("Smallest mean degradation"))
    assert "not tested against" in smallest.text
    assert "(not scored under the same perturbations)" in smallest.text
    assert "no per-document samples" not in smallest.text
    # the clean cells are shared: ranked together, and tested
    lowest = next(f for f in t.verdict_lines if f.text.startswith("Lowest clean BPB"))
    assert "among" not in lowest.text and lowest.status == "significant"
