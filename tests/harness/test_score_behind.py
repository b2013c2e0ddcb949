"""Scoring behind training (``harness.scorebehind``, ``TOKBENCH_SCORE_BEHIND``): each trained
model's forwards run in a background thread while the next model trains; the run's thread makes
the cells from them. The same results files, to the byte, as scoring after training; a job's
error reaches the run with its type (a one-line error at the CLI); a bad setting is a one-line
error before any training (tests/harness/test_cells_behind.py); closing stops a job at its next batch."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
import torch

from core.forkpool import can_fork
from harness.cli import main
from harness.scorebehind import Cancelled, ForwardsBehind, score_behind_wanted


def test_jobs_run_in_order_in_one_thread_and_results_wait_for_them() -> None:
    gate = threading.Event()
    seen: list[str] = []
    behind = ForwardsBehind(torch.device("cpu"))
    try:
        def job(name: str, wait: bool = False):  # noqa: ANN202
            def run(check):  # noqa: ANN001, ANN202
                if wait:
                    assert gate.wait(10)
                check()
                seen.append(f"{name} in {threading.current_thread().name}")
                return name.upper()
            return run

        behind.submit("a", job("a", wait=True))
        behind.submit("b", job("b"))
        assert "a" in behind and "b" in behind
        seen.append("caller goes on")  # while a waits for the gate
        gate.set()
        assert behind.result("b") == "B"  # b waits for a: one thread, in order
        assert behind.result("a") == "A"
        assert seen == ["caller goes on", "a in tokbench-score-behind", "b in tokbench-score-behind"]
        assert "a" not in behind  # taken
        with pytest.raises(ValueError, match="already queued"):
            behind.submit("c", job("c"))
            behind.submit("c", job("c"))
        assert behind.busy_seconds > 0 and behind.wait_seconds > 0
    finally:
        behind.close()


def test_a_failed_job_raises_in_the_caller_with_its_type_and_close_stops_a_job_at_its_next_check() -> None:
    behind = ForwardsBehind(torch.device("cpu"))
    started, release = threading.Event(), threading.Event()
    checks: list[int] = []

    def boom(check):  # noqa: ANN001, ANN202
        raise KeyError("window 7")

    def long(check):  # noqa: ANN001, ANN202
        started.set()
        for i in range(1000):
            assert release.wait(10)
            check()  # raises once closed
            checks.append(i)
        return "never"

    behind.submit("boom", boom)
    with pytest.raises(KeyError, match="window 7"):
        behind.result("boom")
    behind.submit("long", long)
    behind.submit("queued", lambda check: "never started")
    assert started.wait(10)
    closer = threading.Thread(target=behind.close)
    closer.start()
    while not behind._stop.is_set():  # close() has asked
        pass
    release.set()
    closer.join(10)
    assert not closer.is_alive() and checks == []
    with pytest.raises(Cancelled):
        behind.result("long")


def test_off_unless_asked_for_and_env_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOKBENCH_SCORE_BEHIND", raising=False)
    assert not score_behind_wanted()  # measured on a GPU, no gain (session 20): opt-in
    monkeypatch.setenv("TOKBENCH_SCORE_BEHIND", "1")
    assert score_behind_wanted()
    monkeypatch.setenv("TOKBENCH_SCORE_BEHIND", "0")
    assert not score_behind_wanted()
    monkeypatch.setenv("TOKBENCH_SCORE_BEHIND", "later")
    with pytest.raises(ValueError, match=r"TOKBENCH_SCORE_BEHIND='later': expected 0 or 1"):
        score_behind_wanted()


def test_scoring_behind_training_gives_the_same_files_and_scores_each_model_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two models (a byte model and a padded BPE one), scored after training and behind it: the
    same results.csv and samples.jsonl bytes (CPU scoring is deterministic), every packed job
    made in the thread, none in the run's, and a resumed run (every cell on disk) scores nothing."""
    from test_run import SUITE, make_suite

    import harness.run

    suite = make_suite(tmp_path)
    suite.write_text(SUITE.replace("  - name: bytes\n", "  - name: bytes\n  - {name: bpe, vocab_size: 300}\n"))
    where: list[str] = []
    real = harness.run.start_scoring  # where each packed job starts (it then runs in that thread)

    def spy(*a, **k):  # noqa: ANN002, ANN003, ANN202
        where.append(threading.current_thread().name)
        return real(*a, **k)

    monkeypatch.setattr(harness.run, "start_scoring", spy)
    # two models' cells at once where they are made behind (cell_jobs: on a GPU host's CPUs)
    monkeypatch.setattr(harness.run, "cell_jobs", lambda behind: 2 if behind else 1)
    runs = {}
    # the third: with the GPU run's other helpers too — plans made ahead in a forked process
    # (the scoring thread waits for them) and cells made in threads of their own
    variants = [("after", "0", "0"), ("behind", "1", "0")] + ([("behind-ahead", "1", "1")] if can_fork() else [])
    for name, behind, ahead in variants:
        where.clear()
        monkeypatch.setenv("TOKBENCH_SCORE_BEHIND", behind)
        for env in ("TOKBENCH_PLAN_AHEAD", "TOKBENCH_CELLS_BEHIND"):
            monkeypatch.setenv(env, ahead)
        monkeypatch.setenv("TOKBENCH_CACHE", str(tmp_path / f"cache-{name}"))  # plans made afresh
        out = tmp_path / name
        assert main(["run", str(suite), "--out", str(out), "--quiet", "--no-report"]) == 0
        runs[name] = (json.loads((out / "run.json").read_text()), list(where))
    for name, _, _ in variants[1:]:
        for f in ("results.csv", "samples.jsonl"):
            assert (tmp_path / name / f).read_bytes() == (tmp_path / "after" / f).read_bytes(), (name, f)
        assert runs[name][1] == ["tokbench-score-behind"] * 4, name
    if can_fork():
        assert "plan_ahead_plans_seconds" in runs["behind-ahead"][0]["timings"]  # the plans were made ahead
    assert runs["after"][1] == [threading.current_thread().name] * 4  # 2 models x 2 eval sets
    t = runs["behind"][0]["timings"]
    assert t["score_behind_seconds"] > 0 and t["score_behind_wait_seconds"] >= 0
    assert t.get("score_items_seconds", 0.0) == 0.0  # nothing left to score in the run's thread
    # the per-model scoring facts add up the same way (bytes and windows are exact counts)
    for label, sp in runs["after"][0]["speed"]["score"].items():
        got = runs["behind"][0]["speed"]["score"][label]
        assert (got["windows"], got["scored_bytes"]) == (sp["windows"], sp["scored_bytes"]), label
    where.clear()
    monkeypatch.setenv("TOKBENCH_CACHE", str(tmp_path / "cache-behind"))
    assert main(["run", str(suite), "--out", str(tmp_path / "behind"), "--quiet", "--no-report"]) == 0
    assert where == []  # every cell on disk: no forwards at all, behind or not


def test_an_error_in_a_forward_behind_training_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from test_run import make_suite

    import harness.run

    def broken(*a, **k):  # noqa: ANN002, ANN003, ANN202
        raise ValueError("bytes: scoring broke on window 3")

    monkeypatch.setattr(harness.run, "start_scoring", broken)
    monkeypatch.setenv("TOKBENCH_SCORE_BEHIND", "1")
    suite = make_suite(tmp_path)
    assert main(["run", str(suite), "--out", str(tmp_path / "o"), "--quiet", "--no-report"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.startswith("tokbench: error:")]
    assert len(lines) == 1 and "scoring broke on window 3" in lines[0]


def test_a_compiled_call_while_another_thread_traces_runs_uncompiled_while_the_thread_lives() -> None:
    """torch 2.11 on a GPU (session 20): the scoring thread's compiled forward, called while the
    training thread's AOTAutograd trace had FX's process-wide tracing flag set, raised. The flag
    is set here by hand (as that other thread's trace would); with the scoring thread alive the
    call runs uncompiled and gives the module's value; after ``close`` torch's setting is back."""
    import torch._dynamo
    import torch.fx._symbolic_trace as fx_trace

    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 8)
    compiled = torch.compile(lin, backend="eager")
    x = torch.randn(2, 8)
    want = lin(x)
    torch._dynamo.config.error_on_nested_fx_trace = True  # torch's default

    def traced_elsewhere() -> torch.Tensor:
        old = fx_trace._is_fx_tracing_flag
        fx_trace._is_fx_tracing_flag = True
        try:
            with torch.no_grad():
                return compiled(x)
        finally:
            fx_trace._is_fx_tracing_flag = old

    with pytest.raises(RuntimeError, match="symbolically trace a dynamo-optimized function"):
        traced_elsewhere()
    behind = ForwardsBehind(torch.device("cpu"))
    try:
        assert torch.equal(traced_elsewhere(), want.detach())  # in the run's thread
        behind.submit("fwd", lambda check: traced_elsewhere())  # and in the scoring thread
        assert torch.equal(behind.result("fwd"), want.detach())
    finally:
        behind.close()
    assert torch._dynamo.config.error_on_nested_fx_trace
