"""The report's opening answer (reports/headline.py): each tokenizer-free encoder against BPE,
one sentence per quantity whose badge is the comparison table's own verdict."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import FAST

from reports.comparisons import significant
from reports.fmt import sig3
from reports.headline import headline
from reports.load import load_run
from reports.tables import compute_tables


def _headline(run: Path):
    data = load_run(run)
    t = compute_tables(data, **FAST)
    return t, headline(t, data.results, [data.run.get("suite") or {}])


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory):
    from synthetic_run import write_synthetic_run

    # three seeds of well-trained models (small offsets; each document's noise the same in every
    # seed and under every perturbation: a hard document stays hard), so the seeds × documents
    # interval, after Holm over every comparison, calls a difference the size of the fixture's
    # typo sensitivities
    run = write_synthetic_run(tmp_path_factory.mktemp("hl") / "run",
                              encoders=("bytes", "bpe-4096", "blt"), seeds=(0, 1, 2),
                              seed_sd=0.005, doc_noise_per_seed=False, doc_noise_per_cell=False)
    return _headline(run)


def test_each_tokenizer_free_encoder_meets_bpe(three) -> None:
    t, h = three
    assert not h.fallback
    assert [(m.tf, m.bpe) for m in h.matchups] == [("bytes", "bpe-4096"), ("blt", "bpe-4096")]
    # clean BPB, mean degradation, then one per family (typo, case in the fixture)
    for m in h.matchups:
        q = [c.quantity for c in m.claims]
        assert q[:2] == ["clean BPB", "degradation"]
        assert sorted(q[2:]) == ["degradation: case", "degradation: typo"]


def test_badges_are_the_tables_verdicts(three) -> None:
    t, h = three
    c = t.comparisons
    for m in h.matchups:
        clean = m.claims[0]
        r = c[(c.a.isin([m.tf, m.bpe])) & (c.b.isin([m.tf, m.bpe])) & (c.perturbation_id == "clean")
              & (c["mode"] == t.level_mode)].iloc[0]
        d = r["diff"] if r.a == m.tf else -r["diff"]
        sig = bool(significant(r.p_holm, r.ci_lo, r.ci_hi))
        assert clean.status == (("better" if d < 0 else "worse") if sig else "tie")
        assert sig3(d) in clean.text and "95 % CI" in clean.text and "Holm" in clean.text
        if not sig:
            assert "a tie" in clean.text
        mt = t.mean_tests
        r = mt[mt.a.isin([m.tf, m.bpe]) & mt.b.isin([m.tf, m.bpe])
               & (mt["mode"] == t.primary_mode)].iloc[0]
        d = r["diff"] if r.a == m.tf else -r["diff"]
        sig = bool(significant(r.p_holm, r.ci_lo, r.ci_hi))
        assert m.claims[1].status == (("better" if d < 0 else "worse") if sig else "tie")
        assert sig3(d) in m.claims[1].text
    # the fixture: bytes degrades less than BPE under typos (sensitivity 4 against 9)
    bytes_typo = next(c for c in h.matchups[0].claims if c.quantity == "degradation: typo")
    assert bytes_typo.status == "better" and "degrades significantly less" in bytes_typo.text
    assert bytes_typo.badge == "tokenizer-free better"


def test_how_sure(three, make_run) -> None:
    _, h = three
    sure = dict(h.certainty)
    assert sure["seeds"] == "3 per encoder"
    assert "documents and seeds" in sure["intervals"]
    assert sure["suite synthetic"] == "Synthetic fixture — <i>made-up</i> numbers."
    assert sure["documents"] == "14 per encoder and seed"  # 5 + 4 + 5 texts
    assert sure["model size"] == "833 k–1.32 M parameters"  # bytes 800k + 257·128; BPE 4096·128
    assert sure["training"] == "1 MB of text per model"
    assert not any("one seed" in c for c in h.caveats)
    _, one = _headline(make_run("one", encoders=("bytes", "bpe-4096"), seeds=(0,)))
    assert "documents only" in dict(one.certainty)["intervals"]
    assert any("With one seed the interval covers documents only, not training variance" in c
               for c in one.caveats)


def test_no_bpe_or_no_tokenizer_free_says_so(make_run) -> None:
    _, h = _headline(make_run("nobpe", encoders=("bytes", "blt"), seeds=(0,)))
    assert not h.matchups and "no BPE encoder" in h.fallback
    _, h = _headline(make_run("onlybpe", encoders=("bpe-4096",), seeds=(0,)))
    assert not h.matchups and "no tokenizer-free encoder" in h.fallback


def test_a_family_of_several_perturbations_is_called_only_when_they_agree(make_run) -> None:
    # typo.keyboard (bytes degrades less than BPE) and typo.swap at a severity too small to
    # separate them: one family, two cells that disagree -> a tie that says so. Three seeds of
    # well-trained models, as the module's fixture, so the keyboard cell is called over seeds ×
    # documents
    run = make_run("fam", encoders=("bytes", "bpe-4096"), seeds=(0, 1, 2), seed_sd=0.005,
                   doc_noise_per_seed=False, doc_noise_per_cell=False,
                   perturbations=[("identity", "clean", [0.0]),
                                  ("typo.keyboard", "typo.keyboard", [0.3]),
                                  ("typo.swap", "typo.swap", [0.001])])
    t, h = _headline(run)
    (m,) = h.matchups
    typo = next(c for c in m.claims if c.quantity == "degradation: typo")
    assert "typo.keyboard @ 0.3" in typo.text and "typo.swap @ 0.001" in typo.text
    c = t.comparisons
    calls = {}
    for pid in ("typo.keyboard", "typo.swap"):
        r = c[(c.perturbation_id == pid) & (c["mode"] == t.primary_mode)].iloc[0]
        calls[pid] = bool(significant(r.p_holm, r.ci_lo, r.ci_hi))
    assert calls == {"typo.keyboard": True, "typo.swap": False}  # the fixture's premise
    assert typo.status == "tie" and "the perturbations disagree" in typo.text
    assert "(bytes less)" in typo.text and "(a tie)" in typo.text


def test_mdm_meets_mdm_bpe_and_is_marked_a_bound(three) -> None:
    import dataclasses

    import pandas as pd

    t, _ = three
    encs = ["bytes-ar", "bytes-mdm", "bpe-ar", "bpe-mdm"]
    results = pd.DataFrame({"encoder": encs, "encoder_name": ["bytes", "bytes", "bpe", "bpe"],
                            "objective": ["ar", "mdm", "ar", "mdm"]})
    t = dataclasses.replace(t, encoders=encs, bounds=["bytes-mdm", "bpe-mdm"])
    h = headline(t, results)
    # like with like: an ELBO is an upper bound, so it is not set against an exact AR score
    assert [(m.tf, m.bpe) for m in h.matchups] == [("bytes-ar", "bpe-ar"), ("bytes-mdm", "bpe-mdm")]
    assert any("bytes-mdm" in c and "ELBO" in c and "upper bound" in c for c in h.caveats)


def test_compare_of_other_perturbations_names_that_reason(tmp_path: Path) -> None:
    from synthetic_run import set_fingerprint, write_simple_run

    from reports.load import merge_runs

    a = write_simple_run(tmp_path / "runA", ["bytes"], [0], 20, lambda e, s, p, d: 1.0 + 0.01 * d,
                         (("clean", 0.0), ("typo", 0.1)))
    b = write_simple_run(tmp_path / "runB", ["bpe"], [0], 20, lambda e, s, p, d: 1.5 + 0.01 * d,
                         (("clean", 0.0), ("case", 0.1)))
    for run in (a, b):
        set_fingerprint(run, "sha256:aaaa")
    data = merge_runs([load_run(a), load_run(b)])
    t = compute_tables(data, n_boot=20, n_perm=50)
    (m,) = headline(t, data.results).matchups
    assert (m.tf, m.bpe) == ("runA/bytes", "runB/bpe")
    clean, overall, typo = m.claims
    assert clean.status in ("better", "worse", "tie")  # the clean cells are shared
    for c in (overall, typo):
        assert c.status == "untested" and "not scored under the same perturbations" in c.text
        assert "no per-document samples" not in c.text
