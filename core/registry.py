"""One generic name -> class registry for every plugin kind (encoders, perturbations, sources,
analyses).

A suite names a plugin in one of three ways, tried in this order by ``Registry.resolve``:

1. ``"package.module:ClassName"`` — imported directly. The module may live on ``sys.path``
   (installed packages, ``PYTHONPATH``) or in a folder of ``search_paths`` (for a suite: its
   ``plugin_paths``, default the suite file's own folder; see ``harness.infra.plugins.suite_plugin_paths``).
   Those folders are put on ``sys.path`` for that one import only, after the existing entries so
   they never shadow installed modules. The working directory is not searched for a suite's
   plugins (``python -m`` puts it on sys.path by itself; the ``tokbench`` script does not).
   Plugins are code: importing one runs it with your rights.
2. a registered name — a built-in (a lazy ``"module:Attr"`` entry of ``lazy``, imported only when
   named, or a class registered by importing one of ``modules``) or anything already registered
   with the ``register`` decorator.
3. an entry point of the registry's group (e.g. ``tokbench.encoders``); only the entry point whose
   name matches is loaded.

Every class returned passed the base-class check (and the registry's extra ``check``). Unknown
names raise ``PluginError`` with the closest known name:
``unknown encoder 'fuzytok' (did you mean 'fuzzytok'?); known: blt, bpe, bytes, fuzzytok``.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import importlib.util
import sys
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from contextlib import contextmanager
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class PluginError(ValueError):
    """A plugin name that cannot be resolved to a usable class (one-line message)."""


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


def import_target(target: str, what: str, search_paths: Sequence[str | Path] = ()) -> Any:
    """Import ``"module:Attr"`` (Attr may be dotted). ``what`` names the request in errors."""
    module, sep, attr = target.partition(":")
    if not sep or not module or not attr:
        raise PluginError(f"{what}: expected 'package.module:ClassName', got {target!r}")
    with _extra_sys_path(search_paths):
        try:
            obj: Any = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name is not None and (module == e.name or module.startswith(e.name + ".")):
                searched = ", ".join(str(p) for p in search_paths) or "none"
                where = (
                    "it is not installed"
                    if what.startswith("built-in")
                    # the folders searched, and how to add one: a user's file is usually just
                    # somewhere the lookup did not go
                    else f"not installed, and not in the folders searched: {searched}; put the "
                    "file beside the suite or name its folder in the suite's plugin_paths "
                    "(tokbench perturb: the working directory and --plugin-path)"
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


def dataclass_params(cls: type) -> str | None:
    """The default extra check: a plugin is a dataclass whose fields are its parameters."""
    if not is_dataclass(cls):
        return f"{cls.__qualname__} is not a dataclass (its fields are its parameters)"
    return None


class Registry(MutableMapping[str, type], Generic[T]):
    """{name: class} of one plugin kind, with lazy built-ins and entry points.

    kind: the word used in messages ("encoder"). base: ``"module:Class"`` every plugin subclasses
    (a string, imported on first check, so a registry module need not import its base). group:
    the entry-point group. lazy: {name: "module:Attr"} built-ins imported only when named.
    modules: modules whose import registers built-ins (imported on first lookup of an unknown
    name). check: extra test of a class, returning a one-line complaint or None.

    As a mapping it holds the classes registered so far (by decorator or by tests).
    """

    def __init__(
        self,
        kind: str,
        base: str,
        group: str,
        *,
        lazy: dict[str, str] | None = None,
        modules: Sequence[str] = (),
        check: Callable[[type], str | None] = dataclass_params,
    ) -> None:
        self.kind = kind
        self.base = base
        self.group = group
        self.lazy: dict[str, str] = dict(lazy or {})
        self.modules: list[str] = list(modules)
        self.check = check
        self._classes: dict[str, type] = {}

    # -- mapping of registered classes -------------------------------------------------------
    def __getitem__(self, name: str) -> type:
        return self._classes[name]

    def __setitem__(self, name: str, cls: type) -> None:
        self._classes[name] = cls

    def __delitem__(self, name: str) -> None:
        del self._classes[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._classes)

    def __len__(self) -> int:
        return len(self._classes)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {sorted(self._classes)})"

    def register(self, name: str) -> Callable[[type[T]], type[T]]:
        """Class decorator: ``@REGISTRY.register("myname")`` makes ``name: myname`` usable."""

        def deco(cls: type[T]) -> type[T]:
            self._classes[name] = cls
            cls.registry_name = name  # type: ignore[attr-defined]
            return cls

        return deco

    # -- resolution ----------------------------------------------------------------------------
    def checked(self, obj: Any, what: str) -> type[T]:
        """``obj`` if it is a class deriving from ``base`` that passes ``check``; else PluginError."""
        base = import_target(self.base, f"{self.kind} base class")
        if not isinstance(obj, type) or not issubclass(obj, base):
            raise PluginError(
                f"{what}: {obj!r} is not a subclass of {base.__module__}.{base.__qualname__}"
            )
        problem = self.check(obj)
        if problem:
            raise PluginError(f"{what}: {problem}")
        return obj

    def _load_modules(self, want: str | None = None) -> list[PluginError]:
        """Import ``modules``. want=None (listing): the first broken module raises. want=a name:
        stop as soon as it is registered and return the import errors met on the way, so one
        broken built-in does not block the others; the caller reports them if still unknown."""
        errors: list[PluginError] = []
        for module in self.modules:
            if want is not None and want in self._classes:
                break
            try:
                _import_optional(module)
            except PluginError as e:
                if want is None:
                    raise
                errors.append(e)
        return errors

    def entry_points(self) -> dict[str, importlib.metadata.EntryPoint]:
        return {ep.name: ep for ep in importlib.metadata.entry_points(group=self.group)}

    def resolve(self, name: str, search_paths: Sequence[str | Path] = ()) -> type[T]:
        """The class registered for ``name`` (or named ``"module:Class"``).

        search_paths: extra directories for ``"module:Class"`` imports (the CLI passes the current
        directory and the suite file's directory). Raises PluginError with a close-match hint.
        """
        if not isinstance(name, str) or not name:
            raise PluginError(f"{self.kind} name must be a non-empty string, got {name!r}")
        what = f"{self.kind} {name!r}"
        if ":" in name:
            return self.checked(import_target(name, what, search_paths), what)
        if name in self._classes:
            return self.checked(self._classes[name], what)
        if name in self.lazy:
            return self.checked(import_target(self.lazy[name], f"built-in {what}"), what)
        broken = self._load_modules(want=name)
        if name in self._classes:
            return self.checked(self._classes[name], what)
        eps = self.entry_points()
        if name in eps:
            try:
                obj = eps[name].load()
            except (Exception, SystemExit) as e:
                raise PluginError(
                    f"{what}: entry point {eps[name].value!r} ({self.group}) failed to load: "
                    f"{type(e).__name__}: {e}"
                ) from e
            if not isinstance(obj, type) and name in self._classes:  # registers on import
                obj = self._classes[name]
            return self.checked(obj, what)

        known = sorted(set(self._classes) | set(self.lazy) | set(eps))
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        listing = ", ".join(known) if known else "none"
        if broken:  # the name may live in a built-in module that failed: say that first
            raise PluginError(f"{what} not found; {broken[0]}") from broken[0]
        raise PluginError(
            f"unknown {self.kind} {name!r}{hint}; known: {listing} "
            "(or give 'package.module:ClassName')"
        )

    def available(self) -> dict[str, str]:
        """{name: "module:Attr"} of every plugin, sorted, for ``tokbench ls``.

        Lazy built-ins whose module does not exist (yet) are left out; entry points are listed by
        their target string without being imported; ``modules`` are imported, since their
        plugins register on import.
        """
        out: dict[str, str] = {n: ep.value for n, ep in self.entry_points().items()}
        for name, target in self.lazy.items():
            module = target.partition(":")[0]
            try:
                found = importlib.util.find_spec(module) is not None
            except ModuleNotFoundError:
                found = False
            if found:
                out[name] = target
        self._load_modules()
        for name, cls in self._classes.items():
            # a lazy built-in keeps its entry, so the listing does not depend on what was imported
            if name not in self.lazy:
                out[name] = f"{cls.__module__}:{cls.__qualname__}"
        return dict(sorted(out.items()))

    def known_names(self) -> list[str]:
        """Every name ``resolve`` accepts without a ``":"`` (sorted)."""
        return sorted(self.available())
