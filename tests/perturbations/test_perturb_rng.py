"""harness.data.perturb: the per-document rng (sha256 of seed | id | params | doc) and apply()."""

from __future__ import annotations

import hashlib
import random
import threading
from dataclasses import dataclass

import pytest

from harness.data.perturb import apply, rng_for
from perturbations import Perturbation
from perturbations.typo import KeyboardTypo


def test_rng_matches_the_documented_formula() -> None:
    key = '7|typo.keyboard|{"layout":null,"severity":0.1}|doc-1'
    expected = random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))
    got = rng_for(7, "typo.keyboard", {"severity": 0.1, "layout": None}, "doc-1")
    assert got.random() == expected.random()


def test_rng_ignores_key_order_and_changes_with_every_part() -> None:
    base = rng_for(1, "p", {"a": 1, "b": 2}, "d").random()
    assert rng_for(1, "p", {"b": 2, "a": 1}, "d").random() == base
    assert rng_for(2, "p", {"a": 1, "b": 2}, "d").random() != base
    assert rng_for(1, "q", {"a": 1, "b": 2}, "d").random() != base
    assert rng_for(1, "p", {"a": 1, "b": 3}, "d").random() != base
    assert rng_for(1, "p", {"a": 1, "b": 2}, "e").random() != base


def test_for_language_makes_a_variant_and_leaves_the_instance_alone() -> None:
    p = KeyboardTypo(severity=0.2)
    text = "йцукен фыва " * 20
    uk = p.for_language("uk")
    out = apply(uk, text, 0, "kb", {"severity": 0.2}, "d")
    assert out != text and p.lang is None and uk.lang == "uk"  # the shared instance is untouched
    assert p.for_language(None) is p and uk.for_language("uk") is uk
    assert apply(p, text, 0, "kb", {"severity": 0.2}, "d") == text  # en map: nothing to edit


def test_variants_share_what_fit_learned() -> None:
    from perturbations.morphology import Compound

    p = Compound(severity=0.5)
    p.fit(["the snow ball and the snowball, snow and ball, snow ball"] * 3)
    assert p.learned_state()  # fit stored a vocabulary
    de = p.for_language("de")
    assert de.lang == "de" and de.severity == 0.5
    assert all(de.__dict__[k] is v for k, v in p.learned_state().items())
    other = Compound(severity=0.9)
    other.share_fit(p)
    assert other.severity == 0.9 and all(other.__dict__[k] is v for k, v in p.learned_state().items())


def test_apply_is_thread_safe() -> None:
    p = KeyboardTypo(severity=0.1)
    texts = {f"d{i}": f"document number {i} with some words in it " * 30 for i in range(40)}
    want = {d: apply(p, t, 3, "kb", {"severity": 0.1}, d) for d, t in texts.items()}
    got: dict[str, str] = {}

    def work(ids: list[str]) -> None:
        for d in ids:
            got[d] = apply(p, texts[d], 3, "kb", {"severity": 0.1}, d)

    ids = list(texts)
    threads = [threading.Thread(target=work, args=(ids[i::4],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == want


def test_apply_rejects_non_str_output() -> None:
    @dataclass(kw_only=True)
    class Broken(Perturbation):
        def perturb(self, text: str, rng: random.Random) -> str:
            return text.encode()  # type: ignore[return-value]

    with pytest.raises(TypeError, match="returned bytes, expected str"):
        apply(Broken(severity=0.1), "x", 0, "b", {}, "d")
