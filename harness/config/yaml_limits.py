"""Bounds on a YAML document before it is built into Python objects: size, nesting depth and
alias expansion. A suite is a few kB; these limits are far above any real one and far below what
exhausts memory or the Python stack.

    check_yaml_text(text, "suites/x.yaml")   # raises YamlLimitError("suites/x.yaml:3: ...")

The check walks PyYAML's event stream, which is produced by an explicit state machine (no
recursion, no object construction), so a "billion laughs" alias bomb or 100 000 ``[`` are refused
in time and memory linear in the text. Each anchored node's expanded size (its events, with every
alias counted at the size of its anchor) is tracked, so the expanded size of the whole document
is known without expanding it. Each anchor's height is tracked the same way, so nesting built
from aliases (``&b [[*a]]`` with ``a`` already deep) is bounded like written nesting, and an alias
to an anchor that is still open (``&a [*a]``, a self-containing node) is refused: PyYAML builds
such a node at the root of a document into a cyclic object that nothing downstream can walk.
"""

from __future__ import annotations

from typing import Any

import yaml

MAX_TEXT_CHARS = 4_000_000  # 4 MB of YAML: ~1000x the largest shipped suite
MAX_DEPTH = 64  # nested mappings/sequences; suites use < 10
MAX_EXPANDED_NODES = 1_000_000  # scalars + collections after expanding aliases


class YamlLimitError(ValueError):
    """A YAML document over a bound (one line: ``file:line: problem``)."""


def check_yaml_text(text: str, file: str) -> None:
    """Raise YamlLimitError if ``text`` is too long, too deeply nested, or expands (through
    aliases) to more than MAX_EXPANDED_NODES nodes. Syntax errors are left to the real parse."""
    if len(text) > MAX_TEXT_CHARS:
        raise YamlLimitError(
            f"{file}:1: the YAML document is {len(text):,} characters; the limit is {MAX_TEXT_CHARS:,}"
        )
    anchors: dict[str, tuple[int, int]] = {}  # anchor -> (expanded node count, height)
    # open collections: [anchor, expanded nodes inside so far, height of the tallest child]
    stack: list[list[Any]] = []
    total = 0

    def add(n: int, height: int, line: int) -> None:
        """Count a finished node of ``n`` expanded nodes and ``height`` levels below the open
        collection it sits in."""
        nonlocal total
        total += n
        if stack:
            stack[-1][1] += n
            stack[-1][2] = max(stack[-1][2], height)
        if total > MAX_EXPANDED_NODES:
            raise YamlLimitError(
                f"{file}:{line}: the YAML document expands to more than {MAX_EXPANDED_NODES:,} nodes "
                "(aliases '*name' repeat their anchor's content); refusing to build it"
            )

    try:
        for ev in yaml.parse(text, Loader=yaml.SafeLoader):
            line = ev.start_mark.line + 1 if ev.start_mark is not None else 1
            if isinstance(ev, yaml.DocumentStartEvent):
                anchors.clear()  # anchors are per document (an alias never reaches back further)
            elif isinstance(ev, yaml.CollectionStartEvent):
                if len(stack) >= MAX_DEPTH:
                    raise YamlLimitError(
                        f"{file}:{line}: YAML nested deeper than {MAX_DEPTH} levels; refusing to build it"
                    )
                stack.append([ev.anchor, 0, 0])
            elif isinstance(ev, yaml.CollectionEndEvent):
                anchor, inside, tallest = stack.pop()
                height = tallest + 1
                if anchor is not None:
                    anchors[anchor] = (inside + 1, height)
                if stack:
                    stack[-1][1] += inside  # its children, now part of the parent too
                add(1, height, line)  # the collection node itself (its children are counted)
            elif isinstance(ev, yaml.AliasEvent):
                if any(open_anchor == ev.anchor for open_anchor, _, _ in stack):
                    # PyYAML refuses this only below the root; refused here wherever it is
                    raise YamlLimitError(
                        f"{file}:{line}: invalid YAML: recursive alias '*{ev.anchor}' "
                        f"(it is inside its own anchor '&{ev.anchor}')"
                    )
                n, height = anchors.get(ev.anchor, (1, 0))  # undefined: the real parse says so
                if len(stack) + height > MAX_DEPTH:
                    raise YamlLimitError(
                        f"{file}:{line}: YAML nested deeper than {MAX_DEPTH} levels once alias "
                        f"'*{ev.anchor}' is expanded; refusing to build it"
                    )
                add(n, height, line)
            elif isinstance(ev, yaml.ScalarEvent):
                if ev.anchor is not None:
                    anchors[ev.anchor] = (1, 0)
                add(1, 0, line)
    except yaml.YAMLError:
        return  # the real parse reports syntax errors with their line
