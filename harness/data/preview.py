"""``tokbench perturb NAME``: a perturbation at several severities side by side, with the measured
character edit rate next to each nominal severity.

    python -c "from harness.data.preview import preview; print(preview('typo.keyboard', [0.05, 0.2], 'The quick brown fox.', 0, {}))"

Newlines and tabs are shown as ``⏎`` and ``⇥`` so every row stays on one line; ``bytes`` is the
UTF-8 length, which shows changes that are invisible on screen (``unicode.nfd``).
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.data.perturb import apply
from harness.infra.plugins import default_label, resolve
from perturbations.base import Perturbation
from perturbations.measure import edit_rate

DEFAULT_SEVERITIES: tuple[float, ...] = (0.0, 0.02, 0.05, 0.1, 0.2)
SAMPLE_TEXT = (
    "Tokenizer-free models read raw bytes, so a typo changes one byte instead of a whole token. "
    "Ça coûte cher: naïve café owners in Zürich pay 42 € for crêpes."
)


def _visible(text: str) -> str:
    return text.replace("\r\n", "⏎").replace("\n", "⏎").replace("\r", "⏎").replace("\t", "⇥")


def _make(cls: type, severity: float, params: dict[str, Any]) -> Perturbation:
    name = getattr(cls, "registry_name", cls.__qualname__)
    fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
    known = sorted(fields - {"lang", "severity"})
    for key in sorted(params):
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(
                f"perturbation {name!r} has no parameter {key!r}{hint}; parameters: {', '.join(known) or 'none'}"
            )
    # the suite loader's type checks and the plugin's own, as for a suite entry: a value of the
    # wrong type is one line naming the parameter (`perturb: alphabet: expected a string, got
    # null`), not an error from inside perturb()
    from harness.config.build import plugin_config
    from harness.config.where import Where

    return plugin_config(cls, {**params, "severity": severity}, Where(default="perturb"))


def preview(
    name_or_cls: str | type,
    severities: Sequence[float] | None = None,
    text: str | None = None,
    seed: int = 0,
    params: dict[str, Any] | None = None,
    lang: str | None = None,
    plugin_paths: Sequence[str | Path] = (),
) -> str:
    """Render one table: a row per severity with its measured edit rate, UTF-8 size and the text.

    name_or_cls: a registered name, ``"module:Class"`` (looked up in the working directory, then
    in ``plugin_paths``), or the class itself. params: other fields of the perturbation (not severity). The rng is seeded as in
    a run (``harness.data.perturb.rng_for`` with the suite's default perturbation id, every field but
    ``lang`` as params, document id ``"preview"``), so the rows are what a run with this seed gives
    a document of that id. A perturbation with a ``fit`` hook is fitted on the text itself.
    """
    cls = name_or_cls if isinstance(name_or_cls, type) else resolve("perturbation", name_or_cls,
                                                                             [Path.cwd(), *map(Path, plugin_paths)])
    name = getattr(cls, "registry_name", cls.__qualname__) if isinstance(name_or_cls, type) else name_or_cls
    # the perturbation id a suite entry without 'id' gets (harness.config): the registered name, or
    # for "module:Class" the class's registry name / class name — it is part of the rng seed
    pid = default_label(name, cls)
    text = SAMPLE_TEXT if text is None else text
    params = dict(params or {})
    sevs = list(DEFAULT_SEVERITIES if not severities else severities)
    rows = []
    for s in sevs:
        p = _make(cls, s, params)
        p.fit([text])
        run_params = {f.name: getattr(p, f.name) for f in dataclasses.fields(p) if f.name != "lang"}
        out = apply(p.for_language(lang), text, seed, pid, run_params, "preview")
        rows.append((f"{s:g}", f"{edit_rate(text, out):.3f}", str(len(out.encode("utf-8", "surrogatepass"))), _visible(out)))
    header = ("severity", "edit rate", "bytes", "text")
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(3)]
    shown = ", ".join(f"{k}={v!r}" for k, v in sorted(params.items()))
    lines = [f"{name}{' (' + shown + ')' if shown else ''}  seed={seed}  {len(text)} characters"]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, [*widths, 0])).rstrip())
    lines.append("  ".join("-" * w for w in [*widths, 4]))
    for r in rows:
        lines.append("  ".join([r[0].rjust(widths[0]), r[1].rjust(widths[1]), r[2].rjust(widths[2]), r[3]]))
    return "\n".join(lines)
