"""Perturbations: the Perturbation interface, the registry and the built-ins (pure text -> text)."""

from perturbations.base import Perturbation
from perturbations.registry import register

__all__ = ["Perturbation", "register"]
