"""Properties every registered perturbation must have (the registry is iterated, so perturbations
added later are covered too): severity 0 is the identity, the same (seed, document) gives the same
text in any order and in other processes, different seeds differ, and hard or huge inputs never
raise. The checks themselves live in ``perturbations.contract`` so plugin authors can run them."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from harness.data.perturb import apply
from harness.infra.plugins import available, resolve
from perturbations import contract

NAMES = sorted(available("perturbation"))
DOCS = {f"doc{i}": text for i, text in enumerate([contract.RICH_TEXT, *contract.HARD_TEXTS.values()])}
SEED = 1234


def _perturb_docs(name: str, severity: float, doc_ids: list[str]) -> dict[str, str]:
    """Run one perturbation over the docs through the harness's apply (per-document rng)."""
    p = contract.build(resolve("perturbation", name), severity)
    params = {"severity": severity}
    return {d: apply(p, DOCS[d], SEED, name, params, d) for d in doc_ids}


def _worker(jobs: list[tuple[str, float, list[str]]]) -> list[dict[str, str]]:
    return [_perturb_docs(*job) for job in jobs]


def test_every_builtin_is_registered() -> None:
    expected = {
        "identity", "typo.keyboard", "typo.random", "typo.ocr", "typo.spelling", "unicode.nfd",
        "unicode.homoglyph", "unicode.strip_diacritics", "unicode.styling", "case.upper",
        "case.random", "space.random", "repeat.chars", "antspeak", "keyboard.layout", "translit",
    }  # fmt: skip
    assert expected <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_severity_zero_is_identity(name: str) -> None:
    assert contract.check_zero_is_identity(resolve("perturbation", name)) == []


@pytest.mark.parametrize("name", NAMES)
def test_hard_inputs_never_raise_and_stay_utf8(name: str) -> None:
    assert contract.check_hard_inputs(resolve("perturbation", name)) == []


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_output_and_seeds_differ(name: str) -> None:
    cls = resolve("perturbation", name)
    assert contract.check_determinism(cls) == []
    assert contract.check_seeds_differ(cls) == []


@pytest.mark.parametrize("name", NAMES)
def test_output_independent_of_document_order(name: str) -> None:
    ids = list(DOCS)
    forward = _perturb_docs(name, 0.3, ids)
    backward = _perturb_docs(name, 0.3, ids[::-1])
    assert forward == backward


def test_same_output_from_other_processes() -> None:
    """Two spawned processes (fresh interpreters, other hash salts) reproduce the parent's texts."""
    ids = list(DOCS)
    jobs = [(name, 0.3, ids if i % 2 else ids[::-1]) for i, name in enumerate(NAMES)]
    here = _worker(jobs)
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        there = pool.map(_worker, [jobs[0::2], jobs[1::2]])
    merged = [None] * len(jobs)
    merged[0::2], merged[1::2] = there[0], there[1]
    for name, a, b in zip(NAMES, here, merged):
        assert a == b, name


@pytest.mark.parametrize("name", NAMES)
def test_one_megabyte_document(name: str) -> None:
    text = (contract.RICH_TEXT + "\n") * (1_000_000 // (len(contract.RICH_TEXT.encode()) + 1) + 1)
    p = contract.build(resolve("perturbation", name), 0.1)
    t0 = time.perf_counter()
    out = apply(p, text, SEED, name, {"severity": 0.1}, "big")
    assert isinstance(out, str)
    out.encode("utf-8")
    # Not a speed test (benchmarks/bench_perturbations.py is): just no pathological blow-up.
    assert time.perf_counter() - t0 < 30


@pytest.mark.parametrize("name", NAMES)
def test_arbitrary_unicode_never_raises(name: str) -> None:
    """Fuzz: any text (all planes, controls, marks), any severity: a str that encodes to UTF-8,
    and severity 0 gives the text back."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    cls = resolve("perturbation", name)
    instances = {s: contract.build(cls, s) for s in (0.0, 0.2, 1.0)}

    @settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(text=st.text(max_size=80), severity=st.sampled_from([0.0, 0.2, 1.0]), seed=st.integers(0, 2**32))
    def check(text: str, severity: float, seed: int) -> None:
        import random

        out = instances[severity].perturb(text, random.Random(seed))
        assert isinstance(out, str)
        out.encode("utf-8")
        if severity == 0.0:
            assert out == text

    check()
