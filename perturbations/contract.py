"""The properties every perturbation must have, as reusable checks (the test suite runs them on
every registered perturbation; plugin authors can run them on theirs):

    python -m perturbations.contract my_perturbs:ShoutingCase

1. severity 0 returns the text byte-identical;
2. the same rng seed gives the same output (and a random perturbation gives different outputs
   for different seeds on a long multilingual text);
3. no exception on hard inputs (empty, whitespace, emoji, combining marks, RTL, NUL), and the
   output is a ``str`` that encodes to UTF-8 whenever the input does.

Every field of the perturbation needs a default so it can be built as ``cls(severity=s)``.
"""

from __future__ import annotations

import importlib
import random
import sys
from collections.abc import Callable

from perturbations.base import Perturbation

# Inputs that break naive text code. Each is a valid str that encodes to UTF-8.
HARD_TEXTS: dict[str, str] = {
    "empty": "",
    "whitespace": " \t\n\r\n  \u00a0\u3000 ",
    "emoji": "Family 👩\u200d👩\u200d👧\u200d👦 flags 🇩🇪🇯🇵 skin 👍🏽 keycap 1\ufe0f\u20e3 ok 😀😀",
    "combining": "e\u0301 a\u0308\u0304 Z\u0336\u0327 q\u0323\u0302 \u0301leading mark, naïve cafe\u0301",
    "rtl": "שָׁלוֹם עולם \u202eabc\u202c مرحبا بالعالم، كيف حالك؟ 123",
    "nul": "a\x00b\x00\x00 c\x01\x7f end\x00",
    "mixed": "The café in Zürich; Москва — столица. Αθήνα είναι ωραία. 東京は大きい。 ไทย हिन्दी 1234",
}

# A longer text in several scripts, for "different seeds differ" (every built-in finds work here).
RICH_TEXT = " ".join(
    [
        "The quick brown fox jumps over the lazy dog while the committee discusses their "
        "government's recommendations about accommodation, definitely separately.",
        "Walkers walked while walking; the tokenizer tokenized text before tokenization. "
        "Unhappy readers read readable rereadings; connected connections keep connecting, "
        "preprocessing the database of the data base in playgrounds.",
        "Naïve café owners in Zürich pay 42 € for crêpes; élève, señor, Ångström, œuvre.",
        "Привет, мир! Москва — столица России. Съешь же ещё этих мягких французских булок.",
        "Αθήνα είναι ωραία πόλη. Ζεύς και Ήρα.",
        "שָׁלוֹם עולם, مَرْحَبًا بالعالم. 한국어 문장. 東京は大きい。",
    ]
    * 4
)

Factory = Callable[..., Perturbation]


def build(cls: Factory, severity: float, fit_texts: list[str] | None = None) -> Perturbation:
    """Instantiate at ``severity`` and call ``fit`` (on ``fit_texts`` or ``[RICH_TEXT]``)."""
    p = cls(severity=severity)
    p.fit(list(fit_texts) if fit_texts is not None else [RICH_TEXT])
    return p


def check_zero_is_identity(cls: Factory) -> list[str]:
    """Severity 0 must return every text unchanged, byte for byte."""
    p = build(cls, 0.0)
    fails = []
    for name, text in {**HARD_TEXTS, "rich": RICH_TEXT}.items():
        for seed in (0, 1):
            out = p.perturb(text, random.Random(seed))
            if out != text:
                fails.append(f"severity 0 changed the {name!r} text (seed {seed}): {out[:60]!r}")
    return fails


def check_hard_inputs(cls: Factory, severities: tuple[float, ...] = (0.3, 1.0)) -> list[str]:
    """No exception on hard inputs; output is a str, UTF-8 encodable."""
    fails = []
    for s in severities:
        p = build(cls, s)
        for name, text in HARD_TEXTS.items():
            try:
                out = p.perturb(text, random.Random(7))
            except Exception as e:  # noqa: BLE001 - we report any failure
                fails.append(f"severity {s}, {name!r} text: raised {type(e).__name__}: {e}")
                continue
            if not isinstance(out, str):
                fails.append(f"severity {s}, {name!r} text: returned {type(out).__name__}, not str")
                continue
            try:
                out.encode("utf-8")
            except UnicodeEncodeError as e:
                fails.append(f"severity {s}, {name!r} text: output is not valid UTF-8: {e}")
    return fails


def check_determinism(cls: Factory, severity: float = 0.5) -> list[str]:
    """Same seed -> same output (fresh rngs, and after other calls on the same instance)."""
    p = build(cls, severity)
    first = [p.perturb(RICH_TEXT, random.Random(s)) for s in (3, 4)]
    again = [p.perturb(RICH_TEXT, random.Random(s)) for s in (4, 3)][::-1]
    return [] if first == again else ["the same seed gave different outputs"]


def check_seeds_differ(cls: Factory, severity: float = 0.1) -> list[str]:
    """A random perturbation must give different outputs for different seeds (at a low severity:
    near 1 some perturbations rightly edit every eligible site whatever the seed)."""
    if not getattr(cls, "is_random", True):
        return []
    p = build(cls, severity)
    outs = {p.perturb(RICH_TEXT, random.Random(s)) for s in (1, 2, 3)}
    return [] if len(outs) > 1 else [f"is_random is True but seeds 1, 2, 3 gave the same output at severity {severity}"]


def check_all(cls: Factory) -> list[str]:
    """Every check above; returns the failures (empty = the perturbation keeps the contract)."""
    return (
        check_zero_is_identity(cls)
        + check_hard_inputs(cls)
        + check_determinism(cls)
        + check_seeds_differ(cls)
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or ":" not in args[0]:
        print("usage: python -m perturbations.contract package.module:ClassName", file=sys.stderr)
        return 2
    module, _, attr = args[0].partition(":")
    sys.path.insert(0, "")  # the working directory, as the harness does for module:Class names
    cls = getattr(importlib.import_module(module), attr)
    fails = check_all(cls)
    for f in fails:
        print(f"FAIL {args[0]}: {f}")
    if not fails:
        print(f"ok {args[0]}: severity 0 identity, determinism, seeds, hard inputs")
    return 1 if fails else 0


if __name__ == "__main__":
    raise SystemExit(main())
