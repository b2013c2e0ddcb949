"""How loose is the windowed edit rate? ``perturbations.measure.windowed_distance`` (used above
``EXACT_LIMIT`` characters) against the exact Levenshtein distance on one long text, for
perturbations that insert and delete alike characters (``space.random``: both, insert, delete)
and for substitutions (``typo.random``), at a few severities.

    PYTHONPATH=. python benchmarks/edit_rate_window.py

The text is Python's ``pydoc_data.topics`` joined (≈465k characters, no network). Prints the
exact and windowed distances and their ratio (docs/reliability.md cites it)."""

from __future__ import annotations

from pydoc_data.topics import topics

from harness.data.perturb import apply
from perturbations.measure import edit_distance, windowed_distance
from perturbations.registry import REGISTRY


def main() -> None:
    text = "".join(topics.values())
    print(f"text: pydoc_data.topics, {len(text):,} characters")
    for name, params in (("space.random", {"action": "both"}), ("space.random", {"action": "insert"}),
                         ("space.random", {"action": "delete"}), ("typo.random", {})):
        for sev in (0.1, 0.3, 0.5):
            p = REGISTRY.resolve(name)(severity=sev, **params)
            out = apply(p, text, 0, name, {"severity": sev, **params}, "a")
            exact, windowed = edit_distance(text, out), windowed_distance(text, out)
            print(f"{name:13s} {params.get('action', ''):6s} severity {sev:.1f}: exact {exact:8,d}  windowed {windowed:8,d}  "
                  f"ratio {windowed / max(exact, 1):.3f}", flush=True)


if __name__ == "__main__":
    main()
