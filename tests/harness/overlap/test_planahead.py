"""Perturbation ahead of training (``harness.overlap.planahead``): the forked process fits the
perturbations and fills the plan cache while the models train; the run's numbers are the same
as without it, the main process fits nothing when every plan is cached, and its failures reach
the main process with their type."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from core.forkpool import WorkerDied, can_fork
from harness.cli import main
from harness.overlap.planahead import FitOnDemand, PlanAhead, plan_ahead_wanted

pytestmark = pytest.mark.skipif(not can_fork(), reason="plan-ahead forks")

PLUGIN = '''\
from dataclasses import dataclass
import os, random
from pathlib import Path
from perturbations.base import Perturbation


@dataclass(kw_only=True)
class Logged(Perturbation):
    """Upper-cases a word in ten; fit() notes the pid that ran it in fits.log beside this file."""

    def fit(self, texts):
        with open(Path(__file__).with_name("fits.log"), "a") as f:
            f.write(f"{os.getpid()}\\n")

    def perturb(self, text: str, rng: random.Random) -> str:
        return " ".join(w.upper() if rng.random() < 0.1 else w for w in text.split(" "))
'''


def make_suite(tmp: Path) -> Path:
    from test_run import SUITE
    from test_run import make_suite as tiny

    path = tiny(tmp)
    (tmp / "tb_ahead.py").write_text(PLUGIN)
    path.write_text(SUITE.replace("  - {name: case.upper, severity: [0.5, 1.0]}",
                                  "  - {name: case.upper, severity: [0.5, 1.0]}\n  - {name: 'tb_ahead:Logged', id: logged}")
                    .replace("  - name: bytes\n",
                             "  - name: bytes\n  - {name: bpe, vocab_size: [300, 320]}\n"))
    return path


def run(suite: Path, out: Path, ahead: str, cache: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.setenv("TOKBENCH_CACHE", str(cache))
    on = "true" if ahead == "1" else "false"
    assert main(["run", str(suite), "--out", str(out), "--quiet", "--no-report", "--set", f"overlap.plan_ahead={on}"]) == 0
    return json.loads((out / "run.json").read_text())


def test_plan_ahead_gives_the_same_results_and_fits_only_in_its_process(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import harness.data.batchscore
    import harness.pipeline.cells
    import harness.pipeline.outputs

    # several processes even on a 2-core machine: the plan-ahead process forks perturbation
    # workers of its own, and the fit-ahead one a process per BPE model
    monkeypatch.setattr(harness.pipeline.cells, "usable_cpus", lambda: 4)
    monkeypatch.setattr(harness.pipeline.outputs, "usable_cpus", lambda: 4)
    monkeypatch.setattr(harness.data.batchscore, "usable_cpus", lambda: 4)
    suite = make_suite(tmp_path)
    try:
        plain = run(suite, tmp_path / "plain", "0", tmp_path / "cache0", monkeypatch)
        fits = tmp_path / "fits.log"
        assert fits.read_text().split() == [str(os.getpid())]  # fitted here, once
        fits.unlink()
        ahead = run(suite, tmp_path / "ahead", "1", tmp_path / "cache1", monkeypatch)  # a cold plan cache
    finally:
        sys.modules.pop("tb_ahead", None)
    pids = fits.read_text().split()
    assert len(pids) == 1 and pids[0] != str(os.getpid())  # fitted in the plan-ahead process only
    assert (tmp_path / "ahead" / "results.csv").read_text() == (tmp_path / "plain" / "results.csv").read_text()
    assert (tmp_path / "ahead" / "samples.jsonl").read_text() == (tmp_path / "plain" / "samples.jsonl").read_text()
    t = ahead["timings"]
    assert t["plan_ahead_fit_seconds"] >= 0 and t["plan_ahead_plans_seconds"] > 0 and t["plan_ahead_wait_seconds"] >= 0
    assert "plan_ahead_plans_seconds" not in plain["timings"]
    # BPE's merges were learned in the fit-ahead process and handed over: the same merges
    fit = ahead["encoders"]["bpe-300"]["seeds"]["0"]["fit"]
    assert fit["fitted_ahead"] is True and fit["cached"] is True and t["fit_ahead_seconds"] > 0
    assert ahead["encoders"]["bpe-320"]["seeds"]["0"]["fit"]["fitted_ahead"] is True
    assert "fitted_ahead" not in plain["encoders"]["bpe-300"]["seeds"]["0"]["fit"]
    assert fit["bytes_per_token_train"] == plain["encoders"]["bpe-300"]["seeds"]["0"]["fit"]["bytes_per_token_train"]


def test_wanted_by_default_on_a_gpu_only_and_forced_by_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.overlap.planahead as pa

    monkeypatch.setattr(pa, "usable_cpus", lambda: 16)
    assert plan_ahead_wanted("auto", "cuda", True) and not plan_ahead_wanted("auto", "cpu", True)
    assert not plan_ahead_wanted("auto", "cuda", False)  # nowhere to put the plans
    assert not plan_ahead_wanted(True, "cuda", False)
    monkeypatch.setattr(pa, "usable_cpus", lambda: 2)
    assert not plan_ahead_wanted("auto", "cuda", True)  # too few CPUs to share
    assert plan_ahead_wanted(True, "cpu", True)
    assert not plan_ahead_wanted(False, "cuda", True)


def test_process_result_error_and_death() -> None:
    ok = PlanAhead(lambda: {"fit_seconds": 1.0, "plans_seconds": 2.0})
    assert ok.wait() == {"fit_seconds": 1.0, "plans_seconds": 2.0}
    ok.check()  # finished: nothing to raise

    def fails() -> dict[str, float]:
        raise KeyError("no such perturbation")

    bad = PlanAhead(fails)
    with pytest.raises(KeyError, match="no such perturbation"):
        bad.wait()

    from harness.data.batchscore import perturb_many

    # it may fork workers of its own (its pool process is daemonic to multiprocessing)
    kids = PlanAhead(lambda: {"pids": perturb_many([0, 1, 2], lambda _: os.getpid(), 3)})
    assert len(set(kids.wait()["pids"])) == 3

    dead = PlanAhead(lambda: os._exit(7))  # type: ignore[func-returns-value]
    with pytest.raises(WorkerDied, match=r"plan-ahead: worker 0 \(pid \d+\) died \(exit code 7\)"):
        dead.wait()


def test_a_silent_process_is_a_named_error_not_a_hang(monkeypatch: pytest.MonkeyPatch) -> None:
    """Waiting for the plans is bounded like the guarded loops: twice TOKBENCH_STALL_SECONDS."""
    monkeypatch.setenv("TOKBENCH_STALL_SECONDS", "0.5")
    stuck = PlanAhead(lambda: time.sleep(60))  # type: ignore[arg-type,return-value]
    pid = stuck.proc.pid
    t0 = time.monotonic()
    with pytest.raises(TimeoutError, match=r"plan-ahead: worker 0 \(pid \d+\) sent no plans in 1 s \(stalled"):
        stuck.wait()
    assert time.monotonic() - t0 < 20
    with pytest.raises(ProcessLookupError):  # killed and reaped, not left running
        os.kill(pid, 0)


def test_fit_on_demand_answers_membership_without_fitting() -> None:
    calls = []

    def fit() -> dict:
        calls.append(1)
        return {("a", 1.0): {None: "x"}}

    lazy = FitOnDemand([("a", 1.0)], fit)
    assert ("a", 1.0) in lazy and ("b", 1.0) not in lazy and len(lazy) == 1
    assert not lazy.is_fitted and not calls
    assert lazy.get(("a", 1.0)) == {None: "x"} and lazy[("a", 1.0)][None] == "x"
    assert lazy.is_fitted and calls == [1]
    lazy.fitted()
    assert calls == [1]  # once


def test_morfessor_models_travel_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan-ahead process trains Morfessor for the morphology perturbations; the main process
    adopts those models, so the morphology analysis does not train the same ones again."""
    from collections import OrderedDict

    from perturbations.morphology import MorfessorSegmenter as M

    pytest.importorskip("morfessor")
    words = ["walking", "walked", "walks", "talking", "talked", "talks", "jumping", "jumped"] * 2
    probe = ["walking", "talked", "jumps"]
    monkeypatch.setattr(M, "_trained", OrderedDict())

    def child() -> dict:
        seg = M.train(words, seed=3)
        return {"models": M.trained_models(), "segments": [seg.segment(w) for w in probe]}

    got = PlanAhead(child).wait()
    assert not M._trained  # trained over there only
    M.adopt(got["models"])

    def never(types: list[str], seed: int) -> object:
        raise AssertionError("trained again")

    monkeypatch.setattr(M, "_train_model", staticmethod(never))
    assert [M.train(words, seed=3).segment(w) for w in probe] == got["segments"]


DIES = '''\
from dataclasses import dataclass
import os, random
from perturbations.base import Perturbation

MAIN = os.getpid()  # imported by the run itself


@dataclass(kw_only=True)
class DiesAway(Perturbation):
    """Its fit kills any process but the run's own (as the out-of-memory killer might)."""

    def fit(self, texts):
        if os.getpid() != MAIN:
            os._exit(9)

    def perturb(self, text: str, rng: random.Random) -> str:
        return text[::-1]
'''


def test_a_killed_plan_ahead_process_is_replaced_by_this_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The process dying (not a plugin raising) costs the run its head start, not its result."""
    import sys

    from test_run import SUITE
    from test_run import make_suite as tiny

    suite = tiny(tmp_path)
    (tmp_path / "tb_dies.py").write_text(DIES)
    suite.write_text(SUITE.replace("  - {name: case.upper, severity: [0.5, 1.0]}",
                                   "  - {name: 'tb_dies:DiesAway', id: dies}"))
    try:
        plain = run(suite, tmp_path / "plain", "0", tmp_path / "cache0", monkeypatch)
        ahead = run(suite, tmp_path / "ahead", "1", tmp_path / "cache1", monkeypatch)
    finally:
        sys.modules.pop("tb_dies", None)
    err = capsys.readouterr().err
    assert "[perturb] plan-ahead: worker 0" in err and "perturbing in this process instead" in err
    assert (tmp_path / "ahead" / "results.csv").read_text() == (tmp_path / "plain" / "results.csv").read_text()
    assert "plan_ahead_plans_seconds" not in ahead["timings"] and plain["status"] == ahead["status"] == "finished"


def test_analyses_prepared_ahead_give_the_same_buckets_and_no_text_work_here(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The morphology analysis fitted (with the BPE merges it reads, learned there) and prepared
    in the plan-ahead process: the run adopts its word tables after its own fit, computes none
    of them itself, and buckets.csv and results.csv are the same as without plan-ahead."""
    import harness.data.batchscore
    import harness.pipeline.cells
    import harness.pipeline.outputs
    from harness.analyses import morphology

    monkeypatch.setattr(harness.pipeline.cells, "usable_cpus", lambda: 4)
    monkeypatch.setattr(harness.pipeline.outputs, "usable_cpus", lambda: 4)
    monkeypatch.setattr(harness.data.batchscore, "usable_cpus", lambda: 4)
    from test_run import SUITE
    from test_run import make_suite as tiny

    suite = tiny(tmp_path)
    suite.write_text(SUITE.replace("  - name: bytes\n", "  - name: bytes\n  - {name: bpe, vocab_size: 300}\n")
                     + "analyses:\n  - name: morphology\n")
    made: list[int] = []  # word tables computed in this process
    real = morphology.MorphologyAnalysis._arrays

    def counted(self, lang, scored):  # noqa: ANN001, ANN202
        if os.getpid() == me:
            made.append(1)
        return real(self, lang, scored)

    me = os.getpid()
    monkeypatch.setattr(morphology.MorphologyAnalysis, "_arrays", counted)
    plain = run(suite, tmp_path / "plain", "0", tmp_path / "cache0", monkeypatch)
    assert made and "prepared_ahead" not in plain["analyses"]["morphology"]
    made.clear()
    ahead = run(suite, tmp_path / "ahead", "1", tmp_path / "cache1", monkeypatch)
    assert ahead["analyses"]["morphology"]["prepared_ahead"] is True
    assert made == []  # every word table came from the plan-ahead process
    assert ahead["timings"]["plan_ahead_analyses_seconds"] > 0
    for f in ("buckets.csv", "results.csv"):
        assert (tmp_path / "ahead" / f).read_text() == (tmp_path / "plain" / f).read_text(), f


def test_prepared_tables_are_refused_under_another_fit() -> None:
    from harness.analyses.morphology import MorphologyAnalysis
    from sources.base import Document

    docs = [Document(id=f"d{i}", data=f"walking talks {i} unbelievably kindness".encode(), language="en")
            for i in range(30)]
    a, b = MorphologyAnalysis(families=("seen", "morphs")), MorphologyAnalysis(families=("seen", "morphs"))
    a.fit(docs, {})
    a.prepare([(docs[0], docs[0].data)])
    got = a.export_prepared()
    assert got is not None and len(got["arrays"]) == 1
    b.fit(docs[:10], {})  # another training vocabulary
    assert not b.adopt_prepared(got) and not b._state["arrays"]
    b.fit(docs, {})
    assert b.adopt_prepared(got) and b.word_arrays("en", docs[0].data) is got["arrays"][next(iter(got["arrays"]))]
