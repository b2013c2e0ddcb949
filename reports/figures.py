"""Figures (matplotlib Agg + seaborn styling) from the computed tables; each returns a Figure.

Non-Latin text stays mostly in the HTML (surprisal text); figure labels are eval-set names and
ISO codes. Where a glyph does reach a figure, the font list below falls back to Noto faces when
they are installed (matplotlib ≥ 3.6 tries every family of a list per glyph); when DejaVu Sans
has every glyph the figures can show, the list is DejaVu Sans alone (``font_families``).
"""

from __future__ import annotations

import functools
import io
import math
import warnings
from collections.abc import Iterable
from typing import Any

import matplotlib

matplotlib.use("Agg")  # headless: never needs a display

import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib import font_manager  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from core.schema import CLEAN_ID  # noqa: E402
from reports.fmt import sig3  # noqa: E402
from reports.tables import Tables, clean_buckets  # noqa: E402

FONT_FALLBACK = [
    "DejaVu Sans",
    "Noto Sans",
    "Noto Sans CJK JP",
    "Noto Sans Thai",
    "Noto Sans Devanagari",
    "Noto Sans Arabic",
    "Noto Sans Hebrew",
    "Noto Sans Georgian",
    "Noto Sans Armenian",
    "Noto Sans Ethiopic",
]
MODE_LABEL = {
    "clean_target": "clean_target: ΔBPB of the clean continuation after a perturbed prefix",
    "full": "full: ΔBPB of the perturbed text per clean byte — the cost of encoding it",
}
HEATMAP_TITLE = {"clean_target": "clean_target", "full": "full (cost of encoding the perturbed text)"}


# Characters of a label that are layout, not glyphs (matplotlib splits lines on them).
_NOT_GLYPHS = frozenset("\n\r\t")


@functools.cache
def _charmap(family: str) -> frozenset[int]:
    """Code points the installed font of ``family`` has a glyph for (read once per process)."""
    path = font_manager.findfont(font_manager.FontProperties(family=family),
                                 fallback_to_default=False)
    return frozenset(font_manager.get_font(path).get_charmap())


def font_families(texts: Iterable[str] | None = None) -> list[str]:
    """The ``font.family`` list of the figures: the installed families of ``FONT_FALLBACK``
    (``["sans-serif"]`` when none is), or only the first of them when it has a glyph for every
    character of ``texts`` (every string a figure can show). texts None: the whole list.

    Why not always the whole list: matplotlib looks up every family of the list for every text
    it measures or draws (about ten ``findfont`` calls per text), which was the largest single
    cost of a report; when the first family covers every glyph, the others are never used, so
    the pixels are the same."""
    installed = {f.name for f in font_manager.fontManager.ttflist}
    fams = [f for f in FONT_FALLBACK if f in installed] or ["sans-serif"]
    if texts is None or len(fams) == 1:
        return fams
    have = _charmap(fams[0])
    chars = {c for t in texts for c in t} - _NOT_GLYPHS
    return fams[:1] if all(ord(c) in have for c in chars) else fams


def setup_style(texts: Iterable[str] | None = None) -> None:
    """Seaborn theme + a font list restricted to installed families (no findfont warnings),
    one family when it covers ``texts`` (``font_families``; None: the whole fallback list)."""
    sns.set_theme(context="notebook", style="whitegrid", font_scale=0.9)
    plt.rcParams.update({
        "font.family": font_families(texts),
        "svg.fonttype": "none",  # SVG keeps text as text (small files, selectable)
        "svg.hashsalt": "tokbench",  # fixed clip-path ids: same input, same SVG bytes
        "figure.dpi": 100,
        "savefig.dpi": 110,
        "axes.titlesize": 10,
        "axes.titleweight": "bold",
        # Every text in a figure is data (encoder labels, perturbation ids) or plain words: a
        # label with two '$' must print as itself, not as mathtext (or crash its parser).
        "text.parse_math": False,
    })


# The colour-blind palette's distinct colours: a chart with one series per encoder and more
# encoders than this would repeat colours, so two lines could not be told apart (a merged
# scaling sweep has ~100 encoder runs); the report then leaves such charts out and says so.
MAX_SERIES = 10


# seaborn's colour-blind palette in an order where neighbours differ in hue and lightness: its
# own order puts orange, vermillion and tan within the first six, which readers could not tell
# apart in a legend; here they are 2nd, 7th and 9th.
PALETTE = ("#0173b2", "#de8f05", "#029e73", "#cc78bc", "#949494", "#56b4e9", "#d55e00",
           "#ece133", "#ca9161", "#fbafe4")


def palette(encoders: list[str]) -> dict[str, Any]:
    """One colour per encoder (``PALETTE``, hex), the same in every figure and in the HTML
    legend (colours repeat after ``MAX_SERIES`` encoders)."""
    return {e: PALETTE[i % len(PALETTE)] for i, e in enumerate(encoders)}


def freeze_layout(fig: Figure, dpi: float | None = None) -> None:
    """Run the figure's layout engine once, at the PNG's resolution (``dpi``; None:
    ``savefig.dpi``), then remove the engine, so that ``to_png`` and ``to_svg`` both draw at
    those positions. Why: with a layout engine, every ``savefig`` lays the figure out and draws
    it once without output before drawing it for real — two layouts and four draws for a PNG
    and an SVG, where one layout and two draws give the same PNG. The SVG now has the PNG's
    layout (text measured at 110 dpi, not the SVG's 72), so both files show the same axes
    positions and tick values; before, they could differ by a few points and a tick step."""
    engine = fig.get_layout_engine()
    if engine is None:
        return
    dpi = matplotlib.rcParams["savefig.dpi"] if dpi is None else dpi
    old = fig.dpi
    if dpi != "figure":
        fig.dpi = dpi  # text is measured in pixels: lay out at the size the PNG is drawn at
    try:
        engine.execute(fig)
    finally:
        fig.dpi = old
    # None (not "none", a placeholder engine that still makes savefig draw twice); the rc
    # switches would otherwise turn None back into an engine
    with matplotlib.rc_context({"figure.autolayout": False,
                                "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)


def to_png(fig: Figure, dpi: float | None = None) -> bytes:
    """PNG bytes; ``dpi`` None: ``savefig.dpi`` of the style (``setup_style``: 110)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)  # constrained layout already fits; "tight" would draw twice
    return buf.getvalue()


def to_svg(fig: Figure) -> bytes:
    """SVG bytes, text kept as text (``setup_style``), with no date in them."""
    buf = io.BytesIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})  # no date: reproducible files
    return buf.getvalue()


def _grid(n: int, ncols: int = 4, w: float = 3.3, h: float = 2.8) -> tuple[Figure, np.ndarray]:
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    # at least ~6.5 in wide so the title and legend of a one-panel figure fit
    fig, axes = plt.subplots(nrows, ncols, figsize=(max(6.5, w * ncols + 0.5), h * nrows + 0.6),
                             squeeze=False, constrained_layout=True)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes


def severity_curves(t: Tables, mode: str, colors: dict[str, Any]) -> Figure | None:
    """ΔBPB vs severity, one panel per perturbation, one line per encoder, with the paired 95 %
    CI of ΔBPB as a band (perturbed and clean NLL of a document drawn together, seeds first), so
    the band shows the uncertainty of the change itself, not of two overlapping levels. The clean
    baseline is the point (0, 0)."""
    g = t.groups[t.groups["mode"] == mode]
    pids = [p for p in dict.fromkeys(g.perturbation_id) if p != CLEAN_ID]
    if not pids:
        return None
    fig, axes = _grid(len(pids))
    for ax, pid in zip(axes.flat, pids):
        for enc in t.encoders:
            p = g[(g.encoder == enc) & (g.perturbation_id == pid)].sort_values("severity")
            if not len(p) or not p.delta.notna().any():
                continue
            x = np.r_[0.0, p.severity]
            y = np.r_[0.0, p.delta]
            lo = np.r_[0.0, p.delta_lo]
            hi = np.r_[0.0, p.delta_hi]
            ax.plot(x, y, marker="o", ms=4, lw=1.8, color=colors[enc], label=enc)
            if np.isfinite(lo[1:]).any():
                ax.fill_between(x, lo, hi, color=colors[enc], alpha=0.18, lw=0)
        ax.axhline(0.0, color="#555555", lw=0.8, ls="--", zorder=0)
        ax.set_title(pid)
        ax.set_xlabel("severity")
        ax.set_ylabel("ΔBPB (bits/byte)")
    seen: dict[str, Any] = {}  # every encoder once, even if the first panel lacks some
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    if not seen:
        plt.close(fig)
        return None
    fig.legend(list(seen.values()), list(seen), loc="outside lower center",
               ncols=min(max(2, int(fig.get_figwidth() / 1.5)), len(seen)), frameon=False)
    fig.suptitle(MODE_LABEL.get(mode, mode), fontsize=10)
    return fig


def delta_heatmap(t: Tables) -> Figure | None:
    """ΔBPB at each perturbation's highest severity, encoder × perturbation, one panel per mode
    (red = degradation). Each panel has its own symmetric colour scale and colour bar: full-mode
    values (the cost of encoding inserted characters, up to tens of bits per byte) would
    otherwise wash the clean_target panel out to grey. Annotations: three significant digits."""
    r = t.robustness
    if not len(r):
        return None
    mats = []
    for mode in t.modes:
        rm = r[r["mode"] == mode]
        if not len(rm):
            continue
        rm = rm.assign(col=rm.perturbation_id + " @" + rm.top_severity.map("{:g}".format))
        m = rm.pivot_table(index="encoder", columns="col", values="delta_top", sort=False)
        mats.append((mode, m.reindex([e for e in t.encoders if e in m.index])))
    if not mats:
        return None
    ncol = max(m.shape[1] for _, m in mats)
    nrow = max(m.shape[0] for _, m in mats)
    w = max(4.2, 2.2 + 0.9 * ncol + 0.09 * max(len(e) for e in t.encoders))
    h = 1.9 + 0.45 * nrow
    stack = ncol * len(mats) > 12  # many perturbations: one panel per row, not side by side
    shape = (len(mats), 1) if stack else (1, len(mats))
    fig, axes = plt.subplots(*shape, figsize=(w, h * len(mats)) if stack else (w * len(mats), h),
                             squeeze=False, constrained_layout=True)
    for ax, (mode, m) in zip(axes.flat, mats):
        vals = m.to_numpy(dtype=float)
        vmax = float(np.nanmax(np.abs(vals))) if np.isfinite(vals).any() else 0.0
        vmax = vmax or 1.0
        annot = np.vectorize(lambda v: sig3(v) if np.isfinite(v) else "")(vals)
        with warnings.catch_warnings():  # seaborn 0.13 calls a soon-deprecated cmap.set_bad
            warnings.simplefilter("ignore", PendingDeprecationWarning)
            sns.heatmap(m, annot=annot, fmt="", cmap="RdBu_r", center=0.0, vmin=-vmax,
                        vmax=vmax, cbar=True, cbar_kws={"label": "ΔBPB (bits/byte)"},
                        ax=ax, linewidths=0.5, annot_kws={"fontsize": 8})
        ax.set_xlabel("perturbation @ highest severity")
        ax.set_ylabel("")
        ax.set_title(HEATMAP_TITLE.get(mode, mode))
        plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
        plt.setp(ax.get_yticklabels(), rotation=0)
    return fig


def _bars(df: pd.DataFrame, cat: str, labels: dict[str, str], encoders: list[str],
          colors: dict[str, Any], ax: Any) -> None:
    cats = list(dict.fromkeys(df[cat]))
    n = len(encoders)
    width = 0.8 / max(n, 1)
    for i, enc in enumerate(encoders):
        d = df[df.encoder == enc].set_index(cat).reindex(cats)
        x = np.arange(len(cats)) + (i - (n - 1) / 2) * width
        err = np.vstack([(d.bpb - d.ci_lo).to_numpy(), (d.ci_hi - d.bpb).to_numpy()])
        # a CI bound can sit an ulp on the wrong side of the point when every document has the
        # same BPB (the ratio summed in another order): matplotlib refuses a negative error bar
        yerr = np.where(np.isfinite(err), np.maximum(err, 0.0), 0.0) if np.isfinite(err).any() else None
        ax.bar(x, d.bpb, width, color=colors[enc], label=enc, yerr=yerr, capsize=2,
               error_kw={"lw": 0.8})
    ax.set_xticks(np.arange(len(cats)), [labels.get(c, c) for c in cats], rotation=20,
                  ha="right")
    ax.set_ylabel("clean bits per byte")


def _legend_below(fig: Figure, ax: Any) -> None:
    handles, labels = ax.get_legend_handles_labels()
    per_row = max(2, int(fig.get_figwidth() / 1.5))  # ~1.5 in per entry, so nothing is clipped
    fig.legend(handles, labels, loc="outside lower center", ncols=min(per_row, len(labels)),
               frameon=False)


def language_bars(t: Tables, colors: dict[str, Any]) -> Figure | None:
    """Clean BPB per eval set (language, script) and per document script, with 95 % CIs."""
    lang = t.languages
    if not len(lang):
        return None
    show_scripts = len(t.scripts) and t.scripts.script.nunique() > 1
    ncols = 2 if show_scripts else 1
    fig, axes = plt.subplots(1, ncols, figsize=(5.5 * ncols, 3.4), squeeze=False,
                             constrained_layout=True)
    labels = {r.dataset: f"{r.dataset}\n({r.language or '?'}, {r.script or '?'})"
              for r in lang.itertuples()}
    _bars(lang, "dataset", labels, t.encoders, colors, axes[0, 0])
    axes[0, 0].set_title("per eval set")
    if show_scripts:
        _bars(t.scripts, "script", {}, t.encoders, colors, axes[0, 1])
        axes[0, 1].set_title("per document script (ISO 15924)")
    _legend_below(fig, axes[0, 0])
    return fig


def bucket_bars(buckets: pd.DataFrame, encoders: list[str], colors: dict[str, Any]
                ) -> Figure | None:
    """BPB per per-word bucket (e.g. morphemes per word) on clean text, per analysis."""
    if not len(buckets):
        return None
    b = clean_buckets(buckets)
    if not len(b):
        return None
    analyses = list(dict.fromkeys(b.analysis)) or [""]
    fig, axes = plt.subplots(1, len(analyses), figsize=(5.2 * len(analyses), 3.3),
                             squeeze=False, constrained_layout=True)
    for ax, an in zip(axes.flat, analyses):
        # buckets.csv has no per-document rows: no CI
        d = b[b.analysis == an].assign(ci_lo=np.nan, ci_hi=np.nan)
        _bars(d, "bucket", {}, [e for e in encoders if e in set(d.encoder)], colors, ax)
        ax.set_title(an or "buckets")
        ax.set_ylabel("bits per byte")
    _legend_below(fig, axes.flat[0])
    return fig


NOISY_TEXT = "noisy (highest severity)"


def segment_lengths(texts: list[dict[str, Any]]) -> dict[str, dict[str, np.ndarray]]:
    """The segment lengths (bytes) ``segment_hist`` draws: encoder -> {"clean" | NOISY_TEXT ->
    int64 lengths}, encoders and texts in order of first appearance. From the samples that carry
    ``segments``, full mode only when any sample is full-mode; "clean" is the clean cell's, the
    noisy text each perturbation's samples at its highest severity among those kept (over all
    encoders), the rest left out. A standard seed displays ~2 million segments: they stay numpy
    arrays, one a sample, never rows of Python objects."""
    kept = [s for s in texts if s.get("segments")]
    if any(s.get("mode") == "full" for s in kept):
        kept = [s for s in kept if s.get("mode") == "full"]
    top: dict[str, float] = {}  # each perturbation's highest severity among the kept samples
    for s in kept:
        if s["perturbation_id"] != CLEAN_ID:
            sev = float(s.get("severity") or 0.0)
            top[s["perturbation_id"]] = max(top.get(s["perturbation_id"], sev), sev)
    parts: dict[str, dict[str, list[np.ndarray]]] = {}
    for s in kept:
        pid = s["perturbation_id"]
        if pid == CLEAN_ID:
            text = "clean"
        elif float(s.get("severity") or 0.0) == top[pid]:
            text = NOISY_TEXT
        else:
            continue
        parts.setdefault(s["encoder"], {}).setdefault(text, []).append(
            np.asarray(s["segments"], dtype=np.int64))
    return {enc: {text: np.concatenate(a) for text, a in by_text.items()} for enc, by_text in parts.items()}


def segment_hist(texts: list[dict[str, Any]], encoders: list[str],
                 bytes_per_segment: dict[str, float] | None = None) -> Figure | None:
    """Segment (token / patch) length distribution per encoder: clean text vs the most severe
    perturbation's text (``segment_lengths``; full mode preferred), each text's histogram summing
    to 1 over lengths 1 .. its encoder's 99.5th percentile. Titles show
    ``bytes_per_segment[encoder]`` (the efficiency table's pooled number, so the figure and the
    table never disagree); without it, nothing (a sample mean would be a different number).
    Seaborn draws each length's count as a weight: the same bars as from every segment, in a
    fraction of the time."""
    lengths = segment_lengths(texts)
    encs = [e for e in encoders if e in lengths]
    if not encs:
        return None
    fig, axes = plt.subplots(1, len(encs), figsize=(3.6 * len(encs), 2.9), squeeze=False,
                             constrained_layout=True)
    for ax, enc in zip(axes.flat, encs):
        by_text = lengths[enc]
        hi = int(pd.Series(np.concatenate(list(by_text.values()))).quantile(0.995)) + 1
        counts = []
        for text, a in by_text.items():
            v, n = np.unique(a, return_counts=True)
            counts.append(pd.DataFrame({"len": v, "text": text, "count": n}))
        sns.histplot(pd.concat(counts, ignore_index=True), x="len", weights="count", hue="text",
                     stat="probability", common_norm=False, discrete=True, element="step",
                     binrange=(1, max(2, hi)), ax=ax,
                     palette={"clean": "#4c72b0", NOISY_TEXT: "#dd8452"})
        if ax is not axes.flat[len(encs) - 1] and ax.get_legend() is not None:
            ax.get_legend().remove()  # one legend (last panel) is enough
        elif ax.get_legend() is not None:
            sns.move_legend(ax, "upper right", title=None, fontsize=7, frameon=False)
        bps = (bytes_per_segment or {}).get(enc, math.nan)
        ax.set_title(f"{enc}: {bps:.3f} B / segment (clean)" if math.isfinite(bps) else enc)
        ax.set_xlabel("segment length (bytes)")
    return fig


def loss_curves(run: dict[str, Any], encoders: list[str], colors: dict[str, Any]
                ) -> Figure | None:
    """Training loss (bits/byte, as the harness logs it) against bytes seen, one line per
    encoder and seed, from run.json ``train.loss_curve``: [bytes, loss] pairs, {"bytes", "loss"}
    objects, or bare losses (x = logged step)."""
    from reports.findings import per_seed

    encs = run.get("encoders") or {}
    fig, ax = plt.subplots(figsize=(5.8, 3.1), constrained_layout=True)
    drew = False
    xlabel = "training bytes"
    for enc in encoders:
        for k, tr in enumerate(per_seed(encs.get(enc) or {}, "train")):
            curve = tr.get("loss_curve")
            if not curve:
                continue
            try:
                if isinstance(curve[0], dict):
                    x = [float(p.get("bytes", i)) for i, p in enumerate(curve)]
                    y = [float(p["loss"]) for p in curve]
                elif isinstance(curve[0], (list, tuple)):
                    x = [float(p[0]) for p in curve]
                    y = [float(p[1]) for p in curve]
                else:
                    x = list(range(len(curve)))
                    y = [float(v) for v in curve]
                    xlabel = "logged step"
            except (KeyError, TypeError, ValueError, IndexError):
                continue
            ax.plot(x, y, color=colors[enc], label=enc if k == 0 else None, lw=1.4,
                    alpha=1.0 if k == 0 else 0.55)
            drew = True
    if not drew:
        plt.close(fig)
        return None
    ax.set_xlabel(xlabel)
    if xlabel == "training bytes":
        ax.xaxis.set_major_formatter(matplotlib.ticker.EngFormatter(unit="B"))
    ax.set_ylabel("train loss (bits/byte)")
    ax.legend(frameon=False, fontsize=8)
    return fig
