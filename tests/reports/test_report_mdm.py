"""AR vs MDM report block (reports/mdm.py) on a hand-made run directory: pairing, pooled BPB,
Monte Carlo SE, gap and robustness against hand computation, escaping, and old runs."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from reports.load import load_run
from reports.mdm import TABLE_SPEC, ar_vs_mdm, pairs
from reports.render import render_run

LN2 = math.log(2.0)
# encoder -> objective, per-doc clean NLL (nats), per-doc perturbed NLL; 3 docs of 100 bytes
NLL = {
    "b|ar": ("ar", [150.0, 160.0, 170.0], [180.0, 200.0, 190.0]),
    "b|mdm": ("mdm", [200.0, 210.0, 220.0], [215.0, 245.0, 230.0]),
}
SE = 0.01  # bpb_se of every MDM cell


def _write_run(d: Path, with_objective: bool = True) -> Path:
    d.mkdir()
    cols = ["encoder", "encoder_name", "seed", "dataset", "perturbation", "perturbation_id", "severity",
            "mode", "n_docs", "n_bytes", "n_bytes_clean", "nll_nats"] + (["objective", "bpb_se"] if with_objective else [])
    rows, samples = [], []
    for enc, (obj, clean, pert) in NLL.items():
        for pid, sev, nll in (("clean", 0.0, clean), ("typo.keyboard", 0.2, pert)):
            row = [enc, "bytes", 0, "set", "identity" if pid == "clean" else pid, pid, sev, "clean_target", 3,
                   300, 300, sum(nll)]
            if with_objective:
                row += [obj, SE if obj == "mdm" else 0.0]
            rows.append(row)
            for i, x in enumerate(nll):
                samples.append({"encoder": enc, "seed": 0, "dataset": "set", "perturbation_id": pid,
                                "perturbation": "identity" if pid == "clean" else pid, "severity": sev,
                                "mode": "clean_target", "doc_id": f"d{i}", "nll_nats": x, "n_bytes": 100,
                                "n_bytes_clean": 100})
    with (d / "results.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        w.writerows(rows)
    (d / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples))
    return d


def test_ar_vs_mdm_matches_hand_computation(tmp_path: Path) -> None:
    data = load_run(_write_run(tmp_path / "run"))
    assert pairs(data) == [("b|ar", "b|mdm")]
    df = ar_vs_mdm(data)
    (r,) = df.itertuples()
    assert r.bpb_ar == pytest.approx(480 / (LN2 * 300))
    assert r.bpb_mdm == pytest.approx(630 / (LN2 * 300))
    assert r.gap == pytest.approx(150 / (LN2 * 300))
    assert r.bpb_se == pytest.approx(SE)  # one cell: pooling changes nothing
    assert r.delta_ar == pytest.approx((570 - 480) / (LN2 * 300))
    assert r.delta_mdm == pytest.approx((690 - 630) / (LN2 * 300))
    assert r.delta_diff == pytest.approx(-30 / (LN2 * 300))
    assert r.n_docs == 3 and r.n_perturbations == 1
    # The MDM interval includes at least ± 1.96 · SE; the AR one is a plain bootstrap interval.
    assert r.bpb_mdm_hi - r.bpb_mdm >= 1.959 * SE and r.bpb_mdm - r.bpb_mdm_lo >= 1.959 * SE
    assert r.bpb_ar_lo <= r.bpb_ar <= r.bpb_ar_hi
    assert r.delta_diff_lo <= r.delta_diff <= r.delta_diff_hi
    cells = [fn(r) for _, fn, _ in TABLE_SPEC]
    assert cells[4].startswith(f"{r.bpb_mdm:.3f} ± {SE:.3f} [")


def test_report_shows_the_block_escaped_and_states_the_bound(tmp_path: Path) -> None:
    render_run(_write_run(tmp_path / "run"), n_boot=50)
    md = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    html = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    assert "AR vs MDM" in md and "upper bound" in md and "b\\|ar" in md and "| b|ar |" not in md
    assert 'id="mdm"' in html and "upper bound" in html


def test_runs_without_objective_have_no_pairs(tmp_path: Path) -> None:
    data = load_run(_write_run(tmp_path / "old", with_objective=False))
    assert pairs(data) == []
    assert ar_vs_mdm(data).empty
    assert (data.results["objective"] == "ar").all() and (data.results["bpb_se"] == 0).all()
    render_run(tmp_path / "old", n_boot=20)
    assert "AR vs MDM" not in (tmp_path / "old" / "report.md").read_text(encoding="utf-8")


def test_summary_says_which_clean_bpb_is_a_bound(tmp_path: Path) -> None:
    # "Lowest clean BPB" compares b|ar (exact NLL) with b|mdm (an ELBO): the sentence must name
    # the bound; a run without MDM rows says nothing of the kind.
    from reports.tables import compute_tables

    lines = compute_tables(load_run(_write_run(tmp_path / "run")), n_boot=50, n_perm=200).verdict_lines
    (clean,) = [f.text for f in lines if f.text.startswith("Lowest clean BPB")]
    assert "b|mdm is scored by the masked-diffusion ELBO, an upper bound" in clean
    plain = compute_tables(load_run(_write_run(tmp_path / "plain", with_objective=False)), n_boot=50,
                           n_perm=200).verdict_lines
    assert not any("ELBO" in f.text for f in plain)


def test_every_table_and_the_summary_mark_the_bound(tmp_path: Path) -> None:
    # Not only the clean-BPB sentence: each table that names b|mdm marks it (†) and says why,
    # the mean-degradation sentence says its ΔBPB is a difference of bounds, and the report
    # opens with a warning; the AR encoder is never marked.
    from reports.render import BOUND_MARK, BOUND_NOTE, mark_bounds
    from reports.report_tables import build_tables
    from reports.tables import compute_tables

    t = compute_tables(load_run(_write_run(tmp_path / "run")), n_boot=50, n_perm=200)
    assert t.bounds == ["b|mdm"]
    (mean,) = [f.text for f in t.verdict_lines if f.text.startswith("Smallest mean degradation")]
    assert "b|mdm is scored by the masked-diffusion ELBO, so its ΔBPB is a difference of two" in mean
    tables = build_tables(t)
    mark_bounds(tables, t.bounds)
    shown = [k for k, tb in tables.items() if tb.rows and any(
        "b|mdm" in c for c in [*tb.columns, *(x for row in tb.rows for x in row)])]
    assert {"verdict", "comparisons", "matrix_clean", "robustness"} <= set(shown)
    for k in shown:
        tb = tables[k]
        cells = [*tb.columns, *(x for row in tb.rows for x in row)]
        assert all(c == f"b|mdm {BOUND_MARK}" for c in cells if "b|mdm" in c), k
        assert "b|ar" in cells and f"b|ar {BOUND_MARK}" not in cells, k
        assert tb.note.endswith(BOUND_NOTE), k
    render_run(tmp_path / "run", n_boot=50)
    html = (tmp_path / "run" / "report.html").read_text(encoding="utf-8")
    md = (tmp_path / "run" / "report.md").read_text(encoding="utf-8")
    assert 'class="warn">b|mdm is scored by the masked-diffusion ELBO (marked † in tables)' in html
    assert f"b\\|mdm {BOUND_MARK}" in md
