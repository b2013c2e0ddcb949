"""report.md carries corpus text and names made inert, as the HTML report does: no raw HTML tag,
no link or image a hostile name could inject."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reports.blocks import Table, md_table, md_text

HOSTILE = '<script>alert(1)</script> <img src=x onerror=alert(2)> [click](javascript:alert(3)) ![i](http://x/y.png)'


def test_md_text_neutralises_html_and_links() -> None:
    out = md_text(HOSTILE)
    assert "<" not in out and ">" not in out
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in out
    assert not re.search(r"(?<!\\)\[", out)  # every '[' escaped: no link, no image
    assert "\n" not in md_text("a\nb")


def test_md_table_escapes_every_cell() -> None:
    t = Table(key="x", title="T <b>", columns=["encoder", "text"], rows=[["bytes|x", HOSTILE]])
    md = md_table(t)
    assert "<" not in md and "bytes\\|x" in md and "&lt;b&gt;" in md


@pytest.mark.filterwarnings("ignore")
def test_rendered_report_md_has_no_raw_html(tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reports"))
    from synthetic_run import write_synthetic_run  # the report tests' run: it holds <script> text

    from reports import render_run

    run = write_synthetic_run(tmp_path / "run")
    # a hostile dataset name everywhere the report reads it (tables, notes, figure labels)
    for f in run.iterdir():
        if f.is_file():
            text = f.read_text(encoding="utf-8")
            f.write_text(text.replace("en-docs", "<img src=x onerror=alert(1)>"), encoding="utf-8")
    render_run(run, tmp_path / "rep", n_boot=20, n_perm=50, svg=False)
    md = (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    assert "&lt;img src=x onerror=alert(1)&gt;" in md
    assert not re.search(r"<[a-zA-Z/!]", md)


BIDI = "\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u202a\u202b\u202c\u202d"


def test_bidi_controls_are_shown_not_obeyed(run_copy: tuple[Path, Path], tmp_path: Path) -> None:
    # U+202E in a file name or corpus text reversed what followed it in report.html
    from harness.cli import main

    _, out = run_copy
    run_json = out / "run.json"
    run_json.write_text(run_json.read_text(encoding="utf-8").replace("f0.txt", "evil\u202etxt.exe"), encoding="utf-8")
    lines = []
    for line in (out / "samples.jsonl").read_text(encoding="utf-8").splitlines():
        obj = json.loads(line)
        obj["doc_id"] = obj["doc_id"].replace("f0.txt", "evil\u202etxt.exe")
        if obj.get("scored_text") and obj.get("byte_nll"):  # the marks in the displayed text, one NLL per byte
            obj["scored_text"] = BIDI + obj["scored_text"]
            obj["byte_nll"] = [1.0] * len(BIDI.encode()) + obj["byte_nll"]
        lines.append(json.dumps(obj, ensure_ascii=False))
    (out / "samples.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert "\u202e" in (out / "run.json").read_text(encoding="utf-8")  # the payload is in the files
    assert main(["report", str(out), "--out", str(tmp_path / "rep"), "--no-svg", "--bootstrap", "10"]) == 0
    html = (tmp_path / "rep" / "report.html").read_text(encoding="utf-8")
    md = (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    for doc in (html, md):
        assert not any(c in doc for c in BIDI)
    assert "evil&lt;U+202E&gt;txt.exe" in html
    assert "&lt;U+2066&gt;" in html and "&lt;U+061C&gt;" in html  # the sampled text's marks
