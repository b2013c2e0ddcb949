"""Source registry: name -> Source subclass (a ``core.registry.Registry``).

Built-ins register with ``@register("name")`` in the modules listed here (imported on first
lookup); third-party sources come through the ``tokbench.sources`` entry-point group or are named
``"package.module:ClassName"`` in a suite.
"""

from __future__ import annotations

from core.registry import Registry

REGISTRY: Registry = Registry(
    "source",
    base="sources.base:Source",
    group="tokbench.sources",
    modules=[
        "sources.files",
        "sources.stdlib",
        "sources.fortunes",
        "sources.manpages",
        "sources.firefox_l10n",
        "sources.python_docs",
        "sources.kernel_docs",
        "sources.perl_docs",
        "sources.sword",
        "sources.gcide",
        "sources.wordnet",
        "sources.html_docs",
        "sources.debian_mix",
    ],
)
register = REGISTRY.register
