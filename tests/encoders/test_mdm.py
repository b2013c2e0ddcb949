"""Masked-diffusion objective (encoders/mdm.py) on the bytes and bpe encoders: schedules, the
NELBO estimator against exact enumeration over masks, schedule independence, clean_target mask
sharing, batch invariance, PAD slots for BPE, resumable training masks."""

from __future__ import annotations

import math

import pytest
import torch

from encoders.backbone import BackboneConfig
from encoders.bpe import BpeConfig, BpeEncoder, BpeTokenizer
from encoders.byte_baseline import ByteConfig, ByteEncoder
from encoders.mdm import exact_elbo, loss_weight, mask_prob, sample_mask, stratified_t
from harness.data.load import Window
from harness.score.items import ScoreItem, score_items

TINY = BackboneConfig(layers=1, dim=32, heads=2)


def sharp_bytes_model(seed: int = 0, schedule: str = "linear") -> ByteEncoder:
    """A random MDM byte model with large weights, so predictions depend strongly on which units
    are masked (a near-uniform model would make every estimator look right)."""
    torch.manual_seed(seed)
    enc = ByteEncoder(ByteConfig(objective="mdm", mdm_schedule=schedule), TINY)
    with torch.no_grad():
        enc.embed.weight.normal_(0, 1.0)
        enc.head.weight.normal_(0, 0.5)
    return enc.eval()


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_schedule_weight_is_minus_alpha_prime_over_one_minus_alpha(schedule: str) -> None:
    t = torch.tensor([0.01, 0.1, 0.3, 0.5, 0.9, 1.0], dtype=torch.float64)
    h = 1e-6
    alpha = {"linear": lambda x: 1 - x, "cosine": lambda x: torch.cos(math.pi * x / 2)}[schedule]
    d_alpha = (alpha(t + h) - alpha(t - h)) / (2 * h)
    assert torch.allclose(mask_prob(schedule, t), 1 - alpha(t), atol=1e-12)
    assert torch.allclose(loss_weight(schedule, t), -d_alpha / (1 - alpha(t)), rtol=1e-6)
    if schedule == "linear":
        assert torch.allclose(loss_weight(schedule, t), 1 / t)


def test_stratified_times_cover_each_stratum_once() -> None:
    t = stratified_t(8, torch.Generator().manual_seed(3))
    assert ((t > 0) & (t <= 1)).all()
    assert torch.equal(torch.floor(t * 8 - 1e-12).long().clamp(min=0), torch.arange(8))


@pytest.mark.parametrize("span", [1, 4])
def test_mask_marginal_probability(span: int) -> None:
    p = torch.tensor([0.2, 0.7], dtype=torch.float64).repeat_interleave(2000)
    m = sample_mask(p, 64, torch.Generator().manual_seed(0), span).double()
    assert abs(float(m[:2000].mean()) - 0.2) < 0.01
    assert abs(float(m[2000:].mean()) - 0.7) < 0.01
    if span > 1:  # neighbours inside a block are masked together
        same = (m[:, :-1] == m[:, 1:]).double().mean()
        assert float(same) > 0.8


def _mc(enc: ByteEncoder | BpeEncoder, window: bytes, score_from: int, samples: int) -> tuple[float, float]:
    """(NELBO estimate in nats, its standard error) through the harness's scoring function."""
    item = ScoreItem(window, [Window(0, score_from, len(window))])
    (sc,) = score_items(enc, [item], torch.device("cpu"), batch_windows=1, mc_samples=samples)
    return sc.nll, math.sqrt(sc.nll_var)


def _exact(enc: ByteEncoder | BpeEncoder, window: bytes, score_from: int) -> float:
    ids, scored = enc.mdm_probe_input(window, score_from)
    slots = scored[0].nonzero().flatten().tolist()
    valid = torch.ones_like(scored)

    def f(subset: tuple[int, ...]) -> float:
        mask = torch.zeros_like(scored)
        pos = [slots[i] for i in subset]
        mask[0, pos] = True
        with torch.no_grad():
            logp = torch.log_softmax(enc.mdm_logits(ids, mask, valid)[0].double(), -1)
        return float(-logp[pos, ids[0, pos]].sum())  # PAD slots included, as in scoring

    return exact_elbo(f, len(slots))


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_estimator_matches_exact_enumeration(schedule: str) -> None:
    enc = sharp_bytes_model(1, schedule)
    window, sf = b"ab cdefg", 2  # 6 scored bytes: 63 masked subsets
    exact = _exact(enc, window, sf)
    est, se = _mc(enc, window, sf, 10_000)
    assert se < 0.02 * exact
    assert abs(est - exact) < 4 * se, (est, exact, se)


def test_bpe_estimator_with_pad_slots_matches_exact_enumeration() -> None:
    enc = _bpe_mdm()
    with torch.no_grad():
        enc.embed.weight.normal_(0, 1.0)
        enc.head.weight.normal_(0, 0.5)
    window, sf = b"the cat sat", 5  # scored b"at sat": 6 slots, tokens then PADs
    u = enc.mdm_units(window, sf)
    assert len(u.spans) == 6 and any(s is None for s in u.spans)
    exact = _exact(enc, window, sf)
    est, se = _mc(enc, window, sf, 10_000)
    assert abs(est - exact) < 4 * se and se < 0.02 * exact, (est, exact, se)


def test_exact_elbo_of_a_context_free_model_is_the_sum_of_nlls() -> None:
    # If predictions ignore the context, f(S) = Σ_{i∈S} c_i and the ELBO is Σ c_i exactly.
    c = [0.3, 1.7, 2.2, 0.9]
    assert exact_elbo(lambda s: sum(c[i] for i in s), 4) == pytest.approx(sum(c), rel=1e-12)


def test_linear_and_cosine_agree_on_the_same_model() -> None:
    enc = sharp_bytes_model(2)
    window, sf = b"the bound does not depend on the schedule", 10
    enc.mdm_schedule = "linear"
    lin, se_l = _mc(enc, window, sf, 1500)
    enc.mdm_schedule = "cosine"
    cos, se_c = _mc(enc, window, sf, 1500)
    assert abs(lin - cos) < 4 * math.hypot(se_l, se_c), (lin, cos, se_l, se_c)
    assert math.hypot(se_l, se_c) < 0.03 * lin


def test_clean_and_perturbed_prefix_share_t_and_masks() -> None:
    enc = sharp_bytes_model(0)
    enc.mc_samples = 5
    cont = b" and the continuation stays"
    clean, pert = b"a clean prefix" + cont, b"a p3rturbed, longer prefix" + cont
    b1 = enc.collate([clean], [len(clean) - len(cont)])
    b2 = enc.collate([pert], [len(pert) - len(cont)])
    assert torch.equal(b1["t"], b2["t"])
    m1, m2 = b1["mask"][b1["scored"]], b2["mask"][b2["scored"]]
    assert torch.equal(m1, m2) and 0 < int(m1.sum()) < m1.numel()
    assert not b1["mask"][~b1["scored"]].any()  # context slots are never masked


def test_scoring_is_batch_invariant() -> None:
    # A bidirectional model must not see the padding after a shorter window in its batch.
    enc = sharp_bytes_model(3)
    short = ScoreItem(b"short window", [Window(0, 3, 12)])
    long = ScoreItem(b"a much longer window that pads the short one", [Window(0, 5, 44)])
    (alone,) = score_items(enc, [short], torch.device("cpu"), mc_samples=4)
    both = score_items(enc, [short, long], torch.device("cpu"), mc_samples=4)
    assert both[0].nll == pytest.approx(alone.nll, rel=1e-5)
    assert both[0].nll_var == pytest.approx(alone.nll_var, rel=1e-4)


def test_training_masks_replay_from_the_checkpointed_step() -> None:
    torch.manual_seed(0)
    enc = ByteEncoder(ByteConfig(objective="mdm", mdm_span=3), TINY)
    wins = [b"some training text here", b"and another window"]
    first = [float(enc(enc.collate(wins, [0, 0])).nll.sum().detach()) for _ in range(3)]
    state = {k: v.clone() for k, v in enc.state_dict().items()}
    assert int(state["mdm_rng"][1]) == 3
    state["mdm_rng"][1] = 1  # as a checkpoint taken after one step
    enc.load_state_dict(state)
    again = [float(enc(enc.collate(wins, [0, 0])).nll.sum().detach()) for _ in range(2)]
    assert again == pytest.approx(first[1:], rel=1e-6)
    assert len(set(first)) == 3


def test_training_loss_is_weighted_nll_per_byte_and_backpropagates() -> None:
    enc = sharp_bytes_model(0).train()
    batch = enc.collate([b"xyz xyz xyz", b"q"], [0, 0])
    units = enc(batch)
    loss = units.nll.sum() / batch.scored_bytes
    loss.backward()
    assert enc.head.weight.grad is not None and float(enc.head.weight.grad.abs().sum()) > 0
    assert batch.scored_bytes == 12


def _bpe_mdm() -> BpeEncoder:
    torch.manual_seed(0)
    enc = BpeEncoder(BpeConfig(vocab_size=300, objective="mdm"), TINY)
    enc.tokenizer = BpeTokenizer.train([b"the cat sat on the mat. " * 40], 300)
    return enc.eval()


def test_bpe_pads_to_one_slot_per_scored_byte_and_counts_pad_nll() -> None:
    enc = _bpe_mdm()
    w1, w2 = b"xx the the the", b"xx qzjvkwpyxbf"  # same bytes, few vs many tokens
    u1, u2 = enc.mdm_units(w1, 2), enc.mdm_units(w2, 2)
    assert len(u1.spans) == len(u2.spans) == 12  # slots do not reveal the token count
    assert sum(s is None for s in u1.spans) > sum(s is None for s in u2.spans)
    assert all(i == enc.pad for i, s in zip(u1.ids[u1.n_ctx :], u1.spans) if s is None)
    enc.mc_samples = 4
    batch = enc.collate([w1], [2])
    with torch.no_grad():
        units = enc(batch)
    # Units tile the scored bytes; their NLL includes the PAD slots' (folded into the last token).
    per_byte = units.byte_nll([len(w1)], [2])[0]
    total = float(units.nll.sum())
    assert float(per_byte.sum()) == pytest.approx(total, rel=1e-9)
    ids, scored, mask, t = batch["ids"], batch["scored"], batch["mask"], batch["t"]
    with torch.no_grad():
        logp = torch.log_softmax(enc.mdm_logits(ids, mask, batch["valid"]).double(), -1)
    nll = -logp.gather(2, ids.clamp(max=enc.V)[..., None])[..., 0]  # BOS is never scored
    w = loss_weight("linear", t)[:, None]
    by_hand = float((nll * w * (mask & scored)).sum() / 4)
    assert total == pytest.approx(by_hand, rel=1e-5)
    pad_part = float((nll * w * (mask & scored & (ids == enc.pad))).sum() / 4)
    assert pad_part > 0
    assert units.segments == [[b - a for a, b in (s for s in u1.spans if s is not None)]]


def test_ar_default_is_unchanged() -> None:
    torch.manual_seed(0)
    enc = ByteEncoder(ByteConfig(), TINY)
    assert enc.embed.num_embeddings == 257 and "mdm_rng" not in enc.state_dict()
    assert enc.backbone is not None and enc.backbone.causal
    with pytest.raises(NotImplementedError):
        ByteEncoder(ByteConfig(objective="mdm"), TINY).predict_logprobs(b"abc", [1])


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_reported_standard_error_is_calibrated(schedule: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Re-seed the scoring masks 150 times: the RMS of the reported SE must match the spread of the
    # estimates (the plain sample variance overstates the cosine SE about 2x; see
    # encoders.mdm.stratified_variance).
    import encoders.mdm as mdm

    enc = sharp_bytes_model(2, schedule)
    item = ScoreItem(b"the bound does not depend on the schedule, only the variance", [Window(0, 10, 61)])
    seed_of = mdm.seed_of
    est, var = [], []
    for rep in range(150):
        monkeypatch.setattr(mdm, "seed_of", lambda d, salt=0, rep=rep: seed_of(d, rep))
        (sc,) = score_items(enc, [item], torch.device("cpu"), mc_samples=8)
        est.append(sc.nll)
        var.append(sc.nll_var)
    sd = float(torch.tensor(est).std())
    rms_se = math.sqrt(sum(var) / len(var))
    assert 0.8 < rms_se / sd < 1.25, (rms_se, sd)


def test_bidirectional_attention_is_always_counted_at_full_cost() -> None:
    from encoders.backbone import causal_attention_cost

    torch.manual_seed(0)
    ar, mdm = ByteEncoder(ByteConfig(), TINY), ByteEncoder(ByteConfig(objective="mdm"), TINY)
    wins = [b"x" * 40] * 2
    b_ar, b_mdm = ar.collate(wins, [0, 0]), mdm.collate(wins, [0, 0])
    with causal_attention_cost(0.5):
        half_ar, half_mdm = ar.flops(b_ar), mdm.flops(b_mdm)
    assert half_ar < ar.flops(b_ar)  # the causal model's attention is discounted
    assert half_mdm == mdm.flops(b_mdm)  # the bidirectional one's never is
