"""Render a report (HTML + Markdown + figure files) from a run directory's results files.

``render_run(run_dir)`` re-renders without recomputing any model output; ``render_compare``
merges several runs (encoder labels prefixed by the run's directory name) into one report.
The HTML is one self-contained file: inline CSS, figures as ``data:`` URIs, no scripts and no
external requests; every piece of corpus text goes through Jinja2's autoescape.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from core.files import write_text_atomic
from reports import fragility, load, mdm
from reports.blocks import (
    FigureOut,
    Table,
    _jinja,
    figure_bytes,
    md_table,
    md_text,
    write_figure,
)
from reports.comparisons import ALPHA
from reports.headline import Headline, headline
from reports.pool import report_processes
from reports.report_tables import bucket_table, build_tables, spec_table
from reports.surprisal import BIN_LABELS, build_samples
from reports.tables import (
    ANOMALY_CAUSES,
    Tables,
    add_comparisons,
    language_note,
    tables_before_comparisons,
)

NOTE_BPB = (
    "Why bits per byte: a token-level perplexity divides the same total NLL by a different "
    "number of units for every tokenizer (BPE tokens, patches, bytes), so a model with longer "
    "tokens shows a larger perplexity for the same predictions, and a perturbation that splits "
    "words into more tokens changes the unit count. Perplexities of different encoders are "
    "therefore not comparable. Bits per byte divides the total NLL by the UTF-8 bytes of the same "
    "text for every encoder, so it compares the probability each model assigns to identical data."
)


def _flops_note(t: Tables) -> str:
    e = t.efficiency
    base = ("Compute is not equal at equal bytes: a byte-level encoder runs its sequence model "
            "once per byte, so at equal training bytes it spends several times the FLOPs of an "
            "encoder whose model steps over multi-byte tokens or patches.")
    if len(e) and "trained_elsewhere" in e and bool(e.trained_elsewhere.any()):
        # a model trained elsewhere had another training budget: no FLOP comparison includes it
        names = ", ".join(str(x) for x in e.encoder[e.trained_elsewhere])
        base += (f" Trained elsewhere, not by this suite: {names} — BPB comparable, training compute "
                 "not: left out of every FLOP comparison.")
        e = e[~e.trained_elsewhere]
    e = e[e.flops_per_byte_infer.notna()] if len(e) else e
    if len(e) < 2:
        return base
    lo = e.loc[e.flops_per_byte_infer.idxmin()]
    ratios = [f"{r.encoder} {r.flops_per_byte_infer / lo.flops_per_byte_infer:.1f}×"
              for r in e.itertuples() if r.encoder != lo.encoder]
    return (base + f" In this run, inference FLOPs per byte relative to {lo.encoder}: "
            + ", ".join(ratios) + ". Read BPB differences together with the efficiency table.")


# Figures that draw one series (line, bar group or panel) per encoder: left out when the run
# has more encoders than ``figures.MAX_SERIES`` (``_figures``); the heat map has a row each.
PER_ENCODER_FIGURES = ("severity_", "languages", "buckets", "segments", "loss_curves", "permutations")


def crowded_note(encoders: list[str], titles: list[str], max_series: int) -> str | None:
    """The report's note when per-encoder charts are left out: None when ``encoders`` fit."""
    if len(encoders) <= max_series or not titles:
        return None
    return (f"{len(encoders)} encoders are more than the {max_series} colours a chart can tell "
            "apart, so the charts with one series per encoder are left out (those of "
            f"{'; '.join(titles)} that the run has data for). The tables hold every number (and a "
            "scaling sweep's section summarises its points).")


# Seconds of the last render's phases (wall clock): "load" (the run's files), "tables" (their
# statistics but the pairwise comparisons), "figures" (the figures and the pairwise comparisons,
# drawn and resampled in one pool of processes; "figure_seconds": each figure in the process that
# drew it), "other_tables" (the tables' text), "page" (scaling section, samples, HTML and
# Markdown written). ``tokbench run`` copies them into run.json (``timings.report_*``,
# ``report_figure_seconds``).
LAST_TIMINGS: dict[str, Any] = {}


def _figure_specs(t: Tables, data: load.RunData) -> tuple[list[tuple[str, str, str, Callable[[], Any]]], str | None]:
    """The report's figures as (key, title, caption, make) — ``make()`` draws one (None: no data)
    from tables that need no pairwise comparison (``tables_before_comparisons``) — and the note
    naming those left out (``crowded_note``). Sets the figures' style (fonts) first."""
    from reports import figures as F  # matplotlib only when rendering

    F.setup_style(figure_texts(t, data))
    colors = F.palette(t.encoders)
    specs: list[tuple[str, str, str, Callable[[], Any]]] = []
    for mode in t.modes:
        specs.append((f"severity_{mode}", f"ΔBPB vs severity ({mode})",
                      "ΔBPB = BPB(perturbed) − BPB(clean) of the same encoder on the same "
                      "documents, pooled over eval sets and seeds; bands are 95 % paired "
                      "CIs over seeds × documents (a document's perturbed and clean NLL taken "
                      "together; one seed: documents only); severity 0 is the clean baseline (ΔBPB = 0). "
                      + ("" if mode == "clean_target" else FULL_MODE_SHORT),
                      lambda m=mode: F.severity_curves(t, m, colors)))
    specs.append(("delta_heatmap", "ΔBPB heat map",
                  "ΔBPB vs the clean baseline at each perturbation's highest severity, pooled "
                  "over eval sets and seeds; red = degradation. Each panel has its own colour "
                  "scale (full-mode values are not on the clean_target scale).",
                  lambda: F.delta_heatmap(t)))
    specs += [
        ("languages", "Per language and script", "Clean BPB with 95 % CIs.",
         lambda: F.language_bars(t, colors)),
        ("buckets", "Morphology buckets", "BPB per per-word bucket on clean text.",
         lambda: F.bucket_bars(data.buckets, t.encoders, colors)),
        ("segments", "Segment (token / patch) sizes",
         "Distribution of segment lengths in bytes on the stored samples, clean vs the most "
         "severe perturbation (a segment running into a scored span from its context counts "
         "with its scored bytes). The number in each title is bytes per segment on all clean "
         "documents, the efficiency table's.",
         lambda: F.segment_hist(data.texts, t.encoders, dict(zip(t.efficiency.encoder,
                                                                  t.efficiency.bytes_per_segment))
                                if len(t.efficiency) else {})),
        ("loss_curves", "Training loss", "Training loss in bits per byte from run.json (one line per seed).",
         lambda: F.loss_curves(data.run, t.encoders, colors)),
    ]
    frag = fragility.permutation_summary(data.results, data.baselines)
    specs.append(("permutations", "Context fragility",
                  "BPB by permutation and block size (pooled over eval sets and seeds), per "
                  "encoder; compressors dashed.", lambda: fragility.permutation_figure(frag, colors)))
    crowded = len(t.encoders) > F.MAX_SERIES
    left_out = [title for key, title, _, _ in specs
                if crowded and key.startswith(PER_ENCODER_FIGURES)]
    specs = [s for s in specs if not (crowded and s[0].startswith(PER_ENCODER_FIGURES))]
    return specs, crowded_note(t.encoders, left_out, F.MAX_SERIES)


def _drawer(make: Callable[[], Any], svg: bool) -> Callable[[], tuple[tuple[bytes, bytes | None] | None, float]]:
    """A task that draws one figure: its PNG and SVG bytes (None: no data for it) and the seconds
    it took. A whole figure, from its make() to its close, in one process: no pyplot state
    crosses processes, so it may run in a forked worker (which inherits the style, the tables and
    the font caches); the bytes are the same wherever it runs."""
    def draw() -> tuple[tuple[bytes, bytes | None] | None, float]:
        t0 = time.perf_counter()
        fig = make()
        return (None if fig is None else figure_bytes(fig, svg)), time.perf_counter() - t0
    return draw


def _write_figures(specs: list[tuple[str, str, str, Callable[[], Any]]], drawn: list[Any], fig_dir: Path
                   ) -> dict[str, FigureOut]:
    """The drawn figures' files in ``fig_dir``, by key (``LAST_TIMINGS["figure_seconds"]`` too)."""
    LAST_TIMINGS["figure_seconds"] = {key: round(sec, 3) for (key, *_), (_, sec) in zip(specs, drawn)}
    out: dict[str, FigureOut] = {}
    fig_dir.mkdir(parents=True, exist_ok=True)
    for (key, title, caption, _), (files, _) in zip(specs, drawn):
        if files is not None:
            out[key] = write_figure(key, title, caption, *files, fig_dir)
    return out


def figure_texts(t: Tables, data: load.RunData) -> set[str]:
    """Every string a figure of the report can show, for the font choice of
    ``figures.setup_style``: the values of every text column of the rows the figures (and the
    scaling section's, which share the style) are drawn from, the encoder labels and the figure
    module's titles. Wider than what is plotted (an unneeded font fallback only costs time); the
    fixed labels in the figure code are checked by a test."""
    from reports import figures as F  # matplotlib only when rendering

    out = set(t.encoders) | set(F.MODE_LABEL.values()) | set(F.HEATMAP_TITLE.values())
    for df in (data.results, data.baselines, data.buckets, t.scripts):
        for col in df.columns:
            if not pd.api.types.is_numeric_dtype(df[col]):
                out.update(map(str, df[col].dropna().unique()))
    return out


def _without(obj: Any, key: str) -> Any:
    """``obj`` with ``key`` dropped at every depth (loss curves are plotted, not listed)."""
    if isinstance(obj, dict):
        return {k: _without(v, key) for k, v in obj.items() if k != key}
    if isinstance(obj, list):
        return [_without(v, key) for v in obj]
    return obj


def _provenance(data: load.RunData) -> list[tuple[str, str]]:
    """(title, pretty JSON) blocks of run.json facts, per run."""
    blocks = []
    for name, run in data.runs.items():
        if not run:
            continue
        head = {k: run.get(k) for k in ("schema_version", "tokbench_version", "created", "git_sha")
                if k in run}
        blocks.append((f"{name}: run", json.dumps(head, indent=2, ensure_ascii=False)))
        for key in ("suite", "data", "hardware", "precision", "packages", "timings"):
            if run.get(key):
                blocks.append((f"{name}: {key}", json.dumps(run[key], indent=2,
                                                            ensure_ascii=False, default=str)))
        for label, e in (run.get("encoders") or {}).items():
            blocks.append((f"{name}: encoder {label}",
                           json.dumps(_without(e, "loss_curve"), indent=2, ensure_ascii=False,
                                      default=str)))
    return blocks


BOUND_MARK = "†"  # after an encoder scored by the masked-diffusion ELBO, wherever a table names it
BOUND_NOTE = (f"{BOUND_MARK} scored by the masked-diffusion ELBO: its BPB is an upper bound on the "
              "model's own NLL, not an exact value, so a difference to it bounds the true difference "
              "from one side only, and its ΔBPB is a difference of two bounds.")
# Table columns that hold encoder labels (the comparisons' value columns are also named A and B:
# a cell is marked only where its whole text is a bound encoder's label, which a number never is)
_ENCODER_COLUMNS = frozenset({"encoder", "A", "B", "row \\ column"})


def mark_bounds(tables: dict[str, Table], bounds: Sequence[str], skip: Sequence[str] = ()) -> None:
    """In place: every label of an encoder in ``bounds`` (masked-diffusion ELBO) gets
    ``BOUND_MARK`` — in encoder columns, in column headings (matrices and wide tables list
    encoders there) — and each table that shows one gets ``BOUND_NOTE``. ``skip``: tables that
    say it in their own words (the AR-vs-MDM table)."""
    marked = {b: f"{b} {BOUND_MARK}" for b in bounds}
    if not marked:
        return
    for key, t in tables.items():
        if key in skip or not t.rows:
            continue
        hit = False
        cols = [i for i, c in enumerate(t.columns) if c in _ENCODER_COLUMNS]
        for row in t.rows:
            for i in cols:
                if row[i] in marked:
                    row[i], hit = marked[row[i]], True
        for i, c in enumerate(t.columns):
            if c in marked:
                t.columns[i], hit = marked[c], True
        if hit:
            t.note = f"{t.note} {BOUND_NOTE}".strip()


def fragility_table(data: load.RunData) -> Table:
    """The permutation panel's table (``reports.fragility``); no rows when the run has no
    permutations and no compressor baselines."""
    frag = fragility.permutation_summary(data.results, data.baselines)
    return Table("permutations", "BPB by permutation and block size", fragility.COLUMNS,
                 fragility.table_rows(frag), fragility.NOTE, {4, 5, 6})


def _render(data: load.RunData, out_dir: Path, title: str, n_boot: int, n_perm: int, seed: int,
            svg: bool, processes: int | None) -> Path:
    if processes is None:  # read before the tables: a bad TOKBENCH_REPORT_PROCESSES fails at once
        processes = report_processes()
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    t, idx = tables_before_comparisons(data, n_boot=n_boot, n_perm=n_perm, seed=seed, processes=processes)
    specs, crowded = _figure_specs(t, data)
    t1 = time.perf_counter()
    # The figures need no pairwise comparison, so they are drawn in the comparisons' pool of
    # processes, handed out first (the severity grids and the heat map are the longest tasks):
    # one after the other, the two phases took 5.5 s and 4.4 s of a standard seed's report on
    # the H200 host, the figures' 4.4 s mostly its longest figure, with the rest of
    # the processes idle (BENCHMARKS.md). The files are the same bytes either way.
    t, drawn = add_comparisons(t, idx, n_boot=n_boot, n_perm=n_perm, seed=seed, processes=processes,
                               beside=[_drawer(make, svg) for *_, make in specs])
    t2 = time.perf_counter()
    figs = _write_figures(specs, drawn, out_dir / "figures")
    tables = build_tables(t)
    tables["buckets"] = bucket_table(data.buckets, t.encoders)
    tables["permutations"] = fragility_table(data)
    tables["ar_vs_mdm"] = spec_table("ar_vs_mdm", mdm.TITLE, mdm.TABLE_SPEC,
                                 mdm.ar_vs_mdm(data), note=mdm.NOTE)
    mark_bounds(tables, t.bounds, skip=["ar_vs_mdm"])
    t3 = time.perf_counter()
    # Scaling sweeps (flop_budget set): their own section, fitted from the same rows.
    from reports.scaling import with_train_part_bytes
    from reports.scaling_report import scaling_section

    # run.json's passes per point give the text size, so the vertices can say how often D_opt reads it
    scaling = scaling_section(with_train_part_bytes(data.results, data.run.get("encoders") or {}),
                              out_dir / "figures", n_boot=min(n_boot, 400), seed=seed, svg=svg)
    samples = build_samples(data.texts, t.encoders)
    from matplotlib.colors import to_hex

    from reports.figures import palette

    colors = {k: to_hex(v) for k, v in palette(t.encoders).items()}
    suites = [r.get("suite") for r in data.runs.values() if r and isinstance(r.get("suite"), dict)]
    suite_names = list(dict.fromkeys(str(s.get("name")) for s in suites if s.get("name")))
    ctx = dict(
        title=title,
        suite_name=", ".join(suite_names),
        runs=list(data.runs),
        git_sha=next((str(r.get("git_sha")) for r in data.runs.values() if r.get("git_sha")), ""),
        created=next((str(r.get("created")) for r in data.runs.values() if r.get("created")), ""),
        precision=precision_text(data.runs),
        rendered=_dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        encoders=[(e, colors[e]) for e in t.encoders],
        modes=t.modes, primary_mode=t.primary_mode, level_mode=t.level_mode, n_seeds=t.n_seeds,
        headline=headline(t, data.results, suites),
        # the files this report read: a run without analyses writes no buckets.csv
        read_files=[f for f, have in (("results.csv", True), ("samples.jsonl", len(data.samples)),
                                      ("buckets.csv", len(data.buckets)),
                                      ("run.json", any(data.runs.values()))) if have],
        bound_label=lambda e: f"{e} {BOUND_MARK}" if e in t.bounds else e,
        verdict_lines=t.verdict_lines, tables=tables, figs=figs, samples=samples,
        bins=list(enumerate(BIN_LABELS)), note_bpb=NOTE_BPB, note_flops=_flops_note(t),
        provenance=_provenance(data), warnings=data.warnings + ([crowded] if crowded else [])
        + ([bound_warning(t.bounds)] if t.bounds else []), n_boot=n_boot, n_perm=n_perm,
        stat_seed=seed, language_note=language_note(data),
        sections=sections(t, mdm=bool(tables["ar_vs_mdm"].rows),
                          fragility=bool(tables["permutations"].rows)),
        anomaly_causes=[(m, ANOMALY_CAUSES[m]) for m in t.modes
                        if len(t.anomalies) and m in set(t.anomalies["mode"])],
        full_mode_note=FULL_MODE_NOTE, alpha=ALPHA,
        scaling_html=scaling.html if scaling is not None else "",
    )
    html = _jinja().get_template("report.html.j2").render(**ctx)
    html_path = out_dir / "report.html"
    md = _markdown(ctx, tables, figs) + ("\n" + scaling.markdown if scaling is not None else "")
    write_text_atomic(out_dir / "report.md", md)
    write_text_atomic(html_path, html)  # last: report.html present means the report is whole
    LAST_TIMINGS.update(tables=t1 - t0, figures=t2 - t1, other_tables=t3 - t2, page=time.perf_counter() - t3)
    return html_path


def bound_warning(bounds: Sequence[str]) -> str:
    """The report's warning when some encoders' BPB is a masked-diffusion ELBO (an upper bound):
    tables mark them (``mark_bounds``); the figures draw the bound as it is."""
    many = len(bounds) > 1
    return (f"{', '.join(bounds)} {'are' if many else 'is'} scored by the masked-diffusion ELBO "
            f"(marked {BOUND_MARK} in tables): {'their' if many else 'its'} BPB is an upper bound on "
            f"the model's own NLL, not an exact value; the figures draw the bound.")


def precision_text(runs: dict[str, dict[str, Any]]) -> str:
    """How the runs computed (run.json ``precision``; runs before it have none): "training
    bfloat16, scoring float32, deterministic kernels", one phrase per distinct setting. On a GPU
    without ``budget.deterministic`` a repeat of a seed gives other numbers, and the phrase says so."""
    seen: list[str] = []
    for run in runs.values():
        p = (run or {}).get("precision")
        if not isinstance(p, dict):
            continue
        parts = [f"training {p.get('train')}", f"scoring {p.get('score')}"]
        if p.get("deterministic"):
            parts.append("deterministic kernels")
        elif str((run.get("hardware") or {}).get("device", "")).startswith("cuda"):
            parts.append("GPU kernels not deterministic (a repeated seed differs)")
        text = ", ".join(parts)
        if text not in seen:
            seen.append(text)
    return "; ".join(seen)


def _markdown(ctx: dict[str, Any], tables: dict[str, Table], figs: dict[str, FigureOut]) -> str:
    L = [f"# {md_text(ctx['title'])}", ""]
    if ctx["git_sha"] or ctx["created"]:
        L += [f"Run created {md_text(ctx['created'] or '—')}, git {md_text(ctx['git_sha'] or '—')}; "
              f"{ctx['n_seeds']} seed(s); bootstrap {ctx['n_boot']} resamples."
              + (f" Computed in {md_text(ctx['precision'])}." if ctx["precision"] else ""), ""]
    L += [line for w in ctx["warnings"] for line in (f"> {md_text(w)}", "")]  # as the HTML's
    for sec in ctx["sections"]:
        body = [md_table(tables[k]) for k in sec.tables if k in tables and tables[k].rows]
        fl = [f"![{figs[k].title}]({figs[k].file})" for k in sec.figures if k in figs]
        lead = sec.markdown(ctx) if sec.markdown else []
        if not body and not fl and not lead:
            continue
        L += [f"## {sec.title}", ""] + lead + fl + ([""] if fl else []) + body
    return "\n".join(L).rstrip() + "\n"


@dataclass
class Section:
    """One report section: its anchor ``key`` (also the template ``sections/<key>.html.j2``),
    nav ``title``, the tables and figures it shows (Markdown lists them in this order) and an
    optional ``markdown(ctx) -> lines`` for prose the Markdown report leads the section with.

    To add a section: write ``reports/templates/sections/<key>.html.j2`` and one entry in
    ``sections()``; its tables go into ``build_tables`` (or the ``tables`` dict in ``_render``)
    and its figures into ``_figures``.
    """

    key: str
    title: str
    tables: list[str] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    markdown: Callable[[dict[str, Any]], list[str]] | None = None


FULL_MODE_SHORT = (
    "Full mode scores the perturbed text itself, so its ΔBPB is mostly the cost of encoding the "
    "inserted or changed characters, not a loss of robustness.")
FULL_MODE_NOTE = (
    "In full mode the perturbed text itself is scored and its NLL divided by the clean text's "
    "bytes (bpb_clean). A perturbation that inserts rare characters (styled Unicode letters, "
    "homoglyphs, noise bytes) adds bits that any model must spend to encode those characters, "
    "so full-mode ΔBPB measures the cost of encoding the perturbed text — often tens of bits per "
    "byte — not how much the perturbation confuses the model about the rest of the text. That "
    "is the question clean_target answers (the primary view above). The numbers are kept here, "
    "apart from the headline, for completeness.")


def headline_md(h: Headline, label: Callable[[str], str] = str) -> list[str]:
    """The report's opening answer (``reports.headline``) as Markdown lines, data text escaped;
    ``label``: an encoder's label as shown (with the ELBO mark)."""
    out = [f"**{md_text(h.question)}**", ""] + ([md_text(h.reading), ""] if h.reading else [])
    if h.fallback:
        out += [md_text(h.fallback), ""]
    for m in h.matchups:
        out += [f"*{md_text(label(m.tf))} vs {md_text(label(m.bpe))}*", ""]
        out += [f"- **{c.badge}** — {md_text(c.text)}" for c in m.claims] + [""]
    out += ["How sure are we:", ""] + [f"- {md_text(k)}: {md_text(v)}" for k, v in h.certainty]
    out += [f"- caveat: {md_text(c)}" for c in h.caveats]
    return out + [""]


def _summary_md(ctx: dict[str, Any]) -> list[str]:
    return headline_md(ctx["headline"], ctx["bound_label"]) + ([f"- {md_text(f.text)}" for f in ctx["verdict_lines"]] + ["", md_table(ctx["tables"]["verdict"]),
            f"> {md_text(ctx['note_bpb'])}", "", f"> {md_text(ctx['note_flops'])}", ""])


def _full_md(ctx: dict[str, Any]) -> list[str]:
    return [f"> {FULL_MODE_NOTE}", ""]


def _anomalies_md(ctx: dict[str, Any]) -> list[str]:
    if not ctx["tables"]["anomalies"].rows:
        return []
    return [md_table(ctx["tables"]["anomalies"])] + [
        f"- Possible causes ({md_text(m)}): {md_text(text)}" for m, text in ctx["anomaly_causes"]] + [""]


def sections(t: Tables, mdm: bool = False, fragility: bool = False) -> list[Section]:
    """The report's sections in order (the nav bar, the HTML body and the Markdown follow it).
    mdm: the run pairs AR with masked-diffusion encoders (``reports/mdm.py``): add that section.
    fragility: the run has permutations or compressor baselines (``reports.fragility``)."""
    others = [m for m in t.modes if m != t.primary_mode]
    out = [
        Section("summary", "Summary", [], [], _summary_md),
        Section("robustness", "Robustness", ["robustness", "families"],
                [f"severity_{t.primary_mode}", "delta_heatmap"], _anomalies_md),
    ]
    if others:
        out.append(Section("full_mode", "Full mode",
                           [k + f"_{m}" for m in others for k in ("robustness", "families")],
                           [f"severity_{m}" for m in others], _full_md))
    out += [
        Section("comparisons", "Comparisons",
                ["matrix_clean", "matrix", *[f"matrix_{m}" for m in others], "comparisons"]),
        *([Section("mdm", "AR vs MDM", ["ar_vs_mdm"])] if mdm else []),
        Section("multilingual", "Multilingual", ["languages", "languages_delta", "scripts"],
                ["languages"]),
        Section("morphology", "Morphology", ["buckets"], ["buckets"]),
        *([Section("fragility", "Context fragility", ["permutations"], ["permutations"])]
          if fragility else []),
        Section("efficiency", "Efficiency", ["efficiency"], ["loss_curves", "segments"]),
        Section("samples", "Samples"),
        Section("provenance", "Config & provenance", ["cells"]),
    ]
    return out


def render_run(run_dir: Path, out_dir: Path | None = None, *, n_boot: int = 1000,
               n_perm: int = 10000, seed: int = 0, svg: bool = True,
               processes: int | None = None) -> Path:
    """Render ``report.html``, ``report.md`` and ``figures/*.png`` (+ ``.svg``) for one run.

    run_dir: a run directory (results.csv required). out_dir: default run_dir. n_boot: bootstrap
    resamples per interval; n_perm: Monte Carlo permutations when a comparison has more than 14
    documents; seed: seed of all resampling (same seed → same numbers). processes: how many
    processes parse samples.jsonl, run the tables' resampling and draw the figures (1 = in this one; None =
    ``reports.pool.report_processes()``: ``TOKBENCH_REPORT_PROCESSES`` or the usable CPUs, at
    most 8); the files are the same bytes either way (every draw is keyed by its group or
    comparison, not by the order of computation). Returns the HTML path.
    """
    run_dir = Path(run_dir)
    if processes is None:  # a bad TOKBENCH_REPORT_PROCESSES fails before anything is read
        processes = report_processes()
    LAST_TIMINGS.clear()
    t0 = time.perf_counter()
    data = load.load_run(run_dir, processes=processes)
    LAST_TIMINGS["load"] = time.perf_counter() - t0
    suite = data.run.get("suite") or {}
    name = suite.get("name") if isinstance(suite, dict) else None
    title = f"tokbench report — {name or run_dir.resolve().name}"
    return _render(data, Path(out_dir) if out_dir else run_dir, title, n_boot, n_perm, seed, svg,
                   processes)


def render_compare(run_dirs: list[Path], out_dir: Path, *, n_boot: int = 1000,
                   n_perm: int = 10000, seed: int = 0, svg: bool = True,
                   processes: int | None = None) -> Path:
    """One report across runs: encoders are labelled ``<run dir name>/<label>`` and compared
    pairwise on the documents they share (options as ``render_run``). Returns the HTML path."""
    if processes is None:
        processes = report_processes()
    LAST_TIMINGS.clear()
    t0 = time.perf_counter()
    runs = [load.load_run(Path(p), processes=processes) for p in run_dirs]
    LAST_TIMINGS["load"] = time.perf_counter() - t0
    data = load.merge_runs(runs)
    title = "tokbench comparison — " + ", ".join(data.runs)
    return _render(data, Path(out_dir), title, n_boot, n_perm, seed, svg, processes)


__all__ = ["render_run", "render_compare"]
