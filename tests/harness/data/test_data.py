"""Splits, fingerprints and windows: deterministic, exhaustive, word-preserving."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from harness.data.load import (
    cut_before,
    fingerprint,
    is_boundary,
    rolling_windows,
    select_part,
    split_of,
    stable_unit,
    training_windows,
)
from sources.base import Document


def test_split_is_stable_and_has_the_requested_fractions() -> None:
    ids = [f"doc{i}" for i in range(20_000)]
    parts = [split_of(i, 0.05, 0.1) for i in ids]
    assert parts == [split_of(i, 0.05, 0.1) for i in ids]  # same answer every time
    frac_test = parts.count("test") / len(ids)
    frac_valid = parts.count("valid") / len(ids)
    assert abs(frac_test - 0.1) < 0.01 and abs(frac_valid - 0.05) < 0.01
    # A document's part does not depend on which other documents exist.
    docs = [Document(i, b"x") for i in ids[:100]]
    test_ids = {d.id for d in select_part(docs, "test", 0.05, 0.1)}
    assert test_ids == {d.id for d in select_part(docs[::-1], "test", 0.05, 0.1)}


def test_stable_unit_is_sha256_not_python_hash() -> None:
    # Hand-checked value: first 8 bytes of sha256(b"split\x1fa") as a fraction of 2**64.
    import hashlib

    h = hashlib.sha256(b"split\x1fa").digest()
    assert stable_unit("split", "a") == int.from_bytes(h[:8], "big") / 2**64


def test_fingerprint_changes_with_content_and_order() -> None:
    a, b = Document("a", b"1"), Document("b", b"2")
    assert fingerprint([a, b]) != fingerprint([b, a])
    assert fingerprint([a, b]) != fingerprint([a, Document("b", b"3")])
    assert fingerprint([a, b]) == fingerprint([Document("a", b"1"), Document("b", b"2")])


def test_boundaries_are_before_whitespace_after_a_word() -> None:
    d = b"ab  cd\ne"
    assert [i for i in range(len(d) + 1) if is_boundary(d, i)] == [0, 2, 6, 8]


def test_cjk_punctuation_is_a_boundary() -> None:
    d = "漢字。かな、テスト".encode()
    cuts = [i for i in range(1, len(d)) if is_boundary(d, i)]
    assert [d[:i].decode() for i in cuts] == ["漢字。", "漢字。かな、"]


def test_cut_before_prefers_word_boundaries_and_utf8_characters() -> None:
    assert cut_before(b"hello world again", 14, 0) == 11  # before " again"
    s = "ééééééé".encode()  # no whitespace: cut on a character boundary
    c = cut_before(s, 5, 0)
    assert c == 4 and s[:c].decode() == "éé"


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=600), st.integers(4, 64), st.integers(1, 64))
def test_rolling_windows_score_every_byte_exactly_once(
    data: bytes, context: int, stride: int
) -> None:
    stride = min(stride, context)
    ws = rolling_windows(data, context, stride)
    assert b"".join(data[w.score_start : w.end] for w in ws) == data
    for w in ws:
        assert w.end - w.start <= context
        assert w.start <= w.score_start < w.end


def test_rolling_windows_keep_context_and_cut_at_words() -> None:
    text = b"the quick brown fox jumps over the lazy dog " * 10
    ws = rolling_windows(text, 64, 32)
    assert ws[0].start == 0 and ws[0].score_from == 0
    for w in ws[1:]:
        assert w.score_from > 0  # later windows see context
        assert is_boundary(text, w.start) and is_boundary(text, w.score_start)


def test_training_windows_are_exact_deterministic_and_seeded() -> None:
    docs = [Document(f"d{i}", (f"document {i} " * 20).encode()) for i in range(10)]
    a = list(training_windows(docs, 5_000, 64, seed=1))
    b = list(training_windows(docs, 5_000, 64, seed=1))
    c = list(training_windows(docs, 5_000, 64, seed=2))
    assert a == b and a != c
    assert sum(map(len, a)) == 5_000  # exactly the budget, across epochs
    assert max(map(len, a)) <= 64


def test_an_eval_set_that_is_another_source_says_what_it_drops(tmp_path) -> None:
    # the training entry has a language, the eval entry not: another source, read whole, so its
    # documents that training holds are dropped — and run / --dry-run say how many
    from harness.config import load_suite
    from harness.data.load import load_data, source_context

    (tmp_path / "corpus.txt").write_text("\n\n".join(
        f"Paragraph {i} of the corpus, long enough to be a document of its own." for i in range(60)))
    (tmp_path / "s.yaml").write_text(
        "name: s\nseeds: [0]\ndata:\n"
        "  train: {paths: [corpus.txt], docs: paragraph, language: en}\n"
        "  eval:\n"
        "    - {name: same, paths: [corpus.txt], docs: paragraph, language: en}\n"
        "    - {name: other, paths: [corpus.txt], docs: paragraph}\n"
        "budget: {train_bytes: 4096, context_bytes: 128, batch_bytes: 1024, warmup_bytes: 1024}\n"
        "encoders: [bytes]\n")
    suite = load_suite(tmp_path / "s.yaml")
    lines: list[str] = []
    data = load_data(suite, source_context(suite), prepare=False, log=lines.append)
    n_train = len(data.train.docs)
    same = next(ln for ln in lines if ln.startswith("[data] eval 'same'"))
    assert "part 'test' of the training source's 60 document(s); 0 dropped" in same
    other = next(ln for ln in lines if ln.startswith("[data] eval 'other'"))
    assert f"part 'all' of its own source's 60 document(s); {n_train} dropped" in other
    assert f"{60 - n_train} scored" in other
    warn = [ln for ln in lines if "warning" in ln]
    assert len(warn) == 1 and "'other'" in warn[0] and "data.train's keys" in warn[0]
    assert data.facts["eval:other"]["dropped_train_overlap"] == n_train
