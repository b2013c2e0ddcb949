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

from harness.config.build import (
    DEFAULT_SOURCE,
    RESERVED_PERTURBATION_IDS,
    build_suite,
    load_raw,
    load_suite,
    source_spec,
)
from harness.config.convert import from_mapping, init_fields, type_hints
from harness.config.loader import SuiteLoader, merge_trees, parse_yaml
from harness.config.overrides import apply_override
from harness.config.refdoc import EXAMPLE_SUITE, field_docs, suite_reference
from harness.config.where import ConfigError, KeyPath, Where, format_keypath

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
