"""Typed validation: a YAML mapping -> a frozen dataclass, driven by the type annotations
(int, float, str, bool, ``Literal``, ``X | None``, ``tuple[X, ...]``, ``dict[str, X]``, nested
dataclasses), with unknown keys rejected and every error located at ``file:line: key.path``."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import types
import typing
from collections.abc import Collection, Mapping, Sequence
from dataclasses import MISSING, fields, is_dataclass
from typing import Any, Literal, Union, get_args, get_origin

from harness.config.bounds import check_upper_bounds
from harness.config.where import ConfigError, Where, as_where, show_value

# --------------------------------------------------------------------------------------------
# Typed validation of dataclasses



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
        choices = ", ".join(show_value(a) for a in get_args(tp))
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
    """The value at the current location does not fit the type (reported by ``convert_value``)."""


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


def convert_value(tp: Any, value: Any, where: Where) -> Any:
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
        raise where.error(f"expected {_describe(tp)}, got {show_value(value)}{hint}") from None


def _convert_sequence(tp: Any, origin: Any, value: Any, where: Where) -> Any:
    """``value`` as the tuple or list type ``tp`` (``origin``: its ``get_origin``): a tuple for
    tuple types, else a list; items converted one by one, their errors at their index."""
    args = get_args(tp)
    if not isinstance(value, (list, tuple)):
        # a lone value for a variable-length list field (``paths: corpus.txt``) is a 1-item list
        if len(args) == 2 and args[1] is Ellipsis and not isinstance(value, Mapping):
            return (_convert_inner(args[0], value, where),)
        raise _Mismatch
    if not args:
        items = list(value)
    elif len(args) == 2 and args[1] is Ellipsis or origin is not tuple:
        items = [convert_value(args[0], v, where.at(i)) for i, v in enumerate(value)]
    else:
        if len(value) != len(args):
            raise where.error(f"expected a list of {len(args)} items, got {len(value)}")
        items = [convert_value(a, v, where.at(i)) for i, (a, v) in enumerate(zip(args, value))]
    return tuple(items) if (origin is tuple or tp is tuple) else items


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
            if not math.isfinite(value):  # .nan / .inf / 1e400: no setting means them
                raise where.error(f"expected a finite number, got {show_value(value)}")
            return float(value)
        raise _Mismatch
    if tp is str:
        if isinstance(value, str):
            return value
        raise _Mismatch
    if origin is tuple or tp is tuple or origin in (list, Sequence, Collection) or tp is list:
        return _convert_sequence(tp, origin, value, where)
    if origin in (dict, Mapping) or tp is dict:
        if not isinstance(value, Mapping):
            raise _Mismatch
        args = get_args(tp)
        vt = args[1] if len(args) == 2 else Any
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise where.error(f"keys must be strings, got {show_value(k)}")
            out[k] = convert_value(vt, v, where.at(k))
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


def missing_key(mapping: Mapping[str, Any], key: str, where: Where, what: str = "") -> ConfigError:
    """The ConfigError for a required ``key`` absent from ``mapping``, with a did-you-mean when a
    key that is there looks like a typo of it (``nam: bpe`` -> "did you mean 'name' for 'nam'?").
    ``what``: a parenthesised gloss of the key ("a registered encoder")."""
    given = [k for k in mapping if isinstance(k, str)]
    close = difflib.get_close_matches(key, given, n=1, cutoff=0.6)
    hint = f"; did you mean {key!r} for {close[0]!r}?" if close else ""
    return where.error(f"missing required key {key!r}{f' ({what})' if what else ''}{hint}")


def check_keys(mapping: Mapping[str, Any], valid: Collection[str], where: Where) -> None:
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
    where = as_where(where)
    if mapping is None:
        mapping = {}
    if not isinstance(mapping, Mapping):
        raise where.error(f"expected a mapping, got {show_value(mapping)}")
    flds = {
        n: f for n, f in init_fields(cls).items() if n not in exclude and n not in (fixed or {})
    }
    check_keys(mapping, flds, where)
    hints = type_hints(cls)
    kwargs: dict[str, Any] = dict(fixed or {})
    for name, f in flds.items():
        if name in mapping:
            kwargs[name] = convert_value(hints.get(name, Any), mapping[name], where.at(name))
        elif _required(f):
            raise missing_key(mapping, name, where)
    check_upper_bounds(cls, kwargs, where)  # harness/config/bounds.py: absurd sizes, one line
    try:
        return cls(**kwargs)
    except (ValueError, TypeError, AssertionError) as e:
        raise where.error(str(e) or type(e).__name__) from None
