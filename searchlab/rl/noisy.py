"""The noise curriculum's retriever: real results with a share of hits swapped for random passages of the corpus.

ZeroSearch trains on noisy documents so that the agent learns to cope with bad
results; here the noise is real passages, and the share replaced follows
:meth:`searchlab.rl.curriculum.Curriculum.noise_probability` step by step.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from searchlab.retrieval.base import Hit, Retriever


class NoisyRetriever:
    """Wraps a Retriever: each hit is replaced, with probability p, by a random other passage of the corpus
    (ZeroSearch's noisy documents, here real passages).

    ``passages``: the distractor pool, as :class:`Hit` objects or ``(id, contents)`` pairs. A replacement's id
    differs from every id the query's results hold (the original hits and the replacements placed so far), so a
    query never lists a passage twice, and it keeps the replaced hit's score so the ranking reads as before.
    When the pool has no such passage the hit is kept. ``probability`` may be changed between calls (the
    trainer sets it from :meth:`Curriculum.noise_probability` each step). ``replaced`` counts the hits replaced
    so far and ``total`` the hits seen. The generator is the instance's own ``random.Random(seed)``.
    """

    _TRIES = 32  # random picks before falling back to scanning the pool (only a tiny or exhausted pool needs it)

    def __init__(self, retriever: Retriever, passages: list[Hit] | Sequence[tuple[str, str]], probability: float,
                 seed: int):
        self.inner = retriever
        self.pool: list[tuple[str, str]] = [(p.id, p.contents) if isinstance(p, Hit) else (p[0], p[1])
                                            for p in passages]
        self.probability = probability
        self.rng = random.Random(seed)
        self.replaced = 0
        self.total = 0

    @property
    def probability(self) -> float:
        """The probability that each hit is replaced, in [0, 1]."""
        return self._probability

    @probability.setter
    def probability(self, value: float) -> None:
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"probability must lie in [0, 1], got {value}")
        self._probability = value

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        """The inner retriever's results for ``queries``, each hit replaced by a distractor with probability p."""
        if self._probability > 0 and not self.pool:
            raise ValueError("the distractor pool is empty: NoisyRetriever needs passages to replace hits with")
        results = self.inner.search(queries, k)
        self.total += sum(len(hits) for hits in results)
        if self._probability == 0:
            return results  # exactly the inner results, and no draws
        return [self._perturb(hits) for hits in results]

    def _perturb(self, hits: list[Hit]) -> list[Hit]:
        """One query's hits with each replaced, with probability p, by a passage whose id the query lacks."""
        taken = {h.id for h in hits}
        out = []
        for hit in hits:
            if self.rng.random() < self._probability:
                passage = self._distractor(taken)
                if passage is not None:
                    taken.add(passage[0])
                    self.replaced += 1
                    hit = Hit(passage[0], passage[1], hit.score)
            out.append(hit)
        return out

    def _distractor(self, taken: set[str]) -> tuple[str, str] | None:
        """A random pool passage whose id is not in ``taken``, or ``None`` when there is none."""
        for _ in range(self._TRIES):
            passage = self.rng.choice(self.pool)
            if passage[0] not in taken:
                return passage
        free = [p for p in self.pool if p[0] not in taken]
        return self.rng.choice(free) if free else None

    def close(self) -> None:
        """Does nothing: the caller owns the inner retriever and closes it."""
