"""harness.train.stacked on CPU: K same-shape models trained as one stacked model take the steps each
would take alone — per-step losses and final weights equal ``train_step``'s and ``train_encoder``'s
to float rounding (rtol 1e-5, fp32: the NLL and the AdamW terms are summed in another order) —
for byte-level and BPE models, with each member's own learning-rate schedule and FLOP cap."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from _builders import fitted_encoders

from harness.train.loop import autocast_for, make_optimizer, train_encoder, train_step
from harness.train.stacked import Stack, StackedStep, fixed_shape
from harness.train.stacked_loop import Member, train_stack

# AdamW divides by the root of its second moment: where that is tiny, the batched GEMM's other
# rounding order moves a weight by ~1e-6 after five steps (measured 1.14e-6 on one of 1,024)
WEIGHT_ATOL = 1e-5

TEXT = b"the quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs. " * 30


def _build(tmp: Path, which: int, n: int) -> tuple[Any, list[Any]]:
    return fitted_encoders(tmp, which, n, layers=2, text=TEXT)


def _windows(n: int) -> list[bytes]:
    return [TEXT[(i * 37) % 900:][:64] for i in range(n)]


@pytest.mark.parametrize("which", [0, 1], ids=["bytes", "bpe"])
def test_stacked_step_equals_each_model_alone(tmp_path: Path, which: int) -> None:
    torch.set_num_threads(1)
    suite, encs = _build(tmp_path, which, 6)
    b = replace(suite.budget, weight_decay=0.1)
    lrs = [[0.01, 0.003, 0.02][k] * (1 + 0.1 * i) for i in range(5) for k in range(3)]
    ws = _windows(20)
    batches = [encs[0].collate(ws[i * 4:(i + 1) * 4], [0] * 4) for i in range(5)]
    alone = encs[:3]
    stacked_encs = encs[3:]
    step = StackedStep(Stack.of(stacked_encs, stacked_encs[0], torch.device("cpu")), stacked_encs[0], b,
                       torch.device("cpu"))
    opts = [make_optimizer(e, b) for e in alone]
    for i, batch in enumerate(batches):
        want = [float(train_step(e, batch, o, lrs[3 * i + k], b, autocast_for(b, torch.device("cpu"))))
                for k, (e, o) in enumerate(zip(alone, opts))]
        got = step(batch, lrs[3 * i: 3 * i + 3], batch.scored_bytes, i).tolist()
        assert got == pytest.approx(want, rel=1e-5), i
    for k, e in enumerate(alone):
        step.stack.write_into(k, stacked_encs[k])
        for (name, p), q in zip(e.named_parameters(), stacked_encs[k].parameters()):
            torch.testing.assert_close(q, p, rtol=1e-5, atol=WEIGHT_ATOL, msg=name)


def test_only_byte_level_stacks_replay_graphs(tmp_path: Path) -> None:
    """Graphs need one batch shape: byte-level windows have it, BPE's token counts do not."""
    _, byte_encs = _build(tmp_path, 0, 1)
    _, bpe_encs = _build(tmp_path, 1, 1)
    assert fixed_shape(byte_encs[0]) and not fixed_shape(bpe_encs[0])
    shapes = {tuple(bpe_encs[0].collate([w], [0])["inputs"].shape) for w in _windows(8)}
    assert len(shapes) > 1  # why: BPE's windows of equal bytes hold different numbers of tokens


def test_keep_carries_weights_and_moments(tmp_path: Path) -> None:
    _, encs = _build(tmp_path, 0, 3)
    st = Stack.of(encs, encs[0], torch.device("cpu"))
    st.exp_avg.normal_()
    kept = st.keep([2, 0], encs[0])
    assert torch.equal(kept.weights, st.weights[[2, 0]]) and torch.equal(kept.exp_avg, st.exp_avg[[2, 0]])
    assert kept.params[0].data_ptr() == kept.weights.data_ptr() and kept.params[0].grad is not None


@pytest.mark.parametrize("which", [0, 1], ids=["bytes", "bpe"])
def test_train_stack_equals_train_encoder(tmp_path: Path, which: int) -> None:
    """Three points of one rung (different FLOP caps, warm-ups and schedule lengths), each equal to
    ``train_encoder`` alone: steps, bytes, FLOPs, curve, final loss and weights; finished in order."""
    torch.set_num_threads(1)
    suite, encs = _build(tmp_path, which, 6)
    cpu = torch.device("cpu")
    ws = _windows(200)
    # FLOPs after each step (4 windows a step; BPE's vary with its windows' token counts): a cap
    # halfway into step ``steps`` stops a point after exactly that many steps
    done = [0.0]
    for i in range(0, 4 * 16, 4):
        done.append(done[-1] + 3 * encs[0].flops(encs[0].collate(ws[i:i + 4], [0] * 4)))
    plans = [(6, 0.02, 0), (10, 0.01, 256), (15, 0.005, 512)]  # (steps, lr, warm-up bytes)
    members, alone = [], []
    for k, (steps, lr, warm) in enumerate(plans):
        b = replace(suite.budget, lr=lr, warmup_bytes=warm, train_bytes=steps * 256)
        cap = (done[steps - 1] + done[steps]) / 2
        alone.append(train_encoder(encs[k], iter(ws), steps * 256, b, cpu, max_flops=cap))
        members.append(Member(encs[3 + k], b, steps * 256, cap, f"m{k}"))
    order: list[str] = []
    got = train_stack(list(reversed(members)), iter(ws), cpu, on_finish=lambda m, s: order.append(m.label))
    assert order == ["m0", "m1", "m2"]
    for k, want in enumerate(alone):
        st = got[f"m{k}"]
        assert (st["steps"], st["bytes"]) == (want["steps"], want["bytes"]) and st["steps"] == plans[k][0]
        assert st["flops"] == pytest.approx(want["flops"], rel=1e-12)
        assert [x for x, _ in st["loss_curve"]] == [x for x, _ in want["loss_curve"]]
        assert [y for _, y in st["loss_curve"]] == pytest.approx([y for _, y in want["loss_curve"]], rel=1e-5)
        assert st["final_loss_bpb"] == pytest.approx(want["final_loss_bpb"], rel=1e-5)
        for (name, p), q in zip(encs[k].named_parameters(), encs[3 + k].parameters()):
            torch.testing.assert_close(q, p, rtol=1e-5, atol=WEIGHT_ATOL, msg=name)


def test_train_stack_resumes_from_its_checkpoint(tmp_path: Path) -> None:
    """A stack killed as its first member ends (checkpoints every step) resumes with the members
    left — from the checkpoint, the finished member's row dropped — and ends as the whole run."""
    from harness.train.loop import Checkpointer

    torch.set_num_threads(1)
    suite, encs = _build(tmp_path, 0, 6)
    cpu = torch.device("cpu")
    ws = _windows(200)
    per_step = encs[0].flops(encs[0].collate(ws[:4], [0] * 4)) * 3

    def members(which: list[Any]) -> list[Member]:
        return [Member(e, replace(suite.budget, lr=lr, train_bytes=n * 256), n * 256, per_step * (n - 0.5), f"m{k}")
                for k, (e, (n, lr)) in enumerate(zip(which, [(4, 0.02), (8, 0.01), (12, 0.005)]))]

    whole = train_stack(members(encs[:3]), iter(ws), cpu, on_finish=lambda m, s: None)

    def kill(m: Member, s: dict[str, Any]) -> None:
        raise KeyboardInterrupt  # as a kill -9 right after the first member is cached

    ck = Checkpointer(tmp_path / "stack.partial.pt", every_seconds=0.0)
    with pytest.raises(KeyboardInterrupt):
        train_stack(members(encs[3:]), iter(ws), cpu, on_finish=kill, checkpoint=ck)
    assert ck.path.exists()
    _, fresh = _build(tmp_path, 0, 3)  # a restarted process's models: the checkpoint holds the weights
    rest = members(fresh)[1:]
    got = train_stack(rest, iter(ws), cpu, on_finish=lambda m, s: None, checkpoint=ck)
    assert not ck.path.exists() and set(got) == {"m1", "m2"}
    assert got["m1"]["stack"]["resumed_at_step"] == 4  # the checkpoint of the step before the kill
    for lb in ("m1", "m2"):
        assert (got[lb]["steps"], got[lb]["bytes"]) == (whole[lb]["steps"], whole[lb]["bytes"])
        assert [y for _, y in got[lb]["loss_curve"]] == pytest.approx([y for _, y in whole[lb]["loss_curve"]], rel=1e-5)


def test_stacked_wall_by_hand() -> None:
    from harness.pipeline.sweep_estimate import stacked_wall

    # 10 steps of three members, 10 of two, 20 of one; a step costs k seconds with k members
    assert stacked_wall([40, 10, 20], lambda k: float(k)) == 10 * 3 + 10 * 2 + 20 * 1


def test_train_at_once_equals_each_stack_alone(tmp_path: Path) -> None:
    """Three stacks stepped in turn, two in flight (``scaling.streams`` 2): each member's steps,
    curve and weights are bit for bit those of its stack trained alone; the third starts only when
    one of the first two ends; the members' seconds add up to the wall they ran."""
    import time

    from harness.train.stacked_loop import stack_steps, train_at_once

    torch.set_num_threads(1)
    suite, encs = _build(tmp_path, 0, 10)
    cpu = torch.device("cpu")
    ws = _windows(200)
    per_step = encs[0].flops(encs[0].collate(ws[:4], [0] * 4)) * 3
    plans = [[(3, 0.02), (6, 0.01)], [(9, 0.005)], [(4, 0.01), (5, 0.02)]]  # (steps, lr) of each member

    def members(which: list[Any], plan: list[tuple[int, float]], tag: str) -> list[Member]:
        return [Member(e, replace(suite.budget, lr=lr, train_bytes=n * 256), n * 256, per_step * (n - 0.5), f"{tag}{k}")
                for k, (e, (n, lr)) in enumerate(zip(which, plan))]

    alone = [train_stack(members(encs[i:i + len(pl)], pl, f"u{u}"), iter(ws), cpu, on_finish=lambda m, s: None)
             for u, (i, pl) in enumerate(zip((0, 2, 3), plans))]
    events: list[str] = []
    together = [members(encs[i:i + len(pl)], pl, f"u{u}") for u, (i, pl) in enumerate(zip((5, 7, 8), plans))]
    got: dict[str, dict[str, Any]] = {}

    def run(u: int) -> Any:
        def start(share: Any, at_once: int) -> Any:
            events.append(f"start u{u}")
            return stack_steps(together[u], iter(ws), cpu, share=share, at_once=at_once,
                               on_finish=lambda m, s: (got.__setitem__(m.label, s), events.append(f"end {m.label}")))
        return start

    t0 = time.perf_counter()
    train_at_once([run(0), run(1), run(2)], cpu, 2)
    wall = time.perf_counter() - t0
    assert events[:2] == ["start u0", "start u1"] and events.index("start u2") == events.index("end u01") + 1
    for want in alone:
        for label, st in want.items():
            g = got[label]
            assert (g["steps"], g["bytes"], g["flops"], g["loss_curve"]) == (st["steps"], st["bytes"], st["flops"], st["loss_curve"])
            assert g["stack"]["at_once"] == 2
    for a, b in zip([encs[i] for i in (0, 1, 2, 3, 4)], [encs[i] for i in (5, 6, 7, 8, 9)]):
        for p, q in zip(a.parameters(), b.parameters()):
            assert torch.equal(p, q)
    assert sum(g["seconds"] for g in got.values()) == pytest.approx(wall, rel=0.1)


def test_train_at_once_closes_the_others_when_one_fails(tmp_path: Path) -> None:
    from harness.train.stacked_loop import train_at_once

    closed: list[int] = []

    def run(u: int, fail_at: int) -> Any:
        def steps() -> Any:
            try:
                for i in range(10):
                    if i == fail_at:
                        raise RuntimeError(f"run {u} failed")
                    yield
            finally:
                closed.append(u)

        return lambda share, at_once: steps()

    with pytest.raises(RuntimeError, match="run 1 failed"):
        train_at_once([run(0, 99), run(1, 3), run(2, 99)], torch.device("cpu"), 2)
    assert sorted(closed) == [0, 1]  # the third had not started


def test_at_once_wall_by_hand() -> None:
    from harness.pipeline.sweep_estimate import at_once_wall

    units = [([10], lambda k: 1.0), ([30], lambda k: 2.0), ([20, 5], lambda k: float(k))]
    # one at a time: 10 x 1 + 30 x 2 + (5 x 2 + 15 x 1)
    assert at_once_wall(units, 1, 1.0) == 10 + 60 + 25
    # two at once, the GPU runs 1.5 steps in the time of one: rounds of units 0 and 1 cost
    # max(2, 3 / 1.5) = 2 (10 rounds, unit 0 ends); then units 1 and 2 (k = 2): 5 rounds at
    # max(2, 4 / 1.5); then unit 2 at k = 1: 15 rounds at max(2, 3 / 1.5), and both end
    assert at_once_wall(units, 2, 1.5) == pytest.approx(10 * 2 + 5 * 4 / 1.5 + 15 * 2)
