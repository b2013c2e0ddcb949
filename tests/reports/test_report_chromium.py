"""The rendered report in headless Chromium: non-blank, no console errors, no network requests."""

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


def _load(url: str):
    from report_cdp import load_page

    assert CHROMIUM is not None
    return load_page(CHROMIUM, url)


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
