"""``translit``: Cyrillic and Greek written in Latin letters ('Москва' -> 'Moskva')."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

import numpy as np

from perturbations.chartable import CodepointPerturbation
from perturbations.codepoints import CharTable
from perturbations.registry import register
from perturbations.wordsel import replace_in_words

# A practical romanisation (close to the informal one people type; BGN/PCGN-like).
CYRILLIC = dict(zip("абвгдезийклмнопрстуфыэ", "abvgdeziyklmnoprstufye")) | {
    "ё": "yo", "ж": "zh", "х": "kh", "ц": "ts", "ч": "ch", "ш": "sh", "щ": "shch", "ъ": "",
    "ь": "'", "ю": "yu", "я": "ya", "є": "ye", "і": "i", "ї": "yi", "ґ": "g", "ў": "u", "ђ": "dj",
    "ј": "j", "љ": "lj", "њ": "nj", "ћ": "c", "џ": "dz", "ѓ": "gj", "ќ": "kj", "ѕ": "dz",
}  # fmt: skip
GREEK = dict(zip("αβγδεζηικλμνξοπρσςτυφω", "avgdeziiklmnxoprsstyfo")) | {
    "θ": "th", "χ": "ch", "ψ": "ps",
}
ROMAN: dict[str, str] = CYRILLIC | GREEK
# Ukrainian spelling of the letters it reads differently ('Київ' -> 'Kyiv', 'Харків' -> 'Kharkiv').
ROMAN_UK: dict[str, str] = ROMAN | {"и": "y", "г": "h", "ї": "i"}


def _romanizer(table: dict[str, str]) -> CharTable:
    def romanize(ch: str) -> tuple[str, ...]:
        # 'й', 'ё', 'ї' have their own romanisation; other accented letters fall back to their
        # base ('ά' -> 'α': accents are dropped with the script).
        base = ch if ch.lower() in table else unicodedata.normalize("NFD", ch)[0]
        low = base.lower()
        if low not in table:
            return ()
        r = table[low]
        return (r[:1].upper() + r[1:] if base != low else r,)

    return CharTable(func=romanize)


ROMANIZE = _romanizer(ROMAN)
ROMANIZE_UK = _romanizer(ROMAN_UK)


@register("translit")
@dataclass(kw_only=True)
class Transliterate(CodepointPerturbation):
    """Romanised Cyrillic and Greek: 'Москва' -> 'Moskva', 'Αθήνα' -> 'Athina'.

    severity: probability that each word (run of letters, digits and marks) is romanised, 0-1;
    1 romanises the whole text. Text in other scripts is unchanged. Capitals become a capital
    followed by lower case ('Щ' -> 'Shch'); accents on Greek letters are dropped. Cyrillic follows
    Russian reading ('Киев' -> 'Kiev') unless the document's lang is uk ('Київ' -> 'Kyiv').
    """

    def edit(self, cps: np.ndarray, gen: np.random.Generator) -> np.ndarray:
        table = ROMANIZE_UK if self.lang == "uk" else ROMANIZE
        return replace_in_words(cps, table, self.severity, gen)
