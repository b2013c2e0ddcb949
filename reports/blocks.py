"""The report's building blocks, shared by its sections (reports.render, reports.scaling_report):
a table as display strings and its Markdown, Markdown-inert text, the Jinja environment, and a
figure rendered to PNG/SVG and written atomically."""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import markupsafe

from core.files import write_bytes_atomic

_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass
class Table:
    """A table as display strings — rendered identically to HTML and Markdown."""

    key: str
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""
    num_cols: set[int] = field(default_factory=set)  # right-aligned
    collapsed: bool = False
    # optional CSS class per cell (same shape as rows), e.g. "win" / "loss" / "tie" in a matrix
    classes: list[list[str]] | None = None


# Bidirectional controls (embeddings, overrides, isolates, marks): in a name or corpus text they
# reorder what a reader sees (``evil\u202etxt.exe`` displays as ``evilexe.txt``), so every report
# shows them as a visible <U+XXXX> instead.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_MD_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\\": "\\\\", "[": "\\[", "]": "\\]",
                             "`": "\\`", "*": "\\*", "_": "\\_"})


def md_text(s: Any) -> str:
    """Text from the data (corpus text, names, ids) made inert in Markdown: HTML special
    characters become entities (a Markdown viewer renders raw HTML, so ``<script>`` must not
    survive — the same promise as the HTML report's autoescape), and link / emphasis / code
    characters are backslash-escaped so a name cannot become a link or an image."""
    text = str(s).translate(_MD_ESCAPES).replace("\n", " ").replace("\r", " ")
    return _BIDI.sub(lambda m: f"&lt;U+{ord(m.group()):04X}&gt;", text)


def _md_cell(s: str) -> str:
    return md_text(s).replace("|", "\\|")


def md_table(t: Table) -> str:
    if not t.rows:
        return ""
    head = "| " + " | ".join(_md_cell(c) for c in t.columns) + " |"
    sep = "|" + "|".join("---:" if i in t.num_cols else "---" for i in range(len(t.columns))) + "|"
    body = ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in t.rows]
    out = [f"### {md_text(t.title)}", "", head, sep, *body]
    if t.note:
        out += ["", f"*{md_text(t.note)}*"]
    return "\n".join(out) + "\n"


def _jinja() -> jinja2.Environment:
    def finalize(x: Any) -> Any:
        # Lone surrogates (undecodable corpus bytes) cannot be written as UTF-8: show \\xNN;
        # bidirectional controls are shown as <U+202E> (``_BIDI``).
        if isinstance(x, str) and (_SURROGATE.search(x) or _BIDI.search(x)):
            clean = _SURROGATE.sub(lambda m: f"\\x{ord(m.group()) - 0xDC00:02x}"
                                   if ord(m.group()) >= 0xDC80 else "\ufffd", x)
            # Already-escaped markup (macro output) stays markup; the replacement is plain text.
            if isinstance(x, markupsafe.Markup):
                return markupsafe.Markup(_BIDI.sub(lambda m: f"&lt;U+{ord(m.group()):04X}&gt;", clean))
            return _BIDI.sub(lambda m: f"<U+{ord(m.group()):04X}>", clean)
        return x

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=True,  # every {{ }} is HTML-escaped, corpus text included
        undefined=jinja2.StrictUndefined,
        finalize=finalize,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    return env


@dataclass
class FigureOut:
    key: str
    title: str
    caption: str
    png: bytes
    file: str

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + base64.b64encode(self.png).decode("ascii")


def save_figure(fig: Any, key: str, title: str, caption: str, fig_dir: Path | None, svg: bool,
                dpi: float | None = None) -> FigureOut:
    """A matplotlib figure as a ``FigureOut`` (its PNG for the HTML), written atomically to
    ``fig_dir/<key>.png`` and, when ``svg``, ``<key>.svg`` (``fig_dir`` None: no files), then
    closed. ``dpi``: None = the style's (``figures.setup_style``)."""
    png, svg_bytes = figure_bytes(fig, svg and fig_dir is not None, dpi)
    return write_figure(key, title, caption, png, svg_bytes, fig_dir)


def figure_bytes(fig: Any, svg: bool, dpi: float | None = None) -> tuple[bytes, bytes | None]:
    """A matplotlib figure's PNG bytes and, when ``svg``, its SVG bytes (else None), laid out
    once for both; the figure is closed. ``dpi``: None = the style's (``figures.setup_style``)."""
    from reports import figures as F  # matplotlib only when rendering

    F.freeze_layout(fig, dpi)  # one layout for both files
    png = F.to_png(fig, dpi)
    svg_bytes = F.to_svg(fig) if svg else None
    F.plt.close(fig)
    return png, svg_bytes


def write_figure(key: str, title: str, caption: str, png: bytes, svg: bytes | None,
                 fig_dir: Path | None) -> FigureOut:
    """A ``FigureOut`` of rendered bytes (``figure_bytes``), written atomically to
    ``fig_dir/<key>.png`` and, when ``svg`` is given, ``<key>.svg`` (``fig_dir`` None: no files)."""
    if fig_dir is not None:
        fig_dir.mkdir(parents=True, exist_ok=True)
        write_bytes_atomic(fig_dir / f"{key}.png", png)  # a full disk leaves no cut file
        if svg is not None:
            write_bytes_atomic(fig_dir / f"{key}.svg", svg)
    return FigureOut(key, title, caption, png, f"figures/{key}.png")
