"""The documented way to add a perturbation works when followed literally: the example in
docs/perturbations.md is written to a temporary directory as my_perturbs.py, resolved by
``module:Class`` name, previewed and checked against the contract."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.data.perturb import apply
from harness.data.preview import preview
from harness.infra.plugins import PluginError, resolve
from perturbations import contract

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "perturbations.md"


def howto() -> str:
    """docs/perturbations.md's "How to add a perturbation" section (checks follow it literally)."""
    text = DOC.read_text(encoding="utf-8")
    start = text.index("## How to add a perturbation")
    end = text.find("\n## ", start)
    return text[start : end if end > 0 else None]


def doc_example() -> str:
    blocks = re.findall(r"```python\n(.*?)```", howto(), flags=re.S)
    assert blocks, "docs/perturbations.md's 'How to add a perturbation' has no python example"
    return blocks[0]


def test_example_is_about_fifteen_lines() -> None:
    assert 10 <= len(doc_example().strip().splitlines()) <= 20


@pytest.fixture
def plugin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "my_perturbs.py").write_text(doc_example(), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    yield tmp_path
    sys.modules.pop("my_perturbs", None)


def test_doc_example_resolves_runs_and_keeps_the_contract(plugin_dir: Path) -> None:
    cls = resolve("perturbation", "my_perturbs:ShoutingCase", [plugin_dir])
    assert contract.check_all(cls) == []
    out = apply(cls(severity=1.0), "robust models read bytes", 0, "shout", {"severity": 1.0}, "d")
    assert out == "ROBUST MODELS READ BYTES"
    table = preview("my_perturbs:ShoutingCase", [0.0, 1.0], "big small", 0, {})
    # 'big small' -> 'BIG SMALL': 8 of 9 characters edited (the space is kept)
    assert table.splitlines()[-1].split() == ["1", "0.889", "9", "BIG", "SMALL"]
    assert table.splitlines()[-2].split() == ["0", "0.000", "9", "big", "small"]


def test_contract_cli_on_the_doc_example(plugin_dir: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "perturbations.contract", "my_perturbs:ShoutingCase"],
        capture_output=True, text=True, cwd=plugin_dir, timeout=120,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.startswith("ok my_perturbs:ShoutingCase")


def test_unknown_names_suggest_close_matches() -> None:
    with pytest.raises(PluginError, match="did you mean 'typo.keyboard'"):
        resolve("perturbation", "typo.keybord")


def test_doc_example_as_an_entry_point(plugin_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The packaged way: an installed distribution declaring the documented entry point (a bare
    .dist-info next to the module is what pip would install)."""
    doc = howto()
    toml = re.findall(r"```toml\n(.*?)```", doc, flags=re.S)[0]
    group, _, body = toml.partition("\n")
    assert group.strip() == '[project.entry-points."tokbench.perturbations"]'
    dist = plugin_dir / "shouting_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: shouting-plugin\nVersion: 0.1\n", encoding="utf-8")
    # entry_points.txt is the INI form of the TOML table (values without quotes)
    (dist / "entry_points.txt").write_text(
        "[tokbench.perturbations]\n" + body.strip().replace('"', "") + "\n", encoding="utf-8"
    )
    monkeypatch.syspath_prepend(str(plugin_dir))
    cls = resolve("perturbation", "shouting")
    assert cls.__name__ == "ShoutingCase"
    assert cls(severity=1.0).perturb("hi there", __import__("random").Random(0)) == "HI THERE"
