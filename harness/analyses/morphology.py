"""``morphology``: per-word buckets of the scored bytes by how a word relates to its morphs.

Words are ``perturbations.morphology.WORD_RE`` matches (a letter, then letters and combining
marks); words of scripts written without spaces (Han, Kana, Thai, Lao, Khmer, Myanmar, Tibetan)
are skipped. A word's NLL is the sum of its bytes' NLL (nats; the preceding space is not part of
the word). Every word falls in one bucket of each family:

* ``bpe:single`` — the word is one BPE token; ``bpe:aligned`` — several tokens, and every token
  boundary inside the word is a morph boundary; ``bpe:crossing`` — some token boundary falls inside
  a morph. The BPE is the suite's ``bpe`` encoder's tokenizer (the same boundaries for every
  encoder, so the buckets hold the same words for all of them), else a byte-level BPE of
  ``bpe_vocab`` tokens trained here with the ``tokenizers`` library on the training documents.
* ``seen:form`` — the lowercase surface form occurs in the training documents; ``seen:stem`` —
  not the form, but its stem (its longest morph) is the stem of one of the ``max_types`` most
  frequent training word types; ``seen:none`` — neither.
* ``morphs:1`` … ``morphs:4+`` — number of morphs.

Morphs come from a Morfessor Baseline model per language, trained (offline, seconds) on the
``max_types`` most frequent word types of the training documents of that language when it has at
least ``min_types`` types, else on an even sample of the word forms its Hunspell dictionary
generates (found in /usr/share/hunspell or the tokbench cache). A language with neither gets ``<family>:no-segmenter``
buckets for the morph-based families.
"""

from __future__ import annotations

import bisect
import hashlib
import re
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import regex

from harness.analyses.base import Analysis, BucketRow
from harness.analyses.registry import register
from perturbations.morphology import (
    WORD_RE,
    MorfessorSegmenter,
    Segmenter,
    find_hunspell,
    hunspell_paradigms,
    hunspell_stems,
    stem_of,
)
from sources.base import Document
from sources.script import char_script

# Dictionary fallback: Morfessor on at most this many generated forms of at most this length
# (long compounds make it slow; for de_DE this sample is 2564 forms, trained in 12 s on the 2-core
# VM while other jobs shared it).
HUNSPELL_MAX_TYPES = 3000
HUNSPELL_MAX_LEN = 14
NO_SPACE_SCRIPTS = frozenset({"Hani", "Hira", "Kana", "Thai", "Laoo", "Khmr", "Mymr", "Tibt"})
FAMILIES = ("bpe", "seen", "morphs")
WORD_CACHE_BYTES = 1 << 30  # word tables kept for reuse across encoders (about 34 bytes a word)
WORD_MEMO_ENTRIES = 2_000_000  # (language, word, BPE cuts) -> buckets, memoised


def _utf8_len(ch: str) -> int:
    """Bytes of one character in ``scored`` (a lone surrogate from surrogateescape is 1 byte)."""
    o = ord(ch)
    if o < 0x80 or 0xDC80 <= o <= 0xDCFF:
        return 1
    return 2 if o < 0x800 else 3 if o < 0x10000 else 4


def _spaced_words(text: str) -> Iterator[regex.Match[str]]:
    """``WORD_RE`` matches of ``text``, without words of scripts written without spaces."""
    return (m for m in WORD_RE.finditer(text) if char_script(m.group()[0]) not in NO_SPACE_SCRIPTS)


@dataclass(frozen=True)
class _WordArrays:
    """``word_table`` of one text as arrays: start/end (words,) byte offsets; each (word, bucket)
    pair as pair_word/pair_bucket (pairs,) indices into the words and into ``names`` (sorted)."""

    start: np.ndarray
    end: np.ndarray
    pair_word: np.ndarray
    pair_bucket: np.ndarray
    names: list[str]

    @property
    def nbytes(self) -> int:
        return self.start.nbytes + self.end.nbytes + self.pair_word.nbytes + self.pair_bucket.nbytes


def word_buckets(word: str, morphs: Sequence[str] | None, bpe_cuts: Sequence[int] | None,
                 seen_forms: set[str] | frozenset[str], seen_stems: set[str] | frozenset[str] | None,
                 families: Sequence[str] = FAMILIES) -> list[str]:
    """Buckets of one word (see the module docstring).

    word: the surface form; morphs: its lowercase morphs (concatenating to ``word.lower()``) or
    None without a segmenter; bpe_cuts: BPE token boundaries strictly inside the word, in bytes
    from the word's first byte, or None without a tokenizer; seen_forms: lowercase training word
    types; seen_stems: stems of training types (None without a segmenter)."""
    low = word.lower()
    out = []
    for fam in families:
        if fam == "bpe":
            if bpe_cuts is None:
                continue
            if morphs is None:
                out.append("bpe:no-segmenter")
            elif not bpe_cuts:
                out.append("bpe:single")
            else:
                pos, morph_cuts = 0, set()
                for m in morphs[:-1]:
                    pos += len(m.encode("utf-8"))
                    morph_cuts.add(pos)
                out.append("bpe:aligned" if set(bpe_cuts) <= morph_cuts else "bpe:crossing")
        elif fam == "seen":
            if low in seen_forms:
                out.append("seen:form")
            elif morphs is None or seen_stems is None:
                out.append("seen:no-segmenter")
            else:
                out.append("seen:stem" if stem_of(morphs) in seen_stems else "seen:none")
        elif fam == "morphs":
            out.append("morphs:no-segmenter" if morphs is None
                       else f"morphs:{len(morphs)}" if len(morphs) < 4 else "morphs:4+")
        else:
            raise ValueError(f"morphology analysis: unknown family {fam!r} (known: {FAMILIES})")
    return out


class _OwnBpe:
    """Byte-level BPE trained with the ``tokenizers`` library, exposing the suite tokenizer's
    ``encode_with_offsets(bytes) -> (ids, [(start, end) byte spans])``."""

    def __init__(self, texts: Sequence[str], vocab_size: int) -> None:
        from tokenizers import Tokenizer, models, pre_tokenizers, trainers

        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
        tok.train_from_iterator(texts, trainer)
        self.tok = tok

    def encode_with_offsets(self, data: bytes) -> tuple[list[int], list[tuple[int, int]]]:
        # The byte-level pre-tokenizer maps each byte to one character, so a token's byte length
        # is its string length. Invalid UTF-8 bytes (lone surrogates after surrogateescape) cannot
        # be given to `tokenizers`: each becomes a one-byte span of its own (id -1).
        text = data.decode("utf-8", errors="surrogateescape")
        ids: list[int] = []
        spans: list[tuple[int, int]] = []
        pos = 0
        for part in _SURROGATES.split(text):
            if not part:
                continue
            if _SURROGATES.fullmatch(part):
                for _ in part:
                    ids.append(-1)
                    spans.append((pos, pos + 1))
                    pos += 1
                continue
            enc = self.tok.encode(part)
            for i, t in zip(enc.ids, enc.tokens):
                ids.append(i)
                spans.append((pos, pos + len(t)))
                pos += len(t)
        return ids, spans


_SURROGATES = re.compile("([\udc80-\udcff]+)")


def _find_bpe(encoders: dict[str, Any], label: str | None) -> tuple[str, Any] | None:
    """(label, tokenizer) of the suite's BPE encoder: the encoder named ``label``, else the first
    (by label) registered as ``bpe``. The tokenizer is the object with ``encode_with_offsets``:
    the encoder's ``tokenizer`` attribute (encoders.bpe.BpeTokenizer) or the encoder itself."""
    for lab in sorted(encoders):
        enc = encoders[lab]
        if label is not None and lab != label:
            continue
        if label is None and getattr(enc, "registry_name", "") != "bpe" and not lab.startswith("bpe"):
            continue
        for obj in (getattr(enc, "tokenizer", None), enc):
            if obj is not None and callable(getattr(obj, "encode_with_offsets", None)):
                return lab, obj
    if label is not None:
        raise ValueError(f"morphology analysis: bpe_encoder {label!r} is not a trained encoder "
                         f"with a tokenizer (encoders: {sorted(encoders)})")
    return None


def _lang(doc: Document) -> str:
    return (doc.language or "und").split("-")[0].lower()


@register("morphology")
@dataclass(frozen=True, kw_only=True)
class MorphologyAnalysis(Analysis):
    """Per-word buckets: BPE vs morph boundaries, seen forms and stems, morph counts.

    families: which bucket families to report (``bpe``, ``seen``, ``morphs``).
    max_types: word types a Morfessor model trains on (5000 types of en/de/ru text: 23–30 s on
    the 2-core VM while other jobs shared it).
    min_types: a language with fewer training types uses its Hunspell dictionary's forms instead.
    bpe_encoder: label of the encoder whose tokenizer defines BPE boundaries (None = the first
    ``bpe`` encoder of the suite; without one, a BPE of ``bpe_vocab`` tokens is trained here on at
    most ``bpe_train_bytes`` of training text). seed: Morfessor's shuffling seed."""

    families: tuple[str, ...] = FAMILIES
    max_types: int = 5000
    min_types: int = 500
    bpe_encoder: str | None = None
    bpe_vocab: int = 4096
    bpe_train_bytes: int = 5_000_000
    seed: int = 0

    if TYPE_CHECKING:
        _state: dict[str, Any]

    def __post_init__(self) -> None:
        # Fitted state (segmenters, tokenizer, training vocabulary) is not a config field: fields
        # are the YAML parameters and go to run.json.
        object.__setattr__(self, "_state", {})
        bad = [f for f in self.families if f not in FAMILIES]
        if bad:
            raise ValueError(f"morphology analysis: unknown families {bad} (known: {list(FAMILIES)})")

    # -- fit -------------------------------------------------------------------------------
    def fit(self, train_docs: Sequence[Document], encoders: dict[str, Any]) -> None:
        by_lang: dict[str, Counter[str]] = defaultdict(Counter)
        texts = []
        for d in train_docs:
            text = d.data.decode("utf-8", errors="replace")
            texts.append(text)
            counts = by_lang[_lang(d)]
            counts.update(m.group().lower() for m in _spaced_words(text))
        total: Counter[str] = Counter()
        for c in by_lang.values():
            total.update(c)
        st = self._state
        # The harness fits once per seed on the same training part: keep the (slow) segmenters
        # when the vocabulary is unchanged.
        vocab_key = hashlib.sha1(repr(sorted((k, sorted(c.items())) for k, c in by_lang.items()))
                                 .encode("utf-8", "surrogateescape")).hexdigest()
        if st.get("vocab_key") != vocab_key:
            st["segmenters"] = {}
            st["seen_stems"] = {}
        st["vocab_key"] = vocab_key
        st["seen_forms"] = frozenset(total)
        st["top_types"] = sorted(total, key=lambda w: (-total[w], w))[: self.max_types]
        st["by_lang"] = dict(by_lang)
        st["arrays"], st["arrays_bytes"], st["word_memo"] = {}, 0, {}  # words of the previous fit
        st["bpe"] = None
        if "bpe" in self.families:
            found = _find_bpe(encoders, self.bpe_encoder)
            if found is not None:
                st["bpe_source"], st["bpe"] = found
            else:
                sample, size = [], 0
                for t in texts:
                    if size >= self.bpe_train_bytes:
                        break
                    sample.append(t)
                    size += len(t.encode("utf-8"))
                st["bpe"] = _OwnBpe(sample, self.bpe_vocab)
                st["bpe_source"] = f"tokenizers-bpe-{self.bpe_vocab}"

    def fit_encoders(self, labels: Sequence[tuple[str, str]]) -> list[str]:
        """The BPE encoder ``fit`` would take its boundaries from (``_find_bpe``'s choice)."""
        if "bpe" not in self.families:
            return []
        for lab, name in sorted(labels):
            if (lab == self.bpe_encoder) if self.bpe_encoder is not None else (name == "bpe" or lab.startswith("bpe")):
                return [lab]
        return []

    def _fit_fingerprint(self) -> str:
        """What the word tables depend on besides the text: this config (seed, sizes, families), the
        training vocabulary and the BPE boundaries' merges."""
        st = self._state
        bpe = st.get("bpe")
        if bpe is None:
            tok = None
        elif callable(getattr(bpe, "state", None)):  # encoders.bpe.BpeTokenizer
            tok = repr(sorted(bpe.state().items(), key=lambda kv: kv[0]))
        elif isinstance(bpe, _OwnBpe):
            tok = bpe.tok.to_str()
        else:
            return ""  # a tokenizer of unknown make: never handed over
        return hashlib.sha256(repr((repr(self), st.get("vocab_key"), st.get("bpe_source"), tok))
                              .encode("utf-8", "surrogateescape")).hexdigest()

    def export_prepared(self) -> Any:
        fp = self._fit_fingerprint()
        if not fp or not self._state.get("arrays"):
            return None
        return {"fingerprint": fp, "arrays": self._state["arrays"]}

    def adopt_prepared(self, prepared: Any) -> bool:
        """The word tables of a process that fitted this analysis on the same vocabulary, seed and
        BPE merges (the same tables: they depend on the text, the segmenters and the merges
        only); the segmenters are trained here as before when first used."""
        if not prepared or prepared.get("fingerprint") != self._fit_fingerprint() or not prepared["fingerprint"]:
            return False
        for key, arr in prepared["arrays"].items():
            if key not in self._state.setdefault("arrays", {}):
                self._keep(key, arr)
        return True

    def set_segmenter(self, lang: str, segmenter: Segmenter | None) -> None:
        """Use ``segmenter`` for documents of ``lang`` (tests; or a custom segmenter)."""
        self._state.setdefault("segmenters", {})[lang] = segmenter
        self._state.setdefault("seen_stems", {}).pop(lang, None)
        self._state["arrays"], self._state["arrays_bytes"], self._state["word_memo"] = {}, 0, {}

    def segmenter(self, lang: str) -> Segmenter | None:
        """The language's segmenter, trained on first use (see the class docstring)."""
        segs = self._state.setdefault("segmenters", {})
        if lang not in segs:
            counts = self._state.get("by_lang", {}).get(lang, Counter())
            seg: Segmenter | None = None
            if len(counts) >= self.min_types:
                seg = MorfessorSegmenter.train(counts.elements(), self.max_types, self.seed)
            else:
                dic = find_hunspell(lang) if lang != "und" else None
                if dic is not None:
                    seg = MorfessorSegmenter.train(self._hunspell_sample(dic), self.max_types,
                                                   self.seed)
            segs[lang] = seg
        return segs[lang]

    def _hunspell_sample(self, dic: Path) -> list[str]:
        """Word forms for Morfessor from a Hunspell dictionary: every form of an even sample of
        its paradigms (every k-th stem), so Morfessor sees each sampled stem with its affixes;
        forms longer than ``HUNSPELL_MAX_LEN`` letters are left out (long compounds make it slow
        and teach little)."""
        _, paradigms = hunspell_paradigms(dic)
        n = min(self.max_types, HUNSPELL_MAX_TYPES)
        if not paradigms:
            stems = sorted(s.lower() for s in hunspell_stems(dic) if len(s) <= HUNSPELL_MAX_LEN)
            return stems[:: max(1, len(stems) // n)][:n]
        mean = sum(len(p) for p in paradigms) / len(paradigms)
        step = max(1, int(len(paradigms) * mean / n))
        out: list[str] = []
        for p in paradigms[::step]:
            out.extend(f for f in p if len(f) <= HUNSPELL_MAX_LEN)
            if len(out) >= n:
                break
        return out[:n]

    def _seen_stems(self, lang: str, seg: Segmenter) -> frozenset[str]:
        stems = self._state.setdefault("seen_stems", {})
        if lang not in stems:
            stems[lang] = frozenset(stem_of(seg.segment(w)) for w in self._state.get("top_types", ()))
        return stems[lang]

    def describe(self) -> dict[str, Any]:
        """Facts for run.json: which BPE defined the boundaries, segmenters per language."""
        st = self._state
        return {"bpe_source": st.get("bpe_source"),
                "segmenters": {k: type(v).__name__ if v else None
                               for k, v in st.get("segmenters", {}).items()}}

    # -- rows ------------------------------------------------------------------------------
    def word_table(self, lang: str, scored: bytes) -> list[tuple[int, int, tuple[str, ...]]]:
        """(start byte, end byte, buckets) of every word of ``scored``. It depends on the text
        only, not on the encoder (``word_arrays`` caches it in a compact form)."""
        st = self._state
        seg = self.segmenter(lang)
        seen_stems = self._seen_stems(lang, seg) if seg is not None else None
        seen_forms = st.get("seen_forms", frozenset())
        bpe = st.get("bpe")
        starts: list[int] | None = None
        if bpe is not None and "bpe" in self.families:
            _, spans = bpe.encode_with_offsets(scored)
            starts = sorted({s for s, _ in spans})
        text = scored.decode("utf-8", errors="surrogateescape")
        byte_at = np.concatenate([[0], np.cumsum([_utf8_len(c) for c in text])]).astype(np.int64)
        # A word's buckets depend only on (language, word, its BPE cuts): memoised, since words
        # repeat across documents and perturbations (segmenting is most of the cost).
        memo: dict[tuple[str, str, tuple[int, ...] | None], tuple[str, ...]] = st.setdefault("word_memo", {})
        table = []
        for m in _spaced_words(text):
            w = m.group()
            bs, be = int(byte_at[m.start()]), int(byte_at[m.end()])
            cuts = None
            if starts is not None:
                lo, hi = bisect.bisect_right(starts, bs), bisect.bisect_left(starts, be)
                cuts = tuple(c - bs for c in starts[lo:hi])
            key = (lang, w, cuts)
            buckets = memo.get(key)
            if buckets is None:
                low = w.lower()
                morphs = None
                if seg is not None:
                    morphs = seg.segment(low) if len(low.encode("utf-8", "surrogateescape")) == be - bs else [low]
                buckets = tuple(word_buckets(w, morphs, cuts, seen_forms, seen_stems, self.families))
                if len(memo) < WORD_MEMO_ENTRIES:
                    memo[key] = buckets
            table.append((bs, be, buckets))
        return table

    def word_arrays(self, lang: str, scored: bytes) -> _WordArrays:
        """``word_table`` as arrays, cached per text: the harness scores the same text once per
        encoder (and clean_target targets once per perturbation). The cache is bounded by its
        size; once full it keeps what it holds and adds nothing (cells come in the same order for
        every encoder, so evicting the oldest would miss every time)."""
        cache: dict[tuple[str, bytes], _WordArrays] = self._state.setdefault("arrays", {})
        key = (lang, hashlib.sha1(scored).digest())
        hit = cache.get(key)
        if hit is not None:
            return hit
        arr = self._arrays(lang, scored)
        self._keep(key, arr)
        return arr

    def _keep(self, key: tuple[str, bytes], arr: _WordArrays) -> None:
        """Cache ``arr`` if the cache has room (see ``word_arrays``)."""
        used = self._state.get("arrays_bytes", 0)
        if used + arr.nbytes <= WORD_CACHE_BYTES:
            self._state.setdefault("arrays", {})[key] = arr
            self._state["arrays_bytes"] = used + arr.nbytes

    def _arrays(self, lang: str, scored: bytes) -> _WordArrays:
        """``word_table`` of ``scored`` as ``_WordArrays`` (not cached)."""
        table = self.word_table(lang, scored)
        names = sorted({b for _, _, bs in table for b in bs})
        col = {b: i for i, b in enumerate(names)}
        return _WordArrays(
            start=np.array([t[0] for t in table], dtype=np.int64),
            end=np.array([t[1] for t in table], dtype=np.int64),
            pair_word=np.array([i for i, t in enumerate(table) for _ in t[2]], dtype=np.int32),
            pair_bucket=np.array([col[b] for t in table for b in t[2]], dtype=np.int16),
            names=names)

    def prepare(self, spans: Sequence[tuple[Document, bytes]], processes: int | None = None, chunk: int = 64) -> None:
        """Word tables of every scored text not cached yet, computed in forked CPU processes
        (``harness.data.batchscore.perturb_many``; Morfessor segmentation is pure Python) while the
        cache has room. Segmenters are trained here first, so the processes share them. Tables
        depend only on the text, so where they are computed never changes a number."""
        from harness.data.batchscore import perturb_many

        cache: dict[tuple[str, bytes], _WordArrays] = self._state.setdefault("arrays", {})
        todo: dict[tuple[str, bytes], bytes] = {}
        for doc, scored in spans:
            key = (_lang(doc), hashlib.sha1(scored).digest())
            if key not in cache:
                todo.setdefault(key, scored)
        if not todo:
            return
        for lang in sorted({k[0] for k in todo}):
            seg = self.segmenter(lang)
            if seg is not None:
                self._seen_stems(lang, seg)
        keys = list(todo)
        chunks = [keys[i : i + chunk] for i in range(0, len(keys), chunk)]  # texts per task
        done = perturb_many(chunks, lambda ks: [self._arrays(k[0], todo[k]) for k in ks], processes,  # type: ignore[arg-type,return-value]
                            stage="morphology word tables")
        for ks, arrs in zip(chunks, done):
            for k, arr in zip(ks, arrs):
                self._keep(k, arr)  # type: ignore[arg-type]

    def _word_nll(self, doc: Document, scored: bytes, byte_nll: np.ndarray) -> tuple[_WordArrays, np.ndarray]:
        """The span's word arrays and each word's NLL, (words,) float64 nats: the difference of
        the span's own running sum at the word's ends."""
        if len(byte_nll) != len(scored):
            raise ValueError(f"morphology analysis: doc {doc.id!r}: {len(byte_nll)} NLL values "
                             f"for {len(scored)} scored bytes")
        wa = self.word_arrays(_lang(doc), scored)
        if not wa.names:
            return wa, np.zeros(0)
        csum = np.concatenate([[0.0], np.cumsum(np.asarray(byte_nll, dtype=np.float64))])
        return wa, csum[wa.end] - csum[wa.start]

    def cell_buckets(self, spans: Sequence[tuple[Document, bytes, np.ndarray]]) -> dict[str, tuple[int, int, float]]:
        """``Analysis.cell_buckets`` in a few array operations per cell instead of ``rows`` per
        document (252,000 calls a standard seed, 30 s of a 2-core VM's 50 s of cell rows;
        BENCHMARKS.md), with the same numbers to the last bit: one ``bincount`` over
        (document, bucket) bins adds each bin's weights in word order, as ``rows``' per-document
        ``bincount`` does, and the cell's sum over documents is a running sum down the documents
        (``cumsum``, sequential), as adding their rows one after another is."""
        parts = [self._word_nll(doc, scored, nll) for doc, scored, nll in spans]
        parts = [(wa, wn) for wa, wn in parts if wa.names]
        if not parts:
            return {}
        names = sorted({n for wa, _ in parts for n in wa.names})
        col = {n: i for i, n in enumerate(names)}
        k = len(names)
        bins, w_bytes, w_nll = [], [], []
        for d, (wa, wn) in enumerate(parts):
            glob = np.array([col[n] for n in wa.names], dtype=np.int64)
            bins.append(d * k + glob[wa.pair_bucket])
            w_bytes.append((wa.end - wa.start)[wa.pair_word])
            w_nll.append(wn[wa.pair_word])
        all_bins = np.concatenate(bins)
        size = len(parts) * k
        n_words = np.bincount(all_bins, minlength=size).reshape(len(parts), k).sum(axis=0)
        n_bytes = np.bincount(all_bins, weights=np.concatenate(w_bytes), minlength=size).reshape(len(parts), k)
        nll = np.bincount(all_bins, weights=np.concatenate(w_nll), minlength=size).reshape(len(parts), k)
        # a document without words in a bucket adds 0 words, 0 bytes and +0.0 nats: no change
        nll_total = np.cumsum(nll, axis=0)[-1]
        bytes_total = n_bytes.astype(np.int64).sum(axis=0)
        return {b: (int(n_words[i]), int(bytes_total[i]), float(nll_total[i])) for i, b in enumerate(names) if n_words[i]}

    def rows(self, doc: Document, scored: bytes, byte_nll: np.ndarray) -> list[BucketRow]:
        wa, word_nll = self._word_nll(doc, scored, byte_nll)  # (words,) nats
        if not wa.names:
            return []
        k = len(wa.names)
        # bincount adds its weights in order, one bin at a time: the same sums, to the last bit,
        # as adding each word's NLL to its buckets in a loop
        n_words = np.bincount(wa.pair_bucket, minlength=k)
        n_bytes = np.bincount(wa.pair_bucket, weights=(wa.end - wa.start)[wa.pair_word], minlength=k)
        nll = np.bincount(wa.pair_bucket, weights=word_nll[wa.pair_word], minlength=k)
        return [BucketRow(bucket=b, n_words=int(n_words[i]), n_bytes=int(n_bytes[i]), nll_nats=float(nll[i]))
                for i, b in enumerate(wa.names) if n_words[i]]
