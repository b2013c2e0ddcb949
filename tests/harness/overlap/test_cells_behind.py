"""A model's cells made in the background while the next model scores (``CellsBehind``,
``overlap.cells_behind``) and the results files read back in several processes
(``assemble``): the same files, to the byte, as one cell after another in one process; a
cell job's error reaches the run with its type; a bad setting is a one-line error."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import torch

from core.forkpool import can_fork
from harness.cli import main
from harness.overlap.cellsbehind import CellsBehind, cells_behind_wanted


def test_cells_behind_runs_one_job_at_a_time_and_lands_each_in_the_callers_thread() -> None:
    order: list[str] = []
    gate = threading.Event()
    behind = CellsBehind(True)

    def job(name: str, wait: bool = False) -> None:
        if wait:
            assert gate.wait(10)
        order.append(f"job {name} in {threading.current_thread().name}")

    def landed(name: str) -> None:
        order.append(f"landed {name} in {threading.current_thread().name}")

    behind.submit(lambda: job("a", wait=True), lambda: landed("a"))
    order.append("caller goes on")  # while job a waits
    gate.set()
    behind.submit(lambda: job("b"), lambda: landed("b"))  # waits for a, lands it here, starts b
    behind.join()
    main_name = threading.current_thread().name
    assert order == ["caller goes on", "job a in tokbench-cells", f"landed a in {main_name}",
                     "job b in tokbench-cells", f"landed b in {main_name}"]
    assert behind.wait_seconds >= 0.0

    # off: each job and its landing at once, in the caller's thread
    order.clear()
    off = CellsBehind(False)
    off.submit(lambda: job("c"), lambda: landed("c"))
    assert order == [f"job c in {main_name}", f"landed c in {main_name}"]


def test_several_jobs_at_once_run_together_and_land_in_the_order_submitted() -> None:
    """``jobs=2``: two jobs are under way at once
    — the second starts while the first still waits — and a third submit waits for the oldest;
    each lands in the caller's thread, in submission order, whichever job ended first."""
    order: list[str] = []
    started_b, gate_a = threading.Event(), threading.Event()
    behind = CellsBehind(True, jobs=2)

    def job_a() -> None:
        assert started_b.wait(10)  # b runs while a is under way: two at once
        assert gate_a.wait(10)
        order.append("job a")

    def job_b() -> None:
        started_b.set()
        order.append("job b")  # ends first

    behind.submit(job_a, lambda: order.append("landed a"))
    behind.submit(job_b, lambda: order.append("landed b"))
    assert started_b.wait(10)
    gate_a.set()
    behind.submit(lambda: order.append("job c"), lambda: order.append("landed c"))  # waits for a only
    assert order[:3] == ["job b", "job a", "landed a"]
    behind.join()
    assert order[3:] == ["job c", "landed b", "landed c"] or order[3:] == ["landed b", "job c", "landed c"]


def test_an_error_in_one_of_several_jobs_is_raised_and_the_others_finish_without_landing() -> None:
    landed: list[str] = []
    done: list[str] = []
    behind = CellsBehind(True, jobs=3)

    def boom() -> None:
        raise KeyError("cell 7")

    behind.submit(boom, lambda: landed.append("a"))
    behind.submit(lambda: done.append("b"), lambda: landed.append("b"))
    with pytest.raises(KeyError, match="cell 7"):
        behind.join()
    assert landed == [] and done == ["b"]  # b ran to its end (its files whole), landed nothing
    behind.join()  # nothing left under way


def test_a_failed_cell_job_is_raised_in_the_caller_with_its_type_and_never_lands() -> None:
    landed: list[int] = []
    behind = CellsBehind(True)

    def boom() -> None:
        raise KeyError("cell 3")

    behind.submit(boom, lambda: landed.append(1))
    with pytest.raises(KeyError, match="cell 3"):
        behind.submit(lambda: None, lambda: landed.append(2))  # the next submit meets it first
    assert landed == []
    behind.submit(boom, lambda: landed.append(3))
    behind.join(quiet=True)  # an error elsewhere already: dropped
    behind.join()  # nothing under way
    assert landed == []


def test_wanted_on_a_gpu_by_default_and_forced_by_the_setting() -> None:
    assert cells_behind_wanted("auto", "cuda") and not cells_behind_wanted("auto", "cpu")
    assert cells_behind_wanted(True, "cpu")
    assert not cells_behind_wanted(False, "cuda")


def test_a_bad_overlap_setting_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from test_run import make_suite

    suite = make_suite(tmp_path)
    for setting in ("overlap.cells_behind=yes", "overlap.compile_ahead_workers=5", "overlap.behind=true"):
        assert main(["run", str(suite), "--out", str(tmp_path / "o"), "--quiet", "--no-report",
                     "--set", setting]) == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err
        lines = [ln for ln in err.splitlines() if ln.startswith("tokbench: error:")]
        assert len(lines) == 1 and setting.split("=")[0].split(".")[1] in lines[0], lines


@pytest.mark.parametrize("env,expected", [
    ("TOKBENCH_STALL_SECONDS", "expected a positive number of seconds"),  # harness.infra.watchdog
])
def test_bad_env_is_one_line_exit_2_before_any_training(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str], env: str,
                                                        expected: str) -> None:
    from test_run import make_suite

    suite = make_suite(tmp_path)
    monkeypatch.setenv(env, "on")
    assert main(["run", str(suite), "--out", str(tmp_path / "o"), "--quiet", "--no-report"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert [ln for ln in err.splitlines() if ln.startswith("tokbench: error:")] == [
        f"tokbench: error: {env}='on': {expected}"]
    assert not (tmp_path / "o" / "models").exists() or not any((tmp_path / "o" / "models").iterdir())


@pytest.mark.skipif(not can_fork(), reason="cells and results files are made in forked processes")
def test_cells_behind_and_results_files_in_processes_give_the_same_bytes(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from test_run import SUITE, make_suite

    import harness.pipeline.cells
    import harness.pipeline.outputs

    suite = make_suite(tmp_path)
    # two models, so a model's cells are made while the next one scores
    suite.write_text(SUITE.replace("  - name: bytes\n", "  - name: bytes\n  - {name: bpe, vocab_size: 300}\n"))
    monkeypatch.setattr(harness.pipeline.cells, "usable_cpus", lambda: 4)  # cell processes even on 2 cores
    runs = {}
    for name, behind, procs in (("plain", "false", 1), ("behind", "true", 3)):
        monkeypatch.setattr(harness.pipeline.outputs, "assemble_processes", lambda n, procs=procs: procs)
        out = tmp_path / name
        assert main(["run", str(suite), "--out", str(out), "--quiet", "--no-report",
                     "--set", f"overlap.cells_behind={behind}"]) == 0
        runs[name] = json.loads((out / "run.json").read_text())
        assert not list(out.glob(".*.tmp"))  # samples.jsonl's part files are gone
    for f in ("results.csv", "samples.jsonl"):
        assert (tmp_path / "behind" / f).read_bytes() == (tmp_path / "plain" / f).read_bytes(), f
    rows = (tmp_path / "plain" / "results.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * 2 * 3 * 2  # header; 2 models x 2 eval sets x 3 perturbation cells x 2 modes
    t = runs["behind"]["timings"]
    assert t["score_cells_seconds"] > 0 and t["score_cells_wait_seconds"] >= 0


def test_model_files_written_behind_are_the_models_and_a_rerun_loads_them(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Behind the run (``overlap.cells_behind``), each model's files are written in a thread while
    the next model trains: the same files, byte for byte, as written in turn, and a second run
    loads every model from them (the same results)."""
    from test_run import SUITE, make_suite

    suite = make_suite(tmp_path)
    suite.write_text(SUITE.replace("  - name: bytes\n", "  - name: bytes\n  - {name: bpe, vocab_size: 300}\n"))
    for name, behind in (("plain", "false"), ("behind", "true")):
        assert main(["run", str(suite), "--out", str(tmp_path / name), "--quiet", "--no-report",
                     "--set", f"overlap.cells_behind={behind}"]) == 0
    files = {d: sorted((tmp_path / d / "models").iterdir()) for d in ("plain", "behind")}
    assert [p.name for p in files["plain"]] == [p.name for p in files["behind"]] and len(files["plain"]) >= 4
    for a, b in zip(files["plain"], files["behind"]):
        if a.suffix == ".json":  # the meta: the same facts (its clocks differ from run to run)
            assert json.loads(a.read_text()).keys() == json.loads(b.read_text()).keys()
        elif a.suffix == ".pt":  # the weights: CPU training is deterministic (the seals' keys differ)
            assert (torch.load(a, weights_only=True)["payload"] == torch.load(b, weights_only=True)["payload"]), a.name
    t = json.loads((tmp_path / "behind" / "run.json").read_text())["timings"]
    assert t["model_save_seconds"] > 0 and t["model_save_wait_seconds"] >= 0
    capsys.readouterr()
    assert main(["run", str(suite), "--out", str(tmp_path / "behind"), "--quiet", "--no-report",
                 "--set", "overlap.cells_behind=true"]) == 0
    assert capsys.readouterr().err.count("loaded from cache") == 2


def test_a_model_file_that_fails_behind_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    import errno

    from test_run import make_suite

    from harness.infra.results import RunDir

    def full(self, key, state, meta):  # type: ignore[no-untyped-def]
        raise OSError(errno.ENOSPC, "No space left on device", str(self.model_path(key)))

    monkeypatch.setattr(RunDir, "save_model", full)
    suite = make_suite(tmp_path)
    assert main(["run", str(suite), "--out", str(tmp_path / "o"), "--quiet", "--no-report",
                 "--set", "overlap.cells_behind=true"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("tokbench: error:")]
    assert len(lines) == 1 and "disk full" in lines[0]
