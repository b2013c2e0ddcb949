"""``firefox_l10n``: UI strings of ``firefox-esr-l10n-*`` language packs (.ftl/.properties in the
langpack .xpi): the only offline source of Arabic, Hebrew, Thai and Devanagari sentences."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from core.decompress import MAX_MEMBER_BYTES, read_at_most
from sources.base import SourceContext
from sources.debian import DebianSource
from sources.fetch import SourceUnavailableError
from sources.registry import register
from sources.script import detect_script, script_counts

# Attributes holding keyboard shortcuts or CSS, not language.
_SKIP_ATTRS = {"accesskey", "commandkey", "key", "keycode", "modifiers", "style", "width",
               "height", "size"}
_FTL_MESSAGE = re.compile(r"^(-?[A-Za-z][\w-]*)[ \t]*=[ \t]*(.*)$")
_FTL_ATTR = re.compile(r"^[ \t]+\.([\w-]+)[ \t]*=[ \t]*(.*)$")
_PRINTF = re.compile(r"%(?:\d+\$)?(?:l?[Ssd]|[0-9.]*[fu])|#\d")


def _matching_brace(s: str, i: int) -> int:
    """Index of the ``}`` closing the ``{`` at ``s[i]`` (len(s) if unbalanced); braces inside a
    string literal (``{ "{" }``) do not count."""
    depth, j = 0, i
    while j < len(s):
        c = s[j]
        if c == '"' and depth > 0:
            j += 1
            while j < len(s) and s[j] != '"':
                j += 2 if s[j] == "\\" else 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return len(s)


def resolve_placeables(s: str) -> str:
    """Fluent pattern → plain text: a select expression becomes its default (``*[...]``)
    variant, a string literal ``{ "x" }`` its text; variables, terms and functions are dropped."""
    out, i = [], 0
    while i < len(s):
        if s[i] != "{":
            out.append(s[i])
            i += 1
            continue
        j = _matching_brace(s, i)
        inner = s[i + 1 : j]
        arrow = inner.find("->")
        if arrow >= 0 and "{" not in inner[:arrow]:  # a select expression
            variants = inner[arrow + 2 :]
            m = re.search(r"\*\[[^\]]*\]", variants)
            if m:
                rest = variants[m.end():]
                nxt = re.search(r"\n\s*\*?\[[^\]]*\]", rest)
                out.append(resolve_placeables(rest[: nxt.start()] if nxt else rest))
        else:
            lit = re.fullmatch(r'\s*"((?:[^"\\]|\\.)*)"\s*', inner)
            if lit:
                out.append(lit.group(1))
        i = j + 1
    return "".join(out)


def _clean_string(s: str) -> str:
    return " ".join(_PRINTF.sub("", s).split())


def parse_ftl(text: str) -> list[str]:
    """User-visible strings of a Fluent (.ftl) file: message values and attributes (without
    shortcut keys and CSS), placeables resolved, whitespace normalized. Terms (``-brand-name``)
    and their attributes are skipped: they are product names."""
    entries: list[tuple[bool, list[str]]] = []  # (keep, pattern lines)
    cur: list[str] | None = None
    in_term = False
    for line in text.splitlines():
        if line.startswith("#"):
            cur = None
            continue
        if not line.strip():
            continue
        m = _FTL_MESSAGE.match(line)
        if m:
            in_term = m.group(1).startswith("-")
            cur = [m.group(2)]
            entries.append((not in_term, cur))
            continue
        a = _FTL_ATTR.match(line)
        if a and cur is not None:
            cur = [a.group(2)]
            entries.append((not in_term and a.group(1) not in _SKIP_ATTRS, cur))
            continue
        if cur is not None and line[:1] in (" ", "\t"):
            cur.append(line)
    out = []
    for keep, lines in entries:
        if keep:
            s = _clean_string(resolve_placeables("\n".join(lines)))
            if s:
                out.append(s)
    return out


def parse_properties(text: str) -> list[str]:
    """Values of a Java .properties file without shortcut keys; printf placeholders (``%S``,
    ``%1$S``, ``#1``) removed; of ``a;b`` plural forms only the first is kept."""
    out = []
    # A value continues on the next line after a trailing backslash.
    for line in re.sub(r"\\\r?\n[ \t]*", "", text).splitlines():
        line = line.strip()
        if not line or line[0] in "#!" or "=" not in line:
            continue
        key, value = (x.strip() for x in line.split("=", 1))
        if key.rsplit(".", 1)[-1].lower() in _SKIP_ATTRS or key.lower().endswith("accesskey"):
            continue
        value = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), value)
        value = re.sub(r"\\(.)", lambda m: " " if m.group(1) in "nt" else m.group(1), value)
        s = _clean_string(value.split(";")[0])
        if s:
            out.append(s)
    return out


@register("firefox_l10n")
@dataclass(frozen=True, kw_only=True)
class FirefoxL10nSource(DebianSource):
    """UI strings of a Firefox ESR language pack (``firefox-esr-l10n-ar``, ``-he``, ``-th``,
    ``-hi-in``, ``-el`` …), one unit per string, packed one string a line.

    drop_fallback: for a language whose script is not Latin, drop strings with no letter of a
    non-Latin script — untranslated English fallbacks, product names and identifiers."""

    prefix: ClassVar[str] = "firefox-esr-l10n-"
    sep: ClassVar[str] = "\n"
    drop_fallback: bool = True

    def _strings(self, root: Path) -> list[tuple[str, str]]:
        xpis = sorted((root / "usr" / "lib").rglob("*.xpi"))
        if not xpis:
            raise SourceUnavailableError(f"firefox_l10n source: no langpack .xpi in {self.package}")
        out = []
        for xpi in xpis:
            with zipfile.ZipFile(xpi) as z:
                for name in sorted(z.namelist()):
                    if name.endswith(".ftl"):
                        parse = parse_ftl
                    elif name.endswith(".properties"):
                        parse = parse_properties
                    else:
                        continue
                    with z.open(name) as member:
                        raw = read_at_most(member, MAX_MEMBER_BYTES, f"{xpi}: {name}")
                    text = raw.decode("utf-8", errors="replace")
                    out.extend((name, s) for s in parse(text))
        return out

    def units(self, root: Path, ctx: SourceContext) -> Iterator[tuple[str, str]]:
        strings = self._strings(root)
        non_latin = detect_script("\n".join(s for _, s in strings)) not in ("Latn", "Zyyy")
        for name, s in strings:
            if self.drop_fallback and non_latin:
                if not any(k != "Latn" for k in script_counts(s)):
                    continue
            yield name, s
