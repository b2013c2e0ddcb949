"""Typo noise, calibrated: ``typo.keyboard``, ``typo.random``, ``typo.ocr``, ``typo.spelling``.

For every perturbation here, **severity = the expected fraction of the text's characters that are
edited**, measured as ``perturbations.measure.edit_rate`` (Levenshtein / length, an adjacent swap
= 2). A document of N characters gets edits whose costs add up to ``severity · N`` in expectation
(``codepoints.take_by_budget``), so the edit count scales with document length. The measured rate
tracks severity until the text runs out of editable characters or words (then it saturates: every
eligible site is edited); edits that touch each other can also measure slightly below nominal
(two swaps side by side, a deletion next to a substitution).

nlpaug (1.1.11) provides the data — its per-language keyboard maps, its OCR map and its bundled
English misspelling list, read from its package directory without importing nlpaug — but not the
sampling: nlpaug's tokenizer rewrites whitespace and punctuation that it did not perturb, caps
edits at 10 per call, skips words shorter than 4 characters and draws from the global ``random``.
Here the text outside the edited characters is byte-identical, there is no cap, and all randomness
comes from the harness's per-document rng.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from rapidfuzz.distance import Levenshtein

from perturbations.base import Perturbation
from perturbations.chartable import CodepointPerturbation
from perturbations.checks import check_choice, check_fraction
from perturbations.codepoints import (
    CharSet,
    CharTable,
    n_edits,
    numpy_rng,
    sample_positions,
    splice,
    take_by_budget,
    to_codepoints,
)
from perturbations.registry import register

KEYBOARD_LANGS = ("de", "en", "es", "fr", "he", "it", "nl", "pl", "th", "tr", "uk")


def nlpaug_resource(*parts: str) -> Path:
    """Path of a data file inside the installed nlpaug package (nlpaug itself is not imported)."""
    spec = importlib.util.find_spec("nlpaug")
    if spec is None or not spec.submodule_search_locations:
        raise ValueError("the typo.* perturbations need nlpaug's data files: pip install nlpaug==1.1.11")
    return Path(list(spec.submodule_search_locations)[0], "res", *parts)


def _single_chars(values: object) -> list[str]:
    """nlpaug map values are a list of strings or one string; keep single non-space characters
    (the en map has entries like ' t')."""
    items = [values] if isinstance(values, str) else list(values)  # type: ignore[call-overload]
    out = []
    for v in items:
        v = str(v).strip()
        out.extend([v] if len(v) == 1 else [])
    return out


def _with_upper_case(mapping: dict[str, list[str]]) -> dict[str, list[str]]:
    """Add upper-case keys (neighbours upper-cased) where the map has only the lower-case key, so
    'Hello' can become 'Jello' as 'hello' becomes 'jello'."""
    out = dict(mapping)
    for key, vals in mapping.items():
        up = key.upper()
        if len(up) == 1 and up != key and up not in out:
            out[up] = [v.upper() if len(v.upper()) == 1 else v for v in vals]
    return out


@functools.cache
def keyboard_table(lang: str) -> CharTable:
    """Neighbouring keys per character from nlpaug's ``res/char/keyboard/<lang>.json``."""
    raw = json.loads(nlpaug_resource("char", "keyboard", f"{lang}.json").read_text(encoding="utf-8"))
    mapping = {k: _single_chars(v) for k, v in raw.items() if len(k) == 1}
    return CharTable(mapping=_with_upper_case(mapping))


# Confusions added to nlpaug's OCR map (which covers only 0 1 2 5 6 8 9 o r C O E and would cap
# the edit rate of English near 0.1). Classic OCR look-alikes, including the multi-character ones
# (m -> rn costs 2 edits, and is counted as 2).
OCR_EXTRA: dict[str, list[str]] = {
    "a": ["o", "e"], "b": ["h", "6"], "c": ["e", "o"], "d": ["cl"], "e": ["c", "o"], "f": ["t"],
    "g": ["q", "9"], "h": ["b", "li"], "i": ["l", "1", "j"], "j": ["i"], "k": ["lc"],
    "l": ["1", "I", "i"], "m": ["rn", "nn"], "n": ["ri", "h"], "q": ["g"], "s": ["5"], "t": ["f", "l"],
    "u": ["v", "ii"], "v": ["u", "y"], "w": ["vv"], "y": ["v"], "z": ["2"],
    "A": ["4"], "B": ["8"], "D": ["O"], "G": ["6"], "I": ["l", "1"], "S": ["5"], "T": ["7"], "Z": ["2"],
}  # fmt: skip


@functools.cache
def ocr_table(extended: bool) -> CharTable:
    """nlpaug's English OCR map, plus ``OCR_EXTRA`` when ``extended``."""
    raw = json.loads(nlpaug_resource("char", "ocr", "en.json").read_text(encoding="utf-8"))
    mapping: dict[str, list[str]] = {k: [str(v) for v in vs] for k, vs in raw.items() if len(k) == 1}
    if extended:
        for k, vs in OCR_EXTRA.items():
            mapping[k] = list(dict.fromkeys(mapping.get(k, []) + vs))
    return CharTable(mapping=mapping)


# Letters and digits: where typo.random edits (inside words, never whitespace or punctuation).
ALNUM = CharSet(str.isalnum)


def budgeted_replace(
    cps: np.ndarray, table: CharTable, severity: float, gen: np.random.Generator
) -> np.ndarray:
    """Replace randomly chosen code points (``(N,) uint32``) by a candidate from ``table`` until
    the expected total Levenshtein cost is ``severity · N`` (see ``take_by_budget``)."""
    groups = table.lookup(cps)
    eligible = np.flatnonzero(groups >= 0)
    budget = severity * cps.size
    if eligible.size == 0:
        return cps
    # Every replacement costs >= 1, so budget + 1 candidates always suffice.
    m = min(eligible.size, int(np.ceil(budget)) + 1)
    pos = eligible[gen.choice(eligible.size, size=m, replace=False)]
    reps = table.pick(groups[pos], gen)
    n = take_by_budget(table.rep_cost[reps], budget, gen)
    pos, reps = pos[:n], reps[:n]
    return splice(cps, pos, table.rep_off[reps], table.rep_len[reps], table.flat)


@register("typo.keyboard")
@dataclass(kw_only=True)
class KeyboardTypo(CodepointPerturbation):
    """Keyboard typos: characters replaced by a neighbouring key (nlpaug's keyboard maps).

    severity: expected fraction of the text's characters replaced (= expected edit rate), 0-1.
    layout: keyboard map, one of de en es fr he it nl pl th tr uk; None = the document's language
    when it has a map, else en. Characters not on the layout (other scripts) are never edited.
    Upper-case letters get upper-cased neighbours.
    """

    layout: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice(self, "layout", KEYBOARD_LANGS, allow_none=True)

    def edit(self, cps: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        lang = self.layout or (self.lang if self.lang in KEYBOARD_LANGS else "en")
        return budgeted_replace(cps, keyboard_table(lang), self.severity, gen)


@register("typo.ocr")
@dataclass(kw_only=True)
class OcrTypo(CodepointPerturbation):
    """OCR errors: characters replaced by look-alikes (0->o, l->1, m->rn, ...).

    severity: expected fraction of the text's characters edited (= expected edit rate), 0-1; a
    multi-character confusion (m -> rn) counts as its Levenshtein cost (2).
    extended: add common confusions (``OCR_EXTRA``) to nlpaug's map, which on its own covers only
    0 1 2 5 6 8 9 o r C O E (and saturates near an edit rate of 0.1 on English).
    """

    extended: bool = True

    def edit(self, cps: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        return budgeted_replace(cps, ocr_table(bool(self.extended)), self.severity, gen)


def _draw_letters(
    cps: np.ndarray, eligible: np.ndarray, alphabet: np.ndarray, k: int, gen: np.random.Generator
) -> np.ndarray:
    """k random characters: from ``alphabet`` if given, else letters of the document itself."""
    if alphabet.size:
        return alphabet[gen.integers(alphabet.size, size=k)]
    return cps[eligible[gen.integers(eligible.size, size=k)]]


@register("typo.random")
@dataclass(kw_only=True)
class RandomTypo(CodepointPerturbation):
    """Random character edits inside words (letters and digits): insert, substitute, swap, delete.

    severity: expected fraction of the text's characters edited (= expected edit rate), 0-1. An
    adjacent swap edits 2 characters, so swap makes severity·N/2 swaps; the others make
    severity·N single-character edits.
    action: insert | substitute | swap | delete.
    alphabet: characters to insert / substitute; empty = drawn from the document's own letters
    and digits (so Greek text gets Greek typos).
    """

    action: Literal["insert", "substitute", "swap", "delete"] = "substitute"
    alphabet: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_choice(self, "action", ("insert", "substitute", "swap", "delete"))

    def edit(self, cps: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        eligible = np.flatnonzero(ALNUM.mask(cps))
        if eligible.size == 0:
            return cps
        budget = self.severity * cps.size
        alphabet = to_codepoints(self.alphabet)
        if self.action == "swap":
            out = _swap(cps, eligible, budget, gen)
        elif self.action == "delete":
            out = np.delete(cps, sample_positions(eligible, budget, gen))
        elif self.action == "insert":
            pos = sample_positions(eligible, budget, gen)
            new = _draw_letters(cps, eligible, alphabet, pos.size, gen)
            # before or after the chosen letter, so word edges get insertions too
            out = np.insert(cps, pos + gen.integers(0, 2, size=pos.size), new)
        else:
            pos = sample_positions(eligible, budget, gen)
            new = _draw_letters(cps, eligible, alphabet, pos.size, gen)
            for _ in range(8):  # redraw replacements equal to the original (no-op edits)
                same = new == cps[pos]
                if not same.any():
                    break
                new[same] = _draw_letters(cps, eligible, alphabet, int(same.sum()), gen)
            pos, new = pos[new != cps[pos]], new[new != cps[pos]]
            out = cps.copy()
            out[pos] = new
        return out


def _swap(cps: np.ndarray, eligible: np.ndarray, budget: float, gen: np.random.Generator) -> np.ndarray:
    """Swap non-overlapping adjacent pairs (i, i+1) of distinct letters: budget/2 swaps expected
    (2 edits each)."""
    is_elig = np.zeros(cps.size + 1, dtype=bool)
    is_elig[eligible] = True
    nxt = cps[np.minimum(eligible + 1, cps.size - 1)]
    cand = eligible[is_elig[eligible + 1] & (nxt != cps[eligible])]
    want = n_edits(budget / 2, gen)
    chosen = np.zeros(0, dtype=np.int64)
    for _ in range(6):  # draw, drop pairs overlapping a neighbour, top up from what is still free
        need = want - chosen.size
        if need <= 0:
            break
        blocked = np.zeros(cps.size + 2, dtype=bool)
        blocked[chosen] = blocked[chosen + 1] = True
        blocked[chosen[chosen > 0] - 1] = True
        free = cand[~blocked[cand]]
        if free.size == 0:
            break
        new = np.sort(free[gen.choice(free.size, size=min(need, free.size), replace=False)])
        new = new[np.concatenate(([True], np.diff(new) > 1))]
        chosen = np.sort(np.concatenate((chosen, new)))
    idx = np.arange(cps.size)
    idx[chosen], idx[chosen + 1] = chosen + 1, chosen
    return cps[idx]


# Words as the misspelling list spells them: letters, with inner apostrophes / hyphens.
_WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")


@functools.lru_cache(maxsize=1)
def spelling_map() -> dict[str, tuple[str, ...]]:
    """word -> misspellings, from nlpaug's bundled ``spelling_en.txt`` (13,550 lines)."""
    out: dict[str, list[str]] = {}
    path = nlpaug_resource("word", "spelling", "spelling_en.txt")
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) >= 2:
            out.setdefault(parts[0], []).extend(p for p in parts[1:] if p != parts[0])
    return {k: tuple(dict.fromkeys(v)) for k, v in out.items() if v}


@functools.lru_cache(maxsize=1)
def spelling_costs() -> dict[str, tuple[tuple[int, ...], float, int]]:
    """word -> (Levenshtein cost of each misspelling, their mean, index of the farthest one)."""
    out = {}
    for k, vs in spelling_map().items():
        d = tuple(Levenshtein.distance(k, v) for v in vs)
        out[k] = (d, sum(d) / len(d), max(range(len(d)), key=d.__getitem__))
    return out


def _match_case(word: str, variant: str) -> str:
    """Give a misspelling (found under the lower-case key) the case pattern of the word."""
    if len(word) > 1 and word.isupper():
        return variant.upper()
    if word[:1].isupper():
        return variant[:1].upper() + variant[1:]
    return variant


@register("typo.spelling")
@dataclass(kw_only=True)
class SpellingTypo(Perturbation):
    """Common human misspellings of English words (nlpaug's bundled list: 'luck' -> 'lcuk').

    severity: expected fraction of the text's characters edited (= expected edit rate), 0-1; each
    replaced word costs its Levenshtein distance to the misspelling. Only words on the list can
    change (about 3/4 of English running words). A misspelling is drawn uniformly among a word's
    listed ones while that can reach the budget (up to ~0.15 on English prose); above it the draw
    leans towards each word's farthest misspelling, which extends the reach to ~0.3, where it
    saturates. Text with no listed words (other languages) is left unchanged. Case is carried over
    ('Luck' -> 'Lcuk').
    """

    def __post_init__(self) -> None:
        check_fraction(self)

    def perturb(self, text: str, rng: random.Random) -> str:
        if self.severity <= 0 or not text:
            return text
        table, stats = spelling_map(), spelling_costs()
        starts: list[int] = []
        words: list[str] = []
        keys: list[str] = []  # the word's entry in the table (itself, or its lower-case form)
        cap_mean = cap_far = 0.0
        for m in _WORD.finditer(text):
            w = m.group()
            key = w if w in table else w.lower()
            if key in table:
                starts.append(m.start())
                words.append(w)
                keys.append(key)
                d, mean, far = stats[key]
                cap_mean += mean
                cap_far += d[far]
        if not keys:
            return text
        gen = numpy_rng(rng)
        budget = self.severity * len(text)
        # Probability of taking the farthest misspelling instead of a uniform one: 0 unless the
        # uniform draw could not pay for the budget (10 % margin).
        lean = 0.0
        if cap_far > cap_mean:
            lean = min(1.0, max(0.0, (1.1 * budget - cap_mean) / (cap_far - cap_mean)))
        m_sites = min(len(keys), int(np.ceil(budget)) + 1)  # each edit costs >= 1
        order = gen.choice(len(keys), size=m_sites, replace=False)
        picks = gen.random(m_sites)
        leans = gen.random(m_sites) < lean
        new_words: dict[int, str] = {}
        costs: list[int] = []
        kept: list[int] = []
        for i, r, far in zip(order.tolist(), picks.tolist(), leans.tolist()):
            key, word = keys[i], words[i]
            cands, (d, _, far_idx) = table[key], stats[key]
            idx = far_idx if far else int(r * len(cands))
            if word == key:
                new, cost = cands[idx], d[idx]
            else:  # found under its lower-case form: carry the case over, then measure
                new = _match_case(word, cands[idx])
                cost = Levenshtein.distance(word, new)
            if cost > 0:
                new_words[i] = new
                costs.append(cost)
                kept.append(i)
        n = take_by_budget(np.array(costs, dtype=np.int64), budget, gen)
        out, last = [], 0
        for i in sorted(kept[:n]):  # sites are numbered in text order
            out.append(text[last : starts[i]])
            out.append(new_words[i])
            last = starts[i] + len(words[i])
        out.append(text[last:])
        return "".join(out)
