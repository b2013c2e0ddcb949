"""Name -> class resolution for the four plugin kinds: encoders, perturbations, sources, analyses.

Each kind has one ``core.registry.Registry`` in its own package (``encoders.registry``,
``perturbations.registry``, ``sources.registry``, ``harness.analyses.registry``); this module only
maps the kind word a suite key uses to that registry, so the harness has one entry point
(``resolve``, ``available``, ``known_names``) for all four. The resolution order and messages are
documented in ``core.registry``.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from core.registry import PluginError, Registry

Kind = Literal["encoder", "perturbation", "source", "analysis"]
KINDS: tuple[str, ...] = ("encoder", "perturbation", "source", "analysis")

# kind -> module holding its REGISTRY (imported on first use, so listing encoders never imports
# the perturbations).
_REGISTRY_MODULES: dict[str, str] = {
    "encoder": "encoders.registry",
    "perturbation": "perturbations.registry",
    "source": "sources.registry",
    "analysis": "harness.analyses.registry",
}

__all__ = ["KINDS", "Kind", "PluginError", "available", "default_label", "known_names",
           "plugin_failed", "registry", "resolve", "suite_plugin_paths"]


def plugin_failed(obj: Any, method: str, e: BaseException, where: str = "") -> PluginError:
    """A one-line PluginError for a plugin whose ``method`` raised (or called sys.exit): names
    the plugin (registry name and ``module:Class``), the method and the error. The original
    exception is chained (``TOKBENCH_DEBUG=1`` shows its traceback)."""
    cls = obj if isinstance(obj, type) else type(obj)
    name = cls.__dict__.get("registry_name") or cls.__name__
    first = str(e).strip().splitlines()[0] if str(e).strip() else ""
    what = f"sys.exit({e.code!r})" if isinstance(e, SystemExit) else f"{type(e).__name__}: {first}".rstrip(": ")
    return PluginError(f"plugin {name!r} ({cls.__module__}:{cls.__qualname__}) failed in {method}()"
                       f"{' ' + where if where else ''}: {what}")


def suite_plugin_paths(suite_path: str | Path, declared: Sequence[str] = (".",)) -> list[Path]:
    """The folders a suite's ``module:Class`` plugins are looked up in: its ``plugin_paths``,
    relative to the suite file's folder (the working directory when the suite has no file)."""
    base = Path(suite_path).resolve().parent if suite_path else Path.cwd()
    return [(base / p).resolve() for p in declared]


def registry(kind: str) -> Registry:
    """The registry of one plugin kind."""
    if kind not in _REGISTRY_MODULES:
        raise PluginError(f"unknown plugin kind {kind!r}; known: {', '.join(KINDS)}")
    return importlib.import_module(_REGISTRY_MODULES[kind]).REGISTRY


def resolve(kind: Kind, name: str, search_paths: Sequence[str | Path] = ()) -> type:
    """The class registered for ``name`` (or named ``"module:Class"``); see ``Registry.resolve``."""
    return registry(kind).resolve(name, search_paths)


def available(kind: Kind) -> dict[str, str]:
    """{name: "module:Attr"} of every plugin of this kind, for ``tokbench ls``."""
    return registry(kind).available()


def known_names(kind: Kind) -> list[str]:
    """Every name ``resolve`` accepts without a ``":"`` (sorted)."""
    return registry(kind).known_names()


def default_label(name: str, cls: type) -> str:
    """Default label / id of a plugin named in a suite: its name, or for ``"module:Class"`` its
    registry name or class name (this id seeds perturbations, so config and preview share it)."""
    if ":" not in name:
        return name
    # __dict__, not getattr: an unregistered subclass must not inherit its parent's name
    return cls.__dict__.get("registry_name") or cls.__name__
