"""End to end, following docs/perturbations.md's 'How to add a perturbation' literally: its plugin example saved as
my_perturbs.py and its suite as shout.yaml in a temporary directory, ``tokbench run shout.yaml``
runs, and the plugin's cells show up in the results with perturbed text and measured edit rate."""

from __future__ import annotations

import csv
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _cli_available() -> bool:
    try:
        return importlib.util.find_spec("harness.cli") is not None
    except ImportError:
        return False


@pytest.mark.skipif(not _cli_available(), reason="harness.cli is not written yet")
def test_plugin_named_in_a_suite_runs_end_to_end(tmp_path: Path) -> None:
    text = (ROOT / "docs" / "perturbations.md").read_text(encoding="utf-8")
    doc = text[text.index("## How to add a perturbation") :]
    example = re.findall(r"```python\n(.*?)```", doc, flags=re.S)[0]
    suite = re.findall(r"```yaml\n(.*?)```", doc, flags=re.S)[0]
    assert "my_perturbs:ShoutingCase" in suite
    (tmp_path / "my_perturbs.py").write_text(example, encoding="utf-8")
    (tmp_path / "shout.yaml").write_text(suite, encoding="utf-8")
    out = tmp_path / "runs" / "shout"
    r = subprocess.run(
        [sys.executable, "-m", "harness.cli", "run", "shout.yaml", "--out", str(out), "--quiet", "--no-report"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]

    with open(out / "results.csv", newline="", encoding="utf-8") as f:
        rows = [row for row in csv.DictReader(f) if row["perturbation"] == "my_perturbs:ShoutingCase"]
    by_sev = {float(row["severity"]): row for row in rows}
    assert set(by_sev) == {0.1, 0.5}
    assert {row["perturbation_id"] for row in rows} == {"ShoutingCase"}
    assert 0 < float(by_sev[0.1]["edit_rate"]) < float(by_sev[0.5]["edit_rate"])

    samples = [json.loads(line) for line in (out / "samples.jsonl").read_text(encoding="utf-8").splitlines()]
    shouted = [s for s in samples if s["perturbation"] == "my_perturbs:ShoutingCase" and s["severity"] == 0.5]
    assert shouted and all(s["text_perturbed"].lower() == s["text"].lower() for s in shouted)
    assert any(s["text_perturbed"] != s["text"] for s in shouted)
