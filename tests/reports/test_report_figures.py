"""Figure rendering speed-ups keep the output: the font list (one family when it covers every
label), the single layout shared by the PNG and the SVG, and the segment histogram drawn from
counts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reports import figures as F
from reports.blocks import figure_bytes, save_figure
from reports.render import figure_texts

INSTALLED = {f.name for f in F.font_manager.fontManager.ttflist}
FALLBACK = [f for f in F.FONT_FALLBACK if f in INSTALLED] or ["sans-serif"]


def test_latin_labels_get_one_family() -> None:
    # matplotlib ships DejaVu Sans, so it is always the first installed family of the list
    labels = ["bytes", "bpe-4096", "heldout\n(en, Latn)", "unicode.homoglyph @1",
              "ΔBPB (bits/byte)", "perturbation @ highest severity — full", "−0.25", "≥ ×"]
    assert F.font_families(labels) == ["DejaVu Sans"]


@pytest.mark.parametrize("label", ["日本語 (ja, Jpan)", "ภาษาไทย", "हिन्दी"])
def test_non_latin_label_gets_the_installed_fallback_list(label: str) -> None:
    # the whole list of installed families (on a machine without Noto faces: DejaVu Sans only)
    assert F.font_families(["bytes", label]) == FALLBACK


def test_no_labels_means_the_whole_list() -> None:
    assert F.font_families(None) == FALLBACK
    F.setup_style()
    assert list(F.plt.rcParams["font.family"]) == FALLBACK


def test_fixed_labels_of_the_figure_code_need_no_fallback() -> None:
    # labels written in the code are not in figure_texts(): their characters must be DejaVu's
    src = Path(F.__file__).parent
    text = "".join((src / n).read_text(encoding="utf-8")
                   for n in ("figures.py", "fragility.py", "scaling_report.py"))
    non_ascii = {c for c in text if ord(c) > 127}
    assert F.font_families(non_ascii) == ["DejaVu Sans"]


def test_figure_texts_cover_the_run_labels(synthetic_run: Path) -> None:
    from reports import load
    from reports.tables import compute_tables

    data = load.load_run(synthetic_run)
    t = compute_tables(data, n_boot=0, n_perm=0)
    texts = figure_texts(t, data)
    assert set(t.encoders) <= texts
    assert set(data.results.perturbation_id) <= texts
    assert set(data.results.dataset) <= texts


def _figure() -> F.Figure:
    F.setup_style(["a"])
    fig, axes = F._grid(3)
    for i, ax in enumerate(axes.flat[:3]):
        ax.plot([0, 1, 2], [0, i, 4 * i], label=f"enc{i}")
        ax.set_title(f"panel {i}")
        ax.set_ylabel("ΔBPB (bits/byte)")
    F._legend_below(fig, axes.flat[0])
    return fig


def test_one_layout_gives_the_same_png(tmp_path: Path) -> None:
    # the PNG after freeze_layout is the one savefig's own layout gives
    ref = F.to_png(_figure())
    out = save_figure(_figure(), "k", "t", "c", tmp_path, svg=True)
    assert out.png == ref
    assert (tmp_path / "k.svg").read_bytes().startswith(b"<?xml")


def test_svg_is_reproducible(tmp_path: Path) -> None:
    a = save_figure(_figure(), "k", "t", "c", tmp_path / "a", svg=True)
    b = save_figure(_figure(), "k", "t", "c", tmp_path / "b", svg=True)
    assert a.png == b.png
    assert (tmp_path / "a" / "k.svg").read_bytes() == (tmp_path / "b" / "k.svg").read_bytes()


def _sample(enc: str, pid: str, sev: float, mode: str, segs: list[int]) -> dict[str, Any]:
    return {"encoder": enc, "perturbation_id": pid, "severity": sev, "mode": mode, "segments": segs}


def test_segment_lengths_keep_full_mode_clean_and_each_perturbations_top_severity() -> None:
    texts = [
        _sample("bpe", "clean", 0.0, "full", [3, 1]),
        _sample("bpe", "clean", 0.0, "clean_target", [9, 9]),   # full mode exists: left out
        _sample("bpe", "typo", 0.1, "full", [2]),               # not typo's top severity
        _sample("blt", "typo", 0.2, "full", [5, 4]),            # typo's top, set by blt's sample
        _sample("bpe", "typo", 0.2, "full", [7]),
        _sample("bpe", "case", 1.0, "full", [1, 1, 2]),
        _sample("bpe", "clean", 0.0, "full", []),               # no segments: left out
        _sample("blt", "clean", 0.0, "full", [6]),
    ]
    got = F.segment_lengths(texts)
    assert list(got) == ["bpe", "blt"]
    assert list(got["bpe"]) == ["clean", F.NOISY_TEXT] and list(got["blt"]) == [F.NOISY_TEXT, "clean"]
    assert got["bpe"]["clean"].tolist() == [3, 1]
    assert got["bpe"][F.NOISY_TEXT].tolist() == [7, 1, 1, 2]
    assert got["blt"][F.NOISY_TEXT].tolist() == [5, 4] and got["blt"]["clean"].tolist() == [6]
    only_target = F.segment_lengths([_sample("bpe", "clean", 0.0, "clean_target", [2, 2])])
    assert only_target["bpe"]["clean"].tolist() == [2, 2]  # no full mode anywhere: kept
    assert F.segment_hist([_sample("bpe", "clean", 0.0, "full", [])], ["bpe"]) is None


def _segment_hist_from_rows(texts: list[dict[str, Any]], encoders: list[str],
                            bps: dict[str, float]) -> Any:
    """The figure as drawn before counts: one DataFrame row a segment, seaborn counts them."""
    import math

    import pandas as pd

    rows = [(s["encoder"], s["perturbation_id"], float(s["severity"]), s["mode"], int(n))
            for s in texts if s["segments"] for n in s["segments"]]
    df = pd.DataFrame(rows, columns=["encoder", "pid", "severity", "mode", "len"])
    df = df[df["mode"] == "full"] if (df["mode"] == "full").any() else df
    df["text"] = np.where(df.pid == "clean", "clean", "")
    noisy = df[df.pid != "clean"]
    top = noisy.groupby("pid").severity.transform("max")
    df.loc[noisy.index[noisy.severity == top], "text"] = F.NOISY_TEXT
    df = df[df.text != ""]
    encs = [e for e in encoders if e in set(df.encoder)]
    fig, axes = F.plt.subplots(1, len(encs), figsize=(3.6 * len(encs), 2.9), squeeze=False,
                               constrained_layout=True)
    for ax, enc in zip(axes.flat, encs):
        d = df[df.encoder == enc]
        F.sns.histplot(d, x="len", hue="text", stat="probability", common_norm=False, discrete=True,
                       element="step", binrange=(1, max(2, int(d.len.quantile(0.995)) + 1)), ax=ax,
                       palette={"clean": "#4c72b0", F.NOISY_TEXT: "#dd8452"})
        if ax is not axes.flat[len(encs) - 1] and ax.get_legend() is not None:
            ax.get_legend().remove()
        elif ax.get_legend() is not None:
            F.sns.move_legend(ax, "upper right", title=None, fontsize=7, frameon=False)
        b = bps.get(enc, math.nan)
        ax.set_title(f"{enc}: {b:.3f} B / segment (clean)" if math.isfinite(b) else enc)
        ax.set_xlabel("segment length (bytes)")
    return fig


def test_segment_hist_from_counts_draws_what_the_rows_drew() -> None:
    """Weights of a length's count give the very bars of one row a segment: the same PNG and SVG
    bytes, on random lengths with a long tail (the 99.5th percentile cuts it), two modes, clean
    and noisy texts and several severities."""
    rng = np.random.default_rng(7)
    texts = []
    for enc, mean in (("bytes", 1.0), ("bpe-4096", 3.5), ("blt", 4.5)):
        for pid, sevs in (("clean", [0.0]), ("typo.keyboard", [0.05, 0.2]), ("case.upper", [1.0])):
            for sev in sevs:
                for mode in ("clean_target", "full"):
                    for _ in range(3):
                        n = int(rng.integers(50, 400))
                        segs = np.ones(n, int) if mean == 1.0 else rng.geometric(1 / mean, n)
                        texts.append(_sample(enc, pid, sev, mode, segs.tolist()))
    encoders, bps = ["bytes", "bpe-4096", "blt"], {"bpe-4096": 3.512, "blt": 4.4}
    F.setup_style()
    new = figure_bytes(F.segment_hist(texts, encoders, bps), svg=True)
    old = figure_bytes(_segment_hist_from_rows(texts, encoders, bps), svg=True)
    assert new[0] == old[0] and new[1] == old[1]
