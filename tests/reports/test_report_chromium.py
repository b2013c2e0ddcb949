"""The rendered report in headless Chromium: non-blank, no console errors, no network requests,
and what a reader sees on the page (issue #15): qualified winners, the encoder matrix, the ΔBPB
figure, full mode framed apart, no negative zero, anomalies flagged, one bytes-per-patch number,
and a layout that fits at 1024 and 1400 px."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium not installed (Debian: apt-get install --no-install-recommends chromium)",
)
LOCAL_SCHEMES = ("file:", "data:", "about:")


def _load(url: str, **kw):
    from report_cdp import load_page

    assert CHROMIUM is not None
    return load_page(CHROMIUM, url, **kw)


def test_report_in_chromium(rendered: Path, tmp_path: Path) -> None:
    page = _load(rendered.resolve().as_uri())
    (tmp_path / "report.png").write_bytes(page.screenshot_png)
    img = np.asarray(Image.open(io.BytesIO(page.screenshot_png)).convert("RGB"))
    assert img.shape[0] >= 1000 and img.shape[1] >= 1000
    # non-blank: many distinct colours and real contrast (text, figures, shaded samples)
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 200
    assert img.std() > 20
    assert page.console_errors == []
    assert page.requests and page.requests[0].startswith("file:")
    remote = [u for u in page.requests if not u.startswith(LOCAL_SCHEMES)]
    assert remote == []


def test_checker_sees_errors_and_requests(tmp_path: Path) -> None:
    # The harness of the test itself: a page that logs an error and asks for a remote image must
    # be caught, or the test above would prove nothing.
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><p>x</p><script>console.error("boom")</script>'
                   '<img src="http://127.0.0.1:9/nothing.png"></body></html>', encoding="utf-8")
    page = _load(bad.as_uri())
    assert any("boom" in e for e in page.console_errors)
    assert any(u.startswith("http://127.0.0.1:9/") for u in page.requests)


# JavaScript read-outs of the page (the report has no scripts of its own; these only read the DOM)
DOM = {
    "findings": """[...document.querySelectorAll('#summary li.finding')].map(
        li => [li.dataset.status, li.innerText])""",
    "matrix": """(() => { const t = document.querySelector('#tbl-matrix');
        return t ? [...t.rows].map(r => [...r.cells].map(c => [c.innerText, c.className])) : null;
        })()""",
    "matrix_clean": """(() => { const t = document.querySelector('#tbl-matrix_clean');
        return t ? [...t.rows].map(r => [...r.cells].map(c => c.innerText)) : null; })()""",
    "severity_alt": """[...document.querySelectorAll('#robustness figure img')].map(i => i.alt)""",
    "full_section": """(() => { const s = document.querySelector('#full_mode');
        return s ? [s.innerText, !!s.querySelector('#full-mode-note'),
                    document.querySelector('#robustness').innerText] : null; })()""",
    "order": """[...document.querySelectorAll('main > section')].map(s => s.id)""",
    "heatmap_caption": """document.querySelector('#f-delta_heatmap figcaption').innerText""",
    "text": "document.body.innerText",
    "anomalies": """(() => { const t = document.querySelector('#tbl-anomalies');
        return t ? [...t.tBodies[0].rows].map(r => r.innerText) : []; })()""",
    "efficiency": """[...document.querySelector('#tbl-efficiency').tBodies[0].rows].map(
        r => [...r.cells].map(c => c.innerText))""",
    "images": """[...document.images].map(i => [i.alt, i.complete && i.naturalWidth > 0])""",
    "overflow": "document.documentElement.scrollWidth - window.innerWidth",
    "efficiency_overflow": """(() => { const t = document.querySelector('#tbl-efficiency');
        return t.scrollWidth - t.parentElement.clientWidth; })()""",
    "headline": """[...document.querySelectorAll('#headline li.claim')].map(li => [
        li.closest('.matchup').dataset.tf, li.closest('.matchup').dataset.bpe, li.dataset.status,
        li.querySelector('.badge').innerText, li.innerText])""",
    "summary_first": """document.querySelector('#summary > h2').nextElementSibling.id""",
    "how_sure": """(() => { const a = document.querySelector('#how-sure');
        return a ? a.innerText : null; })()""",
}
BADGES = {"better": "tokenizer-free better", "worse": "bpe better", "tie": "tie",
          "untested": "untested"}


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three encoders (blt not distinguishable from bpe-4096 on clean text) and a perturbation
    that improves one of them (an anomaly)."""
    from conftest import FAST
    from synthetic_run import write_synthetic_run

    from reports import render_run

    # three seeds of well-trained models, as the tables' own fixture: the seeds × documents
    # interval then calls the anomaly
    run = write_synthetic_run(tmp_path_factory.mktemp("three") / "run",
                              encoders=("bytes", "bpe-4096", "blt"),
                              improves=("bytes", "case.random"), seeds=(0, 1, 2),
                              seed_sd=0.005, doc_noise_per_seed=False, doc_noise_per_cell=False)
    return render_run(run, svg=False, **FAST)


@pytest.mark.parametrize("width", [1024, 1400])
def test_what_a_reader_sees(three: Path, width: int) -> None:
    import re

    page = _load(three.resolve().as_uri(), width=width, height=1800, evaluate=DOM)
    v = page.values
    assert page.console_errors == []
    # no unqualified winner: every "lowest"/"smallest" line names its Holm test and standing
    findings = v["findings"]
    assert findings and all(st in ("significant", "mixed", "not distinguishable", "untested", "anomaly")
                            for st, _ in findings)
    best = [(st, t) for st, t in findings if "Lowest" in t or "Smallest" in t]
    assert len(best) == 2 and all("Holm" in t for _, t in best)
    lowest = next(t for st, t in best if "Lowest" in t)
    # blt and bpe-4096 are the fixture's near-equal pair: whichever is lowest ties the other
    assert "not distinguishable from" in lowest and ("; blt: " in lowest or "; bpe-4096: " in lowest)
    assert any(st == "anomaly" and "case.random" in t for st, t in findings), findings
    assert not any(" vs " in t for _, t in findings)  # one matrix, not a sentence per pair
    # encoder × encoder matrix: wins–losses–ties off the diagonal, coloured by outcome
    m = v["matrix"]
    assert m is not None and len(m) == 4 and len(m[0]) == 4  # header + 3 encoders
    cells = [c for row in m[1:] for c in row[1:]]
    assert sum(text == "—" for text, _ in cells) == 3
    assert all(re.fullmatch(r"\d+–\d+–\d+", text) for text, _ in cells if text != "—")
    assert any("win" in cls.split() for _, cls in cells)
    assert any("not distinguishable" in c for row in v["matrix_clean"] for c in row)
    # the clean_target figure plots ΔBPB; full mode lives in its own, framed section
    assert "ΔBPB vs severity (clean_target)" in v["severity_alt"]
    full_text, note, rob_text = v["full_section"]
    assert note and "cost of encoding" in full_text and "(full)" in full_text
    assert "Robustness per perturbation (full)" not in rob_text
    assert v["order"].index("robustness") < v["order"].index("full_mode")
    assert "own colour scale" in v["heatmap_caption"]
    # three significant digits, never a negative zero
    assert not re.search(r"[-−]0\.0*(?![0-9])", v["text"])
    # the anomaly is explained
    assert v["anomalies"] and all("case.random" in r and "bytes" in r for r in v["anomalies"])
    assert "Possible causes" in v["text"] or "possible causes" in v["text"]
    # BLT bytes per patch: the efficiency table's number is the segments figure's
    blt = next(r for r in v["efficiency"] if r[0] == "blt")
    assert re.search(r"\d\.\d{3} \(", blt[-2])
    assert all(ok for _, ok in v["images"]) and len(v["images"]) >= 6
    assert v["overflow"] <= 0  # wide tables scroll inside their box, the page does not
    assert v["efficiency_overflow"] <= 0  # the cost table fits the page: nothing to scroll
    # the summary opens with the answer to "tokenizer-free vs BPE", each badge its sentence's
    assert v["summary_first"] == "headline"
    claims = v["headline"]
    assert {(tf, b) for tf, b, *_ in claims} == {("bytes", "bpe-4096"), ("blt", "bpe-4096")}
    for tf, _, status, badge, text in claims:
        assert badge.lower() == BADGES[status]  # CSS may upper-case it
        assert "95 % CI" in text or status == "untested"
        if status == "tie":
            assert "a tie" in text and "significantly" not in text.split("—")[-1]
        elif status in ("better", "worse"):
            assert f"{tf} " in text.split("—")[-1] and "significantly" in text.split("—")[-1]
    assert any(st == "better" and "typo" in text for _, _, st, _, text in claims)
    sure = v["how_sure"]
    assert sure and "seeds" in sure and "Synthetic fixture — <i>made-up</i> numbers." in sure
