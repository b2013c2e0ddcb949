"""The rendered report: files, escaping of corpus text, self-containment, partial runs."""

from __future__ import annotations

import math
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from conftest import FAST

from reports import render_compare, render_run
from reports.surprisal import char_pieces

LN2 = math.log(2.0)


class _Collect(HTMLParser):
    """Collects tags, attribute values and the text inside surprisal rows (class "stext")."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str]] = []
        self.depth = 0  # > 0 while inside a .stext element
        self.stext: list[str] = []
        self._cur: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += [(k, v or "") for k, v in attrs]
        if self.depth:
            self.depth += 1
        elif ("class", "stext") in attrs:
            self.depth = 1
            self._cur = []

    def handle_endtag(self, tag: str) -> None:
        if self.depth:
            self.depth -= 1
            if not self.depth:
                self.stext.append("".join(self._cur))

    def handle_data(self, data: str) -> None:
        if self.depth:
            self._cur.append(data)


def _parse(html: str) -> _Collect:
    p = _Collect()
    p.feed(html)
    return p


def test_files_written(rendered: Path) -> None:
    out = rendered.parent
    assert rendered.name == "report.html"
    names = {p.name for p in (out / "figures").iterdir()}
    for key in ("severity_clean_target", "severity_full", "delta_heatmap", "languages",
                "buckets", "segments", "loss_curves"):
        assert f"{key}.png" in names and f"{key}.svg" in names
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "| encoder |" in md and "### Paired comparisons" in md
    for link in re.findall(r"\]\((figures/[^)]+)\)", md):
        assert (out / link).is_file()


def test_corpus_text_is_escaped(rendered: Path) -> None:
    html = rendered.read_text(encoding="utf-8")
    assert "<script" not in html.lower()  # neither corpus text nor the template has scripts
    assert "<b>not bold</b>" not in html and "&lt;b&gt;not bold&lt;/b&gt;" in html
    p = _parse(html)
    assert "script" not in p.tags and "b" in p.tags  # <b> only from the template
    shown = "\n".join(p.stext)
    assert "<script>alert(1)</script>" in shown  # visible as text, character by character
    for text in ("Съешь же ещё", "東京は日本の首都", "ภาษาไทย"):
        assert text in shown


def test_self_contained(rendered: Path) -> None:
    html = rendered.read_text(encoding="utf-8")
    p = _parse(html)
    for key, val in p.attrs:
        if key in ("src", "href", "srcset", "action", "data"):
            assert val.startswith(("data:image/png;base64,", "#")), (key, val[:60])
    assert not re.search(r"(?i)https?://|//[a-z0-9.-]+\.[a-z]{2,}/|@import|url\(", html)
    assert not {"link", "script", "iframe", "object", "embed"} & set(p.tags)


def test_surprisal_pieces_sum_bytes_per_character() -> None:
    # "a" (1 byte), an undecodable byte 0xff (surrogateescape → 1 byte), "é" (2 bytes)
    text = b"a\xff\xc3\xa9".decode("utf-8", "surrogateescape")
    nll = [1 * LN2, 2 * LN2, 3 * LN2, 5 * LN2]  # nats per byte
    pieces, truncated = char_pieces(text, nll, segments=[2, 2], max_chars=10)
    assert [p.text for p in pieces] == ["a", "\\xff", "é"]
    assert [p.title.split(" · ")[-1] for p in pieces] == ["1.00 bits", "2.00 bits", "8.00 bits"]
    assert [p.cls for p in pieces] == ["s2", "s3", "s5"]  # 1, 2, 4 bits/byte
    assert [p.seg_start for p in pieces] == [False, False, True]
    assert not truncated
    with pytest.raises(ValueError, match="4 bytes but byte_nll has 3"):
        char_pieces(text, nll[:3], None, 10)


def test_bytes_read_in_sensible_units() -> None:
    from reports.report_tables import fbytes

    assert fbytes(1010 * 2**20) == "1010 MiB"  # not "1.01e+03 MiB"
    assert fbytes(1023.9 * 2**20) == "1024 MiB" and fbytes(2**30) == "1 GiB"
    assert fbytes(400 * 2**20) == "400 MiB" and fbytes(1.5 * 2**30) == "1.5 GiB"
    assert fbytes(512) == "512 B" and fbytes(None) == "—"


def test_palette_keeps_look_alike_colours_apart() -> None:
    from reports.figures import PALETTE, palette

    cols = list(palette([f"e{i}" for i in range(6)]).values())
    assert len(set(cols)) == 6 and cols == list(PALETTE[:6])
    # orange, vermillion and tan read alike: up to six encoders get orange alone of the three
    assert "#de8f05" in cols and "#d55e00" not in cols and "#ca9161" not in cols


def test_undecodable_bytes_render_as_escapes(make_run) -> None:
    import json

    run = make_run("raw", seeds=(0,), encoders=("bytes",), datasets=("en-docs",),
                   modes=("full",), buckets=False)
    lines = []
    for line in (run / "samples.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        if row.get("scored_text", "").startswith("T"):  # 1-byte "T" -> the raw byte 0xff
            row["scored_text"] = "\udcff" + row["scored_text"][1:]
        lines.append(json.dumps(row))  # ensure_ascii: the surrogate is written as \udcff
    (run / "samples.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    html = render_run(run, svg=False, **FAST).read_bytes().decode("utf-8")  # valid UTF-8
    assert ">\\xff</span>" in html


def test_partial_run_renders(make_run, tmp_path: Path) -> None:
    run = make_run("partial", samples=False, buckets=False, run_json=False, seeds=(0,),
                   encoders=("bytes",), modes=("full",), datasets=("en-docs",))
    html = render_run(run, svg=False, **FAST).read_text(encoding="utf-8")
    assert "No buckets.csv in this run" in html
    assert "samples.jsonl not found" in html
    assert (run / "figures" / "severity_full.png").is_file()
    # the footer names only the files the report read
    assert "<footer>Rendered by tokbench from results.csv alone.</footer>" in html
    # one encoder: no tokenizer-free-vs-BPE answer, and the headline says why
    assert "no BPE encoder" in html


def test_clean_only_run_renders(make_run) -> None:
    run = make_run("clean", seeds=(0,), modes=("clean_target",), datasets=("en-docs",),
                   perturbations=[("identity", "clean", [0.0])])
    html = render_run(run, svg=False, **FAST).read_text(encoding="utf-8")
    assert "Robustness per perturbation" not in html and 'id="tbl-matrix_clean"' in html


def test_compare_two_runs(make_run, tmp_path: Path) -> None:
    a = make_run("small", seeds=(0,), encoders=("bytes",), datasets=("en-docs",))
    b = make_run("large", seeds=(0,), encoders=("bytes",), datasets=("en-docs",))
    path = render_compare([a, b], tmp_path / "cmp", svg=False, **FAST)
    html = path.read_text(encoding="utf-8")
    assert "small/bytes" in html and "large/bytes" in html
    # the two runs are paired on shared documents: one matrix row and column per run
    matrix = html[html.index('id="tbl-matrix_clean"'):]
    matrix = matrix[:matrix.index("</table>")]
    assert matrix.count("small/bytes") == 2 and matrix.count("large/bytes") == 2


def test_reports_never_import_torch_or_harness() -> None:
    import subprocess
    import sys

    code = ("import sys, reports, reports.render, reports.figures, reports.tables; "
            "bad = [m for m in ('torch', 'harness', 'encoders', 'perturbations') "
            "if m in sys.modules]; print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def _section(html: str, key: str) -> str:
    start = html.index(f'<section id="{key}">')
    return html[start:html.index("</section>", start)]


def test_no_negative_zero_and_three_significant_digits(rendered: Path) -> None:
    for name in ("report.html", "report.md"):
        text = (rendered.parent / name).read_text(encoding="utf-8")
        assert not re.search(r"[-−]0\.0*(?![0-9])", text), name  # never "-0.00" or "-0"
        assert not re.search(r"[-−+]0\.000(?![0-9])", text), name  # a difference shows 3 digits


def test_findings_carry_significance(rendered: Path) -> None:
    summary = _section(rendered.read_text(encoding="utf-8"), "summary")
    items = re.findall(r'<li class="finding [^"]*" data-status="([^"]+)">(.*?)</li>', summary)
    assert items and all(status in ("significant", "mixed", "not distinguishable", "untested",
                                    "anomaly")
                         for status, _ in items)
    for _, text in items:
        if text.split("</span>")[-1].startswith(("Lowest", "Smallest")):
            assert "Holm" in text
    # no finding per encoder pair (the matrix replaces them); the headline's pairs are only
    # tokenizer-free against BPE
    assert not any(" vs " in text for _, text in items)
    assert re.findall(r'<div class="matchup" data-tf="([^"]+)" data-bpe="([^"]+)">', summary) == [
        ("bytes", "bpe-4096")]


def test_full_mode_is_framed_apart_from_the_headline(rendered: Path) -> None:
    html = rendered.read_text(encoding="utf-8")
    rob, full = _section(html, "robustness"), _section(html, "full_mode")
    assert "Robustness per perturbation (full)" not in rob
    assert "Robustness per perturbation (clean_target)" in rob
    assert "Robustness per perturbation (full)" in full
    assert "cost of encoding" in full and 'id="full-mode-note"' in full
    assert html.index('<section id="robustness">') < html.index('<section id="full_mode">')
    assert '<a href="#full_mode">' in html  # in the nav bar


def test_heatmap_has_one_colour_scale_per_panel(synthetic_run: Path) -> None:
    from reports import figures as F
    from reports.load import load_run
    from reports.tables import compute_tables

    t = compute_tables(load_run(synthetic_run), n_boot=20, n_perm=100)
    fig = F.delta_heatmap(t)
    meshes = [c for ax in fig.axes for c in ax.collections if hasattr(c, "norm")
              and c.get_array() is not None and ax.get_title()]
    assert len(meshes) == 2
    for mesh, mode in zip(meshes, t.modes):
        want = t.robustness[t.robustness["mode"] == mode].delta_top.abs().max()
        assert mesh.norm.vmax == pytest.approx(want) and mesh.norm.vmin == pytest.approx(-want)
    texts = [x.get_text() for ax in fig.axes for x in ax.texts]
    assert texts and all(re.fullmatch(r"[+-]?\d+(\.\d+)?", x) for x in texts)
    F.plt.close(fig)


def test_severity_figure_plots_delta_with_paired_ci(synthetic_run: Path) -> None:
    from reports import figures as F
    from reports.load import load_run
    from reports.tables import compute_tables

    t = compute_tables(load_run(synthetic_run), n_boot=20, n_perm=100)
    fig = F.severity_curves(t, "clean_target", F.palette(t.encoders))
    ax = next(a for a in fig.axes if a.get_title() == "typo.keyboard")
    g = t.groups
    for line in ax.get_lines():
        if line.get_label() not in t.encoders:
            continue  # the zero reference line
        want = g[(g.encoder == line.get_label()) & (g.perturbation_id == "typo.keyboard")
                 & (g["mode"] == "clean_target")].sort_values("severity")
        y = line.get_ydata()
        assert y[0] == 0.0 and np.allclose(y[1:], want.delta)
    assert "ΔBPB" in ax.get_ylabel()
    F.plt.close(fig)


def test_bytes_per_segment_is_one_number_everywhere(synthetic_run: Path, rendered: Path) -> None:
    import pandas as pd

    from reports import figures as F
    from reports.load import load_run
    from reports.tables import compute_tables

    res = pd.read_csv(synthetic_run / "results.csv")
    clean = res[(res.encoder == "bpe-4096") & (res.perturbation_id == "clean")
                & (res["mode"] == "full")]
    want = f"{clean.n_bytes.sum() / clean.n_segments.sum():.3f}"
    html = rendered.read_text(encoding="utf-8")
    eff = html[html.index('id="tbl-efficiency"'):]
    eff = eff[:eff.index("</table>")]
    assert f"{want} (token)" in eff
    data = load_run(synthetic_run)
    t = compute_tables(data, n_boot=10, n_perm=10)
    fig = F.segment_hist(data.texts, t.encoders,
                         dict(zip(t.efficiency.encoder, t.efficiency.bytes_per_segment)))
    titles = [ax.get_title() for ax in fig.axes]
    assert f"bpe-4096: {want} B / segment (clean)" in titles
    F.plt.close(fig)


def test_crowded_note_only_past_the_palette() -> None:
    from reports.render import crowded_note

    assert crowded_note([f"e{i}" for i in range(10)], ["Training loss"], 10) is None
    note = crowded_note([f"e{i}" for i in range(11)], ["Training loss", "Per language"], 10)
    assert note is not None and note.startswith("11 encoders are more than the 10 colours")
    assert "(those of Training loss; Per language that the run has data for)" in note
    assert crowded_note([f"e{i}" for i in range(11)], [], 10) is None  # nothing left out


def test_more_encoders_than_colours_leave_the_per_encoder_charts_out(
        make_run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A merged sweep has ~100 encoder runs: lines, bar groups and panels per encoder would
    repeat the palette's 10 colours (and crush the axes), so those charts are left out with a
    note in both reports; the heat map, one row per encoder, stays."""
    import synthetic_run

    from reports.figures import MAX_SERIES

    many = {f"bytes-{i}": ("bytes", 1.9 + 0.01 * i, 4.0, None) for i in range(MAX_SERIES + 1)}
    monkeypatch.setattr(synthetic_run, "ENCODERS", {**synthetic_run.ENCODERS, **many})
    run = make_run("many", encoders=tuple(many), seeds=(0,), modes=("clean_target",),
                   datasets=("en-docs",), sample_docs=1)
    out = tmp_path / "rep"
    html = render_run(run, out, n_boot=50, n_perm=200, svg=False).read_text()
    md = (out / "report.md").read_text()
    pngs = {p.stem for p in (out / "figures").glob("*.png")}
    assert "delta_heatmap" in pngs
    assert not {"severity_clean_target", "languages", "loss_curves"} & pngs
    for text in (html, md):
        assert f"{MAX_SERIES + 1} encoders are more than the {MAX_SERIES} colours" in text
        assert "Training loss" in text.split("colours", 1)[1]


def test_the_header_says_how_the_run_computed(make_run, tmp_path: Path) -> None:
    """run.json's ``precision`` (and, on a GPU without deterministic kernels, that a repeat
    differs) in the HTML header and the Markdown, escaped like everything else; runs from
    before the key show nothing."""
    import json

    from reports.render import precision_text

    run = make_run()
    meta = json.loads((run / "run.json").read_text(encoding="utf-8"))
    meta["precision"] = {"train": "bfloat16", "score": "<i>float32</i>", "deterministic": False}
    meta["hardware"]["device"] = "cuda"
    (run / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    html = render_run(run, tmp_path / "rep", svg=False, **FAST).read_text(encoding="utf-8")
    assert ("computed in training bfloat16, scoring &lt;i&gt;float32&lt;/i&gt;, GPU kernels not deterministic "
            "(a repeated seed differs)") in html
    md = (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")
    assert "Computed in training bfloat16, scoring" in md and "<i>" not in md
    on = {"a": {"precision": {"train": "float32", "score": "float32", "deterministic": True},
                "hardware": {"device": "cuda"}}}
    assert precision_text(on) == "training float32, scoring float32, deterministic kernels"
    cpu = {"a": {"precision": {"train": "float32", "score": "float32", "deterministic": False},
                 "hardware": {"device": "cpu"}}, "b": {}}
    assert precision_text(cpu) == "training float32, scoring float32"
    assert precision_text({"old": {"hardware": {"device": "cuda"}}}) == ""


def test_labels_with_dollars_and_markup_stay_plain_text(tmp_path: Path) -> None:
    # The label checks allow '$', '<', '`' and brackets. Two '$' used to send a figure's legend
    # through matplotlib's mathtext (a crash on "$^^$"), and the Markdown cost note carried the
    # labels unescaped (raw HTML and link syntax in report.md).
    import json
    import random

    from synthetic_run import write_simple_run

    labels = ["a$^^$b", "x<i>`y`[l](http://e.x)"]
    rng = random.Random(2)
    run = write_simple_run(tmp_path / "run", labels, [0], 8,
                           lambda e, s, p, d: 2.0 + 0.1 * (e == labels[1]) + 0.3 * (p != "clean")
                           + rng.gauss(0.0, 0.02), cells=(("clean", 0.0), ("typo.keyboard", 0.1)))
    (run / "run.json").write_text(json.dumps({"suite": {"name": "labels"}, "encoders": {
        labels[0]: {"flops_per_byte_infer": 1e6}, labels[1]: {"flops_per_byte_infer": 3e6}}}))
    render_run(run, **FAST)
    md = (run / "report.md").read_text(encoding="utf-8")
    (note,) = [line for line in md.splitlines() if line.startswith("> Compute is not equal")]
    assert "3.0×" in note and "<i>" not in note and "&lt;i&gt;" in note
    assert not re.search(r"(?<!\\)\]\(", note) and "\\[l\\](http" in note  # no live link
    assert (run / "figures").is_dir() and any((run / "figures").glob("*.png"))


def test_documents_that_all_agree_still_draw_their_bars(tmp_path: Path) -> None:
    # every document at the same BPB: the bootstrap's bounds can land an ulp beyond the point,
    # which matplotlib refused as a negative error bar
    from synthetic_run import write_simple_run

    run = write_simple_run(tmp_path / "run", ["a", "b"], [0], 13,
                           lambda e, s, p, d: 1 / 3 if e == "a" else 1 / 3 + 0.2)
    render_run(run, **FAST)
    assert (run / "report.html").is_file() and any((run / "figures").glob("*.png"))


def test_a_model_trained_elsewhere_is_named_and_left_out_of_flop_ratios(tmp_path: Path) -> None:
    import json

    from synthetic_run import write_simple_run

    labels = ["bytes", "bpe", "ck"]
    run = write_simple_run(tmp_path / "run", labels, [0], 6, lambda e, s, p, d: 2.0 + 0.1 * labels.index(e),
                           cells=(("clean", 0.0),))
    (run / "run.json").write_text(json.dumps({"suite": {"name": "elsewhere"}, "encoders": {
        "bytes": {"name": "bytes", "flops_per_byte_infer": 4e6}, "bpe": {"name": "bpe", "flops_per_byte_infer": 1e6},
        "ck": {"name": "hf", "flops_per_byte_infer": 5e5, "flops_per_byte_train": None, "trained_elsewhere": True}}}))
    render_run(run, **FAST)
    md = (run / "report.md").read_text(encoding="utf-8")
    (note,) = [line for line in md.splitlines() if line.startswith("> Compute is not equal")]
    # ratios against the cheapest *trained* encoder (bpe), ck named apart and in no ratio
    assert "relative to bpe: bytes 4.0×" in note and "ck 0.5×" not in note and "ck" in note.split("relative to")[0]
    assert "| ck | hf (trained elsewhere) |" in md
