"""Seed answers for the self-play proposer: the names and values a corpus knows, never a held-out answer.

With a knowledge base (``kb.jsonl``: the synthetic world, your own records)
the seeds are the names of the entities that another entity's fact points to
(``kind="names"``: "founded by X", "born in X"), or also the values of all
facts (``"values"``: dates, numbers, words); without one, the passage titles.
A name nothing points to can only be asked about through its own facts, where
the proposer, whose searches then return the seed's own passages, mostly writes
a question that names it: on the demo, 2 of 144 such proposals were verified
against 11 of 336 for referenced names; no seed that was a number ever led the
tiny proposer to a verified question (0 of 56) (docs/results/selfplay.md).
A KB without relations gives all its entities' names.
Answers the qa stage reserves for the benchmark suites are left out (the
same hash decides, :func:`searchlab.synth.pipeline.is_heldout`), so self-play
never trains on a test answer.
"""

from __future__ import annotations

import random
from pathlib import Path

from searchlab.corpus.importers import split_contents
from searchlab.jsonl import iter_jsonl
from searchlab.scoring import normalize_answer
from searchlab.synth.config import QAParams
from searchlab.synth.pipeline import is_heldout


def seed_answers(corpus_dir: Path, qa: QAParams, kind: str = "names", max_words: int = 6) -> list[str]:
    """The distinct seed answers of the corpus in ``corpus_dir``, in a fixed order (sorted), held-out ones left out.

    ``max_words``: longer values (sentences) make poor answers and are skipped.
    """
    kb_path = Path(corpus_dir) / "kb.jsonl"
    found: dict[str, str] = {}

    def add(text: str) -> None:
        text = str(text).strip()
        key = normalize_answer(text)
        if key and len(text.split()) <= max_words and key not in found and not is_heldout(qa, text):
            found[key] = text

    if kb_path.is_file():
        records = [record for _, record in iter_jsonl(kb_path)]
        names = {r["id"]: r["name"] for r in records}
        relations = [fact for r in records for fact in r["facts"] if fact["kind"] == "relation"]
        for fact in relations:
            add(names.get(fact["value"], fact["text"]))
        for r in records:
            if not relations:
                add(r["name"])
            for fact in r["facts"] if kind == "values" else ():
                if fact["kind"] != "relation":
                    add(fact["text"])
    else:
        for _, record in iter_jsonl(Path(corpus_dir) / "corpus.jsonl"):
            add(split_contents(record["contents"])[0])
    if not found:
        raise ValueError(f"{corpus_dir}: no seed answers for self-play (no KB value or passage title that is not "
                         f"held out)")
    return [found[key] for key in sorted(found)]


def draw_seeds(seeds: list[str], round_index: int, count: int, seed: int, rank: int = 0, world: int = 1) -> list[str]:
    """``count`` distinct seed answers for round ``round_index`` and process ``rank`` of ``world``: the same on
    every rerun.

    The processes draw their shares in turn from one generator of the round, each from the seeds the shares
    before it left, so they propose for different answers, and process 0 draws what a one-process run draws.
    When the seeds are fewer than ``count × world``, the later shares wrap around the round's draw and repeat
    answers an earlier process has; self-play's duplicate check, which spans processes, keeps one question of each.

    >>> [draw_seeds(["a", "b", "c"], 0, 2, 0, rank, world=2) for rank in (0, 1)]
    [['c', 'b'], ['a', 'c']]
    """
    if not 0 <= rank < world:
        raise ValueError(f"process {rank} is not one of {world}")
    count = min(count, len(seeds))
    rng = random.Random(f"{seed}/selfplay/{round_index}/0")
    drawn, left = [], list(seeds)
    while left and len(drawn) < count * (rank + 1):
        share = rng.sample(left, min(count, len(left)))
        drawn, taken = drawn + share, set(share)
        left = [s for s in left if s not in taken]
    return [drawn[(rank * count + i) % len(drawn)] for i in range(count)]
