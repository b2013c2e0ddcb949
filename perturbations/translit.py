"""``translit``: Cyrillic and Greek written in Latin letters ('Москва' -> 'Moskva')."""

from __future__ import annotations

import random
import unicodedata
from dataclasses import dataclass

from perturbations.base import Perturbation
from perturbations.checks import check_fraction
from perturbations.codepoints import CharTable, from_codepoints, numpy_rng, to_codepoints
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
class Transliterate(Perturbation):
    """Romanised Cyrillic and Greek: 'Москва' -> 'Moskva', 'Αθήνα' -> 'Athina'.

    severity: probability that each word (run of letters, digits and marks) is romanised, 0-1;
    1 romanises the whole text. Text in other scripts is unchanged. Capitals become a capital
    followed by lower case ('Щ' -> 'Shch'); accents on Greek letters are dropped. Cyrillic follows
    Russian reading ('Киев' -> 'Kiev') unless the document's lang is uk ('Київ' -> 'Kyiv').
    """

    def __post_init__(self) -> None:
        check_fraction(self)

    def perturb(self, text: str, rng: random.Random) -> str:
        if self.severity <= 0 or not text:
            return text
        table = ROMANIZE_UK if self.lang == "uk" else ROMANIZE
        return from_codepoints(replace_in_words(to_codepoints(text), table, self.severity, numpy_rng(rng)))
