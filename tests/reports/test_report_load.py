"""samples.jsonl parsed in forked processes, chunk by chunk: the same rows, texts and errors (with
the whole file's line numbers) as one process."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from reports import load


def _line(i: int, **extra: object) -> str:
    row = {"encoder": ["bytes", "bpe"][i % 2], "encoder_name": "x", "dataset": ["heldout", "multi"][i % 3 == 0],
           "language": "en", "script": ["Latn", "Mixd"][i % 3 == 0], "perturbation": "typo",
           "perturbation_id": f"typo@{i % 4}", "mode": ["full", "clean_target"][i % 2], "seed": i % 3,
           "severity": 0.1 * (i % 4), "doc_id": f"d{i % 17}", "nll_nats": 1.5 + i, "n_bytes": 100 + i,
           "n_bytes_clean": None if i % 5 == 0 else 99 + i, "n_tokens": 50, "n_words": 20, "edit_rate": 0.01 * i}
    if i % 7 == 0:  # a displayed sample: its text and per-byte NLL (and, for mixed sets, its script)
        row.update(scored_text=["héllo wörld", "Привет мир", "日本語のテキスト"][(i // 21) % 3],
                   byte_nll=[0.25 * k for k in range(12)])
    row.update(extra)
    return json.dumps(row, ensure_ascii=i % 2 == 0)


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fork from the first byte, a chunk every ~2 kB: dozens of chunks for a few hundred lines."""
    monkeypatch.setattr(load, "PARALLEL_PARSE_BYTES", 0)
    monkeypatch.setattr(load, "PARSE_CHUNK_BYTES", 2048)


def test_forked_parse_gives_the_serial_rows_and_texts(tmp_path: Path, small_chunks: None) -> None:
    lines = [_line(i) for i in range(400)]
    lines.insert(50, "")  # blank lines are skipped, and still counted as lines
    lines.insert(51, "   ")
    path = _write(tmp_path / "samples.jsonl", lines)
    assert len(load._line_chunks(path, path.stat().st_size, 2048)) > 20
    serial, s_texts = load._read_samples(path, processes=1)
    forked, f_texts = load._read_samples(path, processes=3)
    pd.testing.assert_frame_equal(serial, forked)
    assert f_texts == s_texts and len(s_texts) == sum(1 for i in range(400) if i % 7 == 0)
    assert len(serial) == 400
    # a mixed set's document takes the script of its first row in the file, whichever chunk
    # holds its later rows: a text (Cyrillic, Japanese, Latin) or, without one, the set's "Mixd"
    multi = serial[serial["dataset"] == "multi"]
    assert set(multi["script"]) >= {"Latn", "Mixd"}
    assert multi.groupby("doc_id")["script"].nunique().max() == 1


def test_chunks_start_at_lines_and_cover_the_file(tmp_path: Path) -> None:
    path = _write(tmp_path / "s.jsonl", [_line(i) for i in range(200)])
    size = path.stat().st_size
    data = path.read_bytes()
    for chunk in (1, 100, 4096, size, 10 * size):
        parts = load._line_chunks(path, size, chunk)
        assert parts[0][0] == 0 and parts[-1][1] == size
        assert all(b == c for (_, b), (c, _) in zip(parts, parts[1:]))  # contiguous
        assert all(data[a - 1 : a] == b"\n" for a, _ in parts[1:])  # each after a newline


@pytest.mark.parametrize("bad, what", [("{not json", "invalid JSON"), ("[1, 2]", "expected a JSON object"),
                                       ('{"encoder": "x"}', "missing key(s) seed")])
def test_a_bad_line_is_named_with_its_line_in_the_whole_file(tmp_path: Path, small_chunks: None,
                                                             bad: str, what: str) -> None:
    lines = [_line(i) for i in range(300)]
    lines[217] = bad
    lines[250] = "{also bad"  # a later bad line: the first one is reported
    path = _write(tmp_path / "samples.jsonl", lines)
    with pytest.raises(ValueError) as serial:
        load._read_samples(path, processes=1)
    with pytest.raises(ValueError) as forked:
        load._read_samples(path, processes=4)
    assert str(serial.value) == str(forked.value)
    assert str(forked.value).startswith(f"{path}: line 218: {what}")
