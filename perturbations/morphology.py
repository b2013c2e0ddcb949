"""Morphology perturbations and the morph segmenters they (and the morphology analysis) use.

Perturbations (severity = fraction of the eligible sites changed, chosen by the rng; 0 → the text
unchanged):

* ``morph.boundary_split``  insert a hyphen or a space at a morph boundary of a word
                            ("preprocessing" → "pre-processing");
* ``morph.compound``        split a word made of two known words ("database" → "data base") and/or
                            join two adjacent words ("data base" → "database");
* ``morph.affix_swap``      replace a word by another form of the same stem: from a Hunspell
                            dictionary's affix rules when one is found, else among forms attested
                            in the ``fit`` texts and the document.

Segmenters: ``fit(texts)`` trains Morfessor Baseline (unsupervised, offline) on the word types of
the texts (when there are at least 300); before that a heuristic segmenter strips the common prefixes and suffixes listed in
``AFFIXES`` for the perturbation's language. Hunspell dictionaries are looked up in
``/usr/share/hunspell`` and in the tokbench cache (``$TOKBENCH_CACHE/debian/hunspell-*/``,
fetched by ``python -m sources.fetch hunspell-de-de``); this module never imports harness.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import regex

from core.errors import field_error as core_field_error
from perturbations.base import Perturbation
from perturbations.checks import check_fraction
from perturbations.registry import register

# A word: a letter followed by letters and combining marks (digits, "_" and apostrophes split).
WORD_RE = regex.compile(r"\p{L}[\p{L}\p{M}]*")

# Prefixes and suffixes for the heuristic segmenter (used before fit()). Longest match first.
AFFIXES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "en": (("counter", "inter", "trans", "under", "over", "anti", "post", "semi", "super", "dis",
            "mis", "non", "pre", "sub", "un", "re", "de", "in", "im"),
           ("ational", "ization", "ations", "ation", "ments", "ment", "ness", "able", "ible",
            "less", "ship", "ings", "ing", "ers", "ies", "ied", "ful", "ous", "ive", "ize", "ise",
            "ity", "ist", "ism", "ed", "er", "ly", "es", "al", "s")),
    "de": (("zusammen", "wieder", "durch", "unter", "über", "nach", "ver", "zer", "ent", "emp",
            "vor", "aus", "ein", "auf", "ab", "an", "be", "ge", "un", "mit", "zu"),
           ("ungen", "ung", "heit", "keit", "schaft", "lich", "isch", "chen", "lein", "bar", "sam",
            "end", "ern", "est", "ten", "te", "en", "er", "es", "em", "st", "e", "n", "s", "t")),
    "es": (("des", "pre", "re", "in", "sub", "anti", "con"),
           ("amente", "mente", "ación", "aciones", "iones", "ción", "ando", "iendo", "aron",
            "ieron", "ados", "adas", "idos", "idas", "ado", "ada", "ido", "ida", "ar", "er", "ir",
            "os", "as", "es", "ía", "o", "a", "s")),
    "ru": (("пере", "при", "пре", "раз", "рас", "под", "над", "от", "по", "за", "вы", "до", "не"),
           ("ость", "ение", "ания", "ание", "ский", "ского", "ться", "ами", "ями", "ого", "его",
            "ому", "ему", "ыми", "ими", "ает", "ают", "ить", "ать", "ов", "ев", "ей", "ой", "ий",
            "ый", "ая", "ое", "ые", "ие", "ам", "ах", "ом", "ем", "ть", "а", "я", "ы", "и", "у",
            "ю", "е", "о")),
    "tr": ((),
           ("lerinden", "larından", "lerinin", "larının", "lerde", "larda", "leri", "ları", "ler",
            "lar", "dan", "den", "tan", "ten", "nın", "nin", "nun", "nün", "da", "de", "ta", "te",
            "ın", "in", "un", "ün", "yı", "yi", "ı", "i", "u", "ü", "a", "e")),
    "fr": (("re", "dé", "pré", "in", "im", "dés", "sous", "sur"),
           ("ement", "ations", "ation", "ements", "ment", "eurs", "euse", "eur", "ait", "ant",
            "ées", "és", "ée", "er", "ez", "es", "e", "s")),
}
_MIN_STEM = 3  # letters a stem keeps when the heuristic strips affixes
MIN_FIT_TYPES = 300  # word types Morfessor needs to learn anything useful


def _case_like(template: str, word: str) -> str:
    """``word`` with the capitalization pattern of ``template`` (lower, Title, UPPER)."""
    if template.isupper() and len(template) > 1:
        return word.upper()
    if template[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


# ------------------------------------------------------------------------------ segmenters
class Segmenter:
    """Splits a lowercase word into morphs (a list of strings that concatenate to the word)."""

    def segment(self, word: str) -> list[str]:
        raise NotImplementedError


class AffixSegmenter(Segmenter):
    """Heuristic: strip the longest listed prefix and the longest listed suffix, keeping a stem of
    at least 3 letters. Used before a segmenter is trained; crude but language-aware."""

    def __init__(self, lang: str | None) -> None:
        pre, suf = AFFIXES.get((lang or "en").split("-")[0], AFFIXES["en"])
        self.prefixes = sorted(pre, key=len, reverse=True)
        self.suffixes = sorted(suf, key=len, reverse=True)

    def segment(self, word: str) -> list[str]:
        head: list[str] = []
        tail: list[str] = []
        stem = word
        for p in self.prefixes:
            if stem.startswith(p) and len(stem) - len(p) >= _MIN_STEM:
                head, stem = [p], stem[len(p):]
                break
        for s in self.suffixes:
            # one suffix only; never cut between a doubled letter ("process" is not "proces+s")
            if stem.endswith(s) and len(stem) - len(s) >= _MIN_STEM and stem[-len(s) - 1] != s[0]:
                tail, stem = [s], stem[: -len(s)]
                break
        return [*head, stem, *tail]


class MorfessorSegmenter(Segmenter):
    """Morfessor Baseline trained on word types (each type counted once: type-based training gives
    linguistically better morphs than token counts). Segmentations are cached."""

    # Trained models by (word types, seed), most recent last. A run trains Morfessor on the same
    # training text for each morphology perturbation and again for the morphology analysis
    # (about 20 s each on a 2-core VM, serial); the model is a function of the chosen types and
    # the seed alone, and segmenting only reads it (``viterbi_segment``), so identical inputs
    # share one trained model. Each segmenter keeps its own cache.
    _trained: ClassVar[OrderedDict[str, object]] = OrderedDict()
    TRAINED_KEPT: ClassVar[int] = 8

    def __init__(self, model: object) -> None:
        self.model = model
        self.cache: dict[str, list[str]] = {}

    @classmethod
    def train(cls, words: Iterable[str], max_types: int = 5000, seed: int = 0) -> MorfessorSegmenter:
        """Train on the ``max_types`` most frequent lowercase word types of ``words`` (ties broken
        alphabetically, so the result depends only on the words and the seed). A model already
        trained in this process on the same types and seed is reused (``_trained``)."""
        if max_types < 1:  # a negative slice end would drop the last types instead
            raise ValueError(f"max_types must be >= 1, got {max_types}")
        counts = Counter(words)
        types = sorted(counts, key=lambda w: (-counts[w], w))[:max_types]
        key = hashlib.sha256("\n".join([str(seed), *sorted(types)]).encode("utf-8", "surrogateescape")).hexdigest()
        model = cls._trained.get(key)
        if model is None:
            model = cls._train_model(types, seed)
            cls._trained[key] = model
            while len(cls._trained) > cls.TRAINED_KEPT:
                cls._trained.popitem(last=False)
        cls._trained.move_to_end(key)
        return cls(model)

    @classmethod
    def trained_models(cls) -> dict[str, object]:
        """The models trained (or adopted) in this process, {key: model}, oldest first: what a
        process that trained them hands to another (``adopt``), so it need not train them again."""
        return dict(cls._trained)

    @classmethod
    def adopt(cls, models: dict[str, object]) -> None:
        """Keep ``models`` (from ``trained_models`` of another process) as if trained here: the
        same key is the same types and seed, so the same model."""
        for key, model in models.items():
            cls._trained.setdefault(key, model)
            cls._trained.move_to_end(key)
        while len(cls._trained) > cls.TRAINED_KEPT:
            cls._trained.popitem(last=False)

    @staticmethod
    def _train_model(types: list[str], seed: int) -> object:
        """A Morfessor Baseline model trained on ``types`` (each counted once), seeded."""
        import morfessor
        import morfessor.utils

        morfessor.utils.show_progress_bar = False  # it writes dots to stderr otherwise
        model = morfessor.BaselineModel()
        model.load_data([(1, w) for w in sorted(types)])
        # Morfessor shuffles with the global `random`; seed it and restore the caller's state.
        state = random.getstate()
        random.seed(seed)
        try:
            if types:
                model.train_batch()
        finally:
            random.setstate(state)
        return model

    def segment(self, word: str) -> list[str]:
        got = self.cache.get(word)
        if got is None:
            if len(word) > 60:  # viterbi is quadratic in length; such "words" are not words
                got = [word]
            else:
                got = list(self.model.viterbi_segment(word)[0]) or [word]  # type: ignore[attr-defined]
            if "".join(got) != word:
                got = [word]
            self.cache[word] = got
        return got


def words_of(texts: Iterable[str]) -> Iterable[str]:
    """Lowercase word tokens (``WORD_RE``) of texts."""
    for t in texts:
        for m in WORD_RE.finditer(t):
            yield m.group().lower()


def stem_of(morphs: Sequence[str]) -> str:
    """The longest morph (the first of equally long ones): a language-independent stand-in for
    the root, since Morfessor does not label morph types."""
    return max(morphs, key=len)


def morph_cuts(word: str, morphs: Sequence[str]) -> list[int]:
    """Character offsets inside ``word`` where one morph ends and the next begins."""
    cuts, pos = [], 0
    for m in morphs[:-1]:
        pos += len(m)
        cuts.append(pos)
    return [c for c in cuts if 0 < c < len(word)]


# ------------------------------------------------------------------------------- Hunspell
def hunspell_dirs() -> list[Path]:
    """Where Hunspell dictionaries are looked for: the system dir, then the tokbench cache."""
    cache = os.environ.get("TOKBENCH_CACHE")
    cache_dir = Path(cache).expanduser() if cache else Path.home() / ".cache" / "tokbench"
    dirs = [Path("/usr/share/hunspell")]
    dirs += sorted((cache_dir / "debian").glob("hunspell-*/root/usr/share/hunspell"))
    return [d for d in dirs if d.is_dir()]


# lookups by (language, the directories searched): the directories follow $TOKBENCH_CACHE and the
# packages fetched into it, so a lookup made before a change there is not reused after it
_FOUND: dict[tuple[str, tuple[Path, ...]], Path | None] = {}


def find_hunspell(lang: str | None, dirs: Sequence[Path] | None = None) -> Path | None:
    """Path of ``<dir>/<ll>_<LL>.dic`` (preferred; en → en_US) or any ``<ll>_*.dic`` / ``<ll>.dic``
    for the language, or None."""
    if not lang:
        return None
    ll = lang.split("-")[0].lower()
    if dirs is None:
        key = (ll, tuple(hunspell_dirs()))
        if key not in _FOUND:
            _FOUND[key] = find_hunspell(ll, key[1])
        return _FOUND[key]
    preferred = {"en": "en_US"}.get(ll, f"{ll}_{ll.upper()}")
    for d in dirs:
        for name in (f"{preferred}.dic", f"{ll}.dic"):
            if (d / name).is_file() and (d / name).with_suffix(".aff").is_file():
                return d / name
        cands = sorted(p for p in d.glob(f"{ll}_*.dic") if p.with_suffix(".aff").is_file())
        if cands:
            return cands[0]
    return None


def _aff_encoding(aff: Path) -> str:
    with open(aff, "rb") as f:
        for raw in f.read(20000).splitlines():
            if raw.startswith(b"SET "):
                return raw[4:].strip().decode("ascii", errors="ignore") or "utf-8"
    return "utf-8"


def hunspell_stems(dic: Path) -> list[str]:
    """The stems of a .dic file (flags, morphological fields and the count line stripped)."""
    enc = _aff_encoding(dic.with_suffix(".aff"))
    out = []
    lines = dic.read_bytes().decode(enc, errors="replace").splitlines()
    for line in lines[1:]:
        w = re.split(r"(?<!\\)/|\s", line.strip(), maxsplit=1)[0]
        if w and WORD_RE.fullmatch(w):
            out.append(w)
    return out


_PARADIGMS: dict[str, tuple[dict[str, list[int]], list[list[str]]]] = {}


def hunspell_paradigms(dic: Path) -> tuple[dict[str, list[int]], list[list[str]]]:
    """Expand a Hunspell dictionary with its single-level affix rules (``spylls`` reads the
    files). Returns ``(form → paradigm ids, paradigms)``: a paradigm is the list of lowercase
    forms of one stem (the stem itself unless flagged NEEDAFFIX, then each prefix and suffix form;
    cross-products of prefix and suffix are left out). Cached per file (a few seconds for the
    large dictionaries)."""
    key = str(dic.resolve())
    if key in _PARADIGMS:
        return _PARADIGMS[key]
    from spylls.hunspell import Dictionary

    d = Dictionary.from_files(str(dic.with_suffix("")))
    aff = d.aff
    needaffix = getattr(aff, "NEEDAFFIX", None)
    index: dict[str, list[int]] = {}
    paradigms: list[list[str]] = []
    for w in d.dic.words:
        stem = w.stem
        forms = [] if needaffix and needaffix in w.flags else [stem]
        for flag in w.flags:
            for sfx in aff.SFX.get(flag, ()):
                if sfx.cond_regexp.search(stem) and stem.endswith(sfx.strip):
                    forms.append(stem[: len(stem) - len(sfx.strip)] + sfx.add)
            for pfx in aff.PFX.get(flag, ()):
                if pfx.cond_regexp.search(stem) and stem.startswith(pfx.strip):
                    forms.append(pfx.add + stem[len(pfx.strip):])
        forms = sorted({f.lower() for f in forms if f and WORD_RE.fullmatch(f)})
        if len(forms) < 2:
            continue
        pid = len(paradigms)
        paradigms.append(forms)
        for f in forms:
            index.setdefault(f, []).append(pid)
    _PARADIGMS[key] = (index, paradigms)
    return index, paradigms


# ---------------------------------------------------------------------------- perturbations
# The longest part morph.compound splits a word into: longer "words" (hashes, base64, runs of one
# letter) are not compounds, and scanning every split point of them was quadratic in their length
MAX_PART_LEN = 64

def _choose(n: int, severity: float, rng: random.Random) -> list[int]:
    """round(severity * n) distinct indices out of n, sorted, drawn with rng (the rng is not
    touched when severity is 0, so severity 0 is the identity)."""
    k = min(n, int(round(max(0.0, min(1.0, severity)) * n)))
    return sorted(rng.sample(range(n), k)) if k else []


def field_error(p: Perturbation, field: str, problem: str) -> ValueError:
    """``core.errors.field_error`` with a perturbation's wording: ``<name>: <field> <problem>``
    (the suite loader reports it at ``perturbations[i].<field>``)."""
    name = getattr(type(p), "registry_name", type(p).__name__)
    return core_field_error(name, field, problem, f"{name}: {field} {problem}")


def _replace_spans(text: str, edits: list[tuple[int, int, str]]) -> str:
    out, pos = [], 0
    for s, e, new in sorted(edits):
        out.append(text[pos:s])
        out.append(new)
        pos = e
    out.append(text[pos:])
    return "".join(out)


@dataclass(kw_only=True)
class _MorphBase(Perturbation):
    """Shared: a segmenter trained by ``fit`` (Morfessor on at most ``max_types`` word types) or
    the heuristic affix segmenter of ``lang`` before that. max_types: the most frequent word types
    Morfessor trains on (>= 1). min_word_len: shorter words are never changed (>= 0)."""

    max_types: int = 5000
    min_word_len: int = 4

    def __post_init__(self) -> None:
        # severity in [0, 1] as every built-in checks it (NaN behaved as 1 and 2 was clamped to 1
        # while the row said 2, so a sweep went flat without a word)
        check_fraction(self)
        # Checked here so `tokbench validate` refuses them (max_types=-1 used to pass and drop
        # the last word type through ``types[:-1]``).
        if isinstance(self.max_types, bool) or not isinstance(self.max_types, int) or self.max_types < 1:
            raise field_error(self, "max_types", f"must be an integer >= 1, got {self.max_types!r}")
        if isinstance(self.min_word_len, bool) or not isinstance(self.min_word_len, int) or self.min_word_len < 0:
            raise field_error(self, "min_word_len", f"must be an integer >= 0, got {self.min_word_len!r}")
        # State, not parameters: kept out of the dataclass fields (fields seed the rng).
        self._segmenter: Segmenter | None = None

    def fit(self, texts: list[str]) -> None:
        """Train Morfessor on the texts' word types; with fewer than ``MIN_FIT_TYPES`` types it
        would learn no morphs, so the heuristic segmenter stays."""
        words = list(words_of(texts))
        if len(set(words)) >= MIN_FIT_TYPES:
            self._segmenter = MorfessorSegmenter.train(words, self.max_types)

    def segmenter(self) -> Segmenter:
        if self._segmenter is None:
            self._segmenter = AffixSegmenter(self.lang)
        return self._segmenter


@register("morph.boundary_split")
@dataclass(kw_only=True)
class BoundarySplit(_MorphBase):
    """Insert ``separator`` ("-", " " or "random": either, drawn per word) at one morph boundary
    (drawn by the rng) of a word ("preprocessing" → "pre-processing"). Eligible: words of at least
    ``min_word_len`` letters with two or more morphs. severity: fraction of eligible words split."""

    separator: Literal["-", " ", "random"] = "-"

    def perturb(self, text: str, rng: random.Random) -> str:
        if self.severity <= 0 or not text:
            return text
        seg = self.segmenter()
        sites = []
        for m in WORD_RE.finditer(text):
            w = m.group()
            if len(w) < self.min_word_len:
                continue
            low = w.lower()
            cuts = morph_cuts(w, seg.segment(low)) if len(low) == len(w) else []
            if cuts:
                sites.append((m.start(), m.end(), cuts))
        edits = []
        for i in _choose(len(sites), self.severity, rng):
            s, e, cuts = sites[i]
            c = cuts[rng.randrange(len(cuts))]
            sep = self.separator if self.separator != "random" else rng.choice(("-", " "))
            w = text[s:e]
            edits.append((s, e, w[:c] + sep + w[c:]))
        return _replace_spans(text, edits)


# Languages that write compounds as one word with the second part lowercase.
_CLOSED_COMPOUND_LANGS = {"de", "nl", "sv", "da", "no", "nb", "nn", "is", "fi", "et", "hu"}


@register("morph.compound")
@dataclass(kw_only=True)
class Compound(Perturbation):
    """Split compounds and/or join adjacent words.

    split: a word that is the concatenation of two known words of at least ``min_part_len`` (>= 1)
    letters ("database" = "data" + "base") gets a space (or ``split_with``) between them; known
    words are the word types of the ``fit`` texts seen at least twice, plus those of the document.
    join: two adjacent words separated by one space or hyphen, each of at least ``min_part_len``
    letters, are written as one (the second lowercased in languages with closed compounds, e.g.
    German "Haus Tür" → "Haustür").
    mode: which site kinds are eligible. severity: fraction of eligible sites changed (a join that
    overlaps an already chosen site is skipped)."""

    mode: Literal["split", "join", "both"] = "both"
    split_with: str = " "
    min_part_len: int = 4

    def __post_init__(self) -> None:
        check_fraction(self)
        if isinstance(self.min_part_len, bool) or not isinstance(self.min_part_len, int) or self.min_part_len < 1:
            raise field_error(self, "min_part_len", f"must be an integer >= 1, got {self.min_part_len!r}")
        self._vocab: set[str] = set()  # fit() state, not a parameter

    def fit(self, texts: list[str]) -> None:
        counts = Counter(words_of(texts))
        self._vocab = {w for w, c in counts.items() if c >= 2 and len(w) >= self.min_part_len}

    def _split_point(self, low: str, vocab: set[str]) -> int | None:
        n = self.min_part_len
        # above 2 · MAX_PART_LEN letters the range is empty: nothing is scanned
        lo, hi = max(n, len(low) - MAX_PART_LEN), min(len(low) - n, MAX_PART_LEN)
        for c in range(lo, hi + 1):  # leftmost split point with two known halves
            if low[:c] in vocab and low[c:] in vocab:
                return c
        return None

    def perturb(self, text: str, rng: random.Random) -> str:
        if self.severity <= 0 or not text:
            return text
        words = list(WORD_RE.finditer(text))
        vocab = self._vocab | {m.group().lower() for m in words if len(m.group()) >= self.min_part_len}
        sites: list[tuple[int, int, str]] = []
        if self.mode in ("split", "both"):
            for m in words:
                w = m.group()
                c = self._split_point(w.lower(), vocab) if len(w) >= 2 * self.min_part_len else None
                if c is not None:
                    sites.append((m.start(), m.end(), w[:c] + self.split_with + w[c:]))
        if self.mode in ("join", "both"):
            closed = (self.lang or "").split("-")[0] in _CLOSED_COMPOUND_LANGS
            for a, b in zip(words, words[1:]):
                gap = text[a.end() : b.start()]
                wa, wb = a.group(), b.group()
                if gap in (" ", "-") and min(len(wa), len(wb)) >= self.min_part_len:
                    second = wb[:1].lower() + wb[1:] if closed and not wb.isupper() else wb
                    sites.append((a.start(), b.end(), wa + second))
        sites.sort()
        edits: list[tuple[int, int, str]] = []
        # The chosen sites come in start order and the kept ones never overlap, so a site
        # overlaps a kept one exactly when it starts before the last kept end (one comparison,
        # not a scan of every kept site: that was quadratic on long texts)
        last_end = -1
        for i in _choose(len(sites), self.severity, rng):
            s, e, new = sites[i]
            if s < last_end:
                continue
            last_end = e
            edits.append((s, e, new))
        return _replace_spans(text, edits)


@register("morph.affix_swap")
@dataclass(kw_only=True)
class AffixSwap(_MorphBase):
    """Replace a word by another form of its stem, keeping its capitalization.

    dictionary: a Hunspell ``.dic`` path (its ``.aff`` beside it); None → looked up for ``lang``
    in /usr/share/hunspell and the tokbench cache. With a dictionary the forms come from its affix
    rules ("walked" → "walking", "Haus" → "Häuser" only where the rules generate it). Without
    one, the forms are those attested in the ``fit`` texts and the document that the segmenter
    gives the same stem (longest morph) and different affixes. Eligible: words of at least
    ``min_word_len`` letters with another form. severity: fraction of eligible words replaced."""

    dictionary: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        # A named dictionary is a local input: refuse a missing one at validate time, not when
        # the first document is perturbed.
        if self.dictionary is not None and not Path(self.dictionary).expanduser().is_file():
            raise field_error(self, "dictionary", f"Hunspell dictionary {self.dictionary!r} not found "
                              "(a .dic file, its .aff beside it)")
        if self.dictionary is not None and not Path(self.dictionary).expanduser().with_suffix(".aff").is_file():
            raise field_error(self, "dictionary", f"Hunspell dictionary {self.dictionary!r} has no "
                              ".aff file beside it (its affix rules)")
        self._attested: dict[str, set[str]] = {}  # fit() state, not a parameter

    def fit(self, texts: list[str]) -> None:
        super().fit(texts)
        self._attested = {}
        self._add_attested(Counter(words_of(texts)))

    def _key(self, low: str) -> str:
        morphs = self.segmenter().segment(low)
        stem = stem_of(morphs)
        return stem if len(morphs) > 1 or stem == low else low

    def _add_attested(self, counts: Counter[str], into: dict[str, set[str]] | None = None) -> None:
        into = self._attested if into is None else into
        for w in sorted(counts):
            if len(w) >= self.min_word_len:
                into.setdefault(self._key(w), set()).add(w)

    def _alternatives_fn(self, text: str) -> Callable[[str], list[str]]:
        dic = Path(self.dictionary).expanduser() if self.dictionary else find_hunspell(self.lang or "en")
        if self.dictionary and not (dic and dic.is_file()):
            raise ValueError(f"morph.affix_swap: dictionary {self.dictionary!r} not found")
        if dic is not None:
            index, paradigms = hunspell_paradigms(dic)

            def alt(low: str) -> list[str]:
                return sorted({f for p in index.get(low, ()) for f in paradigms[p] if f != low})

            return alt
        local: dict[str, set[str]] = {k: set(v) for k, v in self._attested.items()}
        self._add_attested(Counter(words_of([text])), local)

        def alt_attested(low: str) -> list[str]:
            return sorted(f for f in local.get(self._key(low), ()) if f != low)

        return alt_attested

    def perturb(self, text: str, rng: random.Random) -> str:
        if self.severity <= 0 or not text:
            return text
        alternatives = self._alternatives_fn(text)
        sites = []
        for m in WORD_RE.finditer(text):
            w = m.group()
            if len(w) >= self.min_word_len:
                alts = alternatives(w.lower())
                if alts:
                    sites.append((m.start(), m.end(), alts))
        edits = []
        for i in _choose(len(sites), self.severity, rng):
            s, e, alts = sites[i]
            edits.append((s, e, _case_like(text[s:e], alts[rng.randrange(len(alts))])))
        return _replace_spans(text, edits)
