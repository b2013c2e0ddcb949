"""morph.* limits found by a review: severity checked as every built-in checks it,
an affix_swap dictionary without its .aff refused at validate time, compound's overlap rule the
same as before but linear, no split of a "word" longer than two parts can be, and `tokbench
perturb --param` values type-checked like a suite's."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from harness.cli import main
from perturbations.morphology import MAX_PART_LEN, AffixSwap, BoundarySplit, Compound


@pytest.mark.parametrize("cls", [Compound, BoundarySplit, AffixSwap])
@pytest.mark.parametrize("severity", [float("nan"), 2.0, -0.5, "0.5"])
def test_severity_outside_0_1_is_refused(cls: type, severity: object) -> None:
    with pytest.raises(ValueError, match="severity must be a number between 0 and 1"):
        cls(severity=severity)


def test_a_dictionary_without_its_aff_is_refused(tmp_path: Path) -> None:
    dic = tmp_path / "en.dic"
    dic.write_text("1\nwalk/D\n")
    with pytest.raises(ValueError, match=r"no \.aff file beside it"):
        AffixSwap(severity=0.5, dictionary=str(dic))
    (tmp_path / "en.aff").write_text("SET UTF-8\n")
    AffixSwap(severity=0.5, dictionary=str(dic))  # both files: accepted


def _old_compound_edits(sites: list[tuple[int, int, str]], chosen: list[int]) -> list[tuple[int, int, str]]:
    """The overlap rule as it was written before (a scan of every kept site)."""
    edits, taken = [], []
    for i in chosen:
        s, e, new = sites[i]
        if any(s < te and ts < e for ts, te in taken):
            continue
        taken.append((s, e))
        edits.append((s, e, new))
    return edits


def test_compound_output_is_what_the_quadratic_rule_gave(monkeypatch: pytest.MonkeyPatch) -> None:
    import perturbations.morphology as morph

    words = ["house", "boat", "house-boat", "rain", "coat", "raincoat", "sun", "flower", "sunflower"]
    seen: dict[str, list] = {}
    real = morph._replace_spans

    def spy(text: str, edits: list) -> str:
        seen["edits"] = list(edits)
        return real(text, edits)

    monkeypatch.setattr(morph, "_replace_spans", spy)
    for seed in range(30):
        rng = random.Random(seed)
        text = " ".join(rng.choice(words) for _ in range(60))
        for sev in (0.3, 1.0):
            p = Compound(severity=sev, min_part_len=3)
            # the sites and the draw, as perturb() makes them, through the old rule
            out = p.perturb(text, random.Random(seed))
            sites_rng = random.Random(seed)
            words_m = list(morph.WORD_RE.finditer(text))
            vocab = p._vocab | {m.group().lower() for m in words_m if len(m.group()) >= 3}
            sites = []
            for m in words_m:
                w = m.group()
                c = p._split_point(w.lower(), vocab) if len(w) >= 6 else None
                if c is not None:
                    sites.append((m.start(), m.end(), w[:c] + " " + w[c:]))
            for a, b in zip(words_m, words_m[1:]):
                gap = text[a.end():b.start()]
                if gap in (" ", "-") and min(len(a.group()), len(b.group())) >= 3:
                    sites.append((a.start(), b.end(), a.group() + b.group()))
            sites.sort()
            chosen = morph._choose(len(sites), sev, sites_rng)
            assert seen["edits"] == _old_compound_edits(sites, chosen)
            assert out == real(text, _old_compound_edits(sites, chosen))


def test_a_word_longer_than_two_parts_is_never_split() -> None:
    part = "ab" * (MAX_PART_LEN // 2)  # MAX_PART_LEN letters
    p = Compound(severity=1.0, mode="split", min_part_len=2)
    assert p._split_point(part + part, {part}) == MAX_PART_LEN  # the longest parts allowed
    # a part one letter longer, though both halves are known: not a compound
    assert p._split_point(part + part + "c", {part, part + "c"}) is None
    long = part * 40  # 2,560 letters: nothing is scanned
    assert p.perturb(long, random.Random(0)) == long


def test_perturb_param_values_are_type_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perturb", "typo.random", "--text", "hello", "--param", "alphabet="]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "tokbench: error: perturb: alphabet: expected a string, got null"
    assert main(["perturb", "morph.compound", "--severity", "2"]) == 2
    assert "severity must be a number between 0 and 1, got 2.0" in capsys.readouterr().err
