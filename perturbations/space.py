"""Spacing noise: ``space.random`` (spaces inserted / removed) and ``antspeak`` (s p a c e d)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from perturbations.chartable import CodepointPerturbation
from perturbations.checks import check_choice
from perturbations.codepoints import n_edits, selected_words, splice
from perturbations.registry import register
from perturbations.wordsel import ATTACHED, NON_SPACE

SPACE = 0x20


@register("space.random")
@dataclass(kw_only=True)
class RandomSpace(CodepointPerturbation):
    """Spaces inserted inside words ('to ken') and removed between them ('tokenfree').

    severity: expected fraction of the text's characters edited (= expected edit rate), 0-1: a
    document of N characters gets severity·N single-space insertions/removals in expectation
    (fewer when it runs out of places). action: both (each edit is an insertion or a removal with
    equal odds) | insert | delete. Only U+0020 spaces are removed; a space is never inserted
    before a combining mark.
    """

    action: Literal["both", "insert", "delete"] = "both"

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice(self, "action", ("both", "insert", "delete"))

    def edit(self, cps: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        k = n_edits(self.severity * cps.size, gen)
        k_ins = {"insert": k, "delete": 0}.get(self.action, int(gen.binomial(k, 0.5)))
        solid = NON_SPACE.mask(cps)
        # insert before position i: between two non-space characters, i not attached to i-1
        ins_ok = np.flatnonzero(solid[1:] & solid[:-1] & ~ATTACHED.mask(cps[1:])) + 1
        del_ok = np.flatnonzero(cps == SPACE)
        ins = np.sort(ins_ok[gen.choice(ins_ok.size, size=min(k_ins, ins_ok.size), replace=False)])
        k_del = min(k - k_ins, del_ok.size)
        dels = del_ok[gen.choice(del_ok.size, size=k_del, replace=False)]
        out = np.insert(cps, ins, SPACE) if ins.size else cps
        if dels.size:  # shift deletion positions past the insertions made before them
            out = np.delete(out, dels + np.searchsorted(ins, dels, side="right"))
        return out


@register("antspeak")
@dataclass(kw_only=True)
class AntSpeak(CodepointPerturbation):
    """Spaces between the characters of words: 'robust' -> 'r o b u s t' (BLT's "AntSpeak").

    severity: probability that each word (run of non-space characters) is spaced out, 0-1; 1
    spaces out the whole text. A combining mark, ZWJ or variation selector stays attached to its
    base character.
    """

    def edit(self, cps: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        sel = selected_words(NON_SPACE.mask(cps), self.severity, gen)
        attached = ATTACHED.mask(cps)
        # a space after character i when i and i+1 are in the same chosen word, i+1 is a new base
        # character and i is not a zero-width joiner
        after = np.flatnonzero(sel[:-1] & sel[1:] & ~attached[1:] & (cps[:-1] != 0x200D))
        if after.size == 0:
            return cps
        flat = np.stack([cps[after], np.full(after.size, SPACE, dtype=np.uint32)], axis=1).ravel()
        rep_len = np.full(after.size, 2, dtype=np.int64)
        return splice(cps, after, 2 * np.arange(after.size), rep_len, flat)
