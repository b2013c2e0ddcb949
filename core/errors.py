"""Shared errors: a bad command-line value (``UsageError``), and the errors a plugin's config raises
about one of its fields.

A plugin (an encoder, a perturbation, a source) may not import the harness, so its
``__post_init__`` cannot raise the suite loader's located ``ConfigError``. It raises
``field_error(...)`` instead: a plain ValueError whose text names the field for code that builds
the config directly, with the attributes ``field`` and ``problem`` that the loader
(``harness.config.build.plugin_config``) reads to report ``FILE:LINE: <entry>.<field>:
<problem>`` at that key's own line rather than at the entry."""

from __future__ import annotations


def field_error(plugin: str, field: str, problem: str, text: str | None = None) -> ValueError:
    """A ValueError about ``field`` of ``plugin``'s config; its text is ``text`` or
    ``<plugin>.<field>: <problem>``."""
    err = ValueError(text or f"{plugin}.{field}: {problem}")
    err.field = field  # type: ignore[attr-defined]
    err.problem = problem  # type: ignore[attr-defined]
    return err


class UsageError(ValueError):
    """A bad command-line value; reported on one line, exit code 2."""
