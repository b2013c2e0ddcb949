"""Data: load sources, split them deterministically, fingerprint the parts, cut windows.

Split: a document goes to valid / test / train by a stable hash (sha256) of its id, so adding or
removing other documents never moves it. ``data.train`` uses the train part; an eval entry whose
source equals the training source uses its test part; any other eval source is used whole.

Windows: documents are cut into windows of at most ``context_bytes`` bytes, preferring a cut just
before a whitespace byte that follows a non-whitespace byte (a GPT-2-style pre-token boundary, so
BPE sees whole words), else at a UTF-8 character boundary. Every encoder gets the same windows.
"""

from __future__ import annotations

import functools
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from encoders.base import config_to_dict
from sources.base import Document, SourceContext
from sources.fetch import default_cache_dir

_WS = frozenset(b" \t\n\r\x0b\x0c")
_CJK_PUNCT = frozenset(c.encode() for c in "。、，．！？：；」』）】〉》")


def stable_unit(*parts: object) -> float:
    """A number in [0, 1) from sha256 of the parts — never Python's salted ``hash()``."""
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def split_of(doc_id: str, valid_fraction: float, test_fraction: float) -> str:
    """'train' | 'valid' | 'test' for a document id (stable across runs and machines)."""
    u = stable_unit("split", doc_id)
    if u < test_fraction:
        return "test"
    if u < test_fraction + valid_fraction:
        return "valid"
    return "train"


def fingerprint(docs: Sequence[Document]) -> str:
    """sha256 over (id, bytes) of the documents in order: identifies a data part in run.json and
    in the model cache key."""
    h = hashlib.sha256()
    for d in docs:
        h.update(d.id.encode("utf-8", "surrogatepass"))
        h.update(b"\0")
        h.update(hashlib.sha256(d.data).digest())
    return h.hexdigest()


@dataclass
class DataPart:
    """Documents of one source part, with their fingerprint and facts for run.json."""

    name: str
    part: str
    docs: list[Document]
    language: str | None = None
    provenance: dict[str, Any] = field(default_factory=dict)

    @property
    def n_bytes(self) -> int:
        return sum(len(d.data) for d in self.docs)

    @functools.cached_property
    def fingerprint(self) -> str:
        """``fingerprint(docs)``, hashed once: it keys every model and cell of the run."""
        return fingerprint(self.docs)

    def summary(self) -> dict[str, Any]:
        return {
            "part": self.part,
            "n_docs": len(self.docs),
            "n_bytes": self.n_bytes,
            "fingerprint": self.fingerprint,
            "language": self.language,
            "provenance": self.provenance,
        }


def source_key(spec: Any) -> str:
    """Identity of a suite source entry (source name, its config, language): equal keys read
    the same documents, so they are loaded once, and an eval entry equal to data.train is
    evaluated on the training source's test part."""
    blob = json.dumps({"source": spec.source, "config": config_to_dict(spec.config), "lang": spec.language},
                      sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def prepare_sources(suite: Any, ctx: SourceContext) -> None:
    """Let every source of a suite fetch/build what it needs (idempotent; a no-op for local files).

    Debian packages of all sources are fetched in one apt call first; a suite that uses the
    morphology perturbations or analysis also gets the Hunspell dictionaries of its languages
    (optional: without them affix swaps use forms attested in the text, so a failure only warns)."""
    specs = list({source_key(s): s for s in (suite.data.train, *suite.data.eval)}.values())
    packages = [p for s in specs if hasattr(s.config, "packages") for p in s.config.packages()]
    morph = any(p.name.startswith("morph.") for p in suite.perturbations) or any(
        a.name == "morphology" for a in suite.analyses)
    if packages or morph:
        from sources.debian import hunspell_packages
        from sources.fetch import fetch_packages

        if packages:
            fetch_packages(dict.fromkeys(packages), ctx.cache_dir, source="data prepare", log=ctx.log)
        langs = [s.language or getattr(s.config, "language", None)
                 or (s.config.default_language() if hasattr(s.config, "default_language") else None) for s in specs]
        wanted = hunspell_packages(lang for lang in langs if lang) if morph else []
        if wanted:
            try:
                fetch_packages(wanted, ctx.cache_dir, source="hunspell dictionaries", log=ctx.log)
            except ValueError as e:
                ctx.log(f"[data] warning: {e}")
    for spec in specs:
        spec.config.prepare(ctx)


def load_source(spec: Any, ctx: SourceContext) -> tuple[list[Document], dict[str, Any]]:
    """All documents of a suite source entry (``SourceSpec``), with its provenance; the source
    must be prepared (``prepare_sources``).

    Documents without a language get the entry's ``language``; duplicate ids are an error (they
    would collide in the split and in perturbation seeds)."""
    src = spec.config
    docs: list[Document] = []
    seen: set[str] = set()
    for d in src.documents(ctx):
        if d.id in seen:
            raise ValueError(f"source '{spec.source}': duplicate document id '{d.id}'")
        seen.add(d.id)
        lang = d.language or spec.language
        if lang != d.language:
            d = Document(id=d.id, data=d.data, language=lang, script=d.script, meta=d.meta)
        docs.append(d)
    if not docs:
        raise ValueError(f"source '{spec.source}'{' (' + spec.name + ')' if spec.name else ''}: no documents")
    return docs, src.provenance(ctx)


def select_part(docs: list[Document], part: str, valid_fraction: float, test_fraction: float) -> list[Document]:
    if part == "all":
        return list(docs)
    return [d for d in docs if split_of(d.id, valid_fraction, test_fraction) == part]


# ---------------------------------------------------------------------------------------------
# Windows


def source_context(suite: Any, cache_dir: Path | None = None,
                   log: Callable[[str], None] = print) -> SourceContext:
    """The SourceContext of a suite: relative paths resolve from the suite file's directory."""
    return SourceContext(
        base_dir=Path(suite.path).resolve().parent if suite.path else Path.cwd(),
        cache_dir=cache_dir or default_cache_dir(),
        log=log,
    )


@dataclass
class LoadedData:
    """A suite's data, ready to train and score on.

    facts: run.json's ``data`` section (per part: size, fingerprint, provenance, dropped overlap).
    seconds: wall time spent loading (sources prepared included).
    """

    train: DataPart
    evals: list[DataPart]
    facts: dict[str, Any]
    seconds: float


def load_data(suite: Any, ctx: SourceContext, *, prepare: bool = True, limit: int | None = None,
              log: Callable[[str], None] = print) -> LoadedData:
    """Load the train part and every eval set of a suite.

    prepare: let sources fetch/build their data first (idempotent). limit: at most this many
    documents per eval set (``--limit``). Eval documents whose bytes also occur in the training
    part are dropped; eval sets are ordered by a stable hash of document ids. Raises ValueError
    (one line, naming the suite key) when a part comes out empty or training would repeat the
    train part more than 1000 times.
    """
    s = suite.data
    budget = suite.budget
    t0 = time.perf_counter()
    if prepare:
        prepare_sources(suite, ctx)
    cache: dict[str, tuple[list[Document], dict[str, Any]]] = {}
    facts: dict[str, Any] = {}

    def docs_of(spec: Any) -> tuple[list[Document], dict[str, Any]]:
        key = source_key(spec)
        if key not in cache:
            cache[key] = load_source(spec, ctx)
        return cache[key]

    all_train, prov = docs_of(s.train)
    train_docs = select_part(all_train, s.train.part or "train", s.valid_fraction, s.test_fraction)
    if not train_docs:
        raise ValueError(
            f"data.train: the train part of the source is empty ({len(all_train)} document(s) in all, "
            f"split by document id {1 - s.valid_fraction - s.test_fraction:.0%} train); cut files into more "
            "documents with `docs: paragraph` or `docs: line`, or set `part: all`")
    train = DataPart("train", s.train.part or "train", train_docs, s.train.language, prov)
    passes = budget.train_bytes / max(1, train.n_bytes)
    if passes > 1000:
        raise ValueError(
            f"data.train: the train part holds {train.n_bytes:,} bytes, so budget.train_bytes="
            f"{budget.train_bytes:,} would repeat it {passes:,.0f} times; add text or lower budget.train_bytes")
    n_dict = suite.baselines.dictionary_bytes if getattr(suite, "baselines", None) else 0
    if n_dict / max(1, train.n_bytes) > 1000:  # the compressors' dictionary is cut from the same stream
        raise ValueError(
            f"baselines.dictionary_bytes: the train part holds {train.n_bytes:,} bytes, so a dictionary of "
            f"{n_dict:,} bytes would repeat it {n_dict / max(1, train.n_bytes):,.0f} times; lower it or add text")
    if passes > 1:
        log(f"[data] note: the train part ({train.n_bytes:,} bytes) is repeated {passes:.1f} times "
            f"to reach budget.train_bytes={budget.train_bytes:,}")
    train_hashes = {hashlib.sha256(d.data).digest() for d in train_docs}
    evals = []
    for spec in s.eval:
        docs, prov = docs_of(spec)
        same = source_key(spec) == source_key(s.train)
        part = spec.part or ("test" if same else "all")
        chosen = select_part(docs, part, s.valid_fraction, s.test_fraction)
        chosen = [d for d in chosen if len(d.data) >= suite.eval.min_doc_bytes]
        # No evaluated document may also be a training document (same bytes).
        in_train = [hashlib.sha256(d.data).digest() in train_hashes for d in chosen]
        overlap = [d for d, t in zip(chosen, in_train) if t]
        chosen = [d for d, t in zip(chosen, in_train) if not t]
        chosen.sort(key=lambda d: stable_unit("eval", d.id))
        n_max = min(x for x in (suite.eval.max_docs, limit, 10**12) if x is not None)
        chosen = chosen[:n_max]
        if not chosen:
            raise ValueError(
                f"data.eval '{spec.name}': no documents left (part={part}: {len(docs)} document(s) in the source, "
                f"{len(overlap)} also in training, min_doc_bytes={suite.eval.min_doc_bytes}); give the eval "
                "set its own files, or cut them into more documents with `docs: paragraph` or `docs: line`")
        ep = DataPart(spec.name or spec.source, part, chosen, spec.language, prov)
        log(eval_set_line(ep.name, part, same, len(docs), len(overlap), len(chosen)))
        if overlap and not same:
            log(f"[data] warning: data.eval '{ep.name}': {len(overlap)} of its documents are "
                "training documents (dropped). Its entry differs from data.train (source, paths, "
                "docs, language …), so it is another source and is read whole (part: all); to "
                "evaluate on held-out text of the training source, give it data.train's keys "
                "(it then uses that source's test part)")
        evals.append(ep)
        facts[f"eval:{ep.name}"] = {**ep.summary(), "dropped_train_overlap": len(overlap)}
    facts["train"] = {**train.summary(), "source": s.train.source, "passes": passes}
    return LoadedData(train, evals, facts, time.perf_counter() - t0)


def eval_set_line(name: str, part: str, same: bool, n_source: int, n_dropped: int,
                  n_kept: int) -> str:
    """The line ``run`` and ``--dry-run`` print for an eval set: which part of which source it
    reads, and how many documents it drops as training documents."""
    whose = "the training source's" if same else "its own source's"
    return (f"[data] eval '{name}': part '{part}' of {whose} {n_source:,} document(s); "
            f"{n_dropped:,} dropped as training documents; {n_kept:,} scored")


def is_boundary(data: bytes, i: int) -> bool:
    """True if a cut before byte i keeps words whole: i == 0, i == len, data[i] is whitespace
    following a non-whitespace byte, or (for scripts written without spaces) byte i starts a
    character right after CJK full-width punctuation — a pre-token boundary for GPT-2-style
    tokenizers too, so BPE is not charged for a cut its tokenizer would never make."""
    if i <= 0 or i >= len(data):
        return True
    if data[i] in _WS:
        return data[i - 1] not in _WS
    return i >= 3 and data[i - 3 : i] in _CJK_PUNCT and (data[i] & 0xC0) != 0x80 and data[i : i + 3] not in _CJK_PUNCT


def char_boundary(data: bytes, i: int) -> int:
    """The largest UTF-8 character boundary <= i (continuation bytes 0b10xxxxxx are skipped,
    at most 3 back; invalid bytes count as their own characters)."""
    j = i
    while 0 < j < len(data) and (data[j] & 0xC0) == 0x80 and i - j < 3:
        j -= 1
    return j


def cut_before(data: bytes, limit: int, lo: int) -> int:
    """Best cut position in (lo, limit]: the last word boundary in the last half of the range,
    else the last UTF-8 character boundary. Always > lo so progress is guaranteed."""
    limit = min(limit, len(data))
    if limit >= len(data):
        return len(data)
    floor = lo + max(1, (limit - lo) // 2)
    for i in range(limit, floor - 1, -1):
        if is_boundary(data, i):
            return i
    j = char_boundary(data, limit)
    return j if j > lo else limit


def cut_after(data: bytes, pos: int, hi: int) -> int:
    """Smallest word boundary in [pos, hi), else the smallest char boundary >= pos, never past
    ``hi`` (the caller's scored span starts there, so context may shrink to nothing)."""
    for i in range(pos, hi):
        if is_boundary(data, i):
            return i
    j = pos
    while j < len(data) and (data[j] & 0xC0) == 0x80 and j - pos < 3:
        j += 1
    return min(j, hi)


@dataclass(frozen=True)
class Window:
    """A scoring window over one document: bytes [start, end) are fed to the model, bytes
    [score_start, end) are scored. ``score_from`` = score_start - start."""

    start: int
    score_start: int
    end: int

    @property
    def score_from(self) -> int:
        return self.score_start - self.start


def rolling_windows(data: bytes, context: int, stride: int) -> list[Window]:
    """Windows covering ``data`` so that every byte is scored exactly once.

    The first window scores from byte 0 with no context; each later window scores the next
    ``stride`` bytes (cut at a boundary) and takes as context up to ``context - scored`` bytes
    before them, starting at a boundary."""
    n = len(data)
    out: list[Window] = []
    if n == 0:
        return out
    end = cut_before(data, context, 0)
    out.append(Window(0, 0, end))
    while end < n:
        s = end
        e = cut_before(data, s + stride, s)
        start = cut_after(data, max(0, e - context), s)
        out.append(Window(start, s, e))
        end = e
    return out


def training_windows(docs: Sequence[Document], n_bytes: int, context: int, seed: int) -> Iterator[bytes]:
    """The training stream: documents shuffled by ``seed`` (re-shuffled each epoch), joined by a
    blank line, cut into windows of <= ``context`` bytes, exactly ``n_bytes`` bytes in total.

    Identical for every encoder with the same seed and data: this is what "trained identically"
    means at the data level."""
    if not docs:
        raise ValueError("training split is empty")
    emitted = 0
    epoch = 0
    buf = b""
    while emitted < n_bytes:
        order = sorted(docs, key=lambda d: stable_unit("order", seed, epoch, d.id))
        for d in order:
            buf += d.data + b"\n\n"
            pos = 0  # consume buf by offset: slicing off the head each window would be quadratic
            while len(buf) - pos >= context and emitted < n_bytes:
                view = buf[pos : pos + context + 1]
                cut = cut_before(view, min(context, n_bytes - emitted), 0)
                yield view[:cut]
                emitted += cut
                pos += cut
            buf = buf[pos:]
            if emitted >= n_bytes:
                return
        epoch += 1
        if epoch > 10_000:
            raise ValueError("training data too small for the byte budget")


def batched(items: Iterable[Any], size: int) -> Iterator[list[Any]]:
    """Consecutive lists of ``size`` items (the last may be shorter): training steps of windows."""
    it = iter(items)
    while chunk := list(islice(it, size)):
        yield chunk
