"""``fortunes``: the quotes of a ``fortunes-*`` Debian package (strfile ``%``-separated files;
de es it cs pl ru bg zh …), packed into documents by ``sources.debian.pack_units``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from sources.base import SourceContext
from sources.debian import DebianSource
from sources.registry import register

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_OVERSTRIKE = re.compile(r"[^\n]\x08")  # "_\bX" underline and "X\bX" bold of old terminals
_FORTUNE_SEP = re.compile(r"^%[ \t]*$", re.M)


def clean_fortune_file(text: str) -> list[str]:
    """Split one strfile text into quotes, removing terminal escapes and overstrike."""
    text = _OVERSTRIKE.sub("", _ANSI.sub("", text.replace("\r\n", "\n")))
    out = []
    for q in _FORTUNE_SEP.split(text):
        q = "\n".join(line.rstrip() for line in q.strip("\n").splitlines())
        if q.strip():
            out.append(q)
    return out


@register("fortunes")
@dataclass(frozen=True, kw_only=True)
class FortunesSource(DebianSource):
    """Quotes of a ``fortunes-*`` package (e.g. ``fortunes-de``, ``fortunes-ru``, ``fortunes-zh``,
    ``fortunes`` for English). Reads every plain text file under ``usr/share/games`` except the
    strfile ``.dat`` indexes, symlinks (``.u8`` aliases), offensive (``off/``) collections and
    files that are not valid UTF-8."""

    prefix: ClassVar[str] = "fortunes-"

    def units(self, root: Path, ctx: SourceContext) -> Iterator[tuple[str, str]]:
        base = root / "usr" / "share" / "games"
        files = sorted(p for p in base.rglob("*") if p.is_file() and not p.is_symlink()
                       and p.suffix != ".dat" and "off" not in p.relative_to(base).parts[:-1])
        for f in files:
            data = f.read_bytes()
            if data.startswith(b"#!"):
                continue  # a wrapper script
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                ctx.log(f"fortunes: skipping {f.relative_to(root)} (not UTF-8)")
                continue
            rel = f.relative_to(root).as_posix()
            for q in clean_fortune_file(text):
                yield rel, q
