"""Vectorised code-point editing: the machinery every character-level perturbation shares.

A text becomes a ``(N,) uint32`` array of Unicode code points (``to_codepoints``); perturbations
pick positions and replacements with numpy and splice the result back (``splice``), so a 1 MB
document costs a few numpy passes instead of a Python loop per character.

Randomness: perturbations receive the harness's ``random.Random``; ``numpy_rng`` derives a numpy
``Generator`` from it (64 bits drawn from that rng), so the output still depends only on the
harness seed — never on global ``random`` / ``np.random`` state.

Lone surrogates (text decoded with ``surrogateescape``) survive the round trip unchanged
(``surrogatepass``): a perturbation never makes an encodable text unencodable.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Mapping, Sequence

import numpy as np
from rapidfuzz.distance import Levenshtein

_BMP = 0x10000


def numpy_rng(rng: random.Random) -> np.random.Generator:
    """A numpy Generator seeded from ``rng`` (advances ``rng`` by 64 bits)."""
    return np.random.default_rng(rng.getrandbits(64))


def to_codepoints(text: str) -> np.ndarray:
    """``text`` -> ``(len(text),) uint32`` code points (lone surrogates kept)."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def from_codepoints(cps: np.ndarray) -> str:
    """Inverse of ``to_codepoints``."""
    return np.ascontiguousarray(cps, dtype=np.uint32).tobytes().decode("utf-32-le", "surrogatepass")


def _per_codepoint(
    cps: np.ndarray, bmp: np.ndarray, lock: threading.Lock, astral: Callable[[int], int | bool]
) -> np.ndarray:
    """``(N,)`` values of ``bmp.dtype`` per code point: read from the tabulated Basic Multilingual
    Plane ``bmp`` (``(65536,)``), and for code points above it from ``astral(cp)``, called once per
    distinct code point while holding ``lock`` (it may fill a cache)."""
    out = np.empty(cps.shape, dtype=bmp.dtype)
    low = cps < _BMP
    out[low] = bmp[cps[low]]
    if not low.all():
        high_pos = np.flatnonzero(~low)
        uniq, inverse = np.unique(cps[high_pos], return_inverse=True)
        with lock:
            vals = np.array([astral(cp) for cp in uniq.tolist()], dtype=bmp.dtype)
        out[high_pos] = vals[inverse]
    return out


class CharTable:
    """A per-code-point property or replacement table with a fast ``(N,)`` lookup.

    Built either from a mapping ``{char: [replacement strings]}`` or from a function
    ``f(char) -> tuple[str, ...]`` (empty tuple = no replacement). Function tables are filled for the
    whole Basic Multilingual Plane on first use (~65k calls, once per process) and lazily, per
    distinct code point, above it. Thread-safe.

    Each eligible code point has a *group*: its list of candidate replacements. ``lookup`` returns
    the group id per position (-1 = not eligible); ``pick`` draws one candidate per position; the
    candidates themselves are stored as code-point runs in ``flat`` (``rep_off``, ``rep_len``), with
    their Levenshtein distance to the replaced character in ``rep_cost``.
    """

    def __init__(
        self,
        mapping: Mapping[str, Sequence[str]] | None = None,
        func: Callable[[str], Sequence[str]] | None = None,
    ) -> None:
        if (mapping is None) == (func is None):
            raise ValueError("CharTable needs exactly one of mapping or func")
        self._mapping = dict(mapping) if mapping is not None else None
        self._func = func
        self._lock = threading.Lock()
        self._ready = False
        self._astral: dict[int, int] = {}
        self._groups: list[tuple[str, ...]] = []
        self._keys: list[str] = []  # the character each group belongs to

    # -- building -------------------------------------------------------------------------------

    def _candidates(self, ch: str) -> tuple[str, ...]:
        if self._func is not None:
            return tuple(r for r in self._func(ch) if r != ch)
        assert self._mapping is not None
        return tuple(r for r in self._mapping.get(ch, ()) if r != ch)

    def _add_group(self, key: str, cands: tuple[str, ...]) -> int:
        self._groups.append(cands)
        self._keys.append(key)
        return len(self._groups) - 1

    def _build(self) -> None:
        bmp = np.full(_BMP, -1, dtype=np.int64)
        if self._func is not None:
            for cp in range(_BMP):
                cands = self._candidates(chr(cp))
                if cands:
                    bmp[cp] = self._add_group(chr(cp), cands)
        else:
            assert self._mapping is not None
            for key in self._mapping:
                if len(key) != 1:
                    raise ValueError(f"CharTable keys must be single characters, got {key!r}")
                cands = self._candidates(key)
                if not cands:
                    continue
                gid = self._add_group(key, cands)
                if ord(key) < _BMP:
                    bmp[ord(key)] = gid
                else:
                    self._astral[ord(key)] = gid
        self._bmp = bmp
        self._pack()
        self._ready = True

    def _pack(self) -> None:
        """Flatten the groups into numpy arrays (rebuilt when an astral lookup adds a group)."""
        rep_strings = [r for g in self._groups for r in g]
        self.group_start = np.zeros(len(self._groups), dtype=np.int64)
        self.group_count = np.array([len(g) for g in self._groups], dtype=np.int64)
        if len(self._groups):
            self.group_start[1:] = np.cumsum(self.group_count)[:-1]
        self.rep_len = np.array([len(r) for r in rep_strings], dtype=np.int64)
        self.rep_off = np.zeros(len(rep_strings), dtype=np.int64)
        if rep_strings:
            self.rep_off[1:] = np.cumsum(self.rep_len)[:-1]
        self.flat = to_codepoints("".join(rep_strings))
        self.rep_strings = rep_strings
        # Levenshtein cost of each replacement against its key (1 for a one-character swap-in).
        self.rep_cost = np.array(
            [Levenshtein.distance(k, r) for k, g in zip(self._keys, self._groups) for r in g],
            dtype=np.int64,
        )

    def _ensure(self) -> None:
        if not self._ready:
            with self._lock:
                if not self._ready:
                    self._build()

    # -- queries --------------------------------------------------------------------------------

    def lookup(self, cps: np.ndarray) -> np.ndarray:
        """``(N,) int64`` group id per code point, -1 where the table has no entry."""
        self._ensure()
        return _per_codepoint(cps, self._bmp, self._lock, self._astral_group)

    def _astral_group(self, cp: int) -> int:
        """Group id of a code point above the BMP (function tables: computed on first sight)."""
        if cp not in self._astral and self._func is not None:
            cands = self._candidates(chr(cp))
            self._astral[cp] = self._add_group(chr(cp), cands) if cands else -1
            if cands:
                self._pack()
        return self._astral.get(cp, -1)

    def mask(self, cps: np.ndarray) -> np.ndarray:
        """``(N,) bool``: code points the table has a replacement for."""
        return self.lookup(cps) >= 0

    def pick(self, groups: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        """One uniformly drawn candidate (replacement id) per entry of ``groups`` (all >= 0)."""
        self._ensure()
        r = gen.random(groups.shape[0])
        return self.group_start[groups] + (r * self.group_count[groups]).astype(np.int64)

    def first(self, groups: np.ndarray) -> np.ndarray:
        """The first candidate of each group (deterministic tables: one candidate each)."""
        self._ensure()
        return self.group_start[groups]


def splice(
    cps: np.ndarray, pos: np.ndarray, rep_off: np.ndarray, rep_len: np.ndarray, flat: np.ndarray
) -> np.ndarray:
    """Replace ``cps[pos[j]]`` by the run ``flat[rep_off[j] : rep_off[j] + rep_len[j]]``.

    pos: ``(k,)`` distinct positions (any order); a run may be empty (deletion) or longer than one
    code point (expansion). Returns the new ``(N',) uint32`` array.
    """
    if pos.size == 0:
        return cps
    lens = np.ones(cps.shape[0], dtype=np.int64)
    lens[pos] = rep_len
    ends = np.cumsum(lens)
    starts = ends - lens
    out = np.empty(int(ends[-1]) if ends.size else 0, dtype=np.uint32)
    keep = np.ones(cps.shape[0], dtype=bool)
    keep[pos] = False
    out[starts[keep]] = cps[keep]
    total = int(rep_len.sum())
    if total:
        group = np.repeat(np.arange(pos.shape[0]), rep_len)
        within = np.arange(total) - np.repeat(np.cumsum(rep_len) - rep_len, rep_len)
        out[starts[pos][group] + within] = flat[rep_off[group] + within]
    return out


def apply_table(
    cps: np.ndarray, pos: np.ndarray, table: CharTable, gen: np.random.Generator | None
) -> np.ndarray:
    """Replace the code points at ``pos`` (all eligible in ``table``) by a candidate each:
    drawn with ``gen``, or the first candidate when ``gen`` is None."""
    if pos.size == 0:
        return cps
    groups = table.lookup(cps[pos])
    reps = table.first(groups) if gen is None else table.pick(groups, gen)
    return splice(cps, pos, table.rep_off[reps], table.rep_len[reps], table.flat)


class CharSet:
    """A set of code points given by a predicate, with a fast ``(N,) bool`` membership test
    (``mask``). The Basic Multilingual Plane is tabulated on first use (~65k predicate calls, once
    per process); code points above it are tested lazily and cached. Thread-safe."""

    def __init__(self, pred: Callable[[str], bool]) -> None:
        self._pred = pred
        self._lock = threading.Lock()
        self._bmp: np.ndarray | None = None
        self._astral: dict[int, bool] = {}

    def mask(self, cps: np.ndarray) -> np.ndarray:
        if self._bmp is None:
            with self._lock:
                if self._bmp is None:
                    self._bmp = np.fromiter((self._pred(chr(c)) for c in range(_BMP)), dtype=bool, count=_BMP)
        return _per_codepoint(cps, self._bmp, self._lock, self._astral_member)

    def _astral_member(self, cp: int) -> bool:
        if cp not in self._astral:
            self._astral[cp] = bool(self._pred(chr(cp)))
        return self._astral[cp]


def n_edits(budget: float, gen: np.random.Generator) -> int:
    """An integer with expectation exactly ``budget``: floor(budget) plus a Bernoulli of the rest."""
    base = int(np.floor(budget))
    return base + int(gen.random() < budget - base)


def take_by_budget(costs: np.ndarray, budget: float, gen: np.random.Generator) -> int:
    """How many leading items (already in random order) to apply so the expected total cost is
    exactly ``budget`` (when the items can pay for it): all items whose running cost stays within
    the budget, plus the next one with probability (remaining budget / its cost)."""
    if costs.size == 0 or budget <= 0:
        return 0
    cum = np.cumsum(costs)
    n = int(np.searchsorted(cum, budget, side="right"))
    if n < costs.size:
        spent = float(cum[n - 1]) if n else 0.0
        if gen.random() < (budget - spent) / float(costs[n]):
            n += 1
    return n


def sample_positions(
    eligible: np.ndarray, budget: float, gen: np.random.Generator, cost: int = 1
) -> np.ndarray:
    """Distinct positions from ``eligible`` (sorted ``(M,)``) whose count times ``cost`` has
    expectation ``budget`` (capped at all of them). Returns them sorted."""
    k = min(eligible.size, n_edits(budget / cost, gen))
    if k <= 0:
        return eligible[:0]
    return np.sort(eligible[gen.choice(eligible.size, size=k, replace=False)])


def word_ids(is_word: np.ndarray) -> tuple[np.ndarray, int]:
    """Label maximal runs of True in ``is_word`` (``(N,) bool``): returns ``(N,) int64`` run index
    (-1 outside runs) and the number of runs."""
    if is_word.size == 0:
        return np.full(0, -1, dtype=np.int64), 0
    starts = is_word & ~np.concatenate(([False], is_word[:-1]))
    ids = np.cumsum(starts) - 1
    ids[~is_word] = -1
    return ids, int(starts.sum())


def selected_words(is_word: np.ndarray, fraction: float, gen: np.random.Generator) -> np.ndarray:
    """``(N,) bool``: the characters of words (runs of ``is_word``) chosen independently with
    probability ``fraction`` each."""
    ids, n = word_ids(is_word)
    if n == 0:
        return np.zeros(is_word.shape, dtype=bool)
    chosen = gen.random(n) < fraction
    return is_word & chosen[np.maximum(ids, 0)]
