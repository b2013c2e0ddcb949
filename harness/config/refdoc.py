"""The suite reference (docs/suite_reference.md), rendered from the dataclasses and the registered
plugins: ``python -m harness.config > docs/suite_reference.md``."""

from __future__ import annotations

import dataclasses
import json
import re
import types
from collections.abc import Collection, Mapping
from dataclasses import MISSING, is_dataclass
from typing import Any, Literal, Union, get_args, get_origin

from encoders.backbone import BackboneConfig
from harness.config.build import DEFAULT_SOURCE
from harness.config.convert import init_fields, type_hints
from harness.config.scaling import Rung, ScalingConfig
from harness.config.suite import (
    SCHEMA_VERSION,
    BaselineConfig,
    BudgetConfig,
    DataConfig,
    EvalConfig,
    OverlapConfig,
    SourceSpec,
    Suite,
)
from harness.infra import plugins

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
        "`eval.modes: [full]` and `eval.stride_bytes` = `budget.context_bytes` (docs/fragility.md)."
    ),
}

PLUGIN_NAMING = """\
## Naming a plugin (encoders, sources, perturbations, analyses)

A `name:` (or `source:`) is looked up in this order:

1. `package.module:ClassName` — imported from `sys.path` (installed packages, `PYTHONPATH`) or
   from the folders in the suite's `plugin_paths` (default: the suite file's folder; the working
   directory only if declared). A file `my_perturbation.py` next to the suite is used as
   `name: my_perturbation:Shout`; its default `id` / label is the class name.
2. A registered name: the built-ins (`tokbench ls encoders|sources|perturbations|analyses`) and
   anything registered with the kind's decorator (`encoders.registry.register`,
   `perturbations.registry.register`, `sources.registry.register`,
   `harness.analyses.registry.register`) by a module already imported.
3. An entry point of an installed package, group `tokbench.encoders`, `tokbench.sources`,
   `tokbench.perturbations` or `tokbench.analyses`. Only the entry point that is named is loaded:

```toml
[project.entry-points."tokbench.perturbations"]
"shout" = "my_package.perturbations:Shout"
```

A plugin class subclasses the kind's base class (`encoders.base.Encoder` with a dataclass `Config`,
`sources.base.Source`, `perturbations.base.Perturbation`, `harness.analyses.base.Analysis`);
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


def _list_sections() -> list[str]:
    """The sections of the suite's list keys (``encoders``, ``perturbations``, ``analyses``,
    ``permutations``), as Markdown lines."""
    out: list[str] = []
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
        "| `kind` | `global` \\| `inter_block` \\| `intra_block` | required | what moves |",
        "| `block_bytes` | int or list of int | required for the block kinds | block size in bytes; a list sweeps |",
        "",
    ]
    return out


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
        ("overlap", OverlapConfig),
        ("scaling", ScalingConfig),
        ("scaling.ladder[i]", Rung),
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
    out += _list_sections()
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
