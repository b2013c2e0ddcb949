"""YAML with line marks: the safe loader (YAML 1.2 floats and booleans, duplicate keys rejected)
recording ``file:line`` of every key, suite files with ``include:``, and tree merging."""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from harness.config.where import ConfigError, KeyPath, Where, show_value
from harness.config.yaml_limits import MAX_TEXT_CHARS, YamlLimitError, check_yaml_text

# --------------------------------------------------------------------------------------------
# YAML with line marks


class _MarkedDict(dict):
    lines: dict[Any, int]


class _MarkedList(list):
    lines: list[int]


class SuiteLoader(yaml.SafeLoader):
    """SafeLoader that records the 1-based line of every mapping key and list item, rejects
    duplicate keys, reads ``1e-3`` as a float and only true/false as booleans."""

    def construct_marked_mapping(self, node: yaml.MappingNode) -> Any:
        data = _MarkedDict()
        data.lines = {}
        yield data
        own = {id(k) for k, _ in node.value}
        self.flatten_mapping(node)  # resolves YAML merge keys (<<: *anchor); merged keys come first
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if not isinstance(key, str):
                raise ConfigError(
                    f"{key_node.start_mark.name}:{line}: mapping keys must be strings, got {show_value(key)}"
                )
            if key in data and id(key_node) in own and data.lines.get(key, -1) >= 0:
                raise ConfigError(f"{key_node.start_mark.name}:{line}: duplicate key {key!r}")
            data[key] = self.construct_object(value_node, deep=True)
            # merged-in keys get a negative marker so a local key may override them once
            data.lines[key] = line if id(key_node) in own else -line

    def construct_marked_sequence(self, node: yaml.SequenceNode) -> Any:
        data = _MarkedList()
        data.lines = []
        yield data
        data.extend(self.construct_object(n, deep=True) for n in node.value)
        data.lines = [n.start_mark.line + 1 for n in node.value]


SuiteLoader.add_constructor("tag:yaml.org,2002:map", SuiteLoader.construct_marked_mapping)
SuiteLoader.add_constructor("tag:yaml.org,2002:seq", SuiteLoader.construct_marked_sequence)
SuiteLoader.yaml_implicit_resolvers = {
    # YAML 1.1 booleans (yes/no/on/off) and timestamps (2024-01-01 -> date) read as strings
    first: [
        (tag, rx)
        for tag, rx in resolvers
        if tag not in ("tag:yaml.org,2002:bool", "tag:yaml.org,2002:timestamp")
    ]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
SuiteLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
SuiteLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?[0-9][0-9_]*(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _unmark(obj: Any, path: KeyPath, file: str, locs: dict[KeyPath, str]) -> Any:
    """Marked tree -> plain dicts/lists, filling ``locs`` with "file:line" per key path."""
    if isinstance(obj, _MarkedDict):
        out = {}
        for key, value in obj.items():
            locs[path + (key,)] = f"{file}:{abs(obj.lines[key])}"
            out[key] = _unmark(value, path + (key,), file, locs)
        return out
    if isinstance(obj, _MarkedList):
        items = []
        for i, value in enumerate(obj):
            locs[path + (i,)] = f"{file}:{obj.lines[i]}"
            items.append(_unmark(value, path + (i,), file, locs))
        return items
    return obj


def _yaml_problem(e: yaml.YAMLError) -> tuple[int | None, str]:
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or str(e)
    context = getattr(e, "context", None)
    text = f"{context}, {problem}" if context else problem
    return (mark.line + 1 if mark is not None else None), " ".join(str(text).split())


def parse_yaml(text: str, file: str) -> tuple[Any, dict[KeyPath, str]]:
    """Parse YAML text; returns (plain data, {key path: "file:line"}). ``file`` names it in errors."""
    try:
        check_yaml_text(text, file)  # harness/config/yaml_limits.py: size, depth, alias expansion
    except YamlLimitError as e:
        raise ConfigError(str(e)) from None
    try:
        loader = SuiteLoader(text)
        loader.name = file
        try:
            marked = loader.get_single_data()
        finally:
            loader.dispose()
    except yaml.YAMLError as e:
        line, problem = _yaml_problem(e)
        raise ConfigError(f"{file}:{line or 1}: invalid YAML: {problem}") from None
    locs: dict[KeyPath, str] = {(): f"{file}:1"}
    return _unmark(marked, (), file, locs), locs


def _display(path: Path) -> str:
    """A path for messages: relative to the CWD when it is below it, else absolute."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return str(path)
    return str(path) if rel.startswith(os.pardir) else rel


def _file_kind(path: Path) -> str:
    """"file" for a regular file, else what is wrong with it, worded to follow a file name."""
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return "not found"
    if stat.S_ISREG(mode):
        return "file"
    return "is a directory" if stat.S_ISDIR(mode) else "is not a regular file"


def read_suite_file(
    path: Path, stack: tuple[Path, ...]
) -> tuple[dict[str, Any], dict[KeyPath, str]]:
    """Read one suite file and, recursively, the files it includes; returns the merged tree."""
    file = _display(path)
    # stat first: a directory, a device (/dev/zero) or a FIFO must not be read, and a huge file is
    # refused before it is in memory (UTF-8 is at most 4 bytes per character)
    try:
        kind = _file_kind(path)
        size = path.stat().st_size if kind == "file" else 0
        if kind == "file" and size <= 4 * MAX_TEXT_CHARS:
            text = path.read_text(encoding="utf-8")
    except FileNotFoundError:  # removed between the stat and the read
        kind = "not found"
    except (OSError, ValueError) as e:  # ValueError: undecodable bytes, a NUL in the path
        raise ConfigError(f"{file}: cannot read suite file: {' '.join(str(e).split())}") from None
    if kind == "not found":
        raise ConfigError(f"{file}: suite file not found")
    if kind != "file":
        raise ConfigError(f"{file}: {kind}" + (", not a suite file" if "directory" in kind else ""))
    if size > 4 * MAX_TEXT_CHARS:
        raise ConfigError(
            f"{file}:1: the suite file is {size:,} bytes; "
            f"the limit is {MAX_TEXT_CHARS:,} characters"
        )
    data, locs = parse_yaml(text, file)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{file}:1: a suite must be a mapping of keys, got {show_value(data)}")
    if "include" not in data:
        return data, locs

    where = Where(("include",), locs, f"{file}:1")
    inc = data.pop("include")
    items = [inc] if isinstance(inc, str) else inc
    if not isinstance(items, list) or not items or not all(isinstance(x, str) for x in items):
        raise where.error(f"expected a file path or a list of file paths, got {show_value(inc)}")
    merged: dict[str, Any] = {}
    merged_locs: dict[KeyPath, str] = {}
    for i, item in enumerate(items):
        w = where.at(i) if isinstance(inc, list) else where
        try:
            target = (path.parent / item).resolve()
            kind = _file_kind(target)
        except (OSError, ValueError, RuntimeError) as e:
            # ValueError: a NUL byte in the path; RuntimeError: a symlink loop (Python < 3.13)
            raise w.error(f"cannot use included file {item!r}: {e}") from None
        if target in stack or target == path:
            chain = " -> ".join(_display(p) for p in (*stack, path, target))
            raise w.error(f"include cycle: {chain}")
        if kind != "file":
            raise w.error(f"included file {item!r} {kind} (looked for {_display(target)})")
        sub, sub_locs = read_suite_file(target, (*stack, path))
        merged, merged_locs = merge_trees(merged, merged_locs, sub, sub_locs)
    own_locs = {k: v for k, v in locs.items() if not (k and k[0] == "include")}
    merged, merged_locs = merge_trees(merged, merged_locs, data, own_locs)
    merged_locs[()] = f"{file}:1"
    return merged, merged_locs


def merge_trees(
    base: dict[str, Any],
    base_locs: Mapping[KeyPath, str],
    over: dict[str, Any],
    over_locs: Mapping[KeyPath, str],
) -> tuple[dict[str, Any], dict[KeyPath, str]]:
    """``include`` semantics: mappings merge recursively, ``over`` wins; lists and scalars are
    replaced whole. Locations follow the value that won."""

    def merge(a: Any, b: Any) -> Any:
        if isinstance(a, dict) and isinstance(b, dict):
            out = dict(a)
            for k, v in b.items():
                out[k] = merge(a[k], v) if k in a else v
            return out
        return b

    merged = merge(base, over)
    locs: dict[KeyPath, str] = {}

    def walk(value: Any, path: KeyPath) -> None:
        loc = over_locs.get(path) or base_locs.get(path)
        if loc is not None:
            locs[path] = loc
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, path + (k,))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                walk(v, path + (i,))

    walk(merged, ())
    return merged, locs
