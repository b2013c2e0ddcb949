"""Character edit rate: the one measure of how much a perturbation changed a text.

``edit_rate(original, perturbed) = Levenshtein(original, perturbed) / len(original)``, counted in
Unicode code points (Python ``str`` characters), with unit costs for insertion, deletion and
substitution. It is plain Levenshtein, not Damerau: an adjacent swap ("ab" -> "ba") counts as
2 edited characters. An empty original gives 0.0 when the perturbed text is empty too, else the
number of inserted characters (the denominator is ``max(len(original), 1)``).

The distance comes from rapidfuzz (bit-parallel, C++). Long texts are measured with an
increasing ``score_cutoff`` (a band of width ~2x the distance), so the cost is about
O(N · distance / 64) rather than O(N² / 64). On the 2-core dev VM, 400 kB of English
(``pydoc_data.topics``) with 10 % of its characters substituted by ``typo.random`` took 1.1 CPU
seconds instead of 3.9 for one unbanded call (0.3 s with 10 % insertions). The result is exact
either way.

That is still quadratic when most characters change (a 1 MB line upper-cased took 83 s), so
``edit_rate_measured`` is exact only while both texts are at most ``EXACT_LIMIT`` characters; above
it, the texts are cut into ``WINDOW`` -character pieces at proportional positions (piece i of the
original is [i·W, (i+1)·W); of the perturbed text, the same fractions of its length) and the
distances of the pieces are summed: O(N · W / 64), linear in the length. The pieces' alignments
joined are one alignment of the whole texts, so the windowed distance is an upper bound of the
exact one (equal for length-preserving edits that never cross a cut). Results say which was used
(``method``: ``exact`` | ``windowed``). It is the smaller of two such chainings (``windowed_distance``
says why): one alone measured up to 1.60× the exact distance where insertions and deletions of
alike characters pile up (docs/reliability.md).
"""

from __future__ import annotations

from rapidfuzz.distance import Levenshtein


def edit_distance(a: str, b: str) -> int:
    """Exact Levenshtein distance between ``a`` and ``b`` in code points (swap = 2)."""
    if a == b:
        return 0
    # The distance is at least the length difference; start the band there and double it.
    cutoff = max(64, abs(len(a) - len(b)))
    longest = max(len(a), len(b))
    while True:
        d = Levenshtein.distance(a, b, score_cutoff=cutoff)
        if d <= cutoff or cutoff >= longest:
            return int(d)
        cutoff *= 2


EXACT_LIMIT = 100_000  # characters: exact Levenshtein up to here (~1 s at worst on one core)
WINDOW = 4096  # characters per piece above the limit


def windowed_distance(a: str, b: str, window: int = WINDOW) -> int:
    """An upper bound of ``edit_distance(a, b)`` in O(len · window / 64): the smaller of two
    chained alignments (``_chained``) that differ in how much of ``b`` each piece may reach
    beyond its share (a quarter window, or none).

    Each chained alignment is an alignment of the whole texts, so each cost bounds the exact
    distance and so does the smaller. Why two: with slack, a piece's alignment can spend the
    slack as insertions before its cut and run ahead of the true cut where insertions and
    deletions of alike characters pile up, and the pieces after it do not catch up
    (``space.random`` with insert and delete on 465k characters: 1.60× the exact distance);
    without slack, a stretch denser in insertions than the whole text cannot be reached. The
    smaller of the two was within 1.2 % of the exact distance on every case of
    ``benchmarks/edit_rate_window.py``."""
    return min(_chained(a, b, window, window // 4), _chained(a, b, window, 0))


def _chained(a: str, b: str, window: int, slack: int) -> int:
    """One chained alignment's cost: ``a`` is cut into ``window``-character pieces; each piece
    (plus a quarter window of look-ahead) is aligned to the stretch of ``b`` from where the
    previous piece ended, as long as the piece scaled by len(b)/len(a), plus ``slack``; the
    alignment is cut where the piece ends, and the cut alignments chain into one alignment of the
    whole texts."""
    ahead = max(1, window // 4)
    ratio = len(b) / max(1, len(a))
    total, a0, b0 = 0, 0, 0
    while a0 < len(a):
        a1 = min(len(a), a0 + window)
        if a1 == len(a):
            return total + edit_distance(a[a0:], b[b0:])
        aa = a[a0 : a1 + ahead]
        bb = b[b0 : b0 + int(len(aa) * ratio) + slack]
        k = a1 - a0  # the cut, in aa's coordinates
        cost, j_cut = 0, 0
        for tag, i1, i2, j1, j2 in Levenshtein.opcodes(aa, bb).as_list():
            if i1 >= k:  # an insertion exactly at the cut goes to the next piece
                break
            if tag == "insert":  # i1 == i2 < k: inserted before the cut
                cost += j2 - j1
                j_cut = j2
            elif i2 <= k:
                cost += 0 if tag == "equal" else i2 - i1
                j_cut = j2
            else:  # the cut falls inside this block
                if tag == "equal":
                    j_cut = j1 + (k - i1)
                elif tag == "replace":
                    cost += k - i1
                    j_cut = j1 + (k - i1)
                else:  # delete
                    cost += k - i1
                    j_cut = j1
                break
        total += cost
        a0, b0 = a1, b0 + j_cut
    return total + (len(b) - b0)


def edit_rate_measured(original: str, perturbed: str, exact_limit: int = EXACT_LIMIT) -> tuple[float, str]:
    """(edit rate, method): exact Levenshtein / max(len(original), 1) when both texts are at most
    ``exact_limit`` characters ("exact"), else the windowed upper bound ("windowed")."""
    if original == perturbed:
        return 0.0, "exact"
    if edit_rate_method(len(original), len(perturbed), exact_limit) == "exact":
        return edit_distance(original, perturbed) / max(len(original), 1), "exact"
    return windowed_distance(original, perturbed) / max(len(original), 1), "windowed"


def edit_rate_method(n_original: int, n_perturbed: int, exact_limit: int = EXACT_LIMIT) -> str:
    """Which measure ``edit_rate_measured`` uses for texts of these lengths (characters):
    "exact" or "windowed" (identical texts are always exact: distance 0)."""
    return "exact" if max(n_original, n_perturbed) <= exact_limit else "windowed"


def edit_rate(original: str, perturbed: str) -> float:
    """The fraction of characters edited: Levenshtein(original, perturbed) / max(len(original), 1),
    exact up to ``EXACT_LIMIT`` characters, windowed above (``edit_rate_measured`` says which)."""
    return edit_rate_measured(original, perturbed)[0]
