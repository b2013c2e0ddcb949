"""Where a suite value sits (key path + ``file:line``), the one-line ``ConfigError`` naming it,
and how a value is shown in messages."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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


def as_where(where: Where | str) -> Where:
    return where if isinstance(where, Where) else Where(default=where or "<config>")




def show_value(value: Any) -> str:
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
