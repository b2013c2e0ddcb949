"""Settings that used to pass ``tokbench validate`` and fail (or silently misbehave) later are
refused when the suite is loaded, on one line ``FILE:LINE: key.path: problem`` naming the key's
own line: BPE settings checked only in ``BpeEncoder.__init__`` (after earlier encoders had
trained), and zero / negative sizes (``max_bytes: -1`` trained on one document, ``max_types: -1``
dropped the last word type)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.config import ConfigError, load_suite
from harness.config.bounds import lower_bound_problem

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def in_tmp() -> None:
    """Stays in the working directory (this folder's conftest moves into tmp_path): the messages
    checked here name the suite by the full path the test gave."""

SUITE = """name: bounds
seeds: [0]
data:
  train:
    source: stdlib
    max_bytes: 100000
  eval:
    - name: stdlib
      source: stdlib
      max_bytes: 100000
budget: {train_bytes: 20000, context_bytes: 64, batch_bytes: 1024, warmup_bytes: 0}
backbone: {layers: 1, dim: 16, heads: 2}
encoders:
  - name: bytes
    dim: 64
  - name: fuzzytok
    blocks: 1
  - name: bpe
    vocab_size: 512
    pattern: gpt2
    fit_bytes: 5000
    min_frequency: 2
perturbations:
  - name: morph.boundary_split
    severity: 0.5
    max_types: 1000
    min_word_len: 4
  - name: morph.compound
    min_part_len: 4
eval: {modes: [full], max_docs: 3}
"""


def suite_with(tmp_path: Path, old: str, new: str, nth: int = 0) -> tuple[Path, int]:
    """The suite with the ``nth`` line containing ``old`` rewritten; (path, that line's number)."""
    lines = SUITE.splitlines()
    hits = [i for i, line in enumerate(lines) if old in line]
    i = hits[nth]
    lines[i] = lines[i].replace(old, new)
    path = tmp_path / "suite.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path, i + 1


def test_the_base_suite_is_valid(tmp_path: Path) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE)
    load_suite(path)


@pytest.mark.parametrize(
    ("old", "new", "nth", "key", "problem"),
    [
        # B: BPE settings, now checked by BpeConfig when the suite is loaded
        ("vocab_size: 512", "vocab_size: 100", 0, "encoders[2].vocab_size",
         "must be >= 256 (the single bytes are tokens), got 100"),
        ("vocab_size: 512", "vocab_size: [100, 512]", 0, "encoders[2].vocab_size",
         "must be >= 256 (the single bytes are tokens), got 100"),
        ("pattern: gpt2", "pattern: '('", 0, "encoders[2].pattern",
         "bpe pattern '(' is not a valid regex"),
        ("fit_bytes: 5000", "fit_bytes: 0", 0, "encoders[2].fit_bytes", "must be > 0 (or null), got 0"),
        ("fit_bytes: 5000", "file: /nonexistent.tiktoken", 0, "encoders[2].file",
         "BPE rank file not found: /nonexistent.tiktoken"),
        ("min_frequency: 2", "min_frequency: 0", 0, "encoders[2].min_frequency", "must be > 0, got 0"),
        # the same gap in the other encoders: bytes' dim and mdm_span were never checked
        ("dim: 64", "dim: 0", 0, "encoders[0].dim", "must be > 0, got 0"),
        ("dim: 64", "mdm_span: -2", 0, "encoders[0].mdm_span", "must be > 0, got -2"),
        # C: sizes of sources and perturbations
        ("max_bytes: 100000", "max_bytes: -1", 0, "data.train.max_bytes", "must be > 0 (or null), got -1"),
        ("max_bytes: 100000", "max_bytes: 0", 1, "data.eval[0].max_bytes", "must be > 0 (or null), got 0"),
        ("max_types: 1000", "max_types: 0", 0, "perturbations[0].max_types", "must be > 0, got 0"),
        ("max_types: 1000", "max_types: -1", 0, "perturbations[0].max_types", "must be > 0, got -1"),
        ("min_word_len: 4", "min_word_len: -1", 0, "perturbations[0].min_word_len", "must be >= 0, got -1"),
        ("min_part_len: 4", "min_part_len: 0", 0, "perturbations[1].min_part_len", "must be > 0, got 0"),
    ],
)
def test_bad_value_is_refused_at_its_own_line(
        tmp_path: Path, old: str, new: str, nth: int, key: str, problem: str) -> None:
    path, line = suite_with(tmp_path, old, new, nth)
    with pytest.raises(ConfigError) as e:
        load_suite(path)
    msg = str(e.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}:{line}: {key}: "), msg
    assert problem in msg


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("data.train={source: python_docs, max_docs: 0}", "data.train.max_docs"),
        ("data.train={source: manpages, package: manpages, max_pages: -1}", "data.train.max_pages"),
        ('data.train={source: debian_mix, members: ["python_docs:python3.11-doc"], member_bytes: 0}',
         "data.train.member_bytes"),
        ("analyses=[{name: morphology, max_types: 0}]", "analyses[0].max_types"),
        ("analyses=[{name: morphology, bpe_vocab: 100}]", "analyses[0].bpe_vocab"),
        ("analyses=[{name: morphology, bpe_train_bytes: 0}]", "analyses[0].bpe_train_bytes"),
        ("perturbations=[{name: morph.affix_swap, dictionary: /nonexistent.dic}]",
         "perturbations[0].dictionary"),
        ("encoders=[{name: blt, ngram_table_size: 0}]", "encoders[0].ngram_table_size"),
        ("encoders=[{name: fuzzytok, kernel_size: 0}]", "encoders[0].kernel_size"),
        ("eval.max_docs=0", "eval.max_docs"),
    ],
)
def test_survey_of_other_size_keys(tmp_path: Path, override: str, key: str) -> None:
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE)
    with pytest.raises(ConfigError) as e:
        load_suite(path, [override])
    assert re.match(rf"--set .*: {re.escape(key)}: ", str(e.value)), str(e.value)
    assert "\n" not in str(e.value)


def test_null_still_means_no_limit(tmp_path: Path) -> None:
    path, _ = suite_with(tmp_path, "max_bytes: 100000", "max_bytes: null", 1)
    suite = load_suite(path, ["encoders[2].fit_bytes=null", "eval.max_docs=null"])
    assert suite.data.eval[0].config.max_bytes is None and suite.eval.max_docs is None


def test_lower_bound_problem() -> None:
    assert lower_bound_problem("max_bytes", None, nullable=True) is None
    assert lower_bound_problem("max_bytes", 1) is None
    assert lower_bound_problem("max_bytes", 0, nullable=True) == "must be > 0 (or null), got 0"
    assert lower_bound_problem("warmup_bytes", 0) is None
    assert lower_bound_problem("bpe_vocab", 255) == "must be >= 256, got 255"
    assert lower_bound_problem("ngram_sizes", (3, 0)) is None  # not a bounded name
    assert lower_bound_problem("dim", True) is None  # booleans are the type checks' business
    assert lower_bound_problem("dim", float("nan")) == "must be > 0, got nan"
    # "> 0" for a float field is > 0, not >= 1: a fractional MLP ratio is a real model
    assert lower_bound_problem("mlp_ratio", 0.5) is None
    assert lower_bound_problem("mlp_ratio", 0.0) == "must be > 0, got 0.0"


def test_direct_construction_still_refuses() -> None:
    """Code that builds configs without the loader gets the checks too, naming the field."""
    from encoders.bpe import BpeConfig
    from perturbations.morphology import BoundarySplit, MorfessorSegmenter
    from sources.stdlib import StdlibSource

    with pytest.raises(ValueError, match="bpe.vocab_size=100 is below 256") as e:
        BpeConfig(vocab_size=100)
    assert getattr(e.value, "field", None) == "vocab_size"
    with pytest.raises(ValueError, match="max_types must be an integer >= 1, got -1"):
        BoundarySplit(severity=0.5, max_types=-1)
    with pytest.raises(ValueError, match="max_types must be >= 1"):
        MorfessorSegmenter.train(["word"], max_types=-1)
    with pytest.raises(ValueError, match="stdlib source: max_bytes must be > 0"):
        StdlibSource(max_bytes=-1)


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("encoders[2].vocab_size=100", "encoders[2].vocab_size"),
        ("encoders[2].pattern=(", "encoders[2].pattern"),
        ("encoders[2].fit_bytes=0", "encoders[2].fit_bytes"),
        ("encoders[2].file=/nonexistent.tiktoken", "encoders[2].file"),
        ("data.train.max_bytes=-1", "data.train.max_bytes"),
        ("data.train.max_bytes=0", "data.train.max_bytes"),
        ("perturbations[2].max_types=0", "perturbations[2].max_types"),
        ("perturbations[2].max_types=-1", "perturbations[2].max_types"),
    ],
)
def test_cli_validate_refuses_on_one_line(override: str, key: str) -> None:
    """The audit's commands: ``tokbench validate smoke --set ...`` exits 2 with one line."""
    proc = subprocess.run([sys.executable, "-m", "harness.cli", "validate", "smoke", "--set", override],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"tokbench: error: --set {override}: {key}: "), lines[0]


@pytest.mark.parametrize(
    ("old", "new", "key", "problem"),
    [
        # a plugin's own checks (core.errors.field_error), not the by-name bounds
        ("    blocks: 1", "    blocks: 1\n    dilations: []", "encoders[1].dilations",
         "must be a non-empty list of integers >= 1"),
        ("    blocks: 1", "    blocks: 1\n    fused_block: true\n    recompute: false",
         "encoders[1].recompute", "false needs fused_block: false"),
    ],
)
def test_a_plugins_own_check_is_located_at_its_key(tmp_path: Path, old: str, new: str, key: str,
                                                    problem: str) -> None:
    text = SUITE.replace(old, new)
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    line = next(i for i, s in enumerate(text.splitlines(), 1) if s.strip().startswith(key.split(".")[-1]))
    with pytest.raises(ConfigError) as e:
        load_suite(path)
    assert str(e.value).startswith(f"{path}:{line}: {key}: ") and problem in str(e.value), str(e.value)


def test_blt_checks_are_located_at_their_key(tmp_path: Path) -> None:
    text = SUITE.replace("  - name: bytes\n", "  - name: blt\n    local_dim: 30\n    local_heads: 4\n  - name: bytes\n")
    path = tmp_path / "suite.yaml"
    path.write_text(text)
    line = text.splitlines().index("    local_dim: 30") + 1
    with pytest.raises(ConfigError) as e:
        load_suite(path)
    assert str(e.value).startswith(f"{path}:{line}: encoders[0].local_dim: must be divisible by local_heads=4")
