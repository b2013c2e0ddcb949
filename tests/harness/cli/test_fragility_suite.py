"""CPU smoke test of suites/fragility.yaml (tiny --set overrides): permuted variants and
compressor baselines end to end, rows that match a by-hand compressor computation, resume, and
one-line errors for suites a permutation cannot run."""

from __future__ import annotations

import csv
import math
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from harness.cli import main
from harness.config import ConfigError, load_suite
from harness.config.permutation import Permutation, permute_window
from harness.data.load import load_data, source_context, training_windows
from harness.score.items import plan_partition

ROOT = Path(__file__).resolve().parents[3]
SUITE = ROOT / "suites" / "fragility.yaml"
TINY = [
    "data.train={source: stdlib, max_bytes: 200000}",
    "data.eval=[{name: stdlib, source: stdlib, max_bytes: 200000}]",
    "budget.train_bytes=8192", "budget.context_bytes=128", "budget.batch_bytes=1024",
    "budget.warmup_bytes=1024", "budget.dtype=float32", "eval.stride_bytes=128",
    "eval.max_docs=3", "backbone.layers=1", "backbone.dim=16", "backbone.heads=2",
    "encoders.1.vocab_size=300",
    "permutations=[global, {kind: inter_block, block_bytes: 16}, {kind: intra_block, block_bytes: 16}]",
    "baselines.dictionary_bytes=2048",
]


def sets(extra: list[str] = []) -> list[str]:  # noqa: B006 (never mutated)
    return [a for s in TINY + extra for a in ("--set", s)]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("frag") / "out"
    assert main(["run", str(SUITE), "--out", str(out), "--quiet", "--no-report", *sets()]) == 0
    return out


def rows(out: Path) -> list[dict[str, str]]:
    with open(out / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_variants_and_baselines(run: Path) -> None:
    r = rows(run)
    labels = {x["encoder"]: x for x in r}
    perms = ["", "~global", "~inter_block-16", "~intra_block-16"]
    for base in ("bytes", "bpe"):
        for p in perms:
            assert labels[base + p]["kind"] == "model"
    for c in ("deflate", "bz2", "lzma"):
        for p in perms:
            assert labels[c + p]["kind"] == "baseline" and labels[c + p]["encoder_name"] == c
    assert labels["bytes~inter_block-16"]["permutation"] == "inter_block"
    assert labels["bytes~inter_block-16"]["block_bytes"] == "16"
    assert labels["bytes~global"]["block_bytes"] == "" and labels["bytes"]["permutation"] == "none"
    suite = load_suite(SUITE, TINY)
    assert sum(x["kind"] == "baseline" for x in r) == suite.n_baseline_cells() == 12
    assert sum(x["kind"] == "model" for x in r) == suite.n_cells() == 8
    # every cell scores the same bytes: BPB is per byte of the original text
    assert len({x["n_bytes"] for x in r}) == 1
    for x in r:
        assert float(x["bpb"]) == pytest.approx(float(x["nll_nats"]) / (math.log(2) * int(x["n_bytes"])))


def test_compressor_row_matches_by_hand(run: Path) -> None:
    suite = load_suite(SUITE, TINY)
    data = load_data(suite, source_context(suite, None, lambda s: None), log=lambda s: None)
    train, evals = data.train, data.evals
    perm = Permutation(kind="intra_block", block_bytes=16)
    # the compressor is primed on the first 2048 bytes of the permuted training stream
    dictionary = b"".join(permute_window(w, [1] * len(w), perm, 128, 0).data
                          for w in training_windows(train.docs, 2048, 128, 0))[:2048]
    assert len(dictionary) == 2048
    bits = n = 0
    for doc in evals[0].docs:
        for w in plan_partition(doc.data, 128).windows:
            fed = permute_window(doc.data[w.start : w.end], [1] * (w.end - w.start), perm, 128, 0).data

            def size(b: bytes) -> int:
                c = zlib.compressobj(9, zlib.DEFLATED, -15, 9)
                return len(c.compress(b) + c.flush())

            bits += 8 * (size(dictionary + fed) - size(dictionary))
            n += len(fed)
    (row,) = [x for x in rows(run) if x["encoder"] == "deflate~intra_block-16"]
    assert int(row["n_bytes"]) == n
    assert float(row["bpb"]) == pytest.approx(bits / n, rel=1e-12)


def test_rerun_is_cached(run: Path) -> None:
    before = (run / "results.csv").read_text()
    assert main(["run", str(SUITE), "--out", str(run), "--quiet", "--no-report", *sets()]) == 0
    assert (run / "results.csv").read_text() == before


@pytest.mark.parametrize("extra,message", [
    (["eval.modes=[full, clean_target]"], r"eval: permutations: need eval.modes: \[full\]"),
    (["eval.stride_bytes=64"], "need eval.stride_bytes equal to budget.context_bytes"),
    (["permutations=[{kind: inter_block}]"], "block_bytes must be a positive integer"),
    (["permutations=[shuffle]"], "permutations"),
    (["baselines.compressors=[zstd]"], "baselines.compressors"),
])
def test_bad_suites_are_one_line_errors(extra: list[str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as e:
        load_suite(SUITE, TINY + extra)
    assert "\n" not in str(e.value)


def test_cli_error_exit_code() -> None:
    r = subprocess.run([sys.executable, "-m", "harness.cli", "validate", str(SUITE),
                        *sets(["eval.stride_bytes=64"])], capture_output=True, text=True, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "stride_bytes" in r.stderr and "Traceback" not in r.stderr
