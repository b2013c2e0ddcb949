"""Figure rendering speed-ups keep the output: the font list (one family when it covers every
label) and the single layout shared by the PNG and the SVG."""

from __future__ import annotations

from pathlib import Path

import pytest

from reports import figures as F
from reports.render import figure_texts, save_figure

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
