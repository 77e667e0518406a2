"""Renamed copies of the demonstrations: every entity title in a demonstration swapped for another one.

Trained for several epochs on the same demonstrations, a small model lowers
its loss by memorising: "Stimina Rembroumsen" in the question predicts
"Stimina" in the query because that pair was seen, and "Althouhelm" in the
answer because the fact was seen. Neither carries over to a held-out
question. In a renamed copy the entity is another one, while its query and
its answer must still be copied, from the question and from the retrieved
passages; so only copying and reading lower the loss on every copy, which is
what the agent needs at test time.

A copy replaces each corpus title found in the prompt and the completion
(questions, thoughts, queries, ``<information>`` passages, the answer) by a
random other title with as many words, the same one everywhere in the
demonstration, so the copy stays consistent with itself. The corpus titles
are the first lines of its passages, so this works for any corpus.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from searchlab.corpus.importers import split_contents
from searchlab.jsonl import iter_jsonl

_TRIES = 20  # random draws for an unused title of the right length before a title is kept as it is


def _alternation(titles: Iterable[str]) -> str:
    """A regular expression that matches any of ``titles``, and at a given place the longest one that fits.

    The titles are factored into a trie (``Ada Lovelace|Ada King`` becomes
    ``Ada (?:King|Lovelace)``): ``re`` tries the branches of a plain
    alternation one by one, so with thousands of titles every position of a
    text cost thousands of tries. Where a title ends inside a longer one, the
    longer continuation is optional and greedy, so it is tried first and the
    shorter title matches only when the longer one does not fit (the lookahead
    after it fails), as in an alternation ordered longest first.
    """
    trie: dict = {}
    for title in titles:
        node = trie
        for char in title:
            node = node.setdefault(char, {})
        node[""] = {}  # a title ends here

    def pattern(node: dict) -> str:
        branches = [re.escape(char) + pattern(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if "" not in node:
            return body
        return ("(?:" + body + ")" if len(branches) == 1 and len(body) > 1 else body) + "?"

    return "(?:" + pattern(trie) + ")"


class TitleRenamer:
    """Swaps whole corpus titles in a text for other titles, consistently within one call."""

    def __init__(self, titles: Iterable[str]):
        unique = sorted({t for t in titles if t.strip()}, key=lambda t: (-len(t), t))  # longest first: no partial match
        if not unique:
            raise ValueError("no titles to rename with")
        self._by_words: dict[int, list[str]] = {}
        for title in unique:
            self._by_words.setdefault(len(title.split()), []).append(title)
        self._pattern = re.compile(r"(?<!\w)" + _alternation(unique) + r"(?!\w)")

    def rename(self, texts: list[str], rng: random.Random) -> list[str]:
        """``texts`` with every title they mention replaced by another title of as many words (one mapping for all)."""
        found = sorted({match for text in texts for match in self._pattern.findall(text)})
        taken, mapping = set(found), {}
        for title in found:
            pool = self._by_words[len(title.split())]
            for _ in range(_TRIES):  # else keep it: too few titles of that length to swap with
                other = rng.choice(pool)
                if other not in taken:
                    mapping[title] = other
                    taken.add(other)
                    break
        return [self._pattern.sub(lambda m: mapping.get(m.group(0), m.group(0)), text) for text in texts]

    def permutation(self, rng: random.Random) -> "TitlePermutation":
        """A random bijection of the titles onto themselves, titles of as many words shuffled among themselves."""
        forward = {}
        for pool in self._by_words.values():
            shuffled = list(pool)
            rng.shuffle(shuffled)
            forward.update(zip(pool, shuffled))
        return TitlePermutation(self._pattern, forward, {new: old for old, new in forward.items()})


@dataclass(frozen=True)
class TitlePermutation:
    """The world with its names shuffled: :meth:`rename` shows a text in it, :meth:`restore` reads one back.

    As every title maps to a title and back, an agent can work entirely in the
    renamed world (its questions, passages and answers renamed; its queries
    restored before they are searched) and meet the same facts under other
    names, so what it remembers of the real world's names is of no use."""

    pattern: re.Pattern
    forward: dict[str, str]
    inverse: dict[str, str]

    def rename(self, text: str) -> str:
        return self.pattern.sub(lambda m: self.forward[m.group(0)], text)

    def restore(self, text: str) -> str:
        return self.pattern.sub(lambda m: self.inverse[m.group(0)], text)


def corpus_titles(corpus_jsonl: Path) -> TitleRenamer:
    """The renamer of the titles of ``corpus_jsonl``'s passages (their first lines)."""
    return TitleRenamer(split_contents(r["contents"])[0] for _, r in iter_jsonl(corpus_jsonl))


def rename_demos(demos: list[dict], renamer: TitleRenamer, copies: int, seed: int) -> list[dict]:
    """``copies`` renamed copies of each demonstration (prompt and completion renamed together), in order."""
    rng = random.Random(seed)
    out = []
    for _ in range(copies):
        for demo in demos:
            prompt, completion = renamer.rename([demo["prompt"], demo["completion"]], rng)
            out.append({**demo, "prompt": prompt, "completion": completion})
    return out
