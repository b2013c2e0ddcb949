"""harness.config.build: the whole suite: valid suites, exact error messages, sweeps, plugins, shipped suites."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from config_fixtures import BASE, FakeAnalysis, FakeConfig, FakeSource, FakeTypo, err, write

from encoders.backbone import BackboneConfig
from harness.config import (
    ConfigError,
    load_suite,
)
from harness.config.suite import SCHEMA_VERSION, BudgetConfig, EvalConfig

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


def test_missing_required_key_suggests_the_typo(tmp_path: Path) -> None:
    msg = err(tmp_path, BASE.replace("  - name: fake\n", "  - nam: fake\n"))
    assert msg.endswith("missing required key 'name' (a registered encoder); did you mean "
                        "'name' for 'nam'?")
    msg = err(tmp_path, BASE.replace("train:", "trian:"))
    assert "unknown key 'trian' (did you mean 'train'?)" in msg  # where keys are checked first


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

def test_schema_version(tmp_path: Path) -> None:
    assert load_suite(write(tmp_path, BASE + "schema_version: 1\n").name).schema_version == 1
    assert err(tmp_path, BASE + "schema_version: 99\n") == (
        f"suite.yaml:24: schema_version: this tokbench reads schema_version {SCHEMA_VERSION}, the suite declares 99"
    )

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

def test_perturbation_is_built_once_with_its_final_parameters(tmp_path: Path) -> None:
    s = load_suite(write(tmp_path, BASE, "s.yaml").name, ["perturbations[0].words=[a, b]"])
    spec = s.perturbations[1]
    assert spec.params == {"keys": "qwerty", "words": ["a", "b"], "severity": 0.5}
    assert spec.perturbation == FakeTypo(severity=0.5, words=("a", "b"))  # lists -> tuples
    assert spec.perturbation.for_language("fr") == FakeTypo(severity=0.5, lang="fr", words=("a", "b"))
    assert s.perturbations[0].perturbation.severity == 0.1

def test_module_class_plugin_from_cwd(tmp_path: Path) -> None:
    (tmp_path / "tb_cwd_plugin.py").write_text(PLUGIN_FILE)
    (tmp_path / "suites").mkdir()
    write(tmp_path, BASE + "  - {name: 'tb_cwd_plugin:Shout', id: loud}\n", "suites/s.yaml")
    with pytest.raises(ConfigError, match="not in the folders searched: .*plugin_paths"):
        load_suite("suites/s.yaml")  # the working directory is not searched unless declared
    write(tmp_path, BASE + "  - {name: 'tb_cwd_plugin:Shout', id: loud}\nplugin_paths: [..]\n",
          "suites/s.yaml")
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
        "description, encoders, eval, name, overlap, permutations, perturbations, plugin_paths, scaling, "
        "schema_version, seeds"
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


_SUITES = sorted((Path(__file__).resolve().parents[3] / "suites").glob("*.yaml"))


@pytest.mark.parametrize("suite_file", _SUITES, ids=[p.name for p in _SUITES])
def test_shipped_suites_validate(suite_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # every suite in suites/ loads with the real plugins (validation only: no data, no training)
    if suite_file.name == "hf_example.yaml":  # its model is made by the tool the suite names
        pytest.importorskip("transformers")
        tool = suite_file.parents[1] / "tools" / "make_tiny_hf_model.py"
        subprocess.run([sys.executable, str(tool), str(tmp_path / "tiny-hf-model")], check=True,
                       capture_output=True, timeout=300)
        monkeypatch.chdir(tmp_path)
    s = load_suite(suite_file)
    assert s.encoders and s.data.eval
