"""The Monte Carlo SE of an MDM cell (``bpb_se``) when scored windows repeat.

Scoring masks and times are seeded by a window's bytes (``encoders.mdm``) and dedup forwards a
distinct window once (``harness.score.items``), so k equal windows — a document repeated in a cell, a
boilerplate run inside one — are ONE estimate with one error: it adds k²·v to the variance of
the cell's total, not k·v. These tests compute that variance by hand from each distinct window
scored alone and check the per-document and the cell numbers against it."""

from __future__ import annotations

import math
import pickle
import random

import pytest
import torch

from encoders.backbone import BackboneConfig
from encoders.byte_baseline import ByteConfig, ByteEncoder
from harness.data.load import Window
from harness.score.items import (
    DocScore,
    ScoreItem,
    estimate_key,
    flatten_windows,
    plan_full,
    score_items,
)
from harness.score.metrics import CellTotals, McVariance, cell_metrics

CPU = torch.device("cpu")
TINY = BackboneConfig(layers=1, dim=16, heads=2)
MC = 4
WORDS = "the a quick brown fox jumps over lazy dog river stone seven light".split()
DOC_A = " ".join(random.Random(1).choices(WORDS, k=30)).encode()
DOC_B = " ".join(random.Random(2).choices(WORDS, k=30)).encode()
RUN = b"=" * 160  # boilerplate: its middle windows (48 bytes, stride 24) are all equal


def mdm() -> ByteEncoder:
    """The byte MDM with large random weights of test_score_dedup: the estimate depends
    strongly on the masks."""
    from test_score_dedup import byte_mdm

    return byte_mdm()  # type: ignore[return-value]


def cell() -> list[ScoreItem]:
    """A cell's documents: DOC_A three times (duplicate documents), DOC_B, and the run."""
    return [plan_full(d, 48, 24) for d in (DOC_A, DOC_B, DOC_A, RUN, DOC_A)]


def alone_var(enc: ByteEncoder, items: list[ScoreItem]) -> tuple[list[float], list[list[int]]]:
    """Per distinct window of ``items``: its variance scored on its own (nats²), and the indices
    into the flattened windows of its occurrences."""
    fw = flatten_windows(items)
    v = []
    for w, sf in fw.distinct:
        (sc,) = score_items(enc, [ScoreItem(w, [Window(0, sf, len(w))])], CPU, mc_samples=MC)
        assert sc is not None and sc.nll_var > 0
        v.append(float(sc.nll_var))
    return v, fw.occurrences


def totals(items: list[ScoreItem], scores: list[DocScore | None]) -> CellTotals:
    t = CellTotals()
    for it, sc in zip(items, scores):
        assert sc is not None
        n = len(it.scored_bytes)
        t.add(sc.nll, n, n, sc.n_units, 1, None, 0.0, nll_var=sc.nll_var)
    return t


@pytest.mark.parametrize("dedup", [True, False])
def test_repeated_windows_count_as_one_estimate(dedup: bool) -> None:
    enc = mdm()
    items = cell()
    v, occ = alone_var(enc, items)
    flat = flatten_windows(items).flat
    counts = [len(o) for o in occ]
    assert max(counts) >= 3 and 1 in counts  # repeats across documents and inside one, and singles
    # by hand: per document Σ_d k_d²·v_d with k_d its occurrences in that document; per cell the
    # same with k_d over the whole cell
    doc_var = [0.0] * len(items)
    for d, o in enumerate(occ):
        for i in {flat[f][0] for f in o}:
            k = sum(flat[f][0] == i for f in o)
            doc_var[i] += k * k * v[d]
    cell_var = sum(len(o) ** 2 * v[d] for d, o in enumerate(occ))
    independent = sum(len(o) * v[d] for d, o in enumerate(occ))  # the old k·v, for the record
    assert cell_var > 2 * independent

    scores = score_items(enc, items, CPU, batch_windows=5, mc_samples=MC, dedup=dedup)
    for sc, want in zip(scores, doc_var):
        assert sc is not None and isinstance(sc.nll_var, McVariance)
        assert sc.nll_var == pytest.approx(want, rel=1e-4)
    run = scores[3]
    assert run is not None and len(items[3].windows) > 3  # the run's equal windows: one estimate
    t = totals(items, scores)
    assert t.nll_var == pytest.approx(cell_var, rel=1e-4)
    n_bytes = sum(len(it.scored_bytes) for it in items)
    se = math.sqrt(cell_var) / (math.log(2) * n_bytes)
    assert cell_metrics(t, None)["bpb_se"] == pytest.approx(se, rel=1e-4)


def test_cell_variance_does_not_depend_on_how_documents_were_scored() -> None:
    # One call, one call per document (as across packed jobs or a resumed run), dedup off: the
    # same estimates, so the same cell variance — keys are the windows' content, not batch indices.
    enc = mdm()
    items = cell()
    together = totals(items, score_items(enc, items, CPU, mc_samples=MC))
    apart = totals(items, [score_items(enc, [it], CPU, mc_samples=MC)[0] for it in items])
    no_dedup = totals(items, score_items(enc, items, CPU, mc_samples=MC, dedup=False))
    assert apart.nll_nats == pytest.approx(together.nll_nats, rel=1e-6)
    assert apart.nll_var == pytest.approx(together.nll_var, rel=1e-4)
    assert no_dedup.nll_var == pytest.approx(together.nll_var, rel=1e-4)
    # and a resumed run (only some items needed) gives those items the same numbers
    needed = [i % 2 == 0 for i in range(len(items))]
    resumed = score_items(enc, items, CPU, mc_samples=MC, needed=needed)
    fresh = score_items(enc, items, CPU, mc_samples=MC)
    for i, (r, f) in enumerate(zip(resumed, fresh)):
        if i % 2:
            assert r is None
        else:
            assert r is not None and f is not None and r.nll_var == f.nll_var and r.nll == f.nll


def test_equal_scored_bytes_with_other_context_are_another_estimate() -> None:
    # Same continuation, different prefixes: the same masks (clean_target's noise cancellation)
    # but other inputs, so other numbers — not merged as one estimate.
    cont = b" the continuation"
    a, b = b"one prefix" + cont, b"another prefix" + cont
    assert estimate_key(a, len(a) - len(cont)) != estimate_key(b, len(b) - len(cont))
    assert estimate_key(a, 3) != estimate_key(a, 4)
    assert estimate_key(bytearray(a), 3) == estimate_key(a, 3)  # the content, not the object


def test_mc_variance_is_a_float_that_keeps_its_terms() -> None:
    x = McVariance({b"k1": (2, 1.5), b"k2": (1, 0.25)})
    assert x == 2 * 2 * 1.5 + 0.25 and x + 1 == 7.25 and math.sqrt(x) == pytest.approx(2.5)
    y = pickle.loads(pickle.dumps(x))
    assert isinstance(y, McVariance) and y == x and y.terms == x.terms
    assert math.isnan(McVariance({b"k": (3, math.nan)}))
    t = CellTotals()
    t.add(1.0, 1, 1, 1, 1, None, 0.0, nll_var=x)
    t.add(1.0, 1, 1, 1, 1, None, 0.0, nll_var=McVariance({b"k1": (1, 1.5), b"k3": (1, 2.0)}))
    t.add(1.0, 1, 1, 1, 1, None, 0.0, nll_var=0.5)  # a plain float: independent of the rest
    assert t.nll_var == pytest.approx(3 * 3 * 1.5 + 0.25 + 2.0 + 0.5)


def test_exact_scores_have_no_variance() -> None:
    torch.manual_seed(0)
    enc = ByteEncoder(ByteConfig(), TINY).eval()
    items = cell()
    scores = score_items(enc, items, CPU)
    for sc in scores:
        assert sc is not None and sc.nll_var == 0.0 and not isinstance(sc.nll_var, McVariance)
    assert cell_metrics(totals(items, scores), None)["bpb_se"] == 0.0
