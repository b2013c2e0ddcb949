"""The terminal summary at the end of a run: models with their worst perturbation, compressor
baselines apart (they are reference points, not models), and the ELBO caveat for MDM rows."""
from __future__ import annotations

from typing import Any

from harness.pipeline.summary import summary_table


def row(enc: str, pert: str, bpb: float, *, kind: str = "model", objective: str = "ar",
        mode: str = "clean_target", sev: float = 0.0) -> dict[str, Any]:
    return {"encoder": enc, "dataset": "ds", "mode": mode, "perturbation_id": pert, "severity": sev,
            "bpb": bpb, "bpb_clean": bpb, "kind": kind, "objective": objective}


def test_models_show_the_worst_perturbation_and_baselines_stand_apart() -> None:
    rows = [row("bytes", "clean", 2.0), row("bytes", "typo", 2.25, sev=0.1), row("bytes", "case", 2.1, sev=0.2),
            row("lzma", "clean", 3.5, kind="baseline"), row("lzma", "typo", 3.9, kind="baseline", sev=0.1)]
    lines = summary_table(rows).splitlines()
    model = [ln for ln in lines if ln.startswith("bytes")]
    assert len(model) == 1 and "2.000" in model[0] and "+0.250" in model[0] and "typo@0.1" in model[0]
    i = lines.index("compressor baselines (not models; clean text):")
    assert lines[i + 1].split() == ["lzma", "ds", "clean_target", "3.500"]
    assert not any(ln.startswith("lzma") for ln in lines[:i])  # never in the models' table
    assert not any("ELBO" in ln for ln in lines)


def test_an_mdm_row_brings_the_upper_bound_caveat() -> None:
    out = summary_table([row("bytes-mdm", "clean", 2.4, objective="mdm")])
    assert "ELBO" in out and "upper bound" in out


def test_old_rows_without_kind_are_models_and_no_rows_say_so() -> None:
    r = row("bytes", "clean", 2.0)
    del r["kind"], r["objective"]
    assert summary_table([r]).splitlines()[2].startswith("bytes")
    assert summary_table([]) == "(no results)"


def test_clean_target_leads_and_full_mode_says_what_it_measures() -> None:
    rows = [row("fuzzytok", "clean", 3.3, mode="full"), row("fuzzytok", "styling", 49.9, mode="full", sev=1),
            row("fuzzytok", "clean", 3.9), row("fuzzytok", "styling", 3.923, sev=1)]
    lines = summary_table(rows).splitlines()
    heads = [i for i, ln in enumerate(lines) if ln.startswith("-- ")]
    assert [lines[i].split()[1] for i in heads] == ["clean_target", "full"]
    # the first number a reader meets is the clean_target one; full mode's is labelled
    assert lines[heads[0] + 1].split()[2:4] == ["3.900", "+0.023"]
    assert lines[heads[1] + 1].split()[2:4] == ["3.300", "+46.600"]
    assert "not robustness" in lines[heads[1]]
