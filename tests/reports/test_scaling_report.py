"""The report's scaling section, rendered from results files alone (synthetic sweep rows)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from synthetic_scaling import Law, sweep_results  # noqa: E402

from reports.load import load_run, merge_runs  # noqa: E402
from reports.scaling_report import scaling_section  # noqa: E402

BYTES = Law(E=0.6, A=40.0, a=0.34, B=80.0, b=0.30, attn=0.25)
BPE = Law(E=0.6, A=20.0, a=0.30, B=25.0, b=0.24, attn=0.05)
BUDGETS = [1e15 * 10 ** (k / 2) for k in range(5)]


def _frame(budgets: list[float] = BUDGETS):
    # "<b>" in a label: everything from the results files must come out escaped
    return sweep_results({"bytes": (BYTES, "byte"), "bpe<b>": (BPE, "token")}, budgets, n_sizes=5,
                         noise=0.001, perturbation={"bytes": (0.1, -0.02), "bpe<b>": (0.3, 0.01)})


def test_section_html_markdown_and_figures(tmp_path: Path) -> None:
    sec = scaling_section(_frame(), tmp_path / "figures", n_boot=30)
    assert sec is not None
    html = str(sec.html)
    assert 'id="scaling"' in html and "Parity" in html and "headline" in html
    assert "bpe&lt;b&gt;" in html and "bpe<b>" not in html
    assert sec.fit.parity.status.iloc[0] in ("crossing", "outside")
    keys = {f.key for f in sec.figures}
    assert keys == {"scaling_isoflop_heldout", "scaling_frontier_heldout", "scaling_robustness_heldout"}
    for k in keys:
        assert (tmp_path / "figures" / f"{k}.png").stat().st_size > 1000
    assert "## Scaling" in sec.markdown and "bpe&lt;b&gt;" in sec.markdown


def test_no_sweep_rows_no_section() -> None:
    df = _frame().assign(flop_budget="")
    assert scaling_section(df, None, n_boot=5) is None


def test_pieces_run_budget_by_budget_merge(tmp_path: Path) -> None:
    df = _frame()
    dirs = []
    for i, b in enumerate(BUDGETS):  # one run directory per budget, as the GPU commands make them
        d = tmp_path / f"piece{i}"
        d.mkdir()
        df[df.flop_budget == b].to_csv(d / "results.csv", index=False)
        dirs.append(d)
    merged = merge_runs([load_run(d) for d in dirs]).results  # as `tokbench report D1 D2 ...`
    (tmp_path / "whole").mkdir()
    df.to_csv(tmp_path / "whole" / "results.csv", index=False)
    whole = scaling_section(load_run(tmp_path / "whole").results, None, n_boot=0).fit
    parts = scaling_section(merged, None, n_boot=0).fit
    assert len(parts.optima) == len(whole.optima) == 2 * len(BUDGETS)
    assert parts.exponents.alpha.to_numpy() == pytest.approx(whole.exponents.alpha.to_numpy(), rel=1e-9)


def test_render_run_includes_the_section(tmp_path: Path) -> None:
    from reports import render_run

    run = tmp_path / "run"
    run.mkdir()
    _frame(BUDGETS[:3]).to_csv(run / "results.csv", index=False)
    html = render_run(run, n_boot=20, n_perm=100, svg=False).read_text()
    assert 'href="#scaling"' in html and 'id="scaling"' in html
    assert "## Scaling" in (run / "report.md").read_text()


def test_a_single_budget_renders_and_says_it_cannot_fit() -> None:
    df = _frame()
    sec = scaling_section(df[df.flop_budget == BUDGETS[0]], None, n_boot=5)
    assert sec is not None
    assert set(sec.fit.parity.status) == {"missing"}
    assert "too few budgets" in sec.fit.parity.statement.iloc[0]


def test_train_part_bytes_from_run_json_passes() -> None:
    import math

    import pandas as pd

    from reports.scaling import with_train_part_bytes

    res = pd.DataFrame({"encoder": ["r/a", "r/b", "r/c", "r/d"], "train_bytes": [300.0, 80.0, 50.0, 10.0]})
    enc = {"r/a": {"scaling": {"passes": 2.0}}, "r/b": {"scaling": {"passes": 0.5}},
           "r/c": {"scaling": {"passes": 0}}, "r/d": {"config": {}}}
    got = with_train_part_bytes(res, enc)["train_part_bytes"].tolist()
    assert got[:2] == [150.0, 160.0]  # 300 / 2, 80 / 0.5
    assert math.isnan(got[2]) and math.isnan(got[3])  # zero passes; no scaling entry


def test_vertices_past_four_passes_are_flagged() -> None:
    """passes at D_opt = D_opt / the text's bytes; a vertex past 4 passes gets a note naming its
    budget (repetition no longer nearly free), one within does not."""
    df = _frame()
    d_opt = scaling_section(df, None, n_boot=0).fit.optima.set_index(["encoder", "budget"]).d_opt
    top = max(BUDGETS)
    part = {"bytes": d_opt[("bytes", top)] / 5.0, "bpe<b>": 1e30}  # bytes' largest vertex: 5 passes
    df = df.assign(train_part_bytes=[part[e.split("@")[0]] for e in df["encoder"]])
    sec = scaling_section(df, None, n_boot=0)
    assert sec is not None
    opt = sec.fit.optima.set_index(["encoder", "budget"])
    assert opt.passes[("bytes", top)] == pytest.approx(5.0)
    assert opt.passes[("bpe<b>", top)] < 1e-10
    over = [b for b in BUDGETS if d_opt[("bytes", b)] > 4 * part["bytes"]]
    assert top in over and len(over) < len(BUDGETS)
    notes = [n for n in sec.fit.notes if "reads the training text" in n]
    assert len(notes) == 1 and ": bytes:" in notes[0]
    for b in BUDGETS:
        assert (f"{b:.3g} (" in notes[0]) == (b in over)
    assert "5.0 passes" in notes[0]
    assert "passes at D\\_opt" in sec.markdown  # Markdown escapes the underscore


def test_vertices_without_run_json_show_no_passes() -> None:
    sec = scaling_section(_frame(), None, n_boot=0)
    assert sec is not None and sec.fit.optima.passes.isna().all()
    assert not [n for n in sec.fit.notes if "reads the training text" in n]


def test_robustness_slopes_read_as_trend_or_tie() -> None:
    """A slope is read from its CI alone: above 0 the gap grows, below 0 it shrinks, a CI holding
    0 is a tie (the report never calls a non-significant slope a trend)."""
    import dataclasses
    import math

    import pandas as pd

    from reports.scaling_report import build_tables, trend_reading

    assert trend_reading(0.002, 0.02) == "gap grows"
    assert trend_reading(-0.02, -0.001) == "gap shrinks"
    assert trend_reading(-0.002, 0.004) == "tie (no trend)"
    assert trend_reading(0.0, 0.004) == "tie (no trend)"  # touching 0 is not above it
    assert trend_reading(math.nan, math.nan) == "—"
    sec = scaling_section(_frame(), None, n_boot=0)
    assert sec is not None
    rob = pd.DataFrame([dict(dataset="heldout", encoder="bytes", perturbation="typo@0.1", slope=0.01,
                             slope_lo=0.002, slope_hi=0.02),
                        dict(dataset="heldout", encoder="bpe", perturbation="typo@0.1", slope=0.001,
                             slope_lo=-0.002, slope_hi=0.004)])
    table = next(t for t in build_tables(dataclasses.replace(sec.fit, robustness=rob))
                 if t.key == "scaling_robustness")
    assert [row[-1] for row in table.rows] == ["gap grows", "tie (no trend)"]
