"""An eval set as a run scores it (decoded texts, scripts, language), the clean cell's
perturbation, and the lossless bytes <-> str conversion every cell uses."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from harness.config.suite import PerturbationSpec
from harness.data.load import DataPart
from sources.base import Document
from sources.script import detect_script

# the clean cell of every eval set: the identity perturbation

CLEAN = PerturbationSpec(name="identity", id="clean", severity=0.0, params={})


def decode(data: bytes) -> str:
    """Bytes → str losslessly: invalid UTF-8 bytes become lone surrogates (surrogateescape)."""
    return data.decode("utf-8", "surrogateescape")


def encode(text: str) -> bytes:
    """str → bytes, inverting ``decode``; surrogates a perturbation made itself pass through."""
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def dominant_script(docs: list[Document], scripts: list[str]) -> str | None:
    """The dataset's script: the byte-weighted majority of its documents' scripts if it covers
    >= 80 %, else Mixd."""
    weights: Counter[str] = Counter()
    for d, script in zip(docs, scripts):
        weights[script] += len(d.data)
    if not weights:
        return None
    script, w = weights.most_common(1)[0]
    return script if w >= 0.8 * sum(weights.values()) else "Mixd"


def dataset_language(docs: list[Document], default: str | None) -> str:
    langs = {d.language for d in docs}
    if len(langs) == 1:
        return next(iter(langs)) or default or ""
    return "mul"


@dataclass(frozen=True)
class EvalSet:
    """One eval set, prepared once per run: decoded texts, each document's script, and the set's
    language and dominant script (columns of every row)."""

    part: DataPart
    texts: list[str]
    scripts: list[str]
    language: str
    script: str | None

    @classmethod
    def of(cls, part: DataPart) -> EvalSet:
        texts = [decode(d.data) for d in part.docs]
        scripts = [d.script or detect_script(t) for d, t in zip(part.docs, texts)]
        return cls(part, texts, scripts, dataset_language(part.docs, part.language),
                   dominant_script(part.docs, scripts))
