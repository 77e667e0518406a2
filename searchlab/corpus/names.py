"""Invented names for the synthetic world: syllable soup, unique titles, look-alikes.

A :class:`NameMaker` draws every name from one seeded ``random.Random``, so a
world's names depend only on its seed. Titles are unique across the whole
world; :meth:`NameMaker.lookalike` makes a deliberate near-copy ("Varden Holm"
→ "Vardan Holm") as a distractor for retrieval.

>>> import random
>>> names = NameMaker(random.Random(0))
>>> city = names.unique(names.word)
>>> names.lookalike(city) != city
True
"""

from __future__ import annotations

import random
from collections.abc import Callable

from searchlab.corpus.vocab import FIXED_WORDS, REAL_NAMES

# Weighted by repetition: plain consonants and vowels dominate, so names stay short and pronounceable.
_ONSETS = ("b", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z",
           "b", "d", "k", "l", "m", "n", "r", "s", "t", "v", "br", "dr", "gr", "kr", "st", "tr", "th", "sh")
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "a", "e", "i", "o", "ei", "ai", "ou")
_CODAS_MID = ("", "", "", "", "n", "r", "l", "s", "m")
_CODAS_END = ("", "", "n", "r", "l", "s", "m", "n", "r", "nd", "rn", "lt", "st", "th", "rk", "sk")
_MALE_ENDINGS = ("or", "an", "en", "ric", "us", "el", "as", "im", "o", "ard", "in", "er")
_FEMALE_ENDINGS = ("a", "ina", "elle", "ia", "ra", "eth", "ine", "is", "ora", "ette", "ea", "wyn")
_SURNAME_ENDINGS = ("", "", "", "", "son", "sen", "berg", "ley", "ov", "ini", "holm", "ard", "wick", "ez", "ski")
_VOWEL_SET = "aeiou"
_SWAPS = {"c": "k", "k": "c", "s": "z", "z": "s", "d": "t", "t": "d", "v": "w", "w": "v", "m": "n", "n": "m"}


def join(word: str, suffix: str) -> str:
    """``word + suffix`` without a vowel pile-up at the seam: "Vela" + "ia" → "Velia"."""
    if suffix[:1] in ("a", "e", "i", "o", "u"):
        while len(word) > 2 and word[-1] in "aeiou":
            word = word[:-1]
    return word + suffix


class NameMaker:
    """Invents pronounceable names and keeps every claimed title unique."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.taken: set[str] = set()  # membership only; never iterated, so hash order cannot leak into output

    # ------------------------------------------------------------ words
    def word(self, syllables: int | None = None, suffixed: bool = False) -> str:
        """A capitalised invented word of 2-3 syllables (or ``syllables``), never a well-known real name.

        ``suffixed``: a suffix ("-ford", "-ia") will follow, so end softly and stay short.
        """
        rng = self.rng
        while True:
            n = syllables or (2 if suffixed or rng.random() < 0.8 else 3)
            parts = []
            for i in range(n):
                onset = "" if i == 0 and rng.random() < 0.15 else rng.choice(_ONSETS)
                coda = rng.choice(_CODAS_END if i == n - 1 and not suffixed else _CODAS_MID)
                parts.append(onset + rng.choice(_VOWELS) + coda)
            w = "".join(parts)
            if len(w) >= 3 and w not in REAL_NAMES:
                return w[0].upper() + w[1:]

    def given_name(self, gender: str) -> str:
        """A first name whose ending suggests the gender ("m" or "f"), e.g. "Varden", "Selina"."""
        rng = self.rng
        while True:
            stem = rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS_MID)
            if rng.random() < 0.25:
                stem += rng.choice(_ONSETS[:15]) + rng.choice(_VOWELS[:5])
            name = join(stem, rng.choice(_MALE_ENDINGS if gender == "m" else _FEMALE_ENDINGS))
            if name not in REAL_NAMES:
                return name[0].upper() + name[1:]

    def surname(self) -> str:
        """A family name, e.g. "Holm", "Tarvisen"."""
        while True:
            ending = self.rng.choice(_SURNAME_ENDINGS)
            name = join(self.word(1 if self.rng.random() < 0.4 else 2, suffixed=bool(ending)), ending)
            if name.lower() not in REAL_NAMES:  # "Bai" + "ley"
                return name

    # ------------------------------------------------------------ titles
    def claim(self, title: str) -> bool:
        """Reserve ``title``; return False if another entity has it or it contains a real name ("Bos|ton")."""
        if title in self.taken or any(w.lower() in REAL_NAMES for w in title.split(" ") if w not in FIXED_WORDS):
            return False
        self.taken.add(title)
        return True

    def unique(self, make: Callable[[], str], tries: int = 1000) -> str:
        """Call ``make`` until it returns a title nobody has, claim it and return it."""
        for _ in range(tries):
            title = make()
            if self.claim(title):
                return title
        raise RuntimeError("could not invent a unique name; the name space is exhausted")

    def lookalike(self, title: str, tries: int = 40) -> str | None:
        """Claim and return a near-copy of ``title`` (one letter of one invented word changed), or None.

        Only invented words change ("Mount Tarsk" → "Mount Tersk", never "Mound Tarsk"),
        so the copy is plausible as a different entity's name.
        """
        rng = self.rng
        tokens = title.split(" ")
        invented = [i for i, t in enumerate(tokens) if t not in FIXED_WORDS and len(t) >= 3]
        if not invented:
            return None
        for _ in range(tries):
            i = rng.choice(invented)
            token = tokens[i]
            j = rng.randrange(1, len(token))  # keep the first letter: look-alikes start alike
            ch = token[j]
            before, after = token[j - 1].lower(), token[j + 1] if j + 1 < len(token) else ""
            # Change only a lone vowel between consonants or a lone consonant between vowels,
            # so "Staurpold" never becomes "Sdaurpold" nor "ou" a "uu".
            if ch in _VOWEL_SET and before not in _VOWEL_SET and after not in _VOWEL_SET:
                new = rng.choice([v for v in _VOWEL_SET if v != ch])
            elif ch in _SWAPS and before in _VOWEL_SET and (not after or after in _VOWEL_SET):
                new = _SWAPS[ch]
            else:
                continue
            changed = token[:j] + new + token[j + 1:]
            if changed.lower() in REAL_NAMES:
                continue
            candidate = " ".join(tokens[:i] + [changed] + tokens[i + 1:])
            if self.claim(candidate):
                return candidate
        return None
