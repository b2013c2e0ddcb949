"""BpeTokenizer: exact round trip of any bytes, byte spans, isolation of invalid bytes, and
.tiktoken files (read, written, missing — never downloaded)."""

from __future__ import annotations

import base64
import json
import socket
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from encoders.bpe.tokenizer import BpeTokenizer, split_utf8

MIXED = "naïve café, Grüße; Ελληνικά; русский; עברית; العربية; 日本語のテキスト; 😀👍🏽\n"


@pytest.fixture(scope="module")
def tok() -> BpeTokenizer:
    corpus = [p.read_bytes() for p in sorted(Path(json.__file__).parent.glob("*.py"))]
    return BpeTokenizer.train(corpus + [MIXED.encode() * 10], vocab_size=600)


def check_round_trip(tok: BpeTokenizer, data: bytes) -> None:
    ids, spans = tok.encode_with_offsets(data)
    assert tok.decode(ids) == data
    assert ids == tok.encode(data)
    # Spans tile the data, and each span holds exactly that token's bytes.
    pos = 0
    for a, b in spans:
        assert a == pos < b
        pos = b
    assert pos == len(data)
    assert all(data[a:b] == tok.token_bytes(i) for i, (a, b) in zip(ids, spans))


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200))
def test_round_trip_random_bytes(tok: BpeTokenizer, data: bytes) -> None:
    check_round_trip(tok, data)


# Any code point, plus lone surrogates (hypothesis never draws category Cs by itself) and NUL;
# strings are turned into bytes with surrogatepass, so surrogates become invalid UTF-8 bytes.
ANY_CHAR = st.one_of(st.characters(), st.integers(0xD800, 0xDFFF).map(chr), st.just("\x00"))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.text(ANY_CHAR, max_size=20), st.binary(max_size=5)), max_size=8))
def test_round_trip_random_unicode_and_bytes(tok: BpeTokenizer, parts: list[str | bytes]) -> None:
    data = b"".join(p.encode("utf-8", "surrogatepass") if isinstance(p, str) else p for p in parts)
    check_round_trip(tok, data)


def test_round_trip_fixed_cases(tok: BpeTokenizer) -> None:
    for data in [
        b"",
        b"\x00",
        b"\x00abc\x00 def\x00",
        MIXED.encode(),
        "a\ud800b".encode("utf-8", "surrogatepass"),  # lone surrogate
        "caf\udce9".encode("utf-8", "surrogateescape"),  # Latin-1 byte via surrogateescape
        b"\xff\xfe\x00abc",
        b"caf\xc3",  # truncated two-byte sequence
        bytes(range(256)),
    ]:
        check_round_trip(tok, data)


@settings(max_examples=100, deadline=None)
@given(
    st.text(max_size=30),
    st.sampled_from([b"\xff", b"\x80", b"\xc3", b"\xed\xa0\x80"]),
    st.text(max_size=30),
)
def test_invalid_bytes_do_not_disturb_neighbours(
    tok: BpeTokenizer, a: str, bad: bytes, c: str
) -> None:
    ea, ec = a.encode(), c.encode()
    # Valid text never starts with a continuation byte, so `bad` stays invalid in context.
    got = tok.encode(ea + bad + ec)
    assert got == tok.encode(ea) + [tok.byte_id[b] for b in bad] + tok.encode(ec)


def test_split_utf8_and_tiktoken_lossy_str_path(tok: BpeTokenizer) -> None:
    data = b"ok\xed\xa0\x80\xffend"
    assert list(split_utf8(data)) == ["ok", 0xED, 0xA0, 0x80, 0xFF, "end"]
    # Why the split exists: tiktoken's str path replaces a lone surrogate by U+FFFD (lossy).
    lossy = tok.encoding.encode_ordinary("a\ud800b")
    assert tok.decode(lossy) == "a\ufffdb".encode()
    assert tok.decode(tok.encode("a\ud800b".encode("utf-8", "surrogatepass"))) == b"a\xed\xa0\x80b"


def write_ranks(path: Path, extra: dict[bytes, int]) -> None:
    ranks = {bytes([i]): i for i in range(256)} | extra
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in ranks.items()))


def test_from_file_hand_written(tmp_path: Path) -> None:
    path = tmp_path / "tiny.tiktoken"
    write_ranks(path, {b"ab": 256, b"abc": 300})  # ranks need not be contiguous
    tok = BpeTokenizer.from_file(path)
    assert tok.n_vocab == 301 and tok.merges is None
    # Pre-tokens "abc", " abx": "abc" -> 300; " abx" -> " ", "ab", "x".
    assert tok.encode(b"abc abx") == [300, 32, 256, 120]
    assert tok.encode_with_offsets(b"abc abx")[1] == [(0, 3), (3, 4), (4, 6), (6, 7)]


def test_to_file_then_from_file(tok: BpeTokenizer, tmp_path: Path) -> None:
    path = tmp_path / "trained.tiktoken"
    tok.to_file(path)
    back = BpeTokenizer.from_file(path, pattern=tok.pattern)
    assert back.ranks == tok.ranks
    data = MIXED.encode() + b"\xff def f(x): return x\n"
    assert back.encode(data) == tok.encode(data)


def test_from_file_errors_are_one_line_and_never_download(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    missing = tmp_path / "cl100k_base.tiktoken"
    with pytest.raises(ValueError, match="not found") as e:
        BpeTokenizer.from_file(missing)
    assert str(missing) in str(e.value) and "\n" not in str(e.value)

    bad = tmp_path / "bad.tiktoken"
    bad.write_bytes(b"YQ== 0\nnot-base64!! 1\n")
    with pytest.raises(ValueError, match=r"bad\.tiktoken:2:"):
        BpeTokenizer.from_file(bad)

    partial = tmp_path / "partial.tiktoken"
    partial.write_bytes(b"YQ== 0\n")  # only b"a": other single bytes missing
    with pytest.raises(ValueError, match=r"partial\.tiktoken: .*single-byte"):
        BpeTokenizer.from_file(partial)


def test_bad_pattern_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="not a valid regex"):
        BpeTokenizer.train([b"x"], 256, pattern="(unclosed")


def test_cl100k_pattern_by_name() -> None:
    # cl100k splits digits in groups of three and makes the space its own pre-token:
    # "123", "45", " ", "123", "45". Pair counts (1,2) (2,3) (4,5) tie at 2 -> bytes order:
    # "12", then (12,3) and (4,5) tie -> "123", then "45".
    tok = BpeTokenizer.train([b"12345 12345"], 300, pattern="cl100k")
    assert [t for t, r in sorted(tok.ranks.items(), key=lambda kv: kv[1])][256:] == [
        b"12",
        b"123",
        b"45",
    ]
    assert tok.encode(b"12345") == [257, 258]
