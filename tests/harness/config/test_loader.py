"""harness.config.loader: YAML with line marks, the YAML 1.2 dialect, include, merge_trees."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from config_fixtures import BASE, err, write
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.config import (
    ConfigError,
    SuiteLoader,
    load_suite,
    merge_trees,
    parse_yaml,
)


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
