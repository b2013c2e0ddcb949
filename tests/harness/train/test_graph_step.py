"""harness.train.graph_step on CPU: the body a CUDA graph captures, run eagerly, trains the model
``train_step`` trains (losses and weights to float rounding: the NLL is summed in another
order), and the capture's warm-up leaves weights and optimizer state as they were, bit for bit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from _builders import fitted_encoders

from harness.train.graph_step import GraphStep, graph_capable
from harness.train.loop import autocast_for, make_optimizer, train_step

TEXT = b"the quick brown fox jumps over the lazy dog; " * 40


def _setup(tmp: Path, which: int = 0) -> tuple[object, object, object]:
    suite, pair = fitted_encoders(tmp, which, 2, layers=1, text=TEXT)
    return suite, pair[0], pair[1]


def _batches(enc: object, n: int) -> list[object]:
    text = TEXT
    out = []
    for i in range(n):
        # windows of 40-64 bytes: the scored byte count changes every step, as in training; the
        # longest is 64, 62, 60, 58, 64, 62 bytes (padded to 64: a graph's fixed shape) and the
        # steps hold 4, 3, 2, 1, 4, 3 windows: four shapes, one more than graphs are made for
        ws = [text[(i * 7 + j) % 300:][: (64 - 2 * (i % 4)) if j == 0 else 40 + (i + j) % 15]
              for j in range(4 - i % 4)]
        out.append(enc.collate(ws, [0] * len(ws)))  # type: ignore[attr-defined]
    return out


@pytest.mark.parametrize("which", [0, 1], ids=["bytes", "bpe"])
def test_graph_body_trains_as_train_step(tmp_path: Path, which: int) -> None:
    torch.set_num_threads(1)
    suite, a, b = _setup(tmp_path, which)
    assert graph_capable(a) and all(torch.equal(x, y) for x, y in zip(a.parameters(), b.parameters()))
    cpu = torch.device("cpu")
    budget = suite.budget
    opt_a, opt_b = make_optimizer(a, budget, cpu), make_optimizer(b, budget, cpu, capturable=True)
    step = GraphStep(b, opt_b, budget, cpu, list(b.parameters()))
    ac = autocast_for(budget, cpu)
    for i, batch in enumerate(_batches(a, 6)):
        lr = budget.lr * (1 - i / 10)
        la = train_step(a, batch, opt_a, lr, budget, ac, clip_params=list(a.parameters()))
        # as train_encoder does: the graph when it takes the shape, else train_step on its optimizer
        if step.accepts([batch]):
            lb = step(batch, lr, batch.scored_bytes)
        else:
            lb = train_step(b, batch, opt_b, lr, budget, ac, clip_params=list(b.parameters()))
        assert torch.allclose(la, lb, rtol=1e-6, atol=0), (i, la, lb)
    for x, y in zip(a.parameters(), b.parameters()):
        assert torch.allclose(x, y, rtol=1e-5, atol=1e-7)
    # BPE's windows hold fewer tokens than bytes: padded up to 64 as well
    assert step.replays == 5 and sorted(step.graphs) == [(2, 64), (3, 64), (4, 64)]  # one window: eager


def test_capture_warm_up_restores_weights_and_state(tmp_path: Path) -> None:
    torch.set_num_threads(1)
    suite, _, b = _setup(tmp_path)
    cpu = torch.device("cpu")
    budget = replace(suite.budget, lr=0.02)
    opt = make_optimizer(b, budget, cpu, capturable=True)
    step = GraphStep(b, opt, budget, cpu, list(b.parameters()))
    first, second = _batches(b, 2)
    before = [p.detach().clone() for p in b.parameters()]
    step._capture(first)  # fresh optimizer: the warm-up's state is zeroed, the weights unchanged
    assert all(torch.equal(x, y) for x, y in zip(before, b.parameters()))
    assert all(torch.count_nonzero(v) == 0 for st in opt.state.values() for v in st.values())
    step(first, budget.lr, first.scored_bytes)  # a real step: state now non-zero
    mid = [p.detach().clone() for p in b.parameters()]
    state = {id(p): {k: v.clone() for k, v in opt.state[p].items()} for p in b.parameters()}
    step._capture(second)  # a new shape mid-training: everything back bit for bit
    assert all(torch.equal(x, y) for x, y in zip(mid, b.parameters()))
    for p in b.parameters():
        for k, v in opt.state[p].items():
            assert torch.equal(v, state[id(p)][k]), k
