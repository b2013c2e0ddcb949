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

One module per job: ``where`` (locations, ``ConfigError``), ``loader`` (YAML with line marks,
``include:``), ``overrides`` (``--set``), ``convert`` (typed validation), ``checks`` (value ranges),
``build`` (plugin sections, the ``Suite``, ``load_suite``), ``refdoc`` (docs/suite_reference.md).
"""

# The names below load their module on first use (PEP 562): importing one light module of this
# package (``harness.config.permutation``, which the report's machine imports) must not load
# torch through ``build``.
_LAZY = {
    "ConfigError": "harness.config.where",
    "DEFAULT_SOURCE": "harness.config.build",
    "EXAMPLE_SUITE": "harness.config.refdoc",
    "KeyPath": "harness.config.where",
    "RESERVED_PERTURBATION_IDS": "harness.config.build",
    "SuiteLoader": "harness.config.loader",
    "Where": "harness.config.where",
    "apply_override": "harness.config.overrides",
    "build_suite": "harness.config.build",
    "field_docs": "harness.config.refdoc",
    "format_keypath": "harness.config.where",
    "from_mapping": "harness.config.convert",
    "init_fields": "harness.config.convert",
    "load_raw": "harness.config.build",
    "load_suite": "harness.config.build",
    "merge_trees": "harness.config.loader",
    "parse_yaml": "harness.config.loader",
    "source_spec": "harness.config.build",
    "suite_reference": "harness.config.refdoc",
    "type_hints": "harness.config.convert",
}


def __getattr__(name: str) -> object:
    import importlib

    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'harness.config' has no attribute {name!r}")


__all__ = [
    "DEFAULT_SOURCE",
    "EXAMPLE_SUITE",
    "RESERVED_PERTURBATION_IDS",
    "ConfigError",
    "KeyPath",
    "SuiteLoader",
    "Where",
    "apply_override",
    "build_suite",
    "field_docs",
    "format_keypath",
    "from_mapping",
    "init_fields",
    "load_raw",
    "load_suite",
    "merge_trees",
    "parse_yaml",
    "source_spec",
    "suite_reference",
    "type_hints",
]
