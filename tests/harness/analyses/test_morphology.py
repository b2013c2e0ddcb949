"""The morphology analysis: bucket assignment on hand-made words, NLL sums over word bytes, the
suite-BPE hook and the fallbacks (own BPE, no segmenter)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.analyses.morphology import MorphologyAnalysis, stem_of, word_buckets
from harness.analyses.registry import REGISTRY as ANALYSES
from perturbations.morphology import Segmenter
from sources.base import Document

SEEN = {"walk", "walked", "play"}
STEMS = {"walk", "play"}


class DictSegmenter(Segmenter):
    """Segmentations from a table; unknown words are one morph."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table

    def segment(self, word: str) -> list[str]:
        return self.table.get(word, [word])


class FakeTokenizer:
    """Splits the scored bytes at fixed byte offsets."""

    def __init__(self, cuts: list[int]) -> None:
        self.cuts = cuts

    def encode_with_offsets(self, data: bytes) -> tuple[list[int], list[tuple[int, int]]]:
        edges = [0, *[c for c in self.cuts if 0 < c < len(data)], len(data)]
        spans = list(zip(edges, edges[1:]))
        return list(range(len(spans))), spans


class FakeBpeEncoder:
    registry_name = "bpe"

    def __init__(self, cuts: list[int]) -> None:
        self.tokenizer = FakeTokenizer(cuts)


@pytest.mark.parametrize(
    ("word", "morphs", "cuts", "expected"),
    [
        # one token: single; seen form
        ("walked", ["walk", "ed"], [], ["bpe:single", "seen:form", "morphs:2"]),
        # token cut at the morph boundary walk|ing: aligned; unseen form of a seen stem
        ("walking", ["walk", "ing"], [4], ["bpe:aligned", "seen:stem", "morphs:2"]),
        # cut inside the stem wa|lking: crossing
        ("walking", ["walk", "ing"], [2], ["bpe:crossing", "seen:stem", "morphs:2"]),
        # one of two cuts misaligned: crossing
        ("replaying", ["re", "play", "ing"], [2, 5], ["bpe:crossing", "seen:stem", "morphs:3"]),
        ("replaying", ["re", "play", "ing"], [2, 6], ["bpe:aligned", "seen:stem", "morphs:3"]),
        # a single-morph word split by BPE is crossing; unseen stem
        ("zebra", ["zebra"], [3], ["bpe:crossing", "seen:none", "morphs:1"]),
        (
            "unrewalkably",
            ["un", "re", "walk", "ab", "ly"],
            [],
            ["bpe:single", "seen:stem", "morphs:4+"],
        ),
        # capitalized surface form is looked up in lowercase
        ("Walked", ["walk", "ed"], [], ["bpe:single", "seen:form", "morphs:2"]),
        # byte offsets: "über" is 5 bytes, morph boundary üb|er at byte 3
        ("überall", ["über", "all"], [5], ["bpe:aligned", "seen:none", "morphs:2"]),
        ("überall", ["über", "all"], [4], ["bpe:crossing", "seen:none", "morphs:2"]),
    ],
)
def test_word_buckets(word: str, morphs: list[str], cuts: list[int], expected: list[str]) -> None:
    assert word_buckets(word, morphs, cuts, SEEN, STEMS) == expected


def test_word_buckets_without_segmenter_or_tokenizer() -> None:
    assert word_buckets("walked", None, None, SEEN, None) == ["seen:form", "morphs:no-segmenter"]
    assert word_buckets("zebra", None, [2], SEEN, None) == [
        "bpe:no-segmenter",
        "seen:no-segmenter",
        "morphs:no-segmenter",
    ]
    assert word_buckets("zebra", ["zebra"], None, SEEN, STEMS, families=("morphs",)) == ["morphs:1"]


def test_stem_is_longest_morph() -> None:
    assert stem_of(["re", "play", "ing"]) == "play"
    assert stem_of(["ab", "cd"]) == "ab"


def test_registered() -> None:
    assert ANALYSES["morphology"] is MorphologyAnalysis
    with pytest.raises(ValueError, match="unknown families"):
        MorphologyAnalysis(families=("bpe", "nope"))


def _fitted(cuts: list[int]) -> MorphologyAnalysis:
    a = MorphologyAnalysis(min_types=10_000)  # too few types here: no Morfessor training
    train = [Document(id="t", data=b"walk walked play", language="en")]
    a.fit(train, {"bpe-4096": FakeBpeEncoder(cuts), "bytes": object()})
    a.set_segmenter(
        "en",
        DictSegmenter(
            {"walking": ["walk", "ing"], "walked": ["walk", "ed"], "zebras": ["zebra", "s"]}
        ),
    )
    return a


def test_rows_sum_nll_over_word_bytes() -> None:
    #         0123456789012345678901
    text = b"walking, walked zebras"
    # BPE tokens: walk|ing|, |walked| |zeb|ras  -> cuts at 4, 7, 9, 15, 16, 19
    a = _fitted([4, 7, 9, 15, 16, 19])
    nll = np.arange(len(text), dtype=np.float64)  # NLL of byte i is i nats
    doc = Document(id="d", data=text, language="en")
    rows = {r.bucket: r for r in a.rows(doc, text, nll)}
    w1, w2, w3 = sum(range(0, 7)), sum(range(9, 15)), sum(range(16, 22))
    assert rows["bpe:aligned"].n_words == 1 and rows["bpe:aligned"].nll_nats == w1  # walk|ing
    assert rows["bpe:single"].n_words == 1 and rows["bpe:single"].nll_nats == w2  # walked
    assert rows["bpe:crossing"].n_bytes == 6 and rows["bpe:crossing"].nll_nats == w3  # zeb|ras
    assert (rows["seen:form"].n_words, rows["seen:stem"].n_words, rows["seen:none"].n_words) == (
        1,
        1,
        1,
    )
    assert rows["morphs:2"].n_words == 3 and rows["morphs:2"].n_bytes == 19
    # every family covers the same words and bytes
    for fam in ("bpe", "seen", "morphs"):
        assert sum(r.n_bytes for b, r in rows.items() if b.startswith(fam)) == 19
        assert sum(r.nll_nats for b, r in rows.items() if b.startswith(fam)) == w1 + w2 + w3
    assert a.describe()["bpe_source"] == "bpe-4096"
    # the word table is cached per text: a second call (another encoder's NLL) reuses it
    rows2 = a.rows(doc, text, np.ones(len(text)))
    assert sum(r.nll_nats for r in rows2 if r.bucket.startswith("seen")) == 19


def test_rows_equal_the_per_word_loop_to_the_last_bit() -> None:
    # rows() sums with np.bincount; the reference adds each word's NLL to its buckets in a loop
    text = b"walking, walked zebras walk walked zebras walking " * 7
    a = _fitted([4, 7, 9, 15, 16, 19])
    nll = np.random.default_rng(0).random(len(text)) * 3.0
    csum = np.concatenate([[0.0], np.cumsum(nll)])
    ref: dict[str, list[float]] = {}
    for bs, be, buckets in a.word_table("en", text):
        for b in buckets:
            acc = ref.setdefault(b, [0, 0, 0.0])
            acc[0] += 1
            acc[1] += be - bs
            acc[2] += float(csum[be] - csum[bs])
    rows = a.rows(Document(id="d", data=text, language="en"), text, nll)
    assert [(r.bucket, r.n_words, r.n_bytes, r.nll_nats) for r in rows] == [
        (b, v[0], v[1], v[2]) for b, v in sorted(ref.items())]
    assert all(type(r.n_words) is int and type(r.nll_nats) is float for r in rows)


def test_cell_buckets_equal_rows_added_document_by_document_to_the_last_bit() -> None:
    # The run sums a cell's buckets with cell_buckets (one bincount over (document, bucket) bins);
    # the reference is the base class's loop: each document's rows added in order, as the run
    # did before. Documents of different lengths and buckets, one without words, one in a
    # language without a segmenter, NLLs of many magnitudes (so summation order would show).
    from harness.analyses.base import Analysis

    a = _fitted([4, 7, 9, 15, 16, 19])
    rng = np.random.default_rng(1)
    texts = [b"walking, walked zebras", b"zebras walk walking " * 5, b"walked", b"12345 !!",
             "東京 walked".encode(), b"walking " * 40, b"Xyzzy plugh walked"]
    langs = ["en", "en", "en", "en", "en", "en", "qqq"]
    spans = [(Document(id=f"d{i}", data=t, language=lg), t, rng.random(len(t)) * 10.0 ** rng.integers(-3, 4, len(t)))
             for i, (t, lg) in enumerate(zip(texts, langs))]
    fast = a.cell_buckets(spans)
    ref = Analysis.cell_buckets(a, spans)
    assert fast == ref and list(sorted(fast)) == sorted(ref)
    assert all(type(v[0]) is int and type(v[1]) is int and type(v[2]) is float for v in fast.values())
    assert "morphs:no-segmenter" in fast and fast["bpe:single"][0] > 0
    assert a.cell_buckets([]) == {} and a.cell_buckets(spans[3:4]) == {}  # no words: no buckets
    with pytest.raises(ValueError, match="NLL values"):
        a.cell_buckets([(spans[0][0], spans[0][1], np.zeros(3))])


def test_prepare_in_processes_gives_the_tables_rows_would_compute() -> None:
    texts = [b"walking, walked zebras", b"zebras walk walking " * 5, b"walked"]
    docs = [Document(id=f"d{i}", data=t, language="en") for i, t in enumerate(texts)]
    a, b = _fitted([4, 7, 9, 15, 16, 19]), _fitted([4, 7, 9, 15, 16, 19])
    a.prepare([(d, d.data) for d in docs], processes=2, chunk=1)  # forked processes fill a's cache
    assert len(a._state["arrays"]) == 3
    for d in docs:
        nll = np.linspace(0.1, 2.0, len(d.data))
        assert a.rows(d, d.data, nll) == b.rows(d, d.data, nll)


def test_rows_skip_words_of_scripts_without_spaces_and_check_lengths() -> None:
    a = _fitted([])
    text = "東京 walked".encode()
    rows = a.rows(Document(id="j", data=text, language="en"), text, np.zeros(len(text)))
    assert sum(r.n_words for r in rows if r.bucket.startswith("seen")) == 1
    with pytest.raises(ValueError, match="NLL values"):
        a.rows(Document(id="j", data=text), text, np.zeros(3))


def test_undecodable_bytes_do_not_break_offsets() -> None:
    a = _fitted([])
    text = b"\xffwalked \xfe\xfdwalking"
    rows = {
        r.bucket: r
        for r in a.rows(Document(id="x", data=text, language="en"), text, np.ones(len(text)))
    }
    assert rows["seen:form"].n_bytes == 6 and rows["seen:stem"].n_bytes == 7


def test_language_without_training_text_or_dictionary() -> None:
    a = _fitted([])
    text = b"Xyzzy plugh"
    rows = {
        r.bucket
        for r in a.rows(Document(id="q", data=text, language="qqq"), text, np.ones(len(text)))
    }
    assert rows == {"bpe:no-segmenter", "seen:no-segmenter", "morphs:no-segmenter"}


def test_own_bpe_when_the_suite_has_none() -> None:
    words = "the walker walked while walking and talking talked to the talkers " * 30
    a = MorphologyAnalysis(min_types=10_000, bpe_vocab=300, families=("bpe",))
    a.fit([Document(id="t", data=words.encode(), language="en")], {"bytes": object()})
    assert a.describe()["bpe_source"] == "tokenizers-bpe-300"
    a.set_segmenter("en", DictSegmenter({}))
    text = "walking ünïcödé".encode() + b"\xff\xfe walked"
    spans = a._state["bpe"].encode_with_offsets(text)[1]
    assert spans[0][0] == 0 and spans[-1][1] == len(text)  # byte spans tile the text
    assert all(s1 == e0 for (_, e0), (s1, _) in zip(spans, spans[1:]))
    rows = a.rows(Document(id="d", data=text, language="en"), text, np.ones(len(text)))
    assert sum(r.n_words for r in rows) == 3


def test_morfessor_segmenter_is_trained_per_language() -> None:
    words = " ".join(
        f"{s}{x}"
        for s in ("walk", "talk", "play", "jump", "look", "help", "kick")
        for x in ("", "s", "ed", "ing", "er", "ers")
    )
    a = MorphologyAnalysis(min_types=20, max_types=200, families=("morphs",))
    a.fit([Document(id="t", data=words.encode(), language="en")], {})
    seg = a.segmenter("en")
    assert seg is not None and "".join(seg.segment("walkers")) == "walkers"
    assert len(seg.segment("walkers")) >= 2


def test_refit_on_the_same_training_text_keeps_segmenters(monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.analyses.morphology as morph

    monkeypatch.setattr(morph, "find_hunspell", lambda lang: None)  # no dictionary fallback here
    a = _fitted([])
    seg = a.segmenter("en")
    train = [Document(id="t", data=b"walk walked play", language="en")]
    a.fit(train, {"bpe": FakeBpeEncoder([])})  # the harness fits once per seed
    assert a.segmenter("en") is seg
    a.fit([Document(id="t", data=b"other words", language="en")], {"bpe": FakeBpeEncoder([])})
    assert a.segmenter("en") is None  # new vocabulary: retrained (too few types: none)
