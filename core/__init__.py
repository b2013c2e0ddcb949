"""The bottom layer: contracts every other package shares (registry, results schema, metric,
atomic file writes).

``core`` imports nothing of ours, so ``harness`` and every wing (``encoders``, ``perturbations``,
``sources``, ``reports``) may import it without creating a cycle.
"""
