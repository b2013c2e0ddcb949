"""User-given names that would break a file name, a CSV cell or a terminal line are refused when
the suite is validated (harness/config/names.py), and cache file names come from a hash, never from
user text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.cli import main
from harness.config.names import MAX_NAME_CHARS, name_problem


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    from reliability_suite import make_suite

    return make_suite(tmp_path)


@pytest.mark.parametrize("override,needle", [
    ("encoders[0]={name: bytes, id: " + "x" * 300 + "}", "encoders[0].id: encoder label is 300 characters long"),
    ('encoders[0]={name: bytes, id: "a\\0b"}', "encoders[0].id: encoder label holds the control character '\\x00'"),
    ('encoders[0]={name: bytes, id: "a\\u001b[31mred"}', "control character '\\x1b'"),
    ("perturbations[0].id=../../etc", "perturbations[0].id: perturbation id holds a path separator '/'"),
    ('data.eval[0].name="a\\nb"', "data.eval[0].name: eval set name holds the control character '\\n'"),
    ("name=" + "n" * 300, "name: suite name is 300 characters long"),
])
def test_bad_name_is_one_line_at_validate(override: str, needle: str, suite: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(suite), "--set", override]) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if not ln.startswith("tokbench: warning:")]
    assert len(err) == 1 and needle in err[0] , err


def test_name_rules() -> None:
    assert name_problem("bpe-4096") is None and name_problem("ünïcode.ok_1") is None
    assert name_problem("x" * MAX_NAME_CHARS) is None
    assert name_problem("x" * (MAX_NAME_CHARS + 1))
    assert name_problem("..") and name_problem("") and name_problem("a\u2028b")


def test_cache_file_names_are_hashes(run_copy: tuple[Path, Path], tmp_path: Path) -> None:
    """A long (100-character) unicode label trains, scores and caches: no file name holds it."""
    suite, _ = run_copy
    label = "é" * 100
    out = tmp_path / "o"
    assert main(["run", str(suite), "--out", str(out), "--quiet", "--no-report",
                 "--set", f"encoders[0]={{name: bytes, id: {label}}}"]) == 0
    names = [p.name for p in out.rglob("*") if p.is_file()]
    assert names and all(re.fullmatch(r"[0-9a-f]{20}(\.partial)?\.(pt|json)", n) for n in names
                         if n not in ("run.json", "results.csv", "samples.jsonl", ".lock", ".seal.key"))
    assert label in (out / "results.csv").read_text()
