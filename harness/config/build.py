"""Building the suite: plugin-backed sections (data, encoders with sweeps, perturbations,
analyses), the whole ``Suite``, and ``load_suite`` (read -> include -> ``--set`` -> validate)."""

from __future__ import annotations

import difflib
import itertools
import json
import math
import re
import types
from collections.abc import Collection, Mapping, Sequence
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from encoders.backbone import BackboneConfig
from harness.config import fragility, pretrained
from harness.config.checks import (
    check_backbone,
    check_budget,
    check_eval,
    check_lr,
    check_ranges,
    check_scaling_lr,
)
from harness.config.convert import (
    check_keys,
    convert_value,
    from_mapping,
    init_fields,
    missing_key,
    type_hints,
)
from harness.config.loader import read_suite_file
from harness.config.names import name_problem, shown
from harness.config.overrides import apply_override
from harness.config.suite import (
    SCHEMA_VERSION,
    AnalysisSpec,
    BudgetConfig,
    DataConfig,
    EncoderSpec,
    EvalConfig,
    OverlapConfig,
    PerturbationSpec,
    SourceSpec,
    Suite,
)
from harness.config.where import ConfigError, KeyPath, Where, as_where, show_value
from harness.infra import plugins

# Source used by a data entry that does not name one: a user pointing at their own text files
# writes only ``paths:``; the embedded corpus must be asked for by name (``source: stdlib``).
DEFAULT_SOURCE = "files"

# Perturbation ids the harness uses itself (the automatic clean baseline).
RESERVED_PERTURBATION_IDS = frozenset({"clean"})


# --------------------------------------------------------------------------------------------
# Plugin-backed sections


def _resolve(kind: plugins.Kind, name: Any, where: Where, search_paths: Sequence[Path]) -> type:
    if not isinstance(name, str) or not name:
        article = "an" if kind[0] in "aeiou" else "a"
        raise where.error(f"expected {article} {kind} name (a string), got {show_value(name)}")
    try:
        return plugins.resolve(kind, name, search_paths)
    except plugins.PluginError as e:
        raise where.error(str(e)) from None


def plugin_config(cls: type, mapping: Any, where: Where, **kwargs: Any) -> Any:
    """``from_mapping`` for a plugin's config class (source, encoder, perturbation, analysis),
    with its own checks located at the field they are about.

    A plugin may not import the harness, so its ``__post_init__`` raises a plain ValueError; when
    that error has a ``field`` attribute naming one of the class's fields (and optionally
    ``problem``, the text without the field's name), the error is reported at
    ``FILE:LINE: <entry>.<field>: <problem>``, with the line of that key, instead of at the
    entry (``core.errors.field_error``, used by bpe, blt and fuzzytok). Errors without it stay at
    the entry.
    ``from_mapping`` raises its ConfigError from inside its ``except`` block, so the plugin's
    error is the ConfigError's ``__context__``."""
    try:
        return from_mapping(cls, mapping, where, **kwargs)
    except ConfigError as e:
        cause = e.__context__
        field = getattr(cause, "field", None)
        if isinstance(cause, ValueError) and isinstance(field, str) and field in init_fields(cls):
            problem = getattr(cause, "problem", None) or str(cause)
            raise where.at(field).error(str(problem)) from None
        raise


def _entry(value: Any, where: Where, what: str) -> dict[str, Any]:
    """A list entry: a mapping, or a bare string as shorthand for ``{name: string}``."""
    if isinstance(value, str):
        return {what: value}
    if not isinstance(value, Mapping):
        raise where.error(f"expected a mapping with '{what}', got {show_value(value)}")
    return dict(value)


def _plugin_entry(
    value: Any, where: Where, kind: plugins.Kind, search_paths: Sequence[Path]
) -> tuple[dict[str, Any], str, type]:
    """An ``encoders`` / ``perturbations`` / ``analyses`` item -> (entry, its name, the class)."""
    entry = _entry(value, where, "name")
    if "name" not in entry:
        raise missing_key(entry, "name", where, f"a registered {kind}")
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
    check_keys(entry, set(_SOURCE_KEYS) | set(cfg_fields), where)
    hints = type_hints(SourceSpec)
    name = convert_value(hints["name"], entry.get("name"), where.at("name"))
    if needs_name and not name:
        raise where.error("an eval set needs a 'name' (its label in results.csv)")
    language = convert_value(hints["language"], entry.get("language"), where.at("language"))
    part = convert_value(hints["part"], entry.get("part"), where.at("part"))
    params = {k: v for k, v in entry.items() if k not in _SOURCE_KEYS}
    cfg_map = dict(params)
    if language is not None and "language" in cfg_fields:
        cfg_map["language"] = language
    try:
        config = plugin_config(cls, cfg_map, where)
    except ConfigError as e:
        if "source" in entry or "missing required key" not in str(e):
            raise
        raise ConfigError(f"{e} (no 'source' given, so it is {DEFAULT_SOURCE!r})") from None
    return SourceSpec(
        source=source, name=name, language=language, part=part, params=params, config=config
    )


def _data(value: Any, where: Where, search_paths: Sequence[Path]) -> DataConfig:
    if not isinstance(value, Mapping):
        raise where.error(f"expected a mapping with 'train' and 'eval', got {show_value(value)}")
    check_keys(value, init_fields(DataConfig), where)
    for key in ("train", "eval"):
        if key not in value:
            raise missing_key(value, key, where)
    train = source_spec(value["train"], where.at("train"), search_paths)
    evals_raw = value["eval"]
    if not isinstance(evals_raw, list):
        raise where.at("eval").error(f"expected a list of eval sets, got {show_value(evals_raw)}")
    if not evals_raw:
        raise where.at("eval").error("needs at least one eval set")
    evals: list[SourceSpec] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(evals_raw):
        spec = source_spec(item, where.at("eval", i), search_paths, needs_name=True)
        assert spec.name is not None
        problem = name_problem(spec.name, "eval set name")  # harness/config/names.py
        if problem:
            raise where.at("eval", i, "name").error(f"{problem}: {shown(spec.name)}")
        if spec.name in seen:
            raise where.at("eval", i, "name").error(
                f"duplicate eval set name {spec.name!r} (also data.eval[{seen[spec.name]}])"
            )
        seen[spec.name] = i
        evals.append(spec)
    hints = type_hints(DataConfig)
    kwargs = {
        k: convert_value(hints[k], value[k], where.at(k))
        for k in ("valid_fraction", "test_fraction")
        if k in value
    }
    data = DataConfig(train=train, eval=tuple(evals), **kwargs)
    check_ranges(data, where)
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
        raise where.error(f"expected a list of encoders, got {show_value(value)}")
    if not value:
        raise where.error("needs at least one encoder")
    specs: list[EncoderSpec] = []
    owner: dict[str, str] = {}  # label -> key path of the entry that produced it
    for i, item in enumerate(value):
        w = where.at(i)
        entry, name, cls = _plugin_entry(item, w, "encoder", search_paths)
        cfg_cls = cls.Config
        cfg_fields = init_fields(cfg_cls)
        if "objective" in entry and "objective" not in cfg_fields:
            # issue #18: name the capability, not just an unknown key (docs/mdm.md)
            raise w.at("objective").error(
                f"encoder {name!r} does not support 'objective' (only encoders whose config "
                "declares it, e.g. bytes and bpe, train as ar | mdm)"
            )
        check_keys(entry, {"name", "id", "backbone"} | set(cfg_fields), w)
        enc_id = convert_value(str | None, entry.get("id"), w.at("id"))
        if "backbone" not in entry:
            backbone: BackboneConfig | None = suite_backbone
        elif entry["backbone"] is None:
            backbone = None
        elif isinstance(entry["backbone"], Mapping):
            base = {f.name: getattr(suite_backbone, f.name) for f in fields(BackboneConfig)}
            backbone = from_mapping(BackboneConfig, {**base, **entry["backbone"]}, w.at("backbone"))
            check_backbone(backbone, w.at("backbone"))
        else:
            raise w.at("backbone").error(
                f"expected null (no backbone) or a mapping of backbone keys to override, got {show_value(entry['backbone'])}"
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
                convert_value(hints[k], v, w.at(k, j))  # locate a bad sweep value at its own line
        base_label = enc_id or plugins.default_label(name, cls)
        for combo in itertools.product(*(params[k] for k in swept)):
            p = {**params, **dict(zip(swept, combo))}
            config = plugin_config(cfg_cls, p, w)
            label = base_label + "".join(f"-{_label_value(v)}" for v in combo)
            if label in owner:
                other = owner[label]
                both = f"{other} and {w.keypath}" if other != w.keypath else f"{other} (twice)"
                raise w.error(
                    f"duplicate encoder label {label!r} from {both}; give an entry a distinct 'id'"
                )
            problem = name_problem(label, "encoder label")  # harness/config/names.py
            if problem:
                raise w.at("id" if enc_id else "name").error(f"{problem}: {shown(label)}")
            if any(c.isspace() or c in "/\\," for c in label):
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
        raise where.error(f"expected a list of perturbations, got {show_value(value)}")
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
        check_keys(entry, {"name", "id", "severity"} | (set(cls_fields) - {"lang"}), w)
        pid = convert_value(str | None, entry.get("id"), w.at("id")) or plugins.default_label(name, cls)
        problem = name_problem(pid, "perturbation id")  # harness/config/names.py
        if problem:
            raise w.at("id" if "id" in entry else "name").error(f"{problem}: {shown(pid)}")
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
                s = convert_value(float, sv, sw)
                if not math.isfinite(s) or s < 0:
                    raise sw.error(f"severity must be a finite number >= 0, got {show_value(sv)}")
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
            inst = plugin_config(cls, params, w, exclude=("lang",), fixed={"severity": s})
            # every field but lang, severity included (harness.config.suite: they seed the rng)
            resolved = {n: getattr(inst, n) for n in cls_fields if n != "lang"}
            specs.append(
                PerturbationSpec(
                    name=name,
                    id=pid,
                    severity=s,
                    params=_json_params(resolved, w),
                    cls=cls,
                    perturbation=inst,
                )
            )
    return tuple(specs)


def _analyses(
    value: Any, where: Where, eval_names: Collection[str], search_paths: Sequence[Path]
) -> tuple[AnalysisSpec, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise where.error(f"expected a list of analyses, got {show_value(value)}")
    specs = []
    for i, item in enumerate(value):
        w = where.at(i)
        entry, name, cls = _plugin_entry(item, w, "analysis", search_paths)
        check_keys(entry, {"name"} | set(init_fields(cls)), w)  # 'name' among the valid keys
        params = {k: v for k, v in entry.items() if k != "name"}
        config = plugin_config(cls, params, w)
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
# The suite

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
SUITE_KEYS: tuple[str, ...] = tuple(n for n in init_fields(Suite) if n not in ("raw", "path"))


def _suite_name(value: Any, where: Where) -> str:
    """The suite's name: it names the run directory, so a safe file name."""
    name = convert_value(str, value, where)
    problem = name_problem(name, "suite name")  # harness/config/names.py
    if problem:
        raise where.error(f"{problem}: {shown(name)}")
    if not _NAME_RE.match(name):
        raise where.error(f"{name!r} is used as the run directory name: use letters, digits, '.', '_' and '-'")
    return name


def _seeds(tp: Any, value: Any, where: Where) -> Any:
    """The suite's seeds: at least one, distinct, each in [0, 2**63)."""
    seeds = convert_value(tp, value, where)
    if not seeds:
        raise where.error("needs at least one seed")
    if len(set(seeds)) != len(seeds):
        raise where.error(f"seeds repeat: {list(seeds)}")
    for i, s in enumerate(seeds):
        if not 0 <= s < 2**63:
            raise where.at(i).error(f"a seed must be >= 0 and < 2**63, got {s}")
    return seeds


def _check_flops_reference(ref: str | None, encoders: Sequence[EncoderSpec], where: Where) -> None:
    """``budget.flops_reference``, when set, names an encoder's label."""
    if ref is None:
        return
    labels = [e.label for e in encoders]
    if ref not in labels:
        close = difflib.get_close_matches(ref, labels, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise where.error(f"no encoder labelled {ref!r}{hint}; labels: {', '.join(labels)}")


def build_suite(
    raw: Mapping[str, Any],
    where: Where | str = "",
    *,
    path: str = "",
    search_paths: Sequence[str | Path] = (),
) -> Suite:
    """Validate a resolved suite mapping (after include / --set) into a ``Suite``."""
    where = as_where(where)
    paths = [Path(p) for p in search_paths]
    if not isinstance(raw, Mapping):
        raise where.error(f"a suite must be a mapping, got {show_value(raw)}")
    check_keys(raw, SUITE_KEYS, where)
    for key in ("name", "seeds", "data", "encoders"):
        if key not in raw:
            raise missing_key(raw, key, where)
    hints = type_hints(Suite)

    name = _suite_name(raw["name"], where.at("name"))
    description = convert_value(str, raw.get("description", ""), where.at("description"))
    version = convert_value(int, raw.get("schema_version", SCHEMA_VERSION), where.at("schema_version"))
    if version != SCHEMA_VERSION:
        raise where.at("schema_version").error(
            f"this tokbench reads schema_version {SCHEMA_VERSION}, the suite declares {version}"
        )
    seeds = _seeds(hints["seeds"], raw["seeds"], where.at("seeds"))

    budget = convert_value(BudgetConfig, raw.get("budget"), where.at("budget"))
    check_budget(budget, where.at("budget"))
    check_lr(budget.lr, where.at("budget", "lr"))
    backbone = convert_value(BackboneConfig, raw.get("backbone"), where.at("backbone"))
    check_backbone(backbone, where.at("backbone"))
    data = _data(raw["data"], where.at("data"), paths)
    encoders = _encoders(raw["encoders"], where.at("encoders"), backbone, paths)
    _check_flops_reference(budget.flops_reference, encoders, where.at("budget", "flops_reference"))
    perturbations = _perturbations(raw.get("perturbations"), where.at("perturbations"), paths)
    eval_cfg = convert_value(EvalConfig, raw.get("eval"), where.at("eval"))
    check_eval(eval_cfg, budget, where.at("eval"))
    analyses = _analyses(
        raw.get("analyses"), where.at("analyses"), [d.name for d in data.eval if d.name], paths
    )
    scaling = convert_value(hints["scaling"], raw.get("scaling"), where.at("scaling"))
    if scaling is not None:
        check_scaling_lr(scaling, budget.lr, where.at("scaling"))
    for i, e in enumerate(encoders):
        if scaling is not None and e.backbone is None:
            raise where.at("encoders", i).error(
                f"encoder {e.label!r} has no shared backbone, so scaling.ladder cannot size it")
    # an encoder trained elsewhere (``hf``) has no training compute: no scaling grid, no FLOP reference
    pretrained.check_suite(encoders, budget, scaling, lambda keys, problem: where.at(*keys).error(problem), paths)
    permutations = fragility.permutations(raw.get("permutations"), where.at("permutations"),
                                          budget.context_bytes)
    if permutations:  # docs/fragility.md: every encoder also trained + scored on each
        fragility.check_permuted_scoring(eval_cfg, budget.context_bytes, where.at("eval"))
        encoders = fragility.permuted_encoders(encoders, permutations, where.at("encoders"), paths)
    baselines = fragility.baselines(raw.get("baselines"), where.at("baselines"))
    overlap = convert_value(OverlapConfig, raw.get("overlap"), where.at("overlap"))
    check_ranges(overlap, where.at("overlap"))
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
        scaling=scaling,
        permutations=permutations,
        baselines=baselines,
        overlap=overlap,
        description=description,
        schema_version=version,
        plugin_paths=convert_value(tuple[str, ...], raw.get("plugin_paths", (".",)), where.at("plugin_paths")),
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
    data, locs = read_suite_file(p.resolve() if p.exists() else p, ())
    for arg in overrides:
        apply_override(data, locs, arg)
    return data, locs


def load_suite(path: str | Path, overrides: Sequence[str] = ()) -> Suite:
    """Load, include, override and validate a suite file. Raises ConfigError (one line).

    ``"module:Class"`` plugins are looked up on sys.path, then in the suite's ``plugin_paths``
    (default: the suite file's folder), never in the working directory.
    """
    data, locs = load_raw(path, overrides)
    where = Where((), locs, locs[()])  # locs[()] is "<suite file>:1"
    declared = convert_value(tuple[str, ...], data.get("plugin_paths", (".",)), where.at("plugin_paths"))
    search = plugins.suite_plugin_paths(path, declared)
    for i, folder in enumerate(search):
        if not folder.is_dir():
            raise where.at("plugin_paths", i).error(f"plugin folder {str(folder)!r} does not exist")
    return build_suite(data, where, path=str(path), search_paths=search)
