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
    assert (c.p_holm >= c.p_perm - 1e-12).all()
    assert (c.n_units == 28).all()  # 14 documents × 2 seeds
    # synthetic BPE degrades ~2× faster: at the top severities bytes degrades less
    top = c[(c.perturbation_id == "typo.keyboard") & (c.severity == 0.2)]
    assert (top["diff"] < 0).all() and (top.ci_hi < 0).all()


def test_robustness_and_verdict(tables) -> None:
    _, t = tables
    r = t.robustness
    row = r[(r.encoder == "bytes") & (r.perturbation_id == "case.random")
            & (r["mode"] == "clean_target")].iloc[0]
    assert row.top_severity == pytest.approx(0.3)
    assert row.slope > 0
    v = t.verdict.set_index("encoder")
    assert v.loc["bytes", "mean_delta"] < v.loc["bpe-4096", "mean_delta"]
    assert any("bytes vs bpe-4096" in line for line in t.verdict_lines)
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
