"""A packed scoring job started ahead (``harness.score.items.start_scoring`` / ``ScoreJob``, issue 16):
the run starts the next model's job while this one's forwards run, so its first batches are
collated by its turn. Started early or in turn, a job forms the same batches, so its numbers are
the same to the bit; the hook that starts it runs once, after the first forward; a job that never
runs is closed with its collation workers; and a whole run gives the same files either way."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_score_dedup import CPU, blt, bpe, byte_ar, cells

from core.forkpool import can_fork
from encoders.base import Encoder
from harness.cli import main
from harness.score.items import ScoreJob, score_items, start_scoring

ENCODERS = [byte_ar, bpe, blt]
IDS = ["bytes", "bpe", "blt"]
# forked collation workers, as on a GPU host (on the CPU the run collates in the prefetch thread)
WORKERS = 2 if can_fork() else 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped) is gone for our purpose
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return True


def _children() -> set[int]:
    """This process's live children (Linux: /proc/<pid>/task/*/children)."""
    out: set[int] = set()
    try:
        for task in os.listdir(f"/proc/{os.getpid()}/task"):
            with open(f"/proc/{os.getpid()}/task/{task}/children") as f:
                out |= {int(p) for p in f.read().split()}
    except OSError:
        return set()
    return {p for p in out if _alive(p)}


def _same(xs: list[Any], ys: list[Any]) -> None:
    assert len(xs) == len(ys)
    for x, y in zip(xs, ys):
        assert x is not None and y is not None
        assert np.array_equal(x.byte_nll, y.byte_nll) and x.nll == y.nll
        assert x.n_units == y.n_units and x.segments == y.segments


@pytest.mark.parametrize("make", ENCODERS, ids=IDS)
def test_a_job_started_while_another_runs_scores_bit_for_bit_as_one_started_in_turn(
        make: Callable[[], Encoder]) -> None:
    items, modes, _ = cells()
    first, second = byte_ar(), make()
    kw: dict[str, Any] = dict(batch_windows=5, collate_workers=WORKERS, groups=modes)
    in_turn_stats: dict[str, Any] = {}
    in_turn = score_items(second, items, CPU, stats=in_turn_stats, **kw)

    # the second job starts from the first one's hook, after its first forward; it runs later
    forwards: list[int] = []
    real_forward = first.forward

    def counted(*a: Any, **k: Any) -> Any:
        forwards.append(1)
        return real_forward(*a, **k)

    first.forward = counted  # type: ignore[method-assign]
    started: list[ScoreJob] = []
    hook_saw: list[int] = []

    def hook() -> None:
        hook_saw.append(len(forwards))
        started.append(start_scoring(second, items, CPU, stats=ahead_stats, **kw))

    ahead_stats: dict[str, Any] = {}
    score_items(first, items, CPU, started=hook, **kw)
    assert hook_saw == [1] and len(forwards) > 1  # once, right after the first forward
    (job,) = started
    ahead = job.run()
    _same(ahead, in_turn)
    for k in ("windows", "scored_bytes", "duplicate_windows", "forward_flops"):
        assert ahead_stats[k] == in_turn_stats[k], k
    # its clocks start with its run: neither the first batch nor the job's seconds include the
    # other job's forwards it was started beside
    assert 0 <= ahead_stats["first_batch_seconds"] <= ahead_stats["seconds"]
    with pytest.raises(RuntimeError, match="has run or was closed"):
        job.run()
    job.close()  # after run: nothing to do


@pytest.mark.skipif(not can_fork(), reason="collation workers are forked processes")
def test_a_job_closed_before_it_runs_ends_its_thread_and_workers() -> None:
    items, _, _ = cells()
    before = _children()
    job = start_scoring(bpe(), items, CPU, batch_windows=2, collate_workers=2)
    deadline = time.time() + 30
    while len(_children() - before) < 2 and time.time() < deadline:  # both workers forked
        time.sleep(0.02)
    workers = _children() - before
    assert len(workers) == 2
    job.close()
    deadline = time.time() + 10
    while any(_alive(p) for p in workers) and time.time() < deadline:
        time.sleep(0.05)
    assert not any(_alive(p) for p in workers)
    with pytest.raises(RuntimeError, match="has run or was closed"):
        job.run()


def test_a_run_gives_the_same_files_with_jobs_started_ahead_or_in_turn(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three models (bytes, a padded BPE, bytes again under another label) over two eval sets:
    with jobs started ahead, every job but each set's first is started from the one before it,
    and results.csv and samples.jsonl are the same bytes as with each job started in turn."""
    from test_run import SUITE, make_suite

    import harness.pipeline.scoring
    import harness.score.items

    suite = make_suite(tmp_path)
    suite.write_text(SUITE.replace("  - name: bytes\n", "  - name: bytes\n  - {name: bpe, vocab_size: 300}\n"
                                   "  - {name: bytes, id: bytes-2}\n"))
    real = harness.pipeline.scoring.start_scoring
    starts: list[tuple[str, bool]] = []  # (encoder class, started from another job's hook)

    def spy(encoder: Encoder, *a: Any, **k: Any) -> ScoreJob:
        import traceback

        from_hook = any(f.name == "started" for f in traceback.extract_stack())
        starts.append((type(encoder).__name__, from_hook))
        return real(encoder, *a, **k)

    monkeypatch.setattr(harness.pipeline.scoring, "start_scoring", spy)
    runs = {}
    for name, on in (("in-turn", "0"), ("ahead", "1")):
        starts.clear()
        monkeypatch.setattr(harness.score.items, "PRESTART", on == "1")
        out = tmp_path / name
        assert main(["run", str(suite), "--out", str(out), "--quiet", "--no-report"]) == 0
        runs[name] = (json.loads((out / "run.json").read_text()), list(starts))
    for f in ("results.csv", "samples.jsonl"):
        assert (tmp_path / "ahead" / f).read_bytes() == (tmp_path / "in-turn" / f).read_bytes(), f
    # 3 models x 2 eval sets; ahead: the second and third job of each set came from a hook
    assert [h for _, h in runs["in-turn"][1]] == [False] * 6
    assert [h for _, h in runs["ahead"][1]] == [False, True, True] * 2
    for label, sp in runs["in-turn"][0]["speed"]["score"].items():
        got = runs["ahead"][0]["speed"]["score"][label]
        assert (got["windows"], got["scored_bytes"]) == (sp["windows"], sp["scored_bytes"]), label


def test_a_job_that_fails_to_start_ahead_is_a_one_line_error_and_leaves_no_worker(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The second model's job fails as it starts (from the first job's hook): the run ends with
    one line naming the error, the first job's collation is torn down, and no process it forked
    is left."""
    from test_run import SUITE, make_suite

    import harness.pipeline.scoring
    import harness.score.items

    suite = make_suite(tmp_path)
    suite.write_text(SUITE.replace("  - name: bytes\n", "  - name: bytes\n  - {name: bytes, id: bytes-2}\n"))
    real = harness.pipeline.scoring.start_scoring
    calls: list[int] = []

    def failing(*a: Any, **k: Any) -> ScoreJob:
        calls.append(1)
        if len(calls) == 2:
            raise ValueError("bytes-2: the scoring set-up broke")
        return real(*a, **k)

    monkeypatch.setattr(harness.pipeline.scoring, "start_scoring", failing)
    monkeypatch.setattr(harness.score.items, "PRESTART", True)
    before = _children()
    assert main(["run", str(suite), "--out", str(tmp_path / "o"), "--quiet", "--no-report"]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("tokbench: error:")]
    assert "Traceback" not in err and len(lines) == 1 and "the scoring set-up broke" in lines[0]
    deadline = time.time() + 10
    while _children() - before and time.time() < deadline:
        time.sleep(0.05)
    assert not _children() - before
