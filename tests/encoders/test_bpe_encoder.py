"""The ``bpe`` encoder: fit on the training split, merges in the checkpoint, units that tile the
scored bytes, BPB normalised by bytes, analytic FLOPs, and the causality probe (which must still
catch a deliberately leaky variant)."""

from __future__ import annotations

import base64
import io
import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from encoders.backbone import BackboneConfig
from encoders.base import FitContext
from encoders.bpe import BpeConfig, BpeEncoder, BpeTokenizer
from encoders.bpe import model as bpe_model

TINY = BackboneConfig(layers=1, dim=16, heads=2)
CFG = BpeConfig(vocab_size=300)
DOCS = [p.read_bytes() for p in sorted(Path(json.__file__).parent.glob("*.py"))] + [
    "Grüße aus Köln; Ελληνικά; русский; 日本語.\n".encode() * 5
]


def make_ctx(train_bytes: int = 40_000, docs: list[bytes] = DOCS) -> FitContext:
    return FitContext(
        train_docs=lambda: iter(docs),
        train_bytes=train_bytes,
        context_bytes=128,
        seed=0,
        device=torch.device("cpu"),
        train=lambda enc, n: {},
        log=lambda msg: None,
    )


def fitted(cfg: BpeConfig = CFG, backbone: BackboneConfig | None = TINY) -> BpeEncoder:
    torch.manual_seed(0)
    enc = BpeEncoder(cfg, backbone)
    enc.fit(make_ctx())
    return enc


def test_fit_reads_the_budget_and_reports() -> None:
    bpe_model._FITTED.clear()  # fits of earlier tests in this process would be reused
    enc = BpeEncoder(BpeConfig(vocab_size=300), TINY)
    params_before = [id(p) for p in enc.parameters()]
    facts = enc.fit(make_ctx(train_bytes=12_345))
    assert facts["bytes"] == 12_345 and facts["flops"] == 0.0 and facts["seconds"] >= 0
    assert facts["vocab_trained"] == 300 and not facts["cached"]
    assert 1.0 < facts["bytes_per_token_train"] < 8.0
    # fit never re-creates parameters: the harness builds the optimizer after fit.
    assert [id(p) for p in enc.parameters()] == params_before
    assert enc.fit(make_ctx(train_bytes=12_345))["cached"]  # same corpus, vocab, pattern
    assert not enc.fit(make_ctx(train_bytes=12_000))["cached"]  # different corpus -> retrain


def test_merges_survive_a_weights_only_checkpoint() -> None:
    enc = fitted()
    buf = io.BytesIO()
    torch.save(enc.state_dict(), buf)
    buf.seek(0)
    state = torch.load(buf, weights_only=True)
    back = BpeEncoder(BpeConfig(vocab_size=300), TINY)
    back.load_state_dict(state)
    assert back.tokenizer is not None and enc.tokenizer is not None
    assert back.tokenizer.ranks == enc.tokenizer.ranks
    assert back.describe() == enc.describe()
    batch = enc.collate([DOCS[0][:100]], [10])
    assert torch.allclose(back(batch).nll, enc(batch).nll)


def test_untrained_encoder_says_so() -> None:
    enc = BpeEncoder(BpeConfig(vocab_size=300), None)
    with pytest.raises(RuntimeError, match="call fit"):
        enc.collate([b"abc"], [0])


def test_config_errors() -> None:
    with pytest.raises(ValueError, match="vocab_size=100"):
        BpeEncoder(BpeConfig(vocab_size=100), None)
    with pytest.raises(ValueError, match="not found: .*nowhere.tiktoken"):
        BpeEncoder(BpeConfig(file="/nowhere/nowhere.tiktoken"), None)
    with pytest.raises(ValueError, match="not a valid regex"):
        BpeEncoder(BpeConfig(pattern="[a-"), None)


def test_vocab_from_file(tmp_path: Path) -> None:
    path = tmp_path / "tiny.tiktoken"
    ranks = {bytes([i]): i for i in range(256)} | {b"de": 256, b"def": 257}
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in ranks.items()))
    enc = BpeEncoder(BpeConfig(file=str(path), vocab_size=999), None)
    assert enc.V == 258 and enc.head.out_features == 258 and enc.embed.num_embeddings == 259
    facts = enc.fit(make_ctx(train_bytes=5_000))
    assert facts["bytes"] == 5_000 and facts["vocab_trained"] == 258
    assert enc.collate([b"def f"], [0])["targets"].tolist() == [[257, 32, 102]]


WINDOWS = [DOCS[0][:120], DOCS[1][:90] + b"\xff caf\xc3", b"", "日本語のテキスト".encode()]
SCORE_FROM = [37, 0, 0, 6]


def test_units_tile_scored_bytes_and_no_token_straddles_score_from() -> None:
    enc = fitted()
    tok = enc.tokenizer
    assert tok is not None
    batch = enc.collate(WINDOWS, SCORE_FROM)
    assert batch.scored_bytes == sum(len(w) - s for w, s in zip(WINDOWS, SCORE_FROM))
    units = enc(batch)
    per_byte = units.byte_nll([len(w) for w in WINDOWS], SCORE_FROM)  # raises unless they tile
    assert [len(p) for p in per_byte] == [len(w) - s for w, s in zip(WINDOWS, SCORE_FROM)]
    for i, (w, s) in enumerate(zip(WINDOWS, SCORE_FROM)):
        ctx_ids, tgt_ids = tok.encode(w[:s]), tok.encode(w[s:])
        ids = ctx_ids + tgt_ids
        assert (
            batch["inputs"][i, : len(ids)].tolist() == [enc.bos, *ids[:-1]][: len(ids)]
        )  # BOS first
        mine = units.window == i
        assert units.start[mine].min().item() == s if tgt_ids else not mine.any()
        assert units.segments is not None
        assert units.segments[i] == [len(tok.token_bytes(t)) for t in tgt_ids]
        assert sum(units.segments[i]) == len(w) - s
    # A batch of empty windows has no tokens and no units (and costs nothing).
    empty = enc.collate([b"", b""], [0, 0])
    assert empty["inputs"].shape == (2, 0) and len(enc(empty).nll) == 0 and enc.flops(empty) == 0


def test_window_nll_is_sum_of_token_nll_and_bpb_divides_by_bytes() -> None:
    enc = fitted()
    tok = enc.tokenizer
    assert tok is not None
    with torch.no_grad():
        units = enc(enc.collate(WINDOWS, SCORE_FROM))
        per_byte = units.byte_nll([len(w) for w in WINDOWS], SCORE_FROM)
        for i, (w, s) in enumerate(zip(WINDOWS, SCORE_FROM)):
            ctx_ids, tgt_ids = tok.encode(w[:s]), tok.encode(w[s:])
            ids = ctx_ids + tgt_ids
            if not tgt_ids:
                continue
            # Independent recomputation: one window alone, no padding, no batching.
            logits = enc.head(enc.hidden(torch.tensor([[enc.bos, *ids[:-1]]])))[0]
            logp = torch.log_softmax(logits.double(), -1)[len(ctx_ids) :]
            token_nll = -logp.gather(1, torch.tensor(tgt_ids).unsqueeze(1)).sum().item()
            assert per_byte[i].sum().item() == pytest.approx(token_nll, rel=1e-5)
            assert units.nll[units.window == i].sum().item() == pytest.approx(token_nll, rel=1e-5)
            # BPB of the window: token NLL over the window's scored *bytes*, not its tokens.
            bpb = per_byte[i].sum().item() / (math.log(2) * len(per_byte[i]))
            assert bpb == pytest.approx(token_nll / (math.log(2) * (len(w) - s)), rel=1e-5)


def test_without_merges_it_is_the_bytes_encoder() -> None:
    # vocab_size 256: every token is one byte with id = byte value and BOS = 256, as in `bytes`.
    # With the same weights both must give the same NLL for every scored byte: same collation,
    # same BOS, same normalisation.
    from encoders.byte_baseline import ByteEncoder

    bpe = fitted(BpeConfig(vocab_size=256))
    byte = ByteEncoder(ByteEncoder.Config(), TINY)
    byte.load_state_dict({k: v for k, v in bpe.state_dict().items() if k != "_extra_state"})
    with torch.no_grad():
        u_bpe = bpe(bpe.collate(WINDOWS, SCORE_FROM))
        u_byte = byte(byte.collate(WINDOWS, SCORE_FROM))
    lengths = [len(w) for w in WINDOWS]
    for a, b in zip(u_bpe.byte_nll(lengths, SCORE_FROM), u_byte.byte_nll(lengths, SCORE_FROM)):
        assert torch.allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("backbone", [None, TINY])
def test_flops_match_flop_counter(backbone: BackboneConfig | None) -> None:
    # The model's FLOPs are those of each window run alone (no padding): torch's counter on every
    # window by itself, summed, equals flops() of the padded batch, on both collation paths.
    enc = fitted(backbone=backbone)
    counted = 0
    for w, s in zip(WINDOWS, SCORE_FROM):
        one = enc.collate([w], [s])
        with FlopCounterMode(display=False) as counter:
            enc(one)
        counted += counter.get_total_flops()
        if backbone is not None:
            # torch's counter does not see SDPA on CPU: add QK^T and AV (2 x 2·N²·dim per layer).
            N = one["inputs"].shape[1]
            counted += backbone.layers * 4 * N * N * backbone.dim
    batch = enc.collate(WINDOWS, SCORE_FROM)
    assert enc.flops(batch) == counted
    if backbone is not None:  # the windows differ in length, so the padded shape would count more
        B, N = batch["inputs"].shape
        assert len(set(batch.meta["lengths"])) > 1
        assert enc.flops(replace(batch, meta={**batch.meta, "lengths": None})) > counted
        block = enc.tokenize_windows(WINDOWS)
        fast = enc.collate_tokenized(block, 0, len(WINDOWS))
        alone = enc.collate(WINDOWS, [0] * len(WINDOWS))
        assert fast.meta["lengths"] == alone.meta["lengths"] and enc.flops(fast) == enc.flops(alone)


def probe(enc: BpeEncoder, clean: bytes, changed: bytes, t: int) -> list[int]:
    """The harness's causality probe in miniature: ``changed`` differs from ``clean`` only in bytes
    >= t; every position p <= t reported for both must have the same distribution."""
    assert clean[:t] == changed[:t]
    a = enc.predict_logprobs(clean, range(len(clean)))
    b = enc.predict_logprobs(changed, range(len(changed)))
    both = [p for p in a if p in b and p <= t]
    assert t in both
    return [p for p in both if not torch.allclose(a[p], b[p], atol=1e-6)]


class LeakyBpe(BpeEncoder):
    """Deliberately broken: every position also sees the mean embedding of the whole sequence,
    future tokens included (as a bidirectional layer or a wrong attention mask would)."""

    def hidden(self, inputs: torch.Tensor) -> torch.Tensor:
        x = self.embed(inputs)
        x = x + x.mean(dim=1, keepdim=True)
        return self.backbone(x) if self.backbone is not None else x


def test_causality_probe_passes_and_catches_a_leak() -> None:
    clean, changed = b"def spam(eggs):\n    return eggs", b"def spam(eggs):\n    yield 42!"
    t = clean.index(b" return")  # "\n   " then " return" vs " yield": a token starts at t in both
    enc = fitted()
    assert probe(enc, clean, changed, t) == []
    leaky = LeakyBpe(BpeConfig(vocab_size=300), TINY)
    leaky.load_state_dict(enc.state_dict())
    assert t in probe(leaky, clean, changed, t)


def test_positions_whose_context_tokens_depend_on_later_bytes_are_left_out() -> None:
    # Only merge: "  ". In "a  b" the regex gives "a", " ", " b" -> tokens a, " ", " ", b (a token
    # starts at 3); in "a   " it gives "a", "   " -> a, "  ", " " (a token starts at 3 too).
    # Same bytes before 3, different context tokens: that is BPE's look-ahead, not the model's.
    ranks = {bytes([i]): i for i in range(256)} | {b"  ": 256}
    enc = BpeEncoder(BpeConfig(vocab_size=257), TINY)
    enc.tokenizer = BpeTokenizer(ranks)
    clean, changed = b"a  b", b"a   "
    assert enc.tokenizer.encode(clean) == [97, 32, 32, 98]
    assert enc.tokenizer.encode(changed) == [97, 256, 32]
    a = enc.predict_logprobs(clean, range(4))
    b = enc.predict_logprobs(changed, range(4))
    assert sorted(a) == [0, 1, 2]  # 3 left out: "a  " alone tokenizes as a, "  "
    assert sorted(b) == [0, 1, 3]
    assert torch.equal(a[1], b[1])


def test_describe_reports_vocab_bytes_per_token_and_embedding_share() -> None:
    enc = fitted()
    d: dict[str, Any] = enc.describe()
    total = sum(p.numel() for p in enc.parameters())
    assert d["vocab_size"] == 300 and d["vocab_trained"] == 300 and d["bos_id"] == 300
    assert d["params_embedding"] == 301 * 16 and d["params_head"] == 300 * 16
    assert d["embedding_share"] == pytest.approx(301 * 16 / total)
    assert d["bytes_per_token_train"] > 1.0


def test_a_second_encoder_reuses_the_fit_of_the_same_sample() -> None:
    """Same merge key (sample content, vocabulary, pattern) → the tokenizer learned once in this
    process, with the same fit facts; a different sample learns its own."""
    bpe_model._FITTED.clear()
    a, b = BpeEncoder(BpeConfig(vocab_size=300), TINY), BpeEncoder(BpeConfig(vocab_size=300), TINY)
    fa, fb = a.fit(make_ctx(train_bytes=12_345)), b.fit(make_ctx(train_bytes=12_345))
    assert not fa["cached"] and fb["cached"] and b.tokenizer is a.tokenizer
    assert fb["bytes_per_token_train"] == fa["bytes_per_token_train"] and b.fit_facts == a.fit_facts
    c = BpeEncoder(BpeConfig(vocab_size=300), TINY)
    assert not c.fit(make_ctx(train_bytes=12_000))["cached"] and c.tokenizer is not a.tokenizer
