"""Tables computed from a synthetic run agree with hand computation from the results files."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reports.load import load_run
from reports.tables import compute_tables

LN2 = math.log(2.0)


@pytest.fixture(scope="module")
def tables(synthetic_run: Path):
    data = load_run(synthetic_run)
    return data, compute_tables(data, n_boot=200, n_perm=2000)


def test_group_bpb_is_pooled_ratio(tables) -> None:
    data, t = tables
    res = pd.read_csv(data.path / "results.csv")
    rows = res[(res.encoder == "bpe-4096") & (res.perturbation_id == "typo.keyboard")
               & (res.severity == 0.2) & (res["mode"] == "full")]
    clean = res[(res.encoder == "bpe-4096") & (res.perturbation_id == "clean")
                & (res["mode"] == "full")]
    # full mode: NLL per *clean* byte, pooled over eval sets and seeds
    want = rows.nll_nats.sum() / (LN2 * rows.n_bytes_clean.sum())
    base = clean.nll_nats.sum() / (LN2 * clean.n_bytes.sum())
    g = t.groups
    got = g[(g.encoder == "bpe-4096") & (g.perturbation_id == "typo.keyboard")
            & (g.severity == 0.2) & (g["mode"] == "full")].iloc[0]
    assert got.bpb == pytest.approx(want)
    assert got.delta == pytest.approx(want - base)
    assert got.rel == pytest.approx((want - base) / base)
    assert got.ci_lo < got.bpb < got.ci_hi
    assert got.delta_lo < got.delta < got.delta_hi
    per_seed = [r.nll_nats.sum() / (LN2 * r.n_bytes_clean.sum()) for _, r in rows.groupby("seed")]
    assert got.seed_mean == pytest.approx(np.mean(per_seed))
    assert got.seed_sd == pytest.approx(np.std(per_seed, ddof=1))


def test_clean_target_uses_scored_bytes(tables) -> None:
    data, t = tables
    res = pd.read_csv(data.path / "results.csv")
    rows = res[(res.encoder == "bytes") & (res.perturbation_id == "clean")
               & (res["mode"] == "clean_target")]
    g = t.groups
    got = g[(g.encoder == "bytes") & (g.perturbation_id == "clean")
            & (g["mode"] == "clean_target")].iloc[0]
    assert got.bpb == pytest.approx(rows.nll_nats.sum() / (LN2 * rows.n_bytes.sum()))
    assert t.primary_mode == "clean_target" and t.level_mode == "full"


def test_comparisons_are_paired_and_holm_corrected(tables) -> None:
    _, t = tables
    c = t.comparisons
    assert set(c.quantity) == {"BPB", "ΔBPB"}
    # every document of every cell is in samples.jsonl, so the paired estimate equals the
    # difference of the pooled estimates
    assert np.allclose(c["diff"], c.value_a - c.value_b)
    assert np.allclose(c.diff_paired, c["diff"])
    assert (c.p_holm >= c.p_test - 1e-12).all()
    assert (c.n_units == 28).all()  # 14 documents × 2 seeds
    assert (c.covers == "documents and seeds").all() and (c.n_seeds == 2).all()
    # synthetic BPE degrades ~2× faster: at the top severities bytes degrades less (with two
    # seeds of independent noise the seed term has one degree of freedom: a wide interval)
    top = c[(c.perturbation_id == "typo.keyboard") & (c.severity == 0.2)]
    assert (top["diff"] < 0).all() and (top.ci_lo < top["diff"]).all()
    assert (top["diff"] < top.ci_hi).all()


def test_robustness_and_verdict(tables) -> None:
    _, t = tables
    r = t.robustness
    row = r[(r.encoder == "bytes") & (r.perturbation_id == "case.random")
            & (r["mode"] == "clean_target")].iloc[0]
    assert row.top_severity == pytest.approx(0.3)
    assert row.slope > 0
    v = t.verdict.set_index("encoder")
    assert v.loc["bytes", "mean_delta"] < v.loc["bpe-4096", "mean_delta"]
    # the summary names the tests behind "smallest mean degradation", not one line per pair
    smallest = next(f for f in t.verdict_lines if f.text.startswith("Smallest mean"))
    assert "bytes," in smallest.text and "bpe-4096:" in smallest.text and "Holm" in smallest.text
    assert not any(" vs " in f.text for f in t.verdict_lines)
    # the mixed set's documents are labelled by their own script, detected from their text
    assert set(t.scripts.script) >= {"Latn", "Cyrl", "Jpan", "Thai"}


def test_deterministic(synthetic_run: Path) -> None:
    a = compute_tables(load_run(synthetic_run), n_boot=50, n_perm=200, seed=3)
    b = compute_tables(load_run(synthetic_run), n_boot=50, n_perm=200, seed=3)
    pd.testing.assert_frame_equal(a.groups, b.groups)
    pd.testing.assert_frame_equal(a.comparisons, b.comparisons)


def test_partial_runs(make_run) -> None:
    bare = make_run("bare", samples=False, buckets=False, run_json=False, seeds=(0,),
                    encoders=("bytes",), modes=("full",))
    t = compute_tables(load_run(bare), n_boot=50)
    assert t.primary_mode == "full" and t.modes == ["full"]
    assert t.groups.ci_lo.isna().all() and t.groups.seed_sd.isna().all()
    assert len(t.comparisons) == 0
    assert t.efficiency.params_total.isna().all()
    assert t.robustness.delta_top.notna().all()


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda df: df.drop(columns=["nll_nats"]), "missing column(s) nll_nats"),
        (lambda df: df.assign(mode="fulll"), "column 'mode' has 'fulll'"),
        (lambda df: df.assign(nll_nats=["x"] + list(df.nll_nats[1:])), "row 2: not a number"),
        (lambda df: pd.concat([df, df.iloc[:1]]), "duplicate cell"),
    ],
)
def test_bad_results_raise_clear_errors(make_run, mutate, message: str) -> None:
    run = make_run("bad", samples=False, buckets=False, run_json=False)
    path = run / "results.csv"
    mutate(pd.read_csv(path, keep_default_na=False)).to_csv(path, index=False)
    with pytest.raises(ValueError, match="results.csv") as e:
        load_run(run)
    assert message in str(e.value)


def test_missing_results_and_bad_jsonl(tmp_path: Path, make_run) -> None:
    with pytest.raises(ValueError, match="results.csv: not found"):
        load_run(tmp_path)
    run = make_run("badjson", buckets=False, run_json=False)
    with (run / "samples.jsonl").open("a") as f:
        f.write("{not json\n")
    with pytest.raises(ValueError, match=r"samples.jsonl: line \d+: invalid JSON"):
        load_run(run)


@pytest.mark.parametrize(
    ("text", "code"),
    [("Hello, мир", "Latn"), ("Привет, world", "Cyrl"), ("東京は日本の首都", "Jpan"),
     ("中文文本", "Hani"), ("한국어 文", "Kore"), ("ภาษาไทย", "Thai"), ("१२३ हिन्दी", "Deva"),
     ("123 !?", "")],
)
def test_dominant_script(text: str, code: str) -> None:
    from reports.load import dominant_script

    assert dominant_script(text) == code


def test_language_note_finds_parallel_sets() -> None:
    from reports.load import RunData
    from reports.tables import language_note

    res = pd.DataFrame({"dataset": ["en", "es", "de"], "language": ["en", "es", "de"]})
    smp = pd.DataFrame({"dataset": ["en"] * 3 + ["es"] * 3 + ["de"] * 2,
                        "doc_id": ["a", "b", "c", "a", "b", "c", "x", "y"]})
    note = language_note(RunData(path=Path("."), results=res, samples=smp))
    assert "en (en) and es (es) share 3 documents" in note
    assert "Genre" in note or "genre" in note
    one = language_note(RunData(path=Path("."), results=res.iloc[:1], samples=smp))
    assert one == ""


def test_buckets_without_n_words_raise_clear_error(make_run) -> None:
    run = make_run("nowords", samples=False, run_json=False, seeds=(0,), encoders=("bytes",))
    path = run / "buckets.csv"
    pd.read_csv(path).drop(columns=["n_words"]).to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"buckets.csv: missing column\(s\) n_words"):
        load_run(run)


# ----------------------------------------------------------------------------- truthfulness


@pytest.mark.parametrize(
    ("x", "want"),
    [(46.63, "+46.6"), (1409.9, "+1410"), (7.612, "+7.61"), (-0.004123, "-0.00412"),
     (-0.0004, "-0.000400"), (-1e-9, "-1.00e-09"), (0.0, "0"), (-0.0, "0"), (9.996, "+10.0"),
     (2.0, "+2.00"), (math.nan, "—"), (None, "—")],
)
def test_sig3_three_significant_digits_no_negative_zero(x, want: str) -> None:
    from reports.fmt import sig3

    assert sig3(x) == want
    assert sig3(0.5, sign=False) == "0.500"


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    """Three encoders, three seeds of well-trained models (small offsets, each document's noise
    the same in every seed): blt is close to bpe-4096 on clean text; case.random *improves*
    bytes."""
    from synthetic_run import write_synthetic_run

    path = write_synthetic_run(tmp_path_factory.mktemp("three") / "run",
                               encoders=("bytes", "bpe-4096", "blt"),
                               improves=("bytes", "case.random"), seeds=(0, 1, 2),
                               seed_sd=0.005, doc_noise_per_seed=False)
    return compute_tables(load_run(path), n_boot=200, n_perm=2000)


def test_lowest_clean_bpb_says_not_distinguishable(three) -> None:
    lowest = next(f for f in three.verdict_lines if f.text.startswith("Lowest clean BPB"))
    c = three.comparisons
    row = c[(c.a == "bpe-4096") & (c.b == "blt") & (c.perturbation_id == "clean")
            & (c["mode"] == "full")].iloc[0]
    assert row.p_holm >= 0.05  # the fixture's premise: bpe and blt are not distinguishable
    assert "bpe-4096 at" in lowest.text and lowest.status == "not distinguishable"
    assert "not distinguishable from" in lowest.text and "; blt: " in lowest.text


def test_mean_degradation_test_is_the_mean_of_top_severity_deltas(three) -> None:
    m = three.mean_tests
    r = three.robustness
    for enc_a, enc_b in [("bytes", "bpe-4096"), ("bpe-4096", "blt")]:
        row = m[(m.a == enc_a) & (m.b == enc_b) & (m["mode"] == "clean_target")].iloc[0]
        # every document is paired in every cell, so the test's quantity is exactly the
        # difference of the table's mean ΔBPB at the highest severities
        want_a = r[(r.encoder == enc_a) & (r["mode"] == "clean_target")].delta_top.mean()
        want_b = r[(r.encoder == enc_b) & (r["mode"] == "clean_target")].delta_top.mean()
        assert row.value_a == pytest.approx(want_a) and row.value_b == pytest.approx(want_b)
        assert row.ci_lo <= row["diff"] <= row.ci_hi
        assert row.p_holm >= row.p_test
    smallest = next(f for f in three.verdict_lines if f.text.startswith("Smallest mean"))
    assert smallest.status == "significant" and "significantly less degradation" in smallest.text


def test_one_holm_family_for_all_encoder_comparisons(three) -> None:
    from reports import stats

    c, m = three.comparisons, three.mean_tests
    p = np.r_[c.p_test.to_numpy(float), m.p_test.to_numpy(float)]
    assert np.allclose(np.r_[c.p_holm, m.p_holm], stats.holm(p), equal_nan=True)


def test_anomaly_is_flagged_with_causes(three) -> None:
    a = three.anomalies
    assert set(a.encoder) == {"bytes"} and set(a.perturbation_id) == {"case.random"}
    assert (a.delta < 0).all() and (a.delta_hi < 0).all() and (a.p_delta_holm < 0.05).all()
    order = ["clean_target", "full"]  # primary mode first
    assert list(a["mode"]) == sorted(a["mode"], key=order.index)
    assert all("training" in c or "deletes" in c for c in a.cause)
    lines = [f for f in three.verdict_lines if f.status == "anomaly"]
    assert len(lines) == 1 and "case.random improves bytes at severity 0.3" in lines[0].text
    # a degrading perturbation is not an anomaly
    g = three.groups
    assert not len(a.merge(g[g.delta > 0][["encoder", "perturbation_id", "severity", "mode"]]))


def test_pair_matrix_counts_hand_computed(three) -> None:
    from reports.comparisons import pair_matrix

    c = three.comparisons
    p = c[(c["mode"] == "clean_target") & (c.quantity == "ΔBPB")]
    m = pair_matrix(c, three.encoders, "clean_target").set_index(["row", "col"])
    for (a, b), g in p.groupby(["a", "b"]):
        sig = (g.p_holm < 0.05) & ((g.ci_lo > 0) | (g.ci_hi < 0))  # reports.comparisons.significant
        fwd, rev = m.loc[(a, b)], m.loc[(b, a)]
        assert fwd.wins == int((sig & (g["diff"] < 0)).sum()) == rev.losses
        assert fwd.losses == int((sig & (g["diff"] > 0)).sum()) == rev.wins
        assert fwd.ties == int((~sig).sum()) == rev.ties
        assert fwd.wins + fwd.losses + fwd.ties + fwd.untested == len(g)


def test_without_samples_a_winner_is_untested(make_run) -> None:
    run = make_run("nosamples", samples=False, buckets=False, seeds=(0,),
                   datasets=("en-docs",))
    t = compute_tables(load_run(run), n_boot=20, n_perm=100)
    lowest = next(f for f in t.verdict_lines if f.text.startswith("Lowest clean BPB"))
    assert lowest.status == "untested" and "not tested against" in lowest.text
    assert "significantly" not in lowest.text


def test_mean_degradation_carries_its_ci(three, tmp_path: Path) -> None:
    # the verdict's mean ΔBPB (and the summary's "smallest mean degradation") has a paired
    # bootstrap CI: around the value on the fixture, degenerate where every document degrades
    # by exactly the same amount
    from synthetic_run import write_simple_run

    v = three.verdict
    assert (v.mean_lo <= v.mean_delta + 1e-12).all() and (v.mean_delta <= v.mean_hi + 1e-12).all()
    assert (v.mean_hi > v.mean_lo).all()
    smallest = next(f for f in three.verdict_lines if f.text.startswith("Smallest mean"))
    assert "[95 % CI " in smallest.text.split("—")[0]
    run = write_simple_run(tmp_path / "flat", ["a", "b"], [0], 9,
                           lambda e, s, p, d: 1.5 + (0.25 if p != "clean" else 0.0) + 0.01 * d
                           + (0.125 if e == "b" and p != "clean" else 0.0),
                           cells=(("clean", 0.0), ("typo.keyboard", 0.1)))
    t = compute_tables(load_run(run), n_boot=50, n_perm=100)
    a = t.verdict.set_index("encoder").loc["a"]
    assert a.mean_delta == pytest.approx(0.25) and a.mean_lo == pytest.approx(0.25)
    assert a.mean_hi == pytest.approx(0.25)


def test_one_interval_per_quantity(make_run) -> None:
    # one eval set of one script: the verdict's, the eval set's and the script's clean BPB are the
    # same number over the same documents, so they carry the same interval (not three resamplings)
    t = compute_tables(load_run(make_run("one", datasets=("en-docs",))), n_boot=200, n_perm=200)
    for enc in t.encoders:
        v = t.verdict[t.verdict.encoder == enc].iloc[0]
        lang = t.languages[t.languages.encoder == enc].iloc[0]
        script = t.scripts[t.scripts.encoder == enc].iloc[0]
        assert np.isfinite(v.clean_lo)
        assert (lang.ci_lo, lang.ci_hi) == (v.clean_lo, v.clean_hi) == (script.ci_lo, script.ci_hi)
        assert lang.bpb == pytest.approx(v.clean_bpb) and script.bpb == pytest.approx(v.clean_bpb)
    # three eval sets: Cyrillic is all of ru-fortunes, so it carries that eval set's interval
    t = compute_tables(load_run(make_run("three")), n_boot=200, n_perm=200)
    for enc in t.encoders:
        lang = t.languages[(t.languages.encoder == enc) & (t.languages.dataset == "ru-fortunes")]
        cyrl = t.scripts[(t.scripts.encoder == enc) & (t.scripts.script == "Cyrl")]
        assert (cyrl.ci_lo.iloc[0], cyrl.ci_hi.iloc[0]) == (lang.ci_lo.iloc[0], lang.ci_hi.iloc[0])
        v = t.verdict[t.verdict.encoder == enc].iloc[0]
        assert (lang.ci_lo.iloc[0], lang.ci_hi.iloc[0]) != (v.clean_lo, v.clean_hi)
