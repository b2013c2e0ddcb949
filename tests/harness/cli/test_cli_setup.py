"""CLI rough edges a new user hits: validate checks data paths, --version, whole suite
descriptions in `ls suites`, shipped suites found after a plain install, the load warning."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.cli import main, plain_doc, suite_description, suites_dir
from harness.pipeline.preflight import load_warning

ROOT = Path(__file__).resolve().parent.parent.parent.parent

SUITE = """\
name: paths
seeds: [0]
data:
  train: {paths: [corpus.txt]}
  eval:
    - {name: heldout, paths: [corpus.txt]}
    - {name: missing, paths: [nowhere/absent.txt]}
encoders:
  - name: bytes
"""


def test_validate_fails_on_a_missing_data_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "corpus.txt").write_text("Some text.\n\nMore text.\n")
    (tmp_path / "s.yaml").write_text(SUITE)
    monkeypatch.chdir(tmp_path)  # suite folder == working directory: named once
    assert main(["validate", str(tmp_path / "s.yaml")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "data.eval[1] (missing)" in err and "'nowhere/absent.txt' matches no file" in err
    assert err.count(str(tmp_path.resolve())) == 2  # the suite path and the folder, once
    assert " and " not in err.split("looked in")[1]
    (tmp_path / "nowhere").mkdir()
    (tmp_path / "nowhere" / "absent.txt").write_text("now here\n")
    assert main(["validate", str(tmp_path / "s.yaml")]) == 0
    assert "# OK" in capsys.readouterr().out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith("tokbench ") and len(out.split()) == 2


def test_ls_suites_shows_whole_descriptions(capsys: pytest.CaptureFixture[str]) -> None:
    text = "# First line of a description that\n# goes on here.\n#\n#   tokbench run x\nname: x\n"
    assert suite_description(text) == "First line of a description that goes on here."
    assert main(["ls", "suites"]) == 0
    out = capsys.readouterr().out
    for p in sorted(suites_dir().glob("*.yaml")):
        assert f"{p.stem:<16} {suite_description(p.read_text(encoding='utf-8'))}" in out
    assert "trained on a mixture of all five." in out  # morphology's second line


def test_ls_shows_docstrings_without_rst_markup(capsys: pytest.CaptureFixture[str]) -> None:
    assert plain_doc("Quotes of a ``fortunes-*`` package, see :class:`~x.Y` and :func:`f`.") == (
        "Quotes of a fortunes-* package, see x.Y and f.")
    assert main(["ls", "sources"]) == 0
    out = capsys.readouterr().out
    assert "fortunes-*" in out and "``" not in out


def test_every_option_has_a_help_line() -> None:
    import argparse

    from harness.cli import build_parser

    def walk(p: argparse.ArgumentParser, path: str):
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for name, sub in a.choices.items():
                    yield from walk(sub, f"{path} {name}")
            elif not isinstance(a, (argparse._HelpAction, argparse._VersionAction)):
                yield path, a

    bare = [f"{path} {a.dest}" for path, a in walk(build_parser(), "tokbench") if not a.help]
    assert bare == []


def test_shipped_suites_resolve_after_a_plain_install(tmp_path: Path) -> None:
    """Build the wheel (no deps, no network), unpack it as site-packages, and resolve a suite
    by name from an unrelated working directory."""
    src = tmp_path / "src"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.splitlines()
    keep = ("harness/", "encoders/", "perturbations/", "reports/", "core/", "suites/",
            "sources/")
    for f in files:
        if (f in ("pyproject.toml", "README.md") or f.startswith(keep)) and (ROOT / f).is_file():
            (src / f).parent.mkdir(parents=True, exist_ok=True)
            (src / f).write_bytes((ROOT / f).read_bytes())
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                        "--no-build-isolation", "--no-index", ".", "-w", str(tmp_path / "dist")],
                       cwd=src, capture_output=True, text=True, timeout=300)
    if r.returncode != 0 and "No module named" in r.stderr:
        pytest.skip(f"cannot build a wheel here: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr
    site = tmp_path / "site"
    with zipfile.ZipFile(next((tmp_path / "dist").glob("tokbench-*.whl"))) as z:
        z.extractall(site)
    assert (site / "suites" / "smoke.yaml").is_file()
    work = tmp_path / "elsewhere"
    work.mkdir()
    code = "from harness.cli import find_suite; print(find_suite('smoke'))"
    r = subprocess.run([sys.executable, "-c", code], cwd=work, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(site)}, timeout=60)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()) == site / "suites" / "smoke.yaml"


def test_load_warning_when_oversubscribed() -> None:
    warn = load_warning((5.2, 4.0, 3.0), cores=2)
    assert "oversubscribed" in warn and "5.2" in warn and "idle machine" in warn
    assert load_warning((1.9, 1.0, 1.0), cores=2) == ""


def test_load_warning_switch_turns_off_the_live_reading_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "getloadavg", lambda: (99.0, 99.0, 99.0))
    monkeypatch.setenv("TOKBENCH_LOAD_WARNING", "1")
    assert "99.0" in load_warning(cores=2)
    monkeypatch.setenv("TOKBENCH_LOAD_WARNING", "0")  # as tests/conftest.py sets it
    assert load_warning(cores=2) == ""
    assert "5.2" in load_warning((5.2, 4.0, 3.0), cores=2)  # an explicit reading still warns


SHOUT = '''\
from dataclasses import dataclass

from perturbations import Perturbation


@dataclass(kw_only=True)
class Shout(Perturbation):
    """Upper-cases everything. severity: unused."""

    def perturb(self, text, rng):
        return text.upper()
'''


def test_perturb_finds_a_plugin_by_plugin_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    plug = tmp_path / "plug"
    plug.mkdir()
    (plug / "tb_cli_shout.py").write_text(SHOUT)
    monkeypatch.chdir(tmp_path)  # not the plugin's folder
    assert main(["perturb", "tb_cli_shout:Shout", "--text", "quiet words"]) == 2
    err = capsys.readouterr().err
    assert f"folders searched: {tmp_path.resolve()}" in err and "--plugin-path" in err
    assert main(["perturb", "tb_cli_shout:Shout", "--text", "quiet words",
                 "--plugin-path", str(plug), "--severity", "1"]) == 0
    assert "QUIET WORDS" in capsys.readouterr().out
