"""The docs' references resolve: every relative link (and its #anchor, as GitHub makes heading
anchors), every `benchmarks/...` path and every `tests/....py` file named in README.md,
BENCHMARKS.md and docs/*.md exists, and every results log BENCHMARKS.md names exists under
benchmarks/results/ (its tables name logs relative to that folder)."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]
RESULTS = ROOT / "benchmarks" / "results"


def expand(path: str) -> list[str]:
    """`a_{x,y}.log` → [`a_x.log`, `a_y.log`] (shell brace expansion, as the docs write groups)."""
    parts = re.split(r"\{([^{}]*)\}", path)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def anchors(doc: Path) -> set[str]:
    """GitHub's anchors of a markdown file's headings: lower case, punctuation but `-` and `_`
    dropped, spaces as `-`."""
    heads = re.findall(r"^#+ +(.+?) *$", doc.read_text(encoding="utf-8"), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


def test_anchor_slugs() -> None:
    assert "where-issue-16s-targets-stand" in {
        re.sub(r"[^\w\- ]", "", "Where issue 16's targets stand".lower()).replace(" ", "-")}


def links(text: str) -> set[str]:
    """Relative markdown link targets, anchors dropped."""
    targets = {t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text)}
    return {t for t in targets if t and "://" not in t and not t.startswith("mailto:")}


def bench_paths(text: str) -> set[str]:
    """`benchmarks/...` paths named anywhere in the text (placeholders like NAME or globs skipped)."""
    found = set()
    for m in re.findall(r"(?<![\w/.:])benchmarks/[\w./{},*-]*", text):
        m = m.rstrip(".,")
        if "*" in m or "NAME" in m or "<" in m:
            continue
        found.update(expand(m))
    return found


def cited_tests(text: str) -> set[str]:
    """`tests/....py` files named anywhere in the text (the docs cite a guarantee's test by path)."""
    return set(re.findall(r"(?<![\w/.:])tests/[\w/]+\.py", text))


def results_names(text: str) -> set[str]:
    """Log-like names in backticks (a `_` or `/` in them, ending in a results file's suffix or `/`)."""
    names = set()
    for tok in re.findall(r"`([^`\s]+)`", text):
        if tok.startswith(("benchmarks/", "/", "$", "~", ".")) or not ("_" in tok or "/" in tok):
            continue
        if re.search(r"\.(log|json|csv|gz|md)$|/$", tok):
            names.update(expand(tok))
    return names


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_links_and_benchmark_paths_exist(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    missing = sorted(t for t in links(text) if not (doc.parent / t).exists())
    missing += sorted(p for p in bench_paths(text) if not (ROOT / p).exists())
    missing += sorted(p for p in cited_tests(text) if not (ROOT / p).is_file())
    for target in re.findall(r"\]\(([^)\s#]*\.md)#([^)\s]+)\)", text):
        path, anchor = target
        if (doc.parent / path).exists() and anchor not in anchors(doc.parent / path):
            missing.append(f"{path}#{anchor}")
    assert not missing, f"{doc.name}: {missing}"


def test_benchmarks_md_names_existing_logs() -> None:
    text = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8")
    everything = [p.relative_to(RESULTS).as_posix() + ("/" if p.is_dir() else "") for p in RESULTS.rglob("*")]
    missing = sorted(n for n in results_names(text)
                     if not any(e == n or e.endswith("/" + n) for e in everything))
    assert not missing, missing


def test_benchmarks_md_stays_short() -> None:
    lines = (ROOT / "BENCHMARKS.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 400
    assert not [line for line in lines if re.search(r"[Ss]ession \d", line)]
