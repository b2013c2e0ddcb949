"""CSV formula injection (OWASP): a name that would start a results.csv cell with = + - @ is
refused at validate time at its key; any other text cell starting with one (or with a tab or a
carriage return) gets OWASP's single-quote prefix on write, which the report's reader removes.
Numbers stay numbers (``-0.5``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli import main


def _line(capsys: pytest.CaptureFixture[str]) -> str:
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if ln.startswith("tokbench: error:")]
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("override,key", [
    ("encoders[0]={name: bytes, id: \"=cmd|'calc'!A0\"}", "encoders[0].id"),
    ("data.eval[0].name=\"@SUM(1+1)*cmd|' -C calc'!A0\"", "data.eval[0].name"),
    ("perturbations[0]={name: case.upper, id: '+HYPERLINK(\"http://x\")'}", "perturbations[0].id"),
    ("perturbations[0]={name: case.upper, id: '-2+3'}", "perturbations[0].id"),
])
def test_formula_names_are_refused(override: str, key: str, tmp_path: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    from reliability_suite import make_suite

    assert main(["validate", str(make_suite(tmp_path)), "--set", override]) == 2
    line = _line(capsys)
    assert f"{key}: " in line and "which a spreadsheet opening results.csv runs as a formula" in line


def test_text_cells_are_prefixed_and_read_back(tmp_path: Path) -> None:
    from harness.infra.writes import write_csv
    from reports.load import read_table

    rows = [{"encoder": "bytes", "language": "=1+1", "script": "@x", "fingerprint": "\tcmd",
             "dataset": "-rf", "perturbation_id": "clean", "mode": "full", "seed": 0,
             "nll_nats": 12.5, "n_bytes": 10, "severity": -0.5, "model_size": "-0.5"}]
    cols = list(rows[0])
    p = tmp_path / "results.csv"
    write_csv(p, rows, cols)
    line = p.read_text().splitlines()[1]
    assert line.startswith("bytes,'=1+1,'@x,'\tcmd,'-rf,clean,full,0,12.5,10,-0.5,-0.5")
    back = read_table(p, ["encoder"]).iloc[0]
    assert (back.language, back.script, back.fingerprint, back.dataset) == ("=1+1", "@x", "\tcmd", "-rf")
    assert back.severity == -0.5 and back.model_size == "-0.5"
