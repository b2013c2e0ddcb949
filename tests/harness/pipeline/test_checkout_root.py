"""Modules that find the checkout from their own path (the report process's and the ranks'
PYTHONPATH, the plan cache's code hash, the git commit in run.json) find the same folder: the one
holding harness/cli.py, whatever subpackage they sit in."""

from __future__ import annotations

from pathlib import Path

from harness.data import batchscore
from harness.overlap import reportproc
from harness.pipeline.launch import rank_env

ROOT = Path(__file__).resolve().parents[3]


def test_every_module_finds_the_checkout() -> None:
    assert (ROOT / "harness" / "cli.py").is_file()
    assert reportproc.ROOT == ROOT
    assert rank_env({})["PYTHONPATH"].split(":")[0] == str(ROOT)


def test_the_code_hash_reads_files_that_exist() -> None:
    missing = [f for f in batchscore._SHARED_CODE if not (ROOT / f).is_file()]
    assert not missing, f"code_hash would hash nothing for {missing}"
