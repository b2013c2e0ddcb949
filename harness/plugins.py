"""Name -> class resolution for the four plugin kinds: encoders, perturbations, sources, analyses.

A suite names a plugin in one of three ways, tried in this order:

1. ``"package.module:ClassName"`` — imported directly. The module may live on ``sys.path``
   (installed packages, ``PYTHONPATH``) or in a folder the suite declares in ``plugin_paths``
   (default: the suite file's own folder; see ``suite_plugin_paths``). Those folders are put on
   ``sys.path`` for that one import only, after the existing entries so they never shadow
   installed modules. The working directory is not searched for a suite's plugins (``python -m``
   puts it on sys.path by itself; the ``tokbench`` script does not). Plugins are code: importing
   one runs it with your rights.
2. a registered name — a built-in (encoders: the lazy ``"module:Attr"`` table
   ``encoders.registry.BUILTIN``; the other kinds: the modules listed in ``BUILTIN_MODULES`` of
   their registry module, imported on first lookup) or anything already registered by import.
3. an entry point of the kind's group (``tokbench.encoders``, ``tokbench.perturbations``,
   ``tokbench.sources``, ``tokbench.analyses``); only the entry point whose name matches is loaded.

Only plugins the user named are imported (listing entry points reads their names, not their code).
Unknown names raise ``PluginError`` with the closest known name:
``unknown encoder 'fuzytok' (did you mean 'fuzzytok'?); known: blt, bpe, bytes, fuzzytok``.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import importlib.util
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, is_dataclass
from pathlib import Path
from typing import Any, Literal

Kind = Literal["encoder", "perturbation", "source", "analysis"]
KINDS: tuple[str, ...] = ("encoder", "perturbation", "source", "analysis")


class PluginError(ValueError):
    """A plugin name that cannot be resolved to a usable class (one-line message)."""


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


@dataclass(frozen=True)
class _KindInfo:
    registry_module: str  # module holding the registry dict (and BUILTIN / BUILTIN_MODULES)
    registry_attr: str  # name of the {name: class} dict in it
    group: str  # entry-point group
    base: str  # "module:Class" every plugin of this kind must subclass


_KINDS: dict[str, _KindInfo] = {
    "encoder": _KindInfo(
        "encoders.registry", "REGISTRY", "tokbench.encoders", "encoders.base:Encoder"
    ),
    "perturbation": _KindInfo(
        "perturbations.registry",
        "REGISTRY",
        "tokbench.perturbations",
        "perturbations.base:Perturbation",
    ),
    "source": _KindInfo(
        "harness.sources.base", "SOURCES", "tokbench.sources", "harness.sources.base:Source"
    ),
    "analysis": _KindInfo(
        "harness.analyses.base", "ANALYSES", "tokbench.analyses", "harness.analyses.base:Analysis"
    ),
}


def _info(kind: str) -> _KindInfo:
    if kind not in _KINDS:
        raise PluginError(f"unknown plugin kind {kind!r}; known: {', '.join(KINDS)}")
    return _KINDS[kind]


def _registry(kind: str) -> dict[str, type]:
    info = _info(kind)
    return getattr(importlib.import_module(info.registry_module), info.registry_attr)


def _import_optional(module: str) -> None:
    """Import a built-in module; skip it if that very module does not exist (not written yet).

    Any other failure (a missing dependency of the built-in, a bug) is a real error: PluginError,
    so a broken install fails loudly instead of hiding a plugin.
    """
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name == module:
            return
        raise PluginError(f"built-in module {module!r} cannot be imported: {e}") from e
    except Exception as e:  # a syntax error or import-time bug in a built-in: one line, loud
        raise PluginError(
            f"built-in module {module!r} cannot be imported: {type(e).__name__}: {e}"
        ) from e


def _load_builtin_modules(kind: str, want: str | None = None) -> list[PluginError]:
    """Import the modules in BUILTIN_MODULES of a registry-module kind (not encoders).

    want=None (listing): the first broken module raises. want=a name: stop as soon as it is
    registered and return the import errors met on the way, so one broken built-in does not block
    the others; the caller reports them if the name is still unknown.
    """
    mod = importlib.import_module(_info(kind).registry_module)
    errors: list[PluginError] = []
    for name in getattr(mod, "BUILTIN_MODULES", ()):
        if want is not None and want in _registry(kind):
            break
        try:
            _import_optional(name)
        except PluginError as e:
            if want is None:
                raise
            errors.append(e)
    return errors


def _builtin_table(kind: str) -> dict[str, str]:
    """The lazy {name: "module:Attr"} table (encoders only; other kinds register on import)."""
    mod = importlib.import_module(_info(kind).registry_module)
    return dict(getattr(mod, "BUILTIN", {}))


def _entry_points(kind: str) -> dict[str, importlib.metadata.EntryPoint]:
    return {ep.name: ep for ep in importlib.metadata.entry_points(group=_info(kind).group)}


@contextmanager
def _extra_sys_path(paths: Sequence[str | Path]) -> Iterator[None]:
    added = []
    for p in paths:
        s = str(Path(p).resolve())
        if s not in sys.path:
            sys.path.append(s)
            added.append(s)
    # A plugin file written moments ago (tests, notebooks) is invisible to cached finders.
    importlib.invalidate_caches()
    try:
        yield
    finally:
        for s in added:
            if s in sys.path:
                sys.path.remove(s)


def _import_target(target: str, what: str, search_paths: Sequence[str | Path] = ()) -> Any:
    """Import ``"module:Attr"`` (Attr may be dotted). ``what`` names the request in errors."""
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr:
        raise PluginError(f"{what}: expected 'package.module:ClassName', got {target!r}")
    with _extra_sys_path(search_paths):
        try:
            obj: Any = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name is not None and (module == e.name or module.startswith(e.name + ".")):
                where = (
                    "it is not installed"
                    if what.startswith("built-in")
                    else "not on sys.path, nor in the suite's plugin_paths folders"
                )
                raise PluginError(f"{what}: cannot import module {module!r} ({where})") from None
            raise PluginError(f"{what}: importing {module!r} failed: {e}") from e
        except Exception as e:  # a plugin's own import-time bug: name it on one line
            raise PluginError(
                f"{what}: importing {module!r} failed: {type(e).__name__}: {e}"
            ) from e
        except SystemExit as e:  # sys.exit() at import must not end tokbench silently
            raise PluginError(
                f"{what}: importing {module!r} called sys.exit({e.code!r}); a plugin module must not exit"
            ) from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            close = difflib.get_close_matches(
                part, [n for n in dir(obj) if not n.startswith("_")], n=1
            )
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise PluginError(
                f"{what}: module {module!r} has no attribute {part!r}{hint}"
            ) from None
    return obj


def _check_class(kind: str, obj: Any, what: str) -> type:
    base = _import_target(_info(kind).base, f"{kind} base class")
    if not isinstance(obj, type) or not issubclass(obj, base):
        raise PluginError(
            f"{what}: {obj!r} is not a subclass of {base.__module__}.{base.__qualname__}"
        )
    if kind == "encoder" and not (
        isinstance(getattr(obj, "Config", None), type) and is_dataclass(obj.Config)
    ):
        raise PluginError(
            f"{what}: encoder class {obj.__qualname__} has no dataclass 'Config' attribute"
        )
    if kind != "encoder" and not is_dataclass(obj):
        raise PluginError(
            f"{what}: {obj.__qualname__} is not a dataclass (its fields are its parameters)"
        )
    return obj


def suite_plugin_paths(suite_path: str | Path, declared: Sequence[str] = (".",)) -> list[Path]:
    """The folders a suite's ``module:Class`` plugins are looked up in: its ``plugin_paths``,
    relative to the suite file's folder (the working directory when the suite has no file)."""
    base = Path(suite_path).resolve().parent if suite_path else Path.cwd()
    return [(base / p).resolve() for p in declared]


def known_names(kind: Kind) -> list[str]:
    """Every name ``resolve`` accepts without a ``":"`` (sorted); see ``available`` for what it
    imports."""
    return sorted(available(kind))


def resolve(kind: Kind, name: str, search_paths: Sequence[str | Path] = ()) -> type:
    """Return the class registered for ``name`` (or named ``"module:Class"``) for this plugin kind.

    search_paths: extra directories for ``"module:Class"`` imports (the CLI passes the current
    directory and the suite file's directory). Raises PluginError with a close-match suggestion.
    """
    info = _info(kind)
    if not isinstance(name, str) or not name:
        raise PluginError(f"{kind} name must be a non-empty string, got {name!r}")
    what = f"{kind} {name!r}"
    if ":" in name:
        return _check_class(kind, _import_target(name, what, search_paths), what)

    registry = _registry(kind)
    if name in registry:
        return _check_class(kind, registry[name], what)
    builtin = _builtin_table(kind)
    if name in builtin:
        return _check_class(kind, _import_target(builtin[name], f"built-in {what}"), what)
    broken: list[PluginError] = []
    if kind != "encoder":
        broken = _load_builtin_modules(kind, want=name)
        if name in registry:
            return _check_class(kind, registry[name], what)
    eps = _entry_points(kind)
    if name in eps:
        try:
            obj = eps[name].load()
        except (Exception, SystemExit) as e:
            raise PluginError(
                f"{what}: entry point {eps[name].value!r} ({info.group}) failed to load: "
                f"{type(e).__name__}: {e}"
            ) from e
        if not isinstance(obj, type) and name in registry:  # a module that registers on import
            obj = registry[name]
        return _check_class(kind, obj, what)

    known = sorted(set(registry) | set(builtin) | set(eps))
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    listing = ", ".join(known) if known else "none"
    if broken:  # the name may live in a built-in module that failed: say that first
        raise PluginError(f"{what} not found; {broken[0]}") from broken[0]
    raise PluginError(
        f"unknown {kind} {name!r}{hint}; known: {listing} (or give 'package.module:ClassName')"
    )


def available(kind: Kind) -> dict[str, str]:
    """{name: "module:Attr"} of every plugin of this kind, for ``tokbench ls``.

    Built-in encoders whose module does not exist (yet) are left out; entry points are listed by
    their target string without being imported. For the other kinds the modules in
    ``BUILTIN_MODULES`` are imported, since their plugins register on import.
    """
    out: dict[str, str] = {ep_name: ep.value for ep_name, ep in _entry_points(kind).items()}
    builtin = _builtin_table(kind)
    for name, target in builtin.items():
        module = target.partition(":")[0]
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if found:
            out[name] = target
    if kind != "encoder":
        _load_builtin_modules(kind)
    for name, cls in _registry(kind).items():
        # a built-in keeps its table entry, so the listing does not depend on what was imported
        if name not in builtin:
            out[name] = f"{cls.__module__}:{cls.__qualname__}"
    return dict(sorted(out.items()))


def default_label(name: str, cls: type) -> str:
    """Default label / id of a plugin named in a suite: its name, or for ``"module:Class"`` its
    registry name or class name (this id seeds perturbations, so config and preview share it)."""
    if ":" not in name:
        return name
    # __dict__, not getattr: an unregistered subclass must not inherit its parent's name
    return cls.__dict__.get("registry_name") or cls.__name__
