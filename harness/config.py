"""Suite loading: YAML with line marks -> ``include:`` -> ``--set`` -> typed, frozen ``Suite``.

    suite = load_suite("suites/smoke.yaml", overrides=["budget.lr=1e-3", "encoders[1].vocab_size=512"])

Every problem raises ``ConfigError`` with a one-line message ``FILE:LINE: key.path: problem``
(``suites/x.yaml:14: encoders[1].dilations[1]: expected an int, got 'two'``); ``--set`` values are
located as ``--set key=value``. The CLI prints the message and exits with code 2.

Validation is driven by the dataclasses' type annotations (``from_mapping``), so an encoder, source,
perturbation or analysis config needs no code here: int, float (an int is accepted), str, bool (an
int is not), ``Literal[...]``, ``X | None``, ``tuple[X, ...]`` (a YAML list), ``dict[str, X]`` and
nested dataclasses. Unknown keys are rejected with the closest valid key. A config's own
``__post_init__`` may raise ``ValueError``; its message is reported at the entry's location.

YAML dialect: PyYAML's safe loader with two YAML 1.2 fixes, so suites mean what they look like:
``3e-4`` is a float (YAML 1.1 reads it as a string) and only ``true``/``false`` are booleans
(YAML 1.1 turns ``language: no`` — Norwegian — into ``False``); dates stay strings. Duplicate
keys are an error.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import itertools
import json
import math
import os
import re
import types
import typing
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import MISSING, dataclass, fields, is_dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import yaml

from encoders.backbone import BackboneConfig
from harness import plugins
from harness.permutation import KINDS as PERMUTATION_KINDS
from harness.permutation import Permutation, check_scoring, variant_label
from harness.suite import (
    SCHEMA_VERSION,
    AnalysisSpec,
    BaselineConfig,
    BudgetConfig,
    DataConfig,
    EncoderSpec,
    EvalConfig,
    PerturbationSpec,
    SourceSpec,
    Suite,
)

# Source used by a data entry that does not name one: a user pointing at their own text files
# writes only ``paths:``; the embedded corpus must be asked for by name (``source: stdlib``).
DEFAULT_SOURCE = "files"

# Perturbation ids the harness uses itself (the automatic clean baseline).
RESERVED_PERTURBATION_IDS = frozenset({"clean"})

KeyPath = tuple[str | int, ...]


class ConfigError(ValueError):
    """A suite problem; the message is one line ``FILE:LINE: key.path: problem``."""


# --------------------------------------------------------------------------------------------
# Locations


def format_keypath(path: Sequence[str | int]) -> str:
    """("encoders", 1, "dilations") -> "encoders[1].dilations"."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass(frozen=True)
class Where:
    """Where a value sits: its key path plus the table ``{key path: "file:line"}`` of the suite.

    ``loc`` is the location of the deepest recorded prefix of ``path`` (a value written inline
    inherits its key's line), else ``default``.
    """

    path: KeyPath = ()
    locs: Mapping[KeyPath, str] = dataclasses.field(default_factory=dict)
    default: str = "<config>"

    def at(self, *keys: str | int) -> Where:
        return Where(self.path + tuple(keys), self.locs, self.default)

    @property
    def loc(self) -> str:
        for n in range(len(self.path), -1, -1):
            if self.path[:n] in self.locs:
                return self.locs[self.path[:n]]
        return self.default

    @property
    def keypath(self) -> str:
        return format_keypath(self.path)

    def error(self, problem: str, at: Where | None = None) -> ConfigError:
        """ConfigError for this key path; ``at`` (a deeper Where) only supplies the line."""
        loc = (at or self).loc
        kp = self.keypath
        problem = " ".join(str(problem).split())  # one line, whatever the plugin wrote
        return ConfigError(f"{loc}: {kp}: {problem}" if kp else f"{loc}: {problem}")


def _as_where(where: Where | str) -> Where:
    return where if isinstance(where, Where) else Where(default=where or "<config>")


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
                    f"{key_node.start_mark.name}:{line}: mapping keys must be strings, got {_show(key)}"
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


def _read_suite_file(
    path: Path, stack: tuple[Path, ...]
) -> tuple[dict[str, Any], dict[KeyPath, str]]:
    """Read one suite file and, recursively, the files it includes; returns the merged tree."""
    file = _display(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{file}: suite file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{file}: cannot read suite file: {e}") from None
    data, locs = parse_yaml(text, file)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(f"{file}:1: a suite must be a mapping of keys, got {_show(data)}")
    if "include" not in data:
        return data, locs

    where = Where(("include",), locs, f"{file}:1")
    inc = data.pop("include")
    items = [inc] if isinstance(inc, str) else inc
    if not isinstance(items, list) or not items or not all(isinstance(x, str) for x in items):
        raise where.error(f"expected a file path or a list of file paths, got {_show(inc)}")
    merged: dict[str, Any] = {}
    merged_locs: dict[KeyPath, str] = {}
    for i, item in enumerate(items):
        w = where.at(i) if isinstance(inc, list) else where
        target = (path.parent / item).resolve()
        if target in stack or target == path:
            chain = " -> ".join(_display(p) for p in (*stack, path, target))
            raise w.error(f"include cycle: {chain}")
        if not target.is_file():
            raise w.error(f"included file {item!r} not found (looked for {_display(target)})")
        sub, sub_locs = _read_suite_file(target, (*stack, path))
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


# --------------------------------------------------------------------------------------------
# --set overrides

_SEGMENT = re.compile(r"^([^.\[\]\s=]+)((?:\[\d+\])*)$")


def _parse_keypath(text: str) -> list[str | int] | None:
    """ "encoders[1].vocab_size" / "encoders.1.vocab_size" -> ["encoders", 1 | "1", "vocab_size"].

    ``[n]`` is always a list index (int); a bare digit segment stays a str and indexes a list only
    when it meets one. Returns None when the syntax is wrong.
    """
    out: list[str | int] = []
    for segment in text.split("."):
        m = _SEGMENT.match(segment)
        if m is None:
            return None
        out.append(m.group(1))
        out.extend(int(i) for i in re.findall(r"\d+", m.group(2)))
    return out


def _shorthand_key(path: KeyPath) -> str | None:
    """The key a bare string stands for at this position (``- bytes`` = ``- {name: bytes}``)."""
    if len(path) == 2 and path[0] in ("encoders", "perturbations", "analyses"):
        return "name" if isinstance(path[1], int) else None
    if len(path) == 2 and path[0] == "permutations":
        return "kind" if isinstance(path[1], int) else None
    if path == ("data", "train") or (
        len(path) == 3 and path[:2] == ("data", "eval") and isinstance(path[2], int)
    ):
        return "source"
    return None


def apply_override(data: dict[str, Any], locs: dict[KeyPath, str], arg: str) -> None:
    """Apply one ``--set key.path=value`` in place; the value is parsed as YAML (``[1, 2]``,
    ``{a: 1}``, ``null``, ``3e-4`` ...; empty means null). Missing mappings on the way are made."""
    where_text = f"--set {arg}"
    key, eq, text = arg.partition("=")
    key = key.strip()
    keys = _parse_keypath(key) if eq else None
    if not keys:
        raise ConfigError(f"{where_text}: expected KEY.PATH=VALUE (e.g. budget.lr=1e-3)")
    if keys[0] == "include":
        raise ConfigError(f"{where_text}: include cannot be set from the command line")
    value, value_locs = None, {}
    if text.strip():
        try:
            value, value_locs = parse_yaml(text, where_text)
        except ConfigError as e:
            # drop parse_yaml's "<where>:<line>: [invalid YAML: ]" prefix: the value is one line
            problem = re.sub(r"^.*?:\d+: (?:invalid YAML: )?", "", str(e)[len(where_text) :])
            raise ConfigError(f"{where_text}: cannot read the value as YAML: {problem}") from None

    cur: Any = data
    path: list[str | int] = []
    for i, k in enumerate(keys):
        last = i == len(keys) - 1
        if isinstance(cur, list):
            if isinstance(k, str) and not k.isdigit():
                raise ConfigError(
                    f"{where_text}: {format_keypath(path)} is a list; index it with a number, not {k!r}"
                )
            idx = int(k)
            if idx >= len(cur):
                raise ConfigError(
                    f"{where_text}: {format_keypath(path)} has {len(cur)} item(s); index {idx} is out of range"
                )
            k = idx
        elif isinstance(cur, dict):
            if isinstance(k, int):
                raise ConfigError(f"{where_text}: {format_keypath(path)} is a mapping, not a list")
            if not last and cur.get(k) is None:
                cur[k] = {}
        else:
            raise ConfigError(
                f"{where_text}: {format_keypath(path)} is {_show(cur)}, not a mapping or a list"
            )
        path.append(k)
        if last:
            cur[k] = value
        else:
            short = _shorthand_key(tuple(path))
            if short is not None and isinstance(cur[k], str):
                cur[k] = {short: cur[k]}  # "- bytes" -> {name: bytes}, so its keys can be set
            cur = cur[k]

    prefix = tuple(path)
    for p in [p for p in locs if p[: len(prefix)] == prefix]:
        del locs[p]
    for i in range(1, len(prefix)):  # mappings created on the way
        locs.setdefault(prefix[:i], where_text)
    for sub in value_locs:
        locs[prefix + sub] = where_text


# --------------------------------------------------------------------------------------------
# Typed validation of dataclasses


def _show(value: Any) -> str:
    """A value as it would appear in YAML, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        text = json.dumps(list(value), default=str)
        return f"a list {text}" if len(text) <= 40 else "a list"
    return repr(value)


_NAMES = {
    int: ("an int", "ints"),
    float: ("a number", "numbers"),
    str: ("a string", "strings"),
    bool: ("true or false", "booleans"),
}


def _describe(tp: Any, plural: bool = False) -> str:
    """Human name of a type annotation: "an int", "a list of ints", "one of 'a', 'b'"."""
    origin = get_origin(tp)
    if tp in _NAMES:
        return _NAMES[tp][plural]
    if tp is type(None):
        return "null"
    if tp is Any:
        return "values" if plural else "any value"
    if origin is Literal:
        choices = ", ".join(_show(a) for a in get_args(tp))
        return f"values among {choices}" if plural else f"one of {choices}"
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(a, plural) for a in get_args(tp))
    if origin in (tuple, list, Sequence, Collection) or tp in (tuple, list):
        args = [a for a in get_args(tp) if a is not Ellipsis]
        inner = _describe(args[0], plural=True) if len(set(args)) == 1 else "values"
        return f"lists of {inner}" if plural else f"a list of {inner}"
    if origin in (dict, Mapping) or tp is dict or (isinstance(tp, type) and is_dataclass(tp)):
        return "mappings" if plural else "a mapping"
    return getattr(tp, "__name__", str(tp))


class _Mismatch(Exception):
    """The value at the current location does not fit the type (reported by ``_convert``)."""


@functools.cache
def type_hints(cls: type) -> dict[str, Any]:
    """Resolved annotations of a dataclass (strings from ``from __future__ import annotations``)."""
    try:
        return typing.get_type_hints(cls)
    except Exception:
        # A config defined somewhere get_type_hints cannot see (a local class in a test): resolve
        # field by field, falling back to Any for what cannot be evaluated.
        out: dict[str, Any] = {}
        module = __import__(cls.__module__, fromlist=["_"]).__dict__ if cls.__module__ else {}
        ns = {**vars(typing), **module}
        for f in fields(cls):
            if isinstance(f.type, str):
                try:
                    out[f.name] = eval(f.type, ns)  # noqa: S307 - annotation text of a trusted class
                except Exception:
                    out[f.name] = Any
            else:
                out[f.name] = f.type
        return out


def _convert(tp: Any, value: Any, where: Where) -> Any:
    """Validate ``value`` against annotation ``tp``; nested errors name the nested key path."""
    try:
        return _convert_inner(tp, value, where)
    except _Mismatch:
        hint = ""
        if get_origin(tp) is Literal and isinstance(value, str):
            close = difflib.get_close_matches(
                value, [a for a in get_args(tp) if isinstance(a, str)], n=1
            )
            hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise where.error(f"expected {_describe(tp)}, got {_show(value)}{hint}") from None


def _convert_inner(tp: Any, value: Any, where: Where) -> Any:
    origin = get_origin(tp)
    if tp is Any or tp is object:
        return value
    if tp is type(None):
        if value is None:
            return None
        raise _Mismatch
    if origin in (Union, types.UnionType):
        args = get_args(tp)
        if value is None:
            if type(None) in args:
                return None
            raise _Mismatch
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert_inner(arg, value, where)
            except _Mismatch:
                continue
        raise _Mismatch
    if origin is Literal:
        for a in get_args(tp):
            if value == a and type(value) is type(a):
                return a
        raise _Mismatch
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise _Mismatch
    if tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        # 2e6 reads as a float; accept it for a byte count when it is a whole number
        if isinstance(value, float) and value.is_integer():
            return int(value)
        raise _Mismatch
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        raise _Mismatch
    if tp is str:
        if isinstance(value, str):
            return value
        raise _Mismatch
    if origin is tuple or tp is tuple or origin in (list, Sequence, Collection) or tp is list:
        args = get_args(tp)
        if not isinstance(value, (list, tuple)):
            # a lone value for a variable-length list field (``paths: corpus.txt``) is a 1-item list
            if len(args) == 2 and args[1] is Ellipsis and not isinstance(value, Mapping):
                return (_convert_inner(args[0], value, where),)
            raise _Mismatch
        if not args:
            items = list(value)
        elif len(args) == 2 and args[1] is Ellipsis or origin is not tuple:
            items = [_convert(args[0], v, where.at(i)) for i, v in enumerate(value)]
        else:
            if len(value) != len(args):
                raise where.error(f"expected a list of {len(args)} items, got {len(value)}")
            items = [_convert(a, v, where.at(i)) for i, (a, v) in enumerate(zip(args, value))]
        return tuple(items) if (origin is tuple or tp is tuple) else items
    if origin in (dict, Mapping) or tp is dict:
        if not isinstance(value, Mapping):
            raise _Mismatch
        args = get_args(tp)
        vt = args[1] if len(args) == 2 else Any
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise where.error(f"keys must be strings, got {_show(k)}")
            out[k] = _convert(vt, v, where.at(k))
        return out
    if isinstance(tp, type) and is_dataclass(tp):
        if value is None:
            value = {}  # "budget:" with nothing under it means all defaults
        if not isinstance(value, Mapping):
            raise _Mismatch
        return from_mapping(tp, value, where)
    if isinstance(tp, type) and isinstance(value, tp):
        return value
    raise where.error(f"cannot validate a value of type {tp!r} from YAML")


def _unknown_key(key: str, valid: Collection[str]) -> str:
    close = difflib.get_close_matches(key, sorted(valid), n=1, cutoff=0.6)
    if close:
        return f"unknown key {key!r} (did you mean {close[0]!r}?)"
    return f"unknown key {key!r}; valid keys: {', '.join(sorted(valid)) or 'none'}"


def _check_keys(mapping: Mapping[str, Any], valid: Collection[str], where: Where) -> None:
    for key in mapping:
        if key not in valid:
            raise where.error(_unknown_key(str(key), valid), at=where.at(key))


def init_fields(cls: type) -> dict[str, dataclasses.Field]:
    """The fields a config dataclass takes from YAML (``init=True``), in declaration order."""
    return {f.name: f for f in fields(cls) if f.init}


def _required(f: dataclasses.Field) -> bool:
    return f.default is MISSING and f.default_factory is MISSING


def from_mapping(
    cls: type,
    mapping: Any,
    where: Where | str = "",
    *,
    exclude: Collection[str] = (),
    fixed: Mapping[str, Any] | None = None,
) -> Any:
    """Build a dataclass instance from a YAML mapping, validating every field by its annotation.

    where: a ``Where`` (key path + line table) or a plain prefix for messages (e.g. "encoders[0]").
    exclude: fields that may not be given (e.g. a perturbation's ``severity``, ``lang``).
    fixed: values passed to the constructor as they are (not read from ``mapping``).
    Raises ConfigError on unknown/missing keys, wrong types, or a ValueError/TypeError raised by
    the dataclass itself (``__post_init__`` checks).
    """
    where = _as_where(where)
    if mapping is None:
        mapping = {}
    if not isinstance(mapping, Mapping):
        raise where.error(f"expected a mapping, got {_show(mapping)}")
    flds = {
        n: f for n, f in init_fields(cls).items() if n not in exclude and n not in (fixed or {})
    }
    _check_keys(mapping, flds, where)
    hints = type_hints(cls)
    kwargs: dict[str, Any] = dict(fixed or {})
    for name, f in flds.items():
        if name in mapping:
            kwargs[name] = _convert(hints.get(name, Any), mapping[name], where.at(name))
        elif _required(f):
            raise where.error(f"missing required key {name!r}")
    try:
        return cls(**kwargs)
    except (ValueError, TypeError, AssertionError) as e:
        raise where.error(str(e) or type(e).__name__) from None


# --------------------------------------------------------------------------------------------
# Value ranges of the suite schema (the dataclasses stay plain; the loader owns the checks)

_Rule = tuple[Callable[[Any], bool], str]
_POS: _Rule = (lambda v: v > 0, "must be > 0")
_NONNEG: _Rule = (lambda v: v >= 0, "must be >= 0")
_FRAC: _Rule = (lambda v: 0 <= v <= 1, "must be between 0 and 1")
_FRAC_OPEN_HI: _Rule = (lambda v: 0 <= v < 1, "must be >= 0 and < 1")
_FRAC_OPEN: _Rule = (lambda v: 0 < v < 1, "must be > 0 and < 1")

_RANGES: dict[type, dict[str, _Rule]] = {
    BudgetConfig: {
        "train_bytes": _POS,
        "context_bytes": _POS,
        "batch_bytes": _POS,
        "lr": _POS,
        "min_lr_ratio": _FRAC,
        "warmup_bytes": _NONNEG,
        "weight_decay": _NONNEG,
        "beta1": _FRAC_OPEN_HI,
        "beta2": _FRAC_OPEN_HI,
        "grad_clip": _NONNEG,
    },
    BackboneConfig: {
        "layers": _POS,
        "dim": _POS,
        "heads": _POS,
        "mlp_ratio": _POS,
        "dropout": _FRAC_OPEN_HI,
        "rope_base": _POS,
    },
    DataConfig: {"valid_fraction": _FRAC_OPEN_HI, "test_fraction": _FRAC_OPEN_HI},
    BaselineConfig: {"dictionary_bytes": _NONNEG},
    EvalConfig: {
        "max_docs": _POS,
        "stride_bytes": _POS,
        "context_fraction": _FRAC_OPEN,
        "target_bytes": _POS,
        "min_doc_bytes": _NONNEG,
        "sample_docs": _NONNEG,
        "batch_windows": _POS,
    },
}


def _check_ranges(obj: Any, where: Where) -> None:
    for name, (ok, text) in _RANGES.get(type(obj), {}).items():
        value = getattr(obj, name)
        if value is not None and (isinstance(value, float) and math.isnan(value) or not ok(value)):
            raise where.at(name).error(f"{text}, got {_show(value)}")


def _check_backbone(bb: BackboneConfig, where: Where) -> None:
    _check_ranges(bb, where)
    if bb.dim % bb.heads:
        raise where.at("heads").error(f"dim {bb.dim} is not divisible by heads {bb.heads}")
    if (bb.dim // bb.heads) % 2:
        raise where.at("heads").error(
            f"head size dim/heads = {bb.dim // bb.heads} must be even (RoPE rotates channel pairs)"
        )


def _check_budget(b: BudgetConfig, where: Where) -> None:
    _check_ranges(b, where)
    if b.context_bytes > b.train_bytes:
        raise where.at("context_bytes").error(
            f"context_bytes ({b.context_bytes}) must be <= train_bytes ({b.train_bytes})"
        )
    if b.batch_bytes < b.context_bytes:
        raise where.at("batch_bytes").error(
            f"batch_bytes ({b.batch_bytes}) must be >= context_bytes ({b.context_bytes}): a step holds whole windows"
        )
    if b.batch_bytes > b.train_bytes:
        raise where.at("batch_bytes").error(
            f"batch_bytes ({b.batch_bytes}) must be <= train_bytes ({b.train_bytes}): not even one step"
        )
    if b.warmup_bytes > b.train_bytes:
        raise where.at("warmup_bytes").error(
            f"warmup_bytes ({b.warmup_bytes}) must be <= train_bytes ({b.train_bytes})"
        )


def _check_eval(e: EvalConfig, budget: BudgetConfig, where: Where) -> None:
    _check_ranges(e, where)
    if not e.modes:
        raise where.at("modes").error("needs at least one mode (full, clean_target)")
    if len(set(e.modes)) != len(e.modes):
        raise where.at("modes").error(f"modes repeat: {list(e.modes)}")
    if e.stride_bytes is not None and e.stride_bytes > budget.context_bytes:
        raise where.at("stride_bytes").error(
            f"stride_bytes ({e.stride_bytes}) must be <= budget.context_bytes ({budget.context_bytes})"
        )
    if "clean_target" in e.modes and e.target_bytes >= budget.context_bytes:
        raise where.at("target_bytes").error(
            f"target_bytes ({e.target_bytes}) must be < budget.context_bytes ({budget.context_bytes}) "
            "so the scored window keeps some prefix context"
        )


# --------------------------------------------------------------------------------------------
# Plugin-backed sections


def _resolve(kind: plugins.Kind, name: Any, where: Where, search_paths: Sequence[Path]) -> type:
    if not isinstance(name, str) or not name:
        article = "an" if kind[0] in "aeiou" else "a"
        raise where.error(f"expected {article} {kind} name (a string), got {_show(name)}")
    try:
        return plugins.resolve(kind, name, search_paths)
    except plugins.PluginError as e:
        raise where.error(str(e)) from None


def _entry(value: Any, where: Where, what: str) -> dict[str, Any]:
    """A list entry: a mapping, or a bare string as shorthand for ``{name: string}``."""
    if isinstance(value, str):
        return {what: value}
    if not isinstance(value, Mapping):
        raise where.error(f"expected a mapping with '{what}', got {_show(value)}")
    return dict(value)


def _plugin_entry(
    value: Any, where: Where, kind: plugins.Kind, search_paths: Sequence[Path]
) -> tuple[dict[str, Any], str, type]:
    """An ``encoders`` / ``perturbations`` / ``analyses`` item -> (entry, its name, the class)."""
    entry = _entry(value, where, "name")
    if "name" not in entry:
        raise where.error(f"missing required key 'name' (a registered {kind})")
    return entry, entry["name"], _resolve(kind, entry["name"], where.at("name"), search_paths)


_SOURCE_KEYS = ("source", "name", "language", "part")


def source_spec(
    value: Any, where: Where, search_paths: Sequence[Path] = (), *, needs_name: bool = False
) -> SourceSpec:
    """A ``data.train`` / ``data.eval[i]`` entry -> SourceSpec with the source's config object.

    Keys: ``source`` (default ``files``), ``name``, ``language``, ``part``; every other key is a
    field of the source's config dataclass. ``language`` is also given to the config when it has
    such a field. A bare string is shorthand for ``{source: string}``.
    """
    entry = _entry(value, where, "source")
    source = entry.get("source", DEFAULT_SOURCE)
    cls = _resolve("source", source, where.at("source"), search_paths)
    cfg_fields = init_fields(cls)
    _check_keys(entry, set(_SOURCE_KEYS) | set(cfg_fields), where)
    hints = type_hints(SourceSpec)
    name = _convert(hints["name"], entry.get("name"), where.at("name"))
    if needs_name and not name:
        raise where.error("an eval set needs a 'name' (its label in results.csv)")
    language = _convert(hints["language"], entry.get("language"), where.at("language"))
    part = _convert(hints["part"], entry.get("part"), where.at("part"))
    params = {k: v for k, v in entry.items() if k not in _SOURCE_KEYS}
    cfg_map = dict(params)
    if language is not None and "language" in cfg_fields:
        cfg_map["language"] = language
    try:
        config = from_mapping(cls, cfg_map, where)
    except ConfigError as e:
        if "source" in entry or "missing required key" not in str(e):
            raise
        raise ConfigError(f"{e} (no 'source' given, so it is {DEFAULT_SOURCE!r})") from None
    return SourceSpec(
        source=source, name=name, language=language, part=part, params=params, config=config
    )


def _data(value: Any, where: Where, search_paths: Sequence[Path]) -> DataConfig:
    if not isinstance(value, Mapping):
        raise where.error(f"expected a mapping with 'train' and 'eval', got {_show(value)}")
    _check_keys(value, init_fields(DataConfig), where)
    for key in ("train", "eval"):
        if key not in value:
            raise where.error(f"missing required key {key!r}")
    train = source_spec(value["train"], where.at("train"), search_paths)
    evals_raw = value["eval"]
    if not isinstance(evals_raw, list):
        raise where.at("eval").error(f"expected a list of eval sets, got {_show(evals_raw)}")
    if not evals_raw:
        raise where.at("eval").error("needs at least one eval set")
    evals: list[SourceSpec] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(evals_raw):
        spec = source_spec(item, where.at("eval", i), search_paths, needs_name=True)
        assert spec.name is not None
        if spec.name in seen:
            raise where.at("eval", i, "name").error(
                f"duplicate eval set name {spec.name!r} (also data.eval[{seen[spec.name]}])"
            )
        seen[spec.name] = i
        evals.append(spec)
    hints = type_hints(DataConfig)
    kwargs = {
        k: _convert(hints[k], value[k], where.at(k))
        for k in ("valid_fraction", "test_fraction")
        if k in value
    }
    data = DataConfig(train=train, eval=tuple(evals), **kwargs)
    _check_ranges(data, where)
    if data.valid_fraction + data.test_fraction >= 1:
        raise where.at("test_fraction").error(
            f"valid_fraction + test_fraction = {data.valid_fraction + data.test_fraction:g} leaves no training documents"
        )
    return data


def _is_sweepable(tp: Any) -> bool:
    """Scalar annotations (int, float, str, bool, Literal, and those | None) may be swept."""
    origin = get_origin(tp)
    if origin in (Union, types.UnionType):
        return all(a is type(None) or _is_sweepable(a) for a in get_args(tp))
    return tp in (int, float, str, bool) or origin is Literal


def _label_value(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _encoders(
    value: Any, where: Where, suite_backbone: BackboneConfig, search_paths: Sequence[Path]
) -> tuple[EncoderSpec, ...]:
    if not isinstance(value, list):
        raise where.error(f"expected a list of encoders, got {_show(value)}")
    if not value:
        raise where.error("needs at least one encoder")
    specs: list[EncoderSpec] = []
    owner: dict[str, str] = {}  # label -> key path of the entry that produced it
    for i, item in enumerate(value):
        w = where.at(i)
        entry, name, cls = _plugin_entry(item, w, "encoder", search_paths)
        cfg_cls = cls.Config
        cfg_fields = init_fields(cfg_cls)
        _check_keys(entry, {"name", "id", "backbone"} | set(cfg_fields), w)
        enc_id = _convert(str | None, entry.get("id"), w.at("id"))
        if "backbone" not in entry:
            backbone: BackboneConfig | None = suite_backbone
        elif entry["backbone"] is None:
            backbone = None
        elif isinstance(entry["backbone"], Mapping):
            base = {f.name: getattr(suite_backbone, f.name) for f in fields(BackboneConfig)}
            backbone = from_mapping(BackboneConfig, {**base, **entry["backbone"]}, w.at("backbone"))
            _check_backbone(backbone, w.at("backbone"))
        else:
            raise w.at("backbone").error(
                f"expected null (no backbone) or a mapping of backbone keys to override, got {_show(entry['backbone'])}"
            )

        params = {k: v for k, v in entry.items() if k not in ("name", "id", "backbone")}
        hints = type_hints(cfg_cls)
        swept = [
            k for k, v in params.items() if isinstance(v, list) and _is_sweepable(hints.get(k, Any))
        ]
        for k in swept:
            if not params[k]:
                raise w.at(k).error("an empty list sweeps over nothing; give at least one value")
            for j, v in enumerate(params[k]):
                _convert(hints[k], v, w.at(k, j))  # locate a bad sweep value at its own line
        base_label = enc_id or plugins.default_label(name, cls)
        for combo in itertools.product(*(params[k] for k in swept)):
            p = {**params, **dict(zip(swept, combo))}
            config = from_mapping(cfg_cls, p, w)
            label = base_label + "".join(f"-{_label_value(v)}" for v in combo)
            if label in owner:
                other = owner[label]
                both = f"{other} and {w.keypath}" if other != w.keypath else f"{other} (twice)"
                raise w.error(
                    f"duplicate encoder label {label!r} from {both}; give an entry a distinct 'id'"
                )
            if not label or any(c.isspace() or c in "/\\," for c in label):
                raise w.error(
                    f"encoder label {label!r} may not contain spaces, commas or slashes; set 'id'"
                )
            owner[label] = w.keypath
            specs.append(
                EncoderSpec(name=name, label=label, config=config, backbone=backbone, params=p)
            )
    return tuple(specs)


def _json_params(params: dict[str, Any], where: Where) -> dict[str, Any]:
    """Normalise resolved parameters to JSON types (tuples -> lists): they seed the rng."""
    try:
        return json.loads(json.dumps(params, sort_keys=True, allow_nan=False))
    except (TypeError, ValueError) as e:
        raise where.error(f"parameters must be JSON values (they seed the rng): {e}") from None


def _perturbations(
    value: Any, where: Where, search_paths: Sequence[Path]
) -> tuple[PerturbationSpec, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise where.error(f"expected a list of perturbations, got {_show(value)}")
    specs: list[PerturbationSpec] = []
    owner: dict[str, int] = {}
    for i, item in enumerate(value):
        w = where.at(i)
        entry, name, cls = _plugin_entry(item, w, "perturbation", search_paths)
        cls_fields = init_fields(cls)
        if "lang" in entry:
            raise w.at("lang").error(
                "'lang' is set by the harness from each document's language; set 'language' on the data source"
            )
        _check_keys(entry, {"name", "id", "severity"} | (set(cls_fields) - {"lang"}), w)
        pid = _convert(str | None, entry.get("id"), w.at("id")) or plugins.default_label(name, cls)
        if pid in RESERVED_PERTURBATION_IDS:
            raise w.at("id").error(f"id {pid!r} is reserved for the automatic clean baseline")
        if pid in owner:
            raise w.at("id" if "id" in entry else "name").error(
                f"perturbation id {pid!r} is also used by perturbations[{owner[pid]}]; give one a distinct 'id'"
            )
        owner[pid] = i

        if "severity" in entry:
            sev_raw, sev_w = entry["severity"], w.at("severity")
            if isinstance(sev_raw, list) and not sev_raw:
                raise sev_w.error("an empty list sweeps over nothing; give at least one severity")
            given = (
                [(v, sev_w.at(j)) for j, v in enumerate(sev_raw)]
                if isinstance(sev_raw, list)
                else [(sev_raw, sev_w)]
            )
            severities = []
            for sv, sw in given:
                s = _convert(float, sv, sw)
                if not math.isfinite(s) or s < 0:
                    raise sw.error(f"severity must be a finite number >= 0, got {_show(sv)}")
                severities.append(s)
            if len(set(severities)) != len(severities):
                raise sev_w.error(f"severities repeat: {sev_raw}")
        else:
            default = cls_fields.get("severity")
            severities = [
                float(default.default)
                if default is not None and default.default is not MISSING
                else 0.0
            ]

        params = {k: v for k, v in entry.items() if k not in ("name", "id", "severity")}
        for s in severities:
            inst = from_mapping(cls, params, w, exclude=("lang",), fixed={"severity": s})
            # every field but lang, severity included (harness.suite: they seed the rng)
            resolved = {n: getattr(inst, n) for n in cls_fields if n != "lang"}
            specs.append(
                PerturbationSpec(
                    name=name, id=pid, severity=s, params=_json_params(resolved, w), cls=cls
                )
            )
    return tuple(specs)


def _analyses(
    value: Any, where: Where, eval_names: Collection[str], search_paths: Sequence[Path]
) -> tuple[AnalysisSpec, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise where.error(f"expected a list of analyses, got {_show(value)}")
    specs = []
    for i, item in enumerate(value):
        w = where.at(i)
        entry, name, cls = _plugin_entry(item, w, "analysis", search_paths)
        _check_keys(entry, {"name"} | set(init_fields(cls)), w)  # 'name' among the valid keys
        params = {k: v for k, v in entry.items() if k != "name"}
        config = from_mapping(cls, params, w)
        for j, ds in enumerate(getattr(config, "datasets", ()) or ()):
            if ds not in eval_names:
                close = difflib.get_close_matches(ds, sorted(eval_names), n=1)
                hint = f" (did you mean {close[0]!r}?)" if close else ""
                raise w.at("datasets", j).error(
                    f"no eval set named {ds!r}{hint}; eval sets: {', '.join(sorted(eval_names))}"
                )
        specs.append(AnalysisSpec(name=name, params=params, config=config))
    return tuple(specs)


# --------------------------------------------------------------------------------------------
# Context fragility: permutations and compressor baselines (docs/fragility.md)


def _permutations(value: Any, where: Where) -> tuple[Permutation, ...]:
    """``permutations:`` items — a kind (``global``) or ``{kind, block_bytes}``, where a list of
    block sizes sweeps — to distinct non-identity permutations, in order."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise where.error(f"expected a list of permutations, got {_show(value)}")
    out: list[Permutation] = []
    for i, item in enumerate(value):
        w = where.at(i)
        entry = _entry(item, w, "kind")
        _check_keys(entry, {"kind", "block_bytes"}, w)
        if "kind" not in entry:
            raise w.error(f"missing required key 'kind' ({', '.join(PERMUTATION_KINDS)})")
        kind = _convert(Literal[PERMUTATION_KINDS], entry["kind"], w.at("kind"))  # type: ignore[valid-type]
        raw_bb = entry.get("block_bytes")
        if isinstance(raw_bb, list) and not raw_bb:
            raise w.at("block_bytes").error("an empty list sweeps over nothing; give at least one size")
        given = ([(v, w.at("block_bytes", j)) for j, v in enumerate(raw_bb)]
                 if isinstance(raw_bb, list) else [(raw_bb, w.at("block_bytes"))])
        for v, ww in given:
            try:
                perm = Permutation(kind=kind, block_bytes=_convert(int | None, v, ww))
            except ValueError as e:
                raise ww.error(str(e)) from None
            if perm in out:
                raise ww.error(f"permutation {perm.label} is listed twice")
            if not perm.is_identity:  # the original stream is always there
                out.append(perm)
    return tuple(out)


def _permuted_encoders(encoders: tuple[EncoderSpec, ...], perms: tuple[Permutation, ...],
                       where: Where, search_paths: Sequence[Path]) -> tuple[EncoderSpec, ...]:
    """Each encoder on the original stream, then once per permutation (``bytes~global``)."""
    out: list[EncoderSpec] = []
    for spec in encoders:
        out.append(spec)
        cls = _resolve("encoder", spec.name, where, search_paths)
        if not cls.permutable():
            raise where.error(
                f"encoder {spec.label!r} predicts {cls.unit}s and does not implement "
                "unit_lengths/collate_units, so it cannot be permuted (docs/fragility.md)")
        out += [dataclasses.replace(spec, label=variant_label(spec.label, p), permutation=p)
                for p in perms]
    labels = [s.label for s in out]
    dup = next((x for x in labels if labels.count(x) > 1), None)
    if dup is not None:
        raise where.error(f"duplicate encoder label {dup!r} after adding permutations; rename an 'id'")
    return tuple(out)


def _baselines(value: Any, where: Where) -> BaselineConfig:
    cfg = _convert(BaselineConfig, value, where)
    _check_ranges(cfg, where)
    if len(set(cfg.compressors)) != len(cfg.compressors):
        raise where.at("compressors").error(f"compressors repeat: {list(cfg.compressors)}")
    return cfg


# --------------------------------------------------------------------------------------------
# The suite

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
SUITE_KEYS: tuple[str, ...] = tuple(n for n in init_fields(Suite) if n not in ("raw", "path"))


def build_suite(
    raw: Mapping[str, Any],
    where: Where | str = "",
    *,
    path: str = "",
    search_paths: Sequence[str | Path] = (),
) -> Suite:
    """Validate a resolved suite mapping (after include / --set) into a ``Suite``."""
    where = _as_where(where)
    paths = [Path(p) for p in search_paths]
    if not isinstance(raw, Mapping):
        raise where.error(f"a suite must be a mapping, got {_show(raw)}")
    _check_keys(raw, SUITE_KEYS, where)
    for key in ("name", "seeds", "data", "encoders"):
        if key not in raw:
            raise where.error(f"missing required key {key!r}")
    hints = type_hints(Suite)

    name = _convert(str, raw["name"], where.at("name"))
    if not _NAME_RE.match(name):
        raise where.at("name").error(
            f"{name!r} is used as the run directory name: use letters, digits, '.', '_' and '-'"
        )
    description = _convert(str, raw.get("description", ""), where.at("description"))
    version = _convert(int, raw.get("schema_version", SCHEMA_VERSION), where.at("schema_version"))
    if version != SCHEMA_VERSION:
        raise where.at("schema_version").error(
            f"this tokbench reads schema_version {SCHEMA_VERSION}, the suite declares {version}"
        )
    seeds = _convert(hints["seeds"], raw["seeds"], where.at("seeds"))
    if not seeds:
        raise where.at("seeds").error("needs at least one seed")
    if len(set(seeds)) != len(seeds):
        raise where.at("seeds").error(f"seeds repeat: {list(seeds)}")
    for i, s in enumerate(seeds):
        if not 0 <= s < 2**63:
            raise where.at("seeds", i).error(f"a seed must be >= 0 and < 2**63, got {s}")

    budget = _convert(BudgetConfig, raw.get("budget"), where.at("budget"))
    _check_budget(budget, where.at("budget"))
    backbone = _convert(BackboneConfig, raw.get("backbone"), where.at("backbone"))
    _check_backbone(backbone, where.at("backbone"))
    data = _data(raw["data"], where.at("data"), paths)
    encoders = _encoders(raw["encoders"], where.at("encoders"), backbone, paths)
    if budget.flops_reference is not None:
        labels = [e.label for e in encoders]
        if budget.flops_reference not in labels:
            close = difflib.get_close_matches(budget.flops_reference, labels, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise where.at("budget", "flops_reference").error(
                f"no encoder labelled {budget.flops_reference!r}{hint}; labels: {', '.join(labels)}"
            )
    perturbations = _perturbations(raw.get("perturbations"), where.at("perturbations"), paths)
    eval_cfg = _convert(EvalConfig, raw.get("eval"), where.at("eval"))
    _check_eval(eval_cfg, budget, where.at("eval"))
    analyses = _analyses(
        raw.get("analyses"), where.at("analyses"), [d.name for d in data.eval if d.name], paths
    )
    permutations = _permutations(raw.get("permutations"), where.at("permutations"))
    if permutations:
        try:
            check_scoring(eval_cfg.modes, eval_cfg.stride_bytes, budget.context_bytes)
        except ValueError as e:
            raise where.at("eval").error(str(e)) from None
        encoders = _permuted_encoders(encoders, permutations, where.at("encoders"), paths)
    baselines = _baselines(raw.get("baselines"), where.at("baselines"))
    return Suite(
        name=name,
        seeds=seeds,
        data=data,
        budget=budget,
        backbone=backbone,
        encoders=encoders,
        perturbations=perturbations,
        eval=eval_cfg,
        analyses=analyses,
        permutations=permutations,
        baselines=baselines,
        description=description,
        schema_version=version,
        raw=dict(raw),
        path=path,
    )


def load_raw(
    path: str | Path, overrides: Sequence[str] = ()
) -> tuple[dict[str, Any], dict[KeyPath, str]]:
    """Read a suite file with its includes and apply ``--set`` overrides; no validation.

    Returns (the resolved mapping, {key path: "file:line" or "--set ..."}).
    """
    p = Path(path)
    data, locs = _read_suite_file(p.resolve() if p.exists() else p, ())
    for arg in overrides:
        apply_override(data, locs, arg)
    return data, locs


def load_suite(path: str | Path, overrides: Sequence[str] = ()) -> Suite:
    """Load, include, override and validate a suite file. Raises ConfigError (one line).

    ``"module:Class"`` plugins are looked up on PYTHONPATH, then in the current directory and the
    suite file's directory.
    """
    data, locs = load_raw(path, overrides)
    where = Where((), locs, locs[()])  # locs[()] is "<suite file>:1"
    return build_suite(
        data, where, path=str(path), search_paths=[Path.cwd(), Path(path).resolve().parent]
    )


def build_perturbation(spec: PerturbationSpec, lang: str | None = None) -> Any:
    """A fresh perturbation instance for one document language: ``spec.params`` (JSON types)
    converted back through the class's annotations (lists -> tuples), plus severity and lang."""
    return from_mapping(
        spec.cls,
        {k: v for k, v in spec.params.items() if k not in ("severity", "lang")},
        f"perturbation {spec.id!r}",
        fixed={"severity": spec.severity, "lang": lang},
    )


# --------------------------------------------------------------------------------------------
# Reference documentation, rendered from the dataclasses


def _default_text(f: dataclasses.Field) -> str:
    if f.default is not MISSING:
        value = f.default
    elif f.default_factory is not MISSING:
        value = f.default_factory()
    else:
        return "required"
    if is_dataclass(value):
        return "see below"
    if isinstance(value, tuple):
        value = list(value)
    return f"`{json.dumps(value)}`" if not isinstance(value, str) or value else '`""`'


def _type_text(tp: Any) -> str:
    origin = get_origin(tp)
    if tp in (int, float, str, bool):
        return tp.__name__
    if tp is Any:
        return "any"
    if tp is type(None):
        return "null"
    if origin is Literal:
        return " \\| ".join(str(a) for a in get_args(tp))
    if origin in (Union, types.UnionType):
        return " \\| ".join(_type_text(a) for a in get_args(tp))
    if origin is tuple or origin is list:
        args = [a for a in get_args(tp) if a is not Ellipsis]
        return f"list of {_type_text(args[0])}" if args else "list"
    if origin in (dict, Mapping) or tp is dict:
        return "mapping"
    if isinstance(tp, type) and is_dataclass(tp):
        return "mapping"
    return getattr(tp, "__name__", str(tp))


_CLAUSE = re.compile(
    r"(?:(?<=^)|(?<=[\s.;(]))(`*[A-Za-z_]\w*`*(?:\s*[,/]\s*`*[A-Za-z_]\w*`*)*)\s*:\s"
)


def _doc_clauses(cls: type) -> tuple[str, list[tuple[int, int, list[str]]]]:
    """(the docstring on one line, [(start, end, field names) of every ``field: meaning`` clause])."""
    doc = " ".join((cls.__doc__ or "").split())
    names = set(init_fields(cls)) if is_dataclass(cls) else set()  # an encoder class: summary only
    marks = []
    for m in _CLAUSE.finditer(doc):
        keys = [k.strip().strip("`") for k in re.split(r"[,/]", m.group(1))]
        if any(k in names for k in keys):
            marks.append((m.start(), m.end(), [k for k in keys if k in names]))
    return doc, marks


def field_docs(cls: type) -> dict[str, str]:
    """Per-field text from a dataclass docstring written as ``field: meaning`` clauses (several
    fields may share one: ``beta1, beta2: ...`` or ``a/b: ...``; names may be in backticks); text
    before the first clause is the summary."""
    doc, marks = _doc_clauses(cls)
    out: dict[str, str] = {}
    for j, (_start, end, keys) in enumerate(marks):
        stop = marks[j + 1][0] if j + 1 < len(marks) else len(doc)
        text = doc[end:stop].strip().rstrip(";").strip()
        for k in keys:
            out[k] = text
    return out


def _summary(cls: type) -> str:
    doc, marks = _doc_clauses(cls)
    return (doc[: marks[0][0]] if marks else doc).strip()


# Meanings for fields of classes outside this package whose docstrings do not document them
# field by field yet (the docstring wins once it does).
_FALLBACK_DOCS: dict[type, dict[str, str]] = {
    BackboneConfig: {
        "layers": "transformer blocks.",
        "dim": "model width (channels per position).",
        "heads": "attention heads; dim / heads must be even (RoPE).",
        "mlp_ratio": "MLP hidden units = mlp_ratio * dim.",
        "dropout": "dropout probability in attention (training only).",
        "rope_base": "RoPE frequency base.",
    },
}


def _field_table(
    cls: type,
    skip: Collection[str] = (),
    prefix: str = "",
    defaults: Mapping[str, str] | None = None,
) -> list[str]:
    hints = type_hints(cls)
    docs = dict(_FALLBACK_DOCS.get(cls, {}))
    for klass in reversed(cls.__mro__):  # a base class documents the fields it declares
        if is_dataclass(klass):
            docs.update({k: v for k, v in field_docs(klass).items() if v})
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for name, f in init_fields(cls).items():
        if name in skip:
            continue
        # docstrings use reST ``code``; markdown wants single backticks
        meaning = docs.get(name, "").replace("``", "`").replace("|", "\\|")
        default = (defaults or {}).get(name) or _default_text(f)
        rows.append(
            f"| `{prefix}{name}` | {_type_text(hints.get(name, Any))} | {default} | {meaning} |"
        )
    return rows


EXAMPLE_SUITE = """\
name: my-suite
seeds: [0, 1]
data:
  train: {source: stdlib}
  eval:
    - {name: stdlib, source: stdlib}    # the training source: its test part is scored
    - {name: mine, paths: [my_texts/], docs: paragraph, language: en}   # source: files
budget: {train_bytes: 2e6, context_bytes: 256, batch_bytes: 8192, lr: 3e-3}
backbone: {layers: 2, dim: 64, heads: 4}
encoders:
  - bytes
  - {name: bpe, vocab_size: [1024, 4096]}     # a sweep: bpe-1024, bpe-4096
  - {name: bytes, id: bigram, backbone: null}
perturbations:
  - {name: typo.keyboard, severity: [0.05, 0.2]}
eval: {modes: [full, clean_target], max_docs: 50}
"""

_SECTION_TEXT = {
    "top": (
        "A suite is one YAML mapping. `include:` (a path or a list of paths, relative to the "
        "including file) is read first: mappings merge recursively, keys written in the including "
        "file win, lists are replaced whole. `tokbench run SUITE --set key.path=value` then "
        "overrides single keys (`--set budget.lr=1e-3`, `--set encoders[1].vocab_size=[512,1024]`; "
        "the value is read as YAML). Unknown keys are errors. Numbers such as `3e-4` are floats "
        "and only `true`/`false` are booleans; an int field accepts `2e6`; a list field accepts a "
        "single value (`paths: corpus.txt`)."
    ),
    "data_entry": (
        "`data.train` and every item of `data.eval` is a mapping (or just a source name). "
        f"`source` defaults to `{DEFAULT_SOURCE}`. All keys other than the four below are the "
        "source's own parameters (tables further down)."
    ),
    "encoders": (
        "A list; each item is a mapping (or just a name). `name` is a registered encoder, an entry "
        "point of group `tokbench.encoders`, or `package.module:ClassName`. Other keys are the "
        "encoder's config fields. A scalar field given as a list is a sweep: one encoder per value "
        "(several swept fields: every combination), labelled `<id or name>-<value>...`, e.g. "
        "`bpe-4096`. List-typed fields are never swept. Labels must be unique."
    ),
    "perturbations": (
        "A list; each item is a mapping (or just a name). `name` is a registered perturbation, an "
        "entry point of group `tokbench.perturbations`, or `package.module:ClassName`. Other keys "
        "are the perturbation's fields (`lang` is filled in by the harness). `severity` may be a "
        "list: one cell per severity. Ids must be unique; `clean` is reserved for the automatic "
        "clean baseline."
    ),
    "analyses": (
        "A list of `name` + parameters; `datasets` (where the analysis has it) must name eval sets."
    ),
    "permutations": (
        "A list; each item is a kind (`global`) or a mapping. Every encoder is also trained and "
        "scored on each permutation of its windows, labelled `<label>~<kind>[-<block_bytes>]`, "
        "e.g. `bytes~inter_block-16`; the original stream is always included. Needs "
        "`eval.modes: [full]` and `eval.stride_bytes` = `budget.context_bytes`."
    ),
}

PLUGIN_NAMING = """\
## Naming a plugin (encoders, sources, perturbations, analyses)

A `name:` (or `source:`) is looked up in this order:

1. `package.module:ClassName` — imported from `PYTHONPATH`, the current directory or the suite
   file's directory. A file `my_perturbation.py` next to the suite is used as
   `name: my_perturbation:Shout`; its default `id` / label is the class name.
2. A registered name: the built-ins (`tokbench ls encoders|sources|perturbations|analyses`) and
   anything registered with the kind's decorator (`encoders.registry.register`,
   `perturbations.registry.register`, `harness.sources.base.register_source`,
   `harness.analyses.base.register_analysis`) by a module already imported.
3. An entry point of an installed package, group `tokbench.encoders`, `tokbench.sources`,
   `tokbench.perturbations` or `tokbench.analyses`. Only the entry point that is named is loaded:

```toml
[project.entry-points."tokbench.perturbations"]
"shout" = "my_package.perturbations:Shout"
```

A plugin class subclasses the kind's base class (`encoders.base.Encoder` with a dataclass `Config`,
`harness.sources.base.Source`, `perturbations.base.Perturbation`, `harness.analyses.base.Analysis`);
its dataclass fields are its YAML keys, validated by their type annotations. An unknown name is an
error that names the closest known one.
"""


def _plugin_tables(kind: plugins.Kind, skip: Collection[str], attr: str | None = None) -> list[str]:
    lines: list[str] = []
    for name, target in plugins.available(kind).items():
        try:
            cls = plugins.resolve(kind, name)
            cfg = getattr(cls, attr) if attr else cls
            table = _field_table(cfg, skip)
        except Exception as e:  # one broken plugin must not hide the others
            lines += [f"#### `{name}`", "", f"(could not be loaded: {type(e).__name__}: {e})", ""]
            continue
        summary = (_summary(cfg) or _summary(cls)).replace("``", "`")
        lines += [f"#### `{name}`", "", f"`{target}`" + (f" — {summary}" if summary else ""), ""]
        lines += (table if len(table) > 2 else ["(no parameters)"]) + [""]
    return lines


def suite_reference(include_plugins: bool = True) -> str:
    """Markdown reference of every suite key: type, default, meaning (from the dataclasses).

    include_plugins: also list the parameters of every registered encoder, source, perturbation
    and analysis (imports them).
    """
    out = [
        "# Suite YAML reference",
        "",
        f"Generated by `harness.config.suite_reference()` (schema_version {SCHEMA_VERSION}); "
        "regenerate with `python -m harness.config > docs/suite_reference.md`.",
        "",
        _SECTION_TEXT["top"],
        "",
        "```yaml",
        EXAMPLE_SUITE.rstrip("\n"),
        "```",
        "",
        "## Top level",
        "",
        *_field_table(
            Suite,
            skip=("raw", "path"),
            defaults={
                "budget": "`{}` (all defaults)",
                "backbone": "`{}` (all defaults)",
                "eval": "`{}` (all defaults)",
            },
        ),
        "| `include` | str \\| list of str | `[]` | suite files merged underneath this one "
        "(paths relative to this file) |",
        "",
    ]
    for key, cls in (
        ("data", DataConfig),
        ("budget", BudgetConfig),
        ("backbone", BackboneConfig),
        ("eval", EvalConfig),
        ("baselines", BaselineConfig),
    ):
        summary = _summary(cls).replace("``", "`")
        out += [f"## `{key}`", "", summary, "", *_field_table(cls, prefix=f"{key}."), ""]
    out += [
        "## Data source entries (`data.train`, `data.eval[i]`)",
        "",
        _SECTION_TEXT["data_entry"],
        "",
        *_field_table(SourceSpec, skip=("params", "config")),
        "",
    ]
    out += [
        "## `encoders[i]`",
        "",
        _SECTION_TEXT["encoders"],
        "",
        "| key | type | default | meaning |",
        "|---|---|---|---|",
        "| `name` | string | required | registered encoder, entry point or `module:Class` |",
        "| `id` | string | the name | label prefix in results (`encoder` column) |",
        "| `backbone` | null or mapping | the suite's `backbone` | `null`: no shared backbone; a mapping: the suite backbone with these keys changed |",
        "",
    ]
    out += [
        "## `perturbations[i]`",
        "",
        _SECTION_TEXT["perturbations"],
        "",
        "| key | type | default | meaning |",
        "|---|---|---|---|",
        "| `name` | string | required | registered perturbation, entry point or `module:Class` |",
        "| `id` | string | the name | `perturbation_id` in results; unique |",
        "| `severity` | number or list of numbers | the class default | strength, meaning per perturbation; 0 = unchanged text |",
        "",
    ]
    out += ["## `analyses[i]`", "", _SECTION_TEXT["analyses"], ""]
    out += [
        "## `permutations[i]`",
        "",
        _SECTION_TEXT["permutations"],
        "",
        "| key | type | default | meaning |",
        "|---|---|---|---|",
        "| `kind` | `global` \\| `inter_block` \\| `intra_block` | required | what moves (docs/fragility.md) |",
        "| `block_bytes` | int or list of int | required for the block kinds | block size in bytes; a list sweeps |",
        "",
    ]
    out += [PLUGIN_NAMING]
    if include_plugins:
        for title, kind, skip, attr in (
            ("Sources", "source", ("language",), None),
            ("Encoders", "encoder", (), "Config"),
            ("Perturbations", "perturbation", ("severity", "lang"), None),
            ("Analyses", "analysis", (), None),
        ):
            out += [f"## {title} (registered now)", "", *_plugin_tables(kind, skip, attr)]  # type: ignore[arg-type]
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":  # python -m harness.config > docs/suite_reference.md
    print(suite_reference(), end="")
