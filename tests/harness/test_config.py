"""harness.config: YAML with line marks, include, --set, typed validation, sweeps, exact errors."""

from __future__ import annotations

import json
import random
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from encoders.backbone import BackboneConfig
from encoders.base import Encoder
from encoders.registry import REGISTRY as ENCODERS
from harness.analyses.base import ANALYSES, Analysis
from harness.config import (
    EXAMPLE_SUITE,
    ConfigError,
    SuiteLoader,
    build_perturbation,
    from_mapping,
    load_raw,
    load_suite,
    merge_trees,
    parse_yaml,
    suite_reference,
)
from harness.sources.base import SOURCES, Source
from harness.suite import SCHEMA_VERSION, BudgetConfig, EvalConfig
from perturbations.base import Perturbation
from perturbations.registry import REGISTRY as PERTURBATIONS

# ---------------------------------------------------------------------------------------------
# Fake plugins, registered per test (the real encoders are written in parallel)


@dataclass(frozen=True, kw_only=True)
class FakeConfig:
    """vocab_size: tokens. dilations: conv dilations. kind: a or b. scale: a float knob."""

    vocab_size: int = 256
    dilations: tuple[int, ...] = (1, 2)
    kind: Literal["a", "b"] = "a"
    scale: float = 1.0
    tag: str | None = None

    def __post_init__(self) -> None:
        if any(d <= 0 for d in self.dilations):
            raise ValueError(f"dilations must be positive, got {list(self.dilations)}")


class FakeEncoder(Encoder):
    Config = FakeConfig


@dataclass(frozen=True, kw_only=True)
class FakeSource(Source):
    """text: the one document. repeat: copies."""

    text: str = "hello"
    repeat: int = 1


@dataclass(kw_only=True)
class FakeTypo(Perturbation):
    """severity: fraction of words. keys: keyboard layout."""

    keys: Literal["qwerty", "azerty"] = "qwerty"
    words: tuple[str, ...] = ()

    def perturb(self, text: str, rng: random.Random) -> str:
        return text

    def __post_init__(self) -> None:
        if self.severity > 1:
            raise ValueError(f"severity is a fraction of words, at most 1, got {self.severity}")


@dataclass(frozen=True, kw_only=True)
class FakeAnalysis(Analysis):
    bins: int = 3


@pytest.fixture(autouse=True)
def fakes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ENCODERS, "fake", FakeEncoder)
    monkeypatch.setitem(SOURCES, "fake_src", FakeSource)
    monkeypatch.setitem(PERTURBATIONS, "fake.typo", FakeTypo)
    monkeypatch.setitem(ANALYSES, "fake_an", FakeAnalysis)


# Line numbers below refer to this text: keep it in step with the assertions.
BASE = """\
name: demo
seeds: [0, 1]
data:
  train: {source: fake_src, text: abc}
  eval:
    - {name: same, source: fake_src}
    - name: other
      source: fake_src
      language: de
budget:
  train_bytes: 100000
  context_bytes: 128
  batch_bytes: 1024
  lr: 3e-4
backbone: {layers: 1, dim: 32, heads: 2}
encoders:
  - bytes
  - name: fake
    vocab_size: [512, 1024]
    dilations: [1, 2, 4]
perturbations:
  - name: fake.typo
    severity: [0.1, 0.5]
"""


def write(tmp_path: Path, text: str, name: str = "suite.yaml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # messages show paths relative to the working directory
    monkeypatch.chdir(tmp_path)


def err(tmp_path: Path, text: str, *overrides: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        load_suite(path.name, overrides)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


# ---------------------------------------------------------------------------------------------
# A valid suite


def test_valid_suite(tmp_path: Path) -> None:
    s = load_suite(write(tmp_path, BASE).name)
    assert s.name == "demo" and s.seeds == (0, 1) and s.path == "suite.yaml"
    assert s.budget == BudgetConfig(
        train_bytes=100000, context_bytes=128, batch_bytes=1024, lr=3e-4
    )
    assert s.backbone == BackboneConfig(layers=1, dim=32, heads=2)
    assert s.eval == EvalConfig()
    assert s.schema_version == SCHEMA_VERSION
    # data
    assert s.data.train.source == "fake_src" and s.data.train.config == FakeSource(text="abc")
    assert s.data.train.params == {"text": "abc"}
    assert [e.name for e in s.data.eval] == ["same", "other"]
    assert s.data.eval[1].language == "de" and s.data.eval[1].config == FakeSource(language="de")
    # encoders: a bare name, then a sweep over vocab_size (dilations is a tuple: not swept)
    assert [e.label for e in s.encoders] == ["bytes", "fake-512", "fake-1024"]
    assert s.encoders[1].config == FakeConfig(vocab_size=512, dilations=(1, 2, 4))
    assert s.encoders[2].params == {"vocab_size": 1024, "dilations": [1, 2, 4]}
    assert all(e.backbone == s.backbone for e in s.encoders)
    # perturbations: one spec per severity, params resolved with defaults, JSON types
    assert [(p.id, p.severity) for p in s.perturbations] == [("fake.typo", 0.1), ("fake.typo", 0.5)]
    assert s.perturbations[0].params == {"keys": "qwerty", "words": [], "severity": 0.1}
    assert s.perturbations[0].cls is FakeTypo
    json.dumps(s.perturbations[0].params)
    # raw is the resolved mapping
    assert s.raw["budget"]["lr"] == 3e-4 and s.raw["encoders"][0] == "bytes"


def test_yaml_dialect() -> None:
    text = "a: 3e-4\nb: 1E5\nc: no\nd: yes\ne: True\nf: 1_000\ng: .5\nh: 2024-01-01\ni: off\n"
    data, locs = parse_yaml(text, "x.yaml")
    assert data == {
        "a": 3e-4,
        "b": 1e5,
        "c": "no",
        "d": "yes",
        "e": True,
        "f": 1000,
        "g": 0.5,
        "h": "2024-01-01",
        "i": "off",
    }
    assert locs[("c",)] == "x.yaml:3"


def test_line_marks_for_keys_and_items() -> None:
    _, locs = parse_yaml("a:\n  b:\n    - 1\n    -\n      c: 2\n", "f.yaml")
    assert locs[("a",)] == "f.yaml:1"
    assert locs[("a", "b")] == "f.yaml:2"
    assert locs[("a", "b", 0)] == "f.yaml:3"
    assert locs[("a", "b", 1)] == "f.yaml:5"
    assert locs[("a", "b", 1, "c")] == "f.yaml:5"


def test_yaml_merge_keys_allowed() -> None:
    data, _ = parse_yaml("x: &d {a: 1, b: 2}\ny:\n  <<: *d\n  b: 3\n", "m.yaml")
    assert data["y"] == {"a": 1, "b": 3}


# ---------------------------------------------------------------------------------------------
# Errors: exact messages with file and line


@pytest.mark.parametrize(
    ("replace", "expected"),
    [
        (
            ("  lr: 3e-4", "  lrr: 3e-4"),
            "suite.yaml:14: budget: unknown key 'lrr' (did you mean 'lr'?)",
        ),
        (("  lr: 3e-4", "  lr: fast"), "suite.yaml:14: budget.lr: expected a number, got 'fast'"),
        (("  lr: 3e-4", "  lr: true"), "suite.yaml:14: budget.lr: expected a number, got true"),
        (("  lr: 3e-4", "  lr: 0"), "suite.yaml:14: budget.lr: must be > 0, got 0.0"),
        (
            ("  train_bytes: 100000", "  train_bytes: 100"),
            "suite.yaml:12: budget.context_bytes: context_bytes (128) must be <= train_bytes (100)",
        ),
        (
            ("  train_bytes: 100000", "  train_bytes: 1.5"),
            "suite.yaml:11: budget.train_bytes: expected an int, got 1.5",
        ),
        (
            ("seeds: [0, 1]", "seeds: [0, one]"),
            "suite.yaml:2: seeds[1]: expected an int, got 'one'",
        ),
        (("seeds: [0, 1]", "seeds: [3, 3]"), "suite.yaml:2: seeds: seeds repeat: [3, 3]"),
        (("name: demo", "nmae: demo"), "suite.yaml:1: unknown key 'nmae' (did you mean 'name'?)"),
        (
            ("name: demo", "name: my demo"),
            "suite.yaml:1: name: 'my demo' is used as the run directory name: use letters, digits, '.', '_' and '-'",
        ),
        (
            ("    dilations: [1, 2, 4]", "    dilations: [1, two, 4]"),
            "suite.yaml:20: encoders[1].dilations[1]: expected an int, got 'two'",
        ),
        (
            ("    dilations: [1, 2, 4]", "    dilations: two"),
            "suite.yaml:20: encoders[1].dilations: expected a list of ints, got 'two'",
        ),
        (
            ("    dilations: [1, 2, 4]", "    dilations: [1, -2]"),
            "suite.yaml:18: encoders[1]: dilations must be positive, got [1, -2]",
        ),
        (
            ("    vocab_size: [512, 1024]", "    vocab_size: [512, big]"),
            "suite.yaml:19: encoders[1].vocab_size[1]: expected an int, got 'big'",
        ),
        (
            ("    vocab_size: [512, 1024]", "    vocab_sise: 5"),
            "suite.yaml:19: encoders[1]: unknown key 'vocab_sise' (did you mean 'vocab_size'?)",
        ),
        (
            ("  - name: fake\n", "  - name: fak\n"),
            "suite.yaml:18: encoders[1].name: unknown encoder 'fak' (did you mean 'fake'?); known: ",
        ),
        (
            ("    severity: [0.1, 0.5]", "    severity: [0.1, 2]"),
            "suite.yaml:22: perturbations[0]: severity is a fraction of words, at most 1, got 2.0",
        ),
        (
            ("    severity: [0.1, 0.5]", "    severity: [0.1, -1]"),
            "suite.yaml:23: perturbations[0].severity[1]: severity must be a finite number >= 0, got -1",
        ),
        (
            ("    severity: [0.1, 0.5]", "    severity: [0.1, 0.1]"),
            "suite.yaml:23: perturbations[0].severity: severities repeat: [0.1, 0.1]",
        ),
        (
            ("    severity: [0.1, 0.5]", "    keys: dvorak"),
            "suite.yaml:23: perturbations[0].keys: expected one of 'qwerty', 'azerty', got 'dvorak'",
        ),
        (
            ("    severity: [0.1, 0.5]", "    lang: en"),
            "suite.yaml:23: perturbations[0].lang: 'lang' is set by the harness from each document's language; set 'language' on the data source",
        ),
        (
            ("  - name: fake.typo", "  - name: fake.typo\n    id: clean"),
            "suite.yaml:23: perturbations[0].id: id 'clean' is reserved for the automatic clean baseline",
        ),
        (
            ("    - name: other", "    - name: same"),
            "suite.yaml:7: data.eval[1].name: duplicate eval set name 'same' (also data.eval[0])",
        ),
        (
            ("    - name: other\n", "    - nam: other\n"),
            "suite.yaml:7: data.eval[1]: unknown key 'nam' (did you mean 'name'?)",
        ),
        (
            ("    - {name: same, source: fake_src}", "    - {source: fake_src}"),
            "suite.yaml:6: data.eval[0]: an eval set needs a 'name' (its label in results.csv)",
        ),
        (
            ("      language: de", "      language: 7"),
            "suite.yaml:9: data.eval[1].language: expected a string or null, got 7",
        ),
        (
            ("  train: {source: fake_src, text: abc}", "  train: {source: fake_src, txt: abc}"),
            "suite.yaml:4: data.train: unknown key 'txt' (did you mean 'text'?)",
        ),
        (
            ("  train: {source: fake_src, text: abc}", "  train: {source: fake_sr}"),
            "suite.yaml:4: data.train.source: unknown source 'fake_sr' (did you mean 'fake_src'?); known: ",
        ),
        (
            (
                "backbone: {layers: 1, dim: 32, heads: 2}",
                "backbone: {layers: 1, dim: 32, heads: 3}",
            ),
            "suite.yaml:15: backbone.heads: dim 32 is not divisible by heads 3",
        ),
        (
            (
                "backbone: {layers: 1, dim: 32, heads: 2}",
                "backbone: {layers: 1, dim: 32, heads: 32}",
            ),
            "suite.yaml:15: backbone.heads: head size dim/heads = 1 must be even (RoPE rotates channel pairs)",
        ),
        (
            ("  lr: 3e-4", "  lr: 3e-4\n  lr: 1e-3"),
            "suite.yaml:15: duplicate key 'lr'",
        ),
        (
            ("seeds: [0, 1]", "seeds: [0, 1"),
            "suite.yaml:3: invalid YAML: while parsing a flow sequence, expected ',' or ']', but got ':'",
        ),
    ],
)
def test_error_messages(tmp_path: Path, replace: tuple[str, str], expected: str) -> None:
    old, new = replace
    assert old in BASE
    msg = err(tmp_path, BASE.replace(old, new, 1))
    if expected.endswith("known: "):
        assert msg.startswith(expected)
    else:
        assert msg == expected


def test_missing_required_keys(tmp_path: Path) -> None:
    assert err(tmp_path, "name: x\n") == "suite.yaml:1: missing required key 'seeds'"
    assert err(tmp_path, BASE.replace("  train: {source: fake_src, text: abc}\n", "")) == (
        "suite.yaml:3: data: missing required key 'train'"
    )
    assert (
        err(tmp_path, "- a\n- b\n")
        == 'suite.yaml:1: a suite must be a mapping of keys, got a list ["a", "b"]'
    )


def test_duplicate_encoder_labels_name_both_entries(tmp_path: Path) -> None:
    text = BASE.replace("  - bytes\n", "  - name: bytes\n    id: fake-1024\n")
    assert err(tmp_path, text) == (
        "suite.yaml:19: encoders[1]: duplicate encoder label 'fake-1024' from encoders[0] and "
        "encoders[1]; give an entry a distinct 'id'"
    )


def test_duplicate_perturbation_ids(tmp_path: Path) -> None:
    text = BASE + "  - name: fake.typo\n    severity: 0.2\n"
    assert err(tmp_path, text) == (
        "suite.yaml:24: perturbations[1].name: perturbation id 'fake.typo' is also used by "
        "perturbations[0]; give one a distinct 'id'"
    )


def test_eval_ranges(tmp_path: Path) -> None:
    assert err(tmp_path, BASE + "eval: {context_fraction: 1.5}\n") == (
        "suite.yaml:24: eval.context_fraction: must be > 0 and < 1, got 1.5"
    )
    assert err(tmp_path, BASE + "eval:\n  target_bytes: 128\n") == (
        "suite.yaml:25: eval.target_bytes: target_bytes (128) must be < budget.context_bytes (128) "
        "so the scored window keeps some prefix context"
    )
    # target_bytes only matters for clean_target
    s = load_suite(write(tmp_path, BASE + "eval:\n  modes: [full]\n  target_bytes: 128\n").name)
    assert s.eval.modes == ("full",)
    assert err(tmp_path, BASE + "eval: {modes: [full, ful]}\n") == (
        "suite.yaml:24: eval.modes[1]: expected one of 'full', 'clean_target', got 'ful' (did you mean 'full'?)"
    )
    assert (
        err(tmp_path, BASE + "data_x: 1\n")
        == "suite.yaml:24: unknown key 'data_x' (did you mean 'data'?)"
    )


def test_fractions_leave_training_data(tmp_path: Path) -> None:
    text = BASE.replace("data:\n", "data:\n  valid_fraction: 0.5\n  test_fraction: 0.5\n")
    assert err(tmp_path, text) == (
        "suite.yaml:5: data.test_fraction: valid_fraction + test_fraction = 1 leaves no training documents"
    )


def test_schema_version(tmp_path: Path) -> None:
    assert load_suite(write(tmp_path, BASE + "schema_version: 1\n").name).schema_version == 1
    assert err(tmp_path, BASE + "schema_version: 99\n") == (
        f"suite.yaml:24: schema_version: this tokbench reads schema_version {SCHEMA_VERSION}, the suite declares 99"
    )


# ---------------------------------------------------------------------------------------------
# include


def test_include_merges_recursively_local_wins_lists_replaced(tmp_path: Path) -> None:
    (tmp_path / "common").mkdir()
    write(tmp_path, BASE, "common/base.yaml")
    write(
        tmp_path,
        """\
        include: common/base.yaml
        name: child
        budget:
          lr: 1e-3
        encoders: [bytes]
        """,
    )
    s = load_suite("suite.yaml")
    assert s.name == "child"
    # budget merged key by key: lr from the child, the rest from the base
    assert s.budget.lr == 1e-3 and s.budget.train_bytes == 100000 and s.budget.batch_bytes == 1024
    # lists are replaced whole
    assert [e.label for e in s.encoders] == ["bytes"]
    assert "include" not in s.raw and s.raw["budget"]["lr"] == 1e-3


def test_include_list_later_files_win_and_errors_point_into_included_file(tmp_path: Path) -> None:
    write(tmp_path, BASE, "a.yaml")
    write(tmp_path, "budget:\n  lr: 2e-3\n  context_bytes: 64\n", "b.yaml")
    write(tmp_path, "include: [a.yaml, b.yaml]\nbudget: {context_bytes: 100}\n")
    s = load_suite("suite.yaml")
    assert s.budget.lr == 2e-3 and s.budget.context_bytes == 100
    # an error in a key that came from an included file names that file and line
    write(tmp_path, "budget:\n  lr: -1\n", "b.yaml")
    with pytest.raises(ConfigError) as e:
        load_suite("suite.yaml")
    assert str(e.value) == "b.yaml:2: budget.lr: must be > 0, got -1.0"


def test_include_cycle_and_missing(tmp_path: Path) -> None:
    write(tmp_path, "include: b.yaml\nname: a\n", "a.yaml")
    write(tmp_path, "x: 1\ninclude: [a.yaml]\n", "b.yaml")
    with pytest.raises(ConfigError) as e:
        load_suite("a.yaml")
    assert str(e.value) == "b.yaml:2: include[0]: include cycle: a.yaml -> b.yaml -> a.yaml"
    assert err(tmp_path, "name: x\ninclude: nope.yaml\n") == (
        "suite.yaml:2: include: included file 'nope.yaml' not found (looked for nope.yaml)"
    )
    assert (
        err(tmp_path, "include: [1]\n")
        == "suite.yaml:1: include: expected a file path or a list of file paths, got a list [1]"
    )
    with pytest.raises(ConfigError, match=r"^missing.yaml: suite file not found$"):
        load_suite("missing.yaml")


def test_include_relative_to_including_file(tmp_path: Path) -> None:
    (tmp_path / "suites" / "parts").mkdir(parents=True)
    write(tmp_path, BASE, "suites/parts/base.yaml")
    write(tmp_path, "include: parts/base.yaml\n", "suites/mid.yaml")
    (tmp_path / "elsewhere").mkdir()
    write(tmp_path, "include: ../suites/mid.yaml\nname: deep\n", "elsewhere/top.yaml")
    assert load_suite("elsewhere/top.yaml").name == "deep"


# ---------------------------------------------------------------------------------------------
# --set


def test_set_overrides(tmp_path: Path) -> None:
    write(tmp_path, BASE)
    s = load_suite(
        "suite.yaml",
        [
            "budget.lr=1e-3",
            "encoders[1].vocab_size=64",
            "encoders.1.kind=b",
            "eval.max_docs=5",  # a mapping that was absent is created
            "perturbations[0].severity=[0.2]",
            "description=quick run",
            "budget.flops_reference=bytes",
        ],
    )
    assert s.budget.lr == 1e-3 and s.eval.max_docs == 5 and s.description == "quick run"
    assert [e.label for e in s.encoders] == ["bytes", "fake"]  # a scalar is not a sweep
    assert s.encoders[1].config.kind == "b"
    assert [p.severity for p in s.perturbations] == [0.2]
    assert s.raw["eval"] == {"max_docs": 5}
    s = load_suite(
        "suite.yaml", ["eval.stride_bytes=", "encoders[0]={name: bytes, backbone: null}"]
    )
    assert s.eval.stride_bytes is None and s.encoders[0].backbone is None


@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        ("budget.lr=fast", "--set budget.lr=fast: budget.lr: expected a number, got 'fast'"),
        ("budget.lrr=1", "--set budget.lrr=1: budget: unknown key 'lrr' (did you mean 'lr'?)"),
        (
            "encoders[1].dilations=[1, x]",
            "--set encoders[1].dilations=[1, x]: encoders[1].dilations[1]: expected an int, got 'x'",
        ),
        (
            "encoders.5.kind=a",
            "--set encoders.5.kind=a: encoders has 2 item(s); index 5 is out of range",
        ),
        (
            "encoders.x.kind=a",
            "--set encoders.x.kind=a: encoders is a list; index it with a number, not 'x'",
        ),
        ("budget[0]=1", "--set budget[0]=1: budget is a mapping, not a list"),
        ("name.x=1", "--set name.x=1: name is 'demo', not a mapping or a list"),
        ("budget.lr", "--set budget.lr: expected KEY.PATH=VALUE (e.g. budget.lr=1e-3)"),
        ("=3", "--set =3: expected KEY.PATH=VALUE (e.g. budget.lr=1e-3)"),
        ("a..b=3", "--set a..b=3: expected KEY.PATH=VALUE (e.g. budget.lr=1e-3)"),
        (
            "budget={lr: 1, lr: 2}",
            "--set budget={lr: 1, lr: 2}: cannot read the value as YAML: duplicate key 'lr'",
        ),
        ("include=x.yaml", "--set include=x.yaml: include cannot be set from the command line"),
        (
            "seeds=[1",
            "--set seeds=[1: cannot read the value as YAML: while parsing a flow sequence, expected ',' or ']', but got '<stream end>'",
        ),
        (
            "budget.flops_reference=fake-10",
            "--set budget.flops_reference=fake-10: budget.flops_reference: no encoder labelled 'fake-10' (did you mean 'fake-1024'?); labels: bytes, fake-512, fake-1024",
        ),
    ],
)
def test_set_errors(tmp_path: Path, arg: str, expected: str) -> None:
    assert err(tmp_path, BASE, arg) == expected


def test_load_raw_locations(tmp_path: Path) -> None:
    write(tmp_path, BASE)
    raw, locs = load_raw("suite.yaml", ["budget.lr=1"])
    assert raw["budget"]["lr"] == 1
    assert locs[("budget", "lr")] == "--set budget.lr=1"
    assert locs[("budget", "train_bytes")] == "suite.yaml:11"


# ---------------------------------------------------------------------------------------------
# Sweeps, backbone overrides, plugins by module:Class


def test_cartesian_sweep_and_ids(tmp_path: Path) -> None:
    text = BASE.replace(
        "    dilations: [1, 2, 4]\n",
        "    dilations: [1, 2, 4]\n    kind: [a, b]\n    id: fz\n",
    )
    s = load_suite(write(tmp_path, text).name)
    assert [e.label for e in s.encoders] == [
        "bytes",
        "fz-512-a",
        "fz-512-b",
        "fz-1024-a",
        "fz-1024-b",
    ]
    assert s.encoders[4].config == FakeConfig(vocab_size=1024, dilations=(1, 2, 4), kind="b")
    # a single-item list is still a sweep (label carries the value); None / bools render plainly
    s = load_suite(
        write(tmp_path, BASE, "s2.yaml").name,
        ["encoders[1].vocab_size=[7]", "encoders[1].tag=[null, x]"],
    )
    assert [e.label for e in s.encoders[1:]] == ["fake-7-none", "fake-7-x"]
    assert err(tmp_path, BASE, "encoders[1].vocab_size=[]") == (
        "--set encoders[1].vocab_size=[]: encoders[1].vocab_size: an empty list sweeps over nothing; give at least one value"
    )
    assert err(tmp_path, BASE, "encoders[1].vocab_size=[5, 5]") == (
        "suite.yaml:18: encoders[1]: duplicate encoder label 'fake-5' from encoders[1] (twice); give an entry a distinct 'id'"
    )


def test_encoder_backbone_override_and_null(tmp_path: Path) -> None:
    text = BASE.replace(
        "  - bytes\n",
        "  - name: bytes\n    backbone: null\n  - name: bytes\n    id: wide\n    backbone: {dim: 64}\n",
    )
    s = load_suite(write(tmp_path, text).name)
    assert s.encoders[0].backbone is None
    assert s.encoders[1].backbone == BackboneConfig(layers=1, dim=64, heads=2)
    bad = BASE.replace("  - bytes\n", "  - name: bytes\n    backbone: {dimm: 64}\n")
    assert (
        err(tmp_path, bad)
        == "suite.yaml:18: encoders[0].backbone: unknown key 'dimm' (did you mean 'dim'?)"
    )
    bad = BASE.replace("  - bytes\n", "  - name: bytes\n    backbone: small\n")
    assert err(tmp_path, bad) == (
        "suite.yaml:18: encoders[0].backbone: expected null (no backbone) or a mapping of backbone keys to override, got 'small'"
    )


PLUGIN_FILE = """
from dataclasses import dataclass
from perturbations.base import Perturbation
from encoders.base import Encoder


@dataclass(kw_only=True)
class Shout(Perturbation):
    times: int = 1

    def perturb(self, text, rng):
        return text.upper() * self.times


@dataclass(frozen=True, kw_only=True)
class MyEncConfig:
    width: int = 8


class MyEnc(Encoder):
    Config = MyEncConfig
"""


def test_module_class_plugins_next_to_suite(tmp_path: Path) -> None:
    (tmp_path / "suites").mkdir()
    (tmp_path / "suites" / "tb_cfg_plugin.py").write_text(PLUGIN_FILE)
    text = BASE.replace("  - bytes\n", "  - name: tb_cfg_plugin:MyEnc\n    width: [4, 8]\n") + (
        "  - name: tb_cfg_plugin:Shout\n    times: 2\n    severity: 1\n"
    )
    write(tmp_path, text, "suites/s.yaml")
    # the working directory is tmp_path: the module is found through the suite file's directory
    try:
        s = load_suite("suites/s.yaml")
        assert str((tmp_path / "suites").resolve()) not in sys.path
    finally:
        sys.modules.pop("tb_cfg_plugin", None)
    assert [e.label for e in s.encoders[:2]] == ["MyEnc-4", "MyEnc-8"]
    assert s.encoders[0].name == "tb_cfg_plugin:MyEnc"
    shout = s.perturbations[-1]
    assert (shout.name, shout.id, shout.severity, shout.params) == (
        "tb_cfg_plugin:Shout",
        "Shout",
        1.0,
        {"times": 2, "severity": 1.0},
    )


def test_default_source_is_files(tmp_path: Path) -> None:
    (tmp_path / "corpus.txt").write_text("some text\n")
    text = BASE.replace(
        "    - name: other\n      source: fake_src\n",
        "    - name: other\n      paths: corpus.txt\n",
    )
    s = load_suite(write(tmp_path, text).name)
    spec = s.data.eval[1]
    assert spec.source == "files" and spec.params == {"paths": "corpus.txt"}
    # a lone path is a one-item list; language reaches the source config too
    assert spec.config.paths == ("corpus.txt",) and spec.config.language == "de"


def test_default_source_missing_paths_says_so(tmp_path: Path) -> None:
    text = BASE.replace("    - name: other\n      source: fake_src\n", "    - name: other\n")
    assert err(tmp_path, text) == (
        "suite.yaml:7: data.eval[1]: missing required key 'paths' (no 'source' given, so it is 'files')"
    )


def test_analyses(tmp_path: Path) -> None:
    s = load_suite(
        write(tmp_path, BASE + "analyses:\n  - {name: fake_an, bins: 5, datasets: [other]}\n").name
    )
    assert s.analyses[0].name == "fake_an" and s.analyses[0].config == FakeAnalysis(
        bins=5, datasets=("other",)
    )
    assert err(tmp_path, BASE + "analyses:\n  - {name: fake_an, datasets: [othr]}\n") == (
        "suite.yaml:25: analyses[0].datasets[0]: no eval set named 'othr' (did you mean 'other'?); eval sets: other, same"
    )


# ---------------------------------------------------------------------------------------------
# from_mapping on its own (the harness uses it for any config dataclass)


def test_from_mapping_generic() -> None:
    cfg = from_mapping(FakeConfig, {"vocab_size": 2e3, "dilations": [3], "scale": 2}, "enc")
    assert cfg == FakeConfig(vocab_size=2000, dilations=(3,), scale=2.0)
    assert isinstance(cfg.scale, float)
    with pytest.raises(ConfigError) as e:
        from_mapping(FakeConfig, {"kind": "c"}, "encoders[0]")
    assert str(e.value) == "encoders[0]: kind: expected one of 'a', 'b', got 'c'"
    with pytest.raises(ConfigError) as e:
        from_mapping(FakeConfig, {"vocab_size": True}, "x")
    assert str(e.value) == "x: vocab_size: expected an int, got true"
    # non-frozen kw_only perturbation dataclasses, with fixed and excluded fields
    p = from_mapping(FakeTypo, {"keys": "azerty"}, "p", exclude=("lang",), fixed={"severity": 0.3})
    assert (p.keys, p.severity, p.lang) == ("azerty", 0.3, None)
    with pytest.raises(ConfigError, match=r"^p: unknown key 'severity'"):
        from_mapping(FakeTypo, {"severity": 1}, "p", fixed={"severity": 0.3})


# ---------------------------------------------------------------------------------------------
# Reference documentation


def test_suite_reference_covers_every_key() -> None:
    md = suite_reference(include_plugins=False)
    for key in (
        "`name`",
        "`seeds`",
        "`budget.train_bytes`",
        "`budget.match`",
        "`backbone.heads`",
        "`eval.context_fraction`",
        "`data.valid_fraction`",
        "`part`",
        "`severity`",
        "`include`",
    ):
        assert key in md, key
    # meaning comes from the dataclass docstrings
    assert "| `budget.context_bytes` | int | `256` | window length in bytes" in md


def test_reference_doc_is_current() -> None:
    doc = Path(__file__).resolve().parents[2] / "docs" / "suite_reference.md"
    if not doc.exists():
        pytest.skip("docs/suite_reference.md not generated yet")
    head = suite_reference(include_plugins=False)
    assert doc.read_text().startswith(head.rstrip("\n")), (
        "regenerate: python -m harness.config > docs/suite_reference.md"
    )


def test_set_into_shorthand_entries(tmp_path: Path) -> None:
    write(tmp_path, BASE.replace("  train: {source: fake_src, text: abc}", "  train: fake_src"))
    s = load_suite("suite.yaml", ["encoders[0].id=b0", "data.train.text=xyz"])
    assert s.encoders[0].label == "b0" and s.encoders[0].name == "bytes"
    assert s.data.train.config == FakeSource(text="xyz")


def test_build_perturbation_restores_types(tmp_path: Path) -> None:
    s = load_suite(write(tmp_path, BASE, "s.yaml").name, ["perturbations[0].words=[a, b]"])
    spec = s.perturbations[1]
    assert spec.params == {"keys": "qwerty", "words": ["a", "b"], "severity": 0.5}
    p = build_perturbation(spec, lang="fr")
    assert p == FakeTypo(severity=0.5, lang="fr", words=("a", "b"))


def test_reference_example_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the example in docs/suite_reference.md is a real suite (bpe / typo.keyboard stand-ins here,
    # since those modules are developed separately)
    monkeypatch.setitem(ENCODERS, "bpe", FakeEncoder)
    monkeypatch.setitem(PERTURBATIONS, "typo.keyboard", FakeTypo)
    monkeypatch.setitem(SOURCES, "stdlib", FakeSource)
    assert EXAMPLE_SUITE in suite_reference(include_plugins=False)
    s = load_suite(write(tmp_path, EXAMPLE_SUITE).name)
    assert [e.label for e in s.encoders] == ["bytes", "bpe-1024", "bpe-4096", "bigram"]
    assert s.encoders[3].backbone is None
    assert s.data.eval[1].source == "files" and s.data.eval[1].config.paths == ("my_texts/",)
    assert s.budget.train_bytes == 2_000_000


def test_module_class_plugin_from_cwd(tmp_path: Path) -> None:
    (tmp_path / "tb_cwd_plugin.py").write_text(PLUGIN_FILE)
    (tmp_path / "suites").mkdir()
    write(tmp_path, BASE + "  - {name: 'tb_cwd_plugin:Shout', id: loud}\n", "suites/s.yaml")
    try:
        s = load_suite("suites/s.yaml")
    finally:
        sys.modules.pop("tb_cwd_plugin", None)
    assert (s.perturbations[-1].id, s.perturbations[-1].severity) == ("loud", 0.0)
    assert err(tmp_path, BASE + "  - tb_cwd_plugin:Shoutt\n") == (
        "suite.yaml:24: perturbations[1].name: perturbation 'tb_cwd_plugin:Shoutt': module "
        "'tb_cwd_plugin' has no attribute 'Shoutt' (did you mean 'Shout'?)"
    )
    sys.modules.pop("tb_cwd_plugin", None)


def test_merge_trees_unit() -> None:
    base = {"a": {"x": 1, "y": [1, 2, 3]}, "b": 1}
    base_locs = {
        ("a",): "base:1",
        ("a", "x"): "base:2",
        ("a", "y"): "base:3",
        ("a", "y", 2): "base:4",
        ("b",): "base:5",
    }
    over = {"a": {"y": [9], "z": None}}
    over_locs = {
        ("a",): "over:1",
        ("a", "y"): "over:2",
        ("a", "y", 0): "over:2",
        ("a", "z"): "over:3",
    }
    merged, locs = merge_trees(base, base_locs, over, over_locs)
    assert merged == {"a": {"x": 1, "y": [9], "z": None}, "b": 1}
    assert locs == {
        ("a",): "over:1",
        ("a", "x"): "base:2",
        ("a", "y"): "over:2",
        ("a", "y", 0): "over:2",
        ("a", "z"): "over:3",
        ("b",): "base:5",
    }
    assert base == {"a": {"x": 1, "y": [1, 2, 3]}, "b": 1}  # inputs untouched


_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=8),
)
_keys = st.text("abcdefghij_", min_size=1, max_size=6)
_trees = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=12,
)


class _SuiteDumper(yaml.SafeDumper):
    """Quotes exactly the strings SuiteLoader would read as something else (e.g. '1e5')."""


_SuiteDumper.yaml_implicit_resolvers = SuiteLoader.yaml_implicit_resolvers


@settings(max_examples=60, deadline=None)
@given(st.dictionaries(_keys, _trees, max_size=4))
def test_parse_yaml_roundtrip_and_locations(tree: dict) -> None:
    text = yaml.dump(
        tree, Dumper=_SuiteDumper, allow_unicode=True, default_flow_style=False, sort_keys=False
    )
    data, locs = parse_yaml(text, "t.yaml")
    assert data == tree

    def paths(value: object, prefix: tuple) -> list[tuple]:
        if isinstance(value, dict):
            return [p for k, v in value.items() for p in [prefix + (k,), *paths(v, prefix + (k,))]]
        if isinstance(value, list):
            return [
                p for i, v in enumerate(value) for p in [prefix + (i,), *paths(v, prefix + (i,))]
            ]
        return []

    lines = text.splitlines()
    for p in paths(tree, ()):
        file, line = locs[p].rsplit(":", 1)
        assert file == "t.yaml" and 1 <= int(line) <= len(lines)
        if isinstance(p[-1], str):  # a key's line starts with the key (block style)
            assert lines[int(line) - 1].lstrip(" -").startswith(p[-1])


def test_perturbation_defaults_and_json_params(tmp_path: Path) -> None:
    s = load_suite(write(tmp_path, BASE + "  - {name: fake.typo, id: plain}\n").name)
    plain = s.perturbations[-1]
    assert (plain.id, plain.severity, plain.params["severity"]) == ("plain", 0.0, 0.0)
    msg = err(tmp_path, BASE + "  - {name: fake.typo, id: t2, words: [.nan]}\n")
    assert msg == "suite.yaml:24: perturbations[1].words[0]: expected a string, got nan"
    assert err(tmp_path, BASE + "  - {name: fake.typo, id: t3, severity: []}\n") == (
        "suite.yaml:24: perturbations[1].severity: an empty list sweeps over nothing; give at least one severity"
    )
    assert err(tmp_path, BASE + "  - {name: fake.typo, id: t4, severity: high}\n") == (
        "suite.yaml:24: perturbations[1].severity: expected a number, got 'high'"
    )


def test_list_sections_must_be_lists(tmp_path: Path) -> None:
    assert err(tmp_path, BASE, "encoders=bytes") == (
        "--set encoders=bytes: encoders: expected a list of encoders, got 'bytes'"
    )
    assert err(tmp_path, BASE, "perturbations={name: x}") == (
        "--set perturbations={name: x}: perturbations: expected a list of perturbations, got a mapping"
    )
    assert err(tmp_path, BASE + "x_: 1\n") == (
        "suite.yaml:24: unknown key 'x_'; valid keys: analyses, backbone, baselines, budget, data, "
        "description, encoders, eval, name, permutations, perturbations, schema_version, seeds"
    )
    assert err(tmp_path, BASE + "analyses: fake_an\n") == (
        "suite.yaml:24: analyses: expected a list of analyses, got 'fake_an'"
    )
    assert err(tmp_path, BASE + "analyses: [{name: fake_an, binz: 2}]\n") == (
        "suite.yaml:24: analyses[0]: unknown key 'binz' (did you mean 'bins'?)"
    )
    assert (
        err(tmp_path, BASE, "encoders=[]")
        == "--set encoders=[]: encoders: needs at least one encoder"
    )
    assert (
        err(tmp_path, BASE, "data.eval=[]")
        == "--set data.eval=[]: data.eval: needs at least one eval set"
    )
    assert err(tmp_path, BASE, "encoders[1]=5") == (
        "--set encoders[1]=5: encoders[1]: expected a mapping with 'name', got 5"
    )


_SUITES = sorted((Path(__file__).resolve().parents[2] / "suites").glob("*.yaml"))


@pytest.mark.parametrize("suite_file", _SUITES, ids=[p.name for p in _SUITES])
def test_shipped_suites_validate(suite_file: Path) -> None:
    # every suite in suites/ loads with the real plugins (validation only: no data, no training)
    s = load_suite(suite_file)
    assert s.encoders and s.data.eval
