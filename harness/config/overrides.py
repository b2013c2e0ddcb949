"""``--set key.path=value`` overrides applied to a loaded suite tree, located as ``--set ...``."""

from __future__ import annotations

import re
from typing import Any

from harness.config.loader import parse_yaml
from harness.config.where import ConfigError, KeyPath, format_keypath, show_value

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


def parse_value(text: str, where_text: str) -> tuple[Any, dict[KeyPath, str]]:
    """One command-line value (``--set``, ``--param``) read as YAML with the suite loader and its
    limits (harness/config/yaml_limits.py); empty means null. Returns (value, {key path: where_text});
    a bad value is a ConfigError ``<where_text>: cannot read the value as YAML: <problem>``."""
    if not text.strip():
        return None, {(): where_text}
    try:
        value, locs = parse_yaml(text, where_text)
    except ConfigError as e:
        # drop parse_yaml's "<where>:<line>: [invalid YAML: ]" prefix: the value is one line
        problem = re.sub(r"^.*?:\d+: (?:invalid YAML: )?", "", str(e)[len(where_text) :])
        raise ConfigError(f"{where_text}: cannot read the value as YAML: {problem}") from None
    return value, dict.fromkeys(locs, where_text)


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
    # an empty value (null) is located at the --set argument too, not at the base file's line
    value, value_locs = parse_value(text, where_text)

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
                f"{where_text}: {format_keypath(path)} is {show_value(cur)}, not a mapping or a list"
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
