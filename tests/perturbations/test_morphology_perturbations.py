"""morph.boundary_split / morph.compound / morph.affix_swap: the contract properties, what each
changes on hand-made text, and the Hunspell paradigms on a tiny dictionary written here."""

from __future__ import annotations

import random
from collections import OrderedDict
from pathlib import Path

import pytest

from perturbations import contract
from perturbations.morphology import (
    AffixSegmenter,
    AffixSwap,
    BoundarySplit,
    Compound,
    MorfessorSegmenter,
    find_hunspell,
    hunspell_paradigms,
    hunspell_stems,
    morph_cuts,
)
from perturbations.registry import REGISTRY

CLASSES = [BoundarySplit, Compound, AffixSwap]

AFF = """SET UTF-8
SFX S Y 1
SFX S   0     s          .

SFX D Y 2
SFX D   0     ed         [^e]
SFX D   0     d          e

SFX G Y 2
SFX G   0     ing        [^e]
SFX G   e     ing        e

PFX U Y 1
PFX U   0     un         .
"""
DIC = """4
walk/SDG
bake/DG
tie/D
happy/U
"""


@pytest.fixture
def dictionary(tmp_path: Path) -> Path:
    (tmp_path / "xx_XX.aff").write_text(AFF, encoding="utf-8")
    (tmp_path / "xx_XX.dic").write_text(DIC, encoding="utf-8")
    return tmp_path / "xx_XX.dic"


def test_registered_and_listed() -> None:
    import perturbations.registry as reg

    assert "perturbations.morphology" in reg.REGISTRY.modules
    assert REGISTRY["morph.boundary_split"] is BoundarySplit
    assert REGISTRY["morph.compound"] is Compound
    assert REGISTRY["morph.affix_swap"] is AffixSwap


@pytest.mark.parametrize("cls", CLASSES)
def test_contract(cls: type) -> None:
    """Severity 0 identity, hard inputs, determinism and different seeds (perturbations.contract)."""
    assert contract.check_all(cls) == []


@pytest.mark.parametrize("cls", CLASSES)
@pytest.mark.parametrize("lang", [None, "de", "ru", "tr", "zz"])
def test_unfitted_odd_unicode_never_raises(cls: type, lang: str | None) -> None:
    p = cls(severity=1.0, lang=lang)
    for text in contract.HARD_TEXTS.values():
        out = p.perturb(text, random.Random(0))
        out.encode("utf-8")
        assert p.perturb(text, random.Random(0)) == out


def test_state_is_not_a_parameter() -> None:
    """Only YAML parameters are dataclass fields: they seed the rng and go to run.json."""
    from dataclasses import fields

    assert [f.name for f in fields(BoundarySplit)] == ["severity", "lang", "max_types", "min_word_len", "separator"]
    assert [f.name for f in fields(Compound)] == ["severity", "lang", "mode", "split_with", "min_part_len"]
    assert [f.name for f in fields(AffixSwap)] == ["severity", "lang", "max_types", "min_word_len", "dictionary"]


# ------------------------------------------------------------------------------ segmenters
def test_affix_segmenter() -> None:
    seg = AffixSegmenter("en")
    assert seg.segment("preprocessing") == ["pre", "process", "ing"]
    assert seg.segment("process") == ["process"]  # no cut inside a doubled letter
    assert seg.segment("cat") == ["cat"]  # stems keep three letters
    assert AffixSegmenter("de").segment("verarbeitung") == ["ver", "arbeit", "ung"]
    assert morph_cuts("preprocessing", ["pre", "process", "ing"]) == [3, 10]


WORDS = [f"{s}{x}" for s in ("walk", "talk", "jump", "play", "kick") for x in ("", "s", "ed", "ing")]


def test_morfessor_segmenter_is_deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    words = WORDS
    a = MorfessorSegmenter.train(words, seed=1)
    monkeypatch.setattr(MorfessorSegmenter, "_trained", OrderedDict())  # train b afresh
    b = MorfessorSegmenter.train(list(reversed(words)), seed=1)
    assert a.model is not b.model
    assert [a.segment(w) for w in words] == [b.segment(w) for w in words]
    assert all("".join(a.segment(w)) == w for w in words)
    state = random.getstate()
    MorfessorSegmenter.train(words, seed=7)
    assert random.getstate() == state  # the global rng is restored


def test_morfessor_models_are_shared_by_equal_types_and_seed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The perturbations and the analysis train on the same text: one model per (types, seed).
    Types are the top ``max_types`` by count, so a word below the cut changes nothing."""
    calls: list[int] = []
    train = MorfessorSegmenter._train_model

    def counting(types: list[str], seed: int) -> object:
        calls.append(seed)
        return train(types, seed)

    monkeypatch.setattr(MorfessorSegmenter, "_trained", OrderedDict())
    monkeypatch.setattr(MorfessorSegmenter, "_train_model", staticmethod(counting))
    a = MorfessorSegmenter.train(WORDS * 2, max_types=20, seed=3)
    b = MorfessorSegmenter.train(list(reversed(WORDS * 2)) + ["zzz"], max_types=20, seed=3)  # "zzz": 21st
    assert b.model is a.model and calls == [3]
    assert b.cache is not a.cache  # each keeps its own segmentations
    c = MorfessorSegmenter.train(WORDS * 2, max_types=20, seed=4)  # another seed: another model
    d = MorfessorSegmenter.train(WORDS * 2 + ["zzz"] * 3, max_types=20, seed=3)  # "zzz" now in the top 20
    assert c.model is not a.model and d.model is not a.model and calls == [3, 4, 3]
    monkeypatch.setattr(MorfessorSegmenter, "TRAINED_KEPT", 2)
    MorfessorSegmenter.train(WORDS, max_types=5, seed=9)  # a third entry evicts the oldest
    assert len(MorfessorSegmenter._trained) == 2


# -------------------------------------------------------------------------- boundary_split
def test_boundary_split() -> None:
    text = "Preprocessing walked quickly; cat."
    p = BoundarySplit(severity=1.0, lang="en")
    out = p.perturb(text, random.Random(0))
    # every eligible word (>= 4 letters, >= 2 morphs) gets one separator at a morph boundary
    assert out.count("-") == 3 and out.endswith("; cat.")
    assert out.replace("-", "") == text
    assert out.split()[1] == "walk-ed" and out.split()[2] == "quick-ly;"
    assert out.split()[0] in ("Pre-processing", "Preprocess-ing")
    half = p.__class__(severity=0.34, lang="en").perturb(text, random.Random(0))
    assert half.count("-") == 1  # round(0.34 * 3) words
    spaced = BoundarySplit(severity=1.0, lang="en", separator=" ").perturb("walked", random.Random(0))
    assert spaced == "walk ed"


def test_boundary_split_uses_fitted_segmenter() -> None:
    stems = [a + b + c for a in "bdgkpt" for b in ("ra", "lo", "mi", "su", "ve") for c in "xzqw"]
    words = [s + x for s in stems for x in ("", "s", "ed", "ing")]  # 480 types
    p = BoundarySplit(severity=1.0)
    p.fit([" ".join(words)])
    assert isinstance(p.segmenter(), MorfessorSegmenter)
    out = p.perturb("braxing", random.Random(0))
    assert out.replace("-", "") == "braxing" and out.count("-") == 1


# -------------------------------------------------------------------------------- compound
def test_compound_split_and_join() -> None:
    p = Compound(severity=1.0, mode="split")
    p.fit(["the data and the base, data base"])
    assert p.perturb("A database here.", random.Random(0)) == "A data base here."
    j = Compound(severity=1.0, mode="join", lang="de")
    assert j.perturb("Das Haus Türen", random.Random(0)) == "Das Haustüren"  # "Das": 3 letters
    assert Compound(severity=1.0, mode="join").perturb("New York-City", random.Random(0)) in (
        "NewYork-City", "New YorkCity")  # overlapping joins: one of them
    assert Compound(severity=1.0, mode="join").perturb("to be or", random.Random(0)) == "to be or"


def test_compound_severity_is_fraction_of_sites() -> None:
    text = " ".join(["alpha beta"] * 10)  # 19 join sites; chosen ones may overlap and be skipped
    out = Compound(severity=0.5, mode="join").perturb(text, random.Random(3))
    joined = len(text.split()) - len(out.split())
    assert 5 <= joined <= 10


# ------------------------------------------------------------------------------ affix_swap
def test_dictionary_lookup_follows_the_cache(dictionary: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process that looked a language up under one $TOKBENCH_CACHE (a run's, with Hunspell
    fetched) answers for another as a fresh process would: AffixSwap's forms depend on it."""
    with_dic = tmp_path / "with"
    share = with_dic / "debian" / "hunspell-xx" / "root" / "usr" / "share" / "hunspell"
    share.mkdir(parents=True)
    for suffix in (".dic", ".aff"):
        (share / f"xx_XX{suffix}").write_bytes(dictionary.with_suffix(suffix).read_bytes())
    monkeypatch.setenv("TOKBENCH_CACHE", str(with_dic))
    assert find_hunspell("xx") == share / "xx_XX.dic"
    (tmp_path / "without").mkdir()
    monkeypatch.setenv("TOKBENCH_CACHE", str(tmp_path / "without"))
    assert find_hunspell("xx") is None
    monkeypatch.setenv("TOKBENCH_CACHE", str(with_dic))
    assert find_hunspell("xx") == share / "xx_XX.dic"


def test_hunspell_paradigms(dictionary: Path) -> None:
    index, paradigms = hunspell_paradigms(dictionary)
    forms = {tuple(p) for p in paradigms}
    assert ("walk", "walked", "walking", "walks") in forms
    assert ("bake", "baked", "baking") in forms  # e-drop rule: strip "e", add "ing"
    assert ("tie", "tied") in forms
    assert ("happy", "unhappy") in forms
    assert index["walked"] == index["walks"]
    assert hunspell_stems(dictionary) == ["walk", "bake", "tie", "happy"]
    assert find_hunspell("xx", [dictionary.parent]) == dictionary
    assert find_hunspell("yy", [dictionary.parent]) is None


def test_affix_swap_with_dictionary(dictionary: Path) -> None:
    p = AffixSwap(severity=1.0, dictionary=str(dictionary))
    out = p.perturb("Walked home, baking bread; WALKS.", random.Random(0))
    w = out.replace(",", "").replace(";", "").replace(".", "").split()
    assert w[0] in ("Walk", "Walking", "Walks") and w[2] in ("bake", "baked") and w[4] in ("WALK", "WALKED", "WALKING")
    assert w[1] == "home" and w[3] == "bread"
    with pytest.raises(ValueError, match="dictionary"):
        AffixSwap(severity=1.0, dictionary="/nonexistent/xx.dic").perturb("walked", random.Random(0))


def test_affix_swap_attested_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    import perturbations.morphology as m

    monkeypatch.setattr(m, "find_hunspell", lambda lang, dirs=None: None)
    p = AffixSwap(severity=1.0, lang="en")
    p.fit(["the walkers walked while walking"])  # too few types for Morfessor: affix heuristic
    out = p.perturb("They walked.", random.Random(0))
    assert out in ("They walkers.", "They walking.")
    # without fit, forms attested in the document itself
    q = AffixSwap(severity=1.0, lang="en")
    assert q.perturb("jumped jumping", random.Random(0)) == "jumping jumped"
