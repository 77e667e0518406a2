"""The knowledge base the corpus stage writes, as its readers see it: entities, facts tied to passages, and
value indexes (read by QA synthesis, self-play's KB check and CLPO's restructuring).

:class:`KB` loads ``kb.jsonl`` and ``corpus.jsonl`` (see :mod:`searchlab.corpus.world`)
and indexes facts by value, so that "which entities satisfy this cue" is a
lookup (``(predicate, value) → entities``) or a binary search over a sorted
numeric column, never a scan of entity pairs. Each fact carries its label (its
logical relation to the subject: temporal, spatial, membership, ...) and is
checked against its passage before synthesis may use it.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from searchlab.jsonl import iter_jsonl
from searchlab.progress import track

KB_SOURCES = ("synthetic", "records")  # the corpus sources that come with a knowledge base (kb.jsonl)


def missing_kb(corpus_source: str) -> str | None:
    """Why a corpus of ``corpus.source`` has no knowledge base, for a message that needs one; None when it has."""
    if corpus_source in KB_SOURCES:
        return None
    return (f"the corpus has no knowledge base (corpus.source: {corpus_source}; only {' and '.join(KB_SOURCES)} "
            f"corpora have one)")


@dataclass(frozen=True, slots=True)
class Fact:
    """One KB fact: ``subject`` ``predicate`` ``value``, stated as ``text`` in ``passage``."""

    subject: str
    predicate: str
    value: str | int | float
    relation: bool  # value is an entity id
    passage: str
    text: str

    @property
    def numeric(self) -> bool:
        return not self.relation and isinstance(self.value, (int, float)) and not isinstance(self.value, bool)

    @property
    def boolean(self) -> bool:
        """A yes/no fact (a record's ``true``/``false``); its ``text`` says it in words: "is not landlocked"."""
        return not self.relation and isinstance(self.value, bool)


@dataclass(slots=True)
class Entity:
    """An entity with its facts grouped by predicate (a list: some predicates are multi-valued)."""

    id: str
    type: str
    subtype: str
    name: str
    passages: list[str]
    facts: dict[str, list[Fact]]

    def one(self, predicate: str) -> Fact | None:
        """The fact for ``predicate`` when the entity has exactly one (functional), else None."""
        found = self.facts.get(predicate)
        return found[0] if found and len(found) == 1 else None


class KB:
    """Entities, passages and the value indexes synthesis queries.

    >>> kb = KB.load(Path("data/corpus"))  # doctest: +SKIP
    >>> kb.matching("occupation", "historian")[:3]  # doctest: +SKIP
    ['e0', 'e41', 'e97']
    """

    def __init__(self, entities: dict[str, Entity], passages: dict[str, str]):
        self.entities = entities
        self.passages = passages
        self.by_value: dict[tuple[str, object], list[str]] = defaultdict(list)
        numeric: dict[str, list[tuple[float, str]]] = defaultdict(list)
        self.by_type: dict[str, list[str]] = defaultdict(list)
        self.name_count: dict[str, int] = defaultdict(int)
        self.in_degree: dict[str, int] = defaultdict(int)
        self.passage_subject: dict[str, str] = {}
        self.passage_facts: dict[str, list[Fact]] = defaultdict(list)  # what each passage states
        for e in entities.values():
            self.by_type[e.type].append(e.id)
            for pid in e.passages:
                self.passage_subject[pid] = e.id
            self.name_count[e.name.lower()] += 1
            for facts in e.facts.values():
                for f in facts:
                    self.by_value[(f.predicate, f.value)].append(e.id)
                    self.passage_facts[f.passage].append(f)
                    if f.numeric:
                        numeric[f.predicate].append((f.value, e.id))
                    if f.relation:
                        self.in_degree[f.value] += 1
        self.numeric = {p: sorted(rows) for p, rows in numeric.items()}
        self.numeric_values = {p: [v for v, _ in rows] for p, rows in self.numeric.items()}

    @classmethod
    def load(cls, corpus_dir: Path) -> "KB":
        """Read ``corpus_dir/kb.jsonl`` and ``corpus_dir/corpus.jsonl``; facts whose passage or target is missing,
        or whose passage does not state them, are left out (see :func:`passage_states`)."""
        kb_path, corpus_path = Path(corpus_dir) / "kb.jsonl", Path(corpus_dir) / "corpus.jsonl"
        if not kb_path.exists():
            raise FileNotFoundError(f"{kb_path}: no knowledge base; QA synthesis needs a corpus with kb.jsonl "
                                    "(corpus.source synthetic or records)")
        passages = {r["id"]: r["contents"] for _, r in track(iter_jsonl(corpus_path), desc="qa: passages",
                                                              unit="passage")}
        raw = [r for _, r in track(iter_jsonl(kb_path), desc="qa: kb", unit="entity")]
        ids = {r["id"] for r in raw}
        entities = {}
        for r in raw:
            facts: dict[str, list[Fact]] = defaultdict(list)
            for f in r["facts"]:
                fact = Fact(r["id"], f["predicate"], f["value"], f["kind"] == "relation", f["passage"], f["text"])
                if (not fact.relation or fact.value in ids) and passage_states(passages.get(fact.passage), r["name"],
                                                                               fact.text):
                    facts[fact.predicate].append(fact)
            entities[r["id"]] = Entity(r["id"], r["type"], r.get("subtype") or "", r["name"], r["passages"],
                                       dict(facts))
        if not entities:
            raise ValueError(f"{kb_path}: the knowledge base is empty")
        return cls(entities, passages)

    # ------------------------------------------------------------------ lookups
    def __getitem__(self, entity_id: str) -> Entity:
        return self.entities[entity_id]

    def unique_name(self, entity_id: str) -> bool:
        """True when no other entity shares this entity's name (a question may then name it)."""
        return self.name_count[self.entities[entity_id].name.lower()] == 1

    def matching(self, predicate: str, value) -> list[str]:
        """Entities with ``predicate`` = ``value`` (an entity id for relations)."""
        return self.by_value.get((predicate, value), [])

    def in_range(self, predicate: str, low: float | None, high: float | None) -> list[str]:
        """Entities whose numeric ``predicate`` lies in ``[low, high)`` (None: unbounded); a binary search."""
        start, stop = self.range_bounds(predicate, low, high)
        return [eid for _, eid in self.numeric[predicate][start:stop]] if stop > start else []

    def range_bounds(self, predicate: str, low: float | None, high: float | None) -> tuple[int, int]:
        """``(start, stop)`` positions in ``numeric[predicate]`` of the values in ``[low, high)``."""
        values = self.numeric_values.get(predicate, [])
        start = 0 if low is None else bisect.bisect_left(values, low)
        stop = len(values) if high is None else bisect.bisect_left(values, high)
        return start, stop

    def value_text(self, fact: Fact) -> str:
        """How an answer or cue names the fact's value: the related entity's name, or the passage's text."""
        return self.entities[fact.value].name if fact.relation else fact.text

    def answer_text(self, fact: Fact) -> str:
        """The fact's value as an answer: :meth:`value_text`, or "yes"/"no" for a boolean."""
        if fact.boolean:
            return "yes" if fact.value else "no"
        return self.value_text(fact)


def passage_states(contents: str | None, subject: str, text: str) -> bool:
    """The structured entailment check: the passage is about ``subject`` (its title) and contains ``text``.

    Used when no NLI model is configured: the KB says which passage states a
    fact, and this confirms the passage really carries it before a question
    relies on it.
    """
    if not contents:
        return False
    title, _, body = contents.partition("\n")
    return title.strip('"') == subject and text in body
