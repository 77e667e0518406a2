"""The question record: one question as the qa stage stores it and the stages after it read it
(:func:`read_questions`): the only in-memory form of a question, whichever producer made it.

Three producers fill it:

- synthesis (:meth:`searchlab.synth.generate.Question.to_record`): the question with the structure it was built
  from (answer entity, slot, hops, constraints, mentions, compare), its evidence chain and difficulty features;
- the import of labeled files (:mod:`searchlab.labeled.questions`): the file's name as ``type`` and ``source``, no
  evidence, an unknown bucket, the file's other keys as ``metadata``;
- evaluation's benchmark readers (:func:`searchlab.questions.formats.load_benchmark`): id, question, answers and
  metadata, plus where the question was read (``where``, for messages; never stored).

:meth:`QuestionRecord.to_json` is the line written to ``train.jsonl``, ``dev.jsonl`` and ``heldout.jsonl``;
:meth:`QuestionRecord.to_flashrag` the line of a held-out suite (``world-*.jsonl``), which the benchmark reader
reads back into an equal record.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, get_args

__all__ = ["ABSENT", "BUCKETS", "QUESTION_TYPES", "Absent", "Bucket", "QuestionRecord", "QuestionType", "present",
           "read_questions"]

#: A synthesized question's ``type``: how it was built (an imported one's type is its file's name).
QuestionType = Literal["single", "bridge", "compare", "compose", "oblique"]
QUESTION_TYPES: tuple[str, ...] = get_args(QuestionType)
#: A question's difficulty bucket (``features["bucket"]``), easiest first: curriculum RL's order; None: unknown.
Bucket = Literal["easy", "medium", "hard"]
BUCKETS: tuple[str, ...] = get_args(Bucket)


class Absent(enum.Enum):
    """The type of :data:`ABSENT` (an enum member stays one object through copies and pickling)."""

    ABSENT = "absent"

    def __repr__(self) -> str:  # short, for the reprs of records (and test failures) that hold it
        return "ABSENT"


#: The value of a field a record does not have: left out of its JSON, where ``None`` is written as ``null`` (a
#: synthesized record says ``"answer_entity": null``, an imported one has no ``answer_entity`` key at all).
ABSENT = Absent.ABSENT


def _absent() -> Any:
    """A field only some producers set: :data:`ABSENT` unless given, and given by name only."""
    return field(default=ABSENT, kw_only=True)


@dataclass(frozen=True)
class QuestionRecord:
    """One stored question; a producer sets the fields it knows and leaves the others :data:`ABSENT`.

    The fields are in the order of the keys written: the stored bytes, and so every stage fingerprint after the qa
    stage, depend on that order. A benchmark question's fields (id, question, answers, metadata) may also be given in
    that order, as evaluation always built its questions; the others only by name.
    """

    id: str
    type: str | Absent = _absent()  # synthesized: the question type ("bridge"); imported: the qa.files name
    question: str
    answers: list[str]  # gold answers, the first the canonical one
    answer_entity: str | None | Absent = _absent()  # the answer's KB entity; None for a value (a year, a number)
    slot: dict | Absent = _absent()  # what is asked: {"predicate": p} or {"type": t}
    hops: int | Absent = _absent()
    constraints: list[dict] | Absent = _absent()  # each condition with the fact and passage that satisfy it
    evidence: list[str] | None | Absent = _absent()  # passage ids in reasoning order; None: not known (imported)
    mentions: list[str] | Absent = _absent()  # entity ids the question names
    compare: dict | None | Absent = _absent()  # a comparison's {"predicate", "direction", "options"}; else None
    features: dict | Absent = _absent()  # difficulty features and the curriculum's "bucket" (None: not measured)
    source: str | Absent = _absent()  # imported: the qa.files name the question was read from
    derived_from: str | Absent = _absent()  # an rl clpo rewrite: the id of the question it rewrites
    restructure: str | Absent = _absent()  # an rl clpo rewrite: how ("easier", "rephrased")
    metadata: dict | Absent = ABSENT  # a file's keys besides the question's own (imported, benchmarks)
    where: str = field(default="", compare=False)  # not stored: "<file>: line N" (record N, row N) it was read from

    def to_json(self) -> dict[str, Any]:
        """The stored line: every field but ``where``, in order, leaving out those that are :data:`ABSENT`."""
        return {f.name: value for f in fields(self)
                if f.name != "where" and (value := getattr(self, f.name)) is not ABSENT}

    @classmethod
    def from_json(cls, record: dict[str, Any]) -> QuestionRecord:
        """The record a stored line holds; the keys it lacks stay :data:`ABSENT` (a key no record has is a
        TypeError)."""
        return cls(**record)

    @property
    def bucket(self) -> str | None:
        """The difficulty bucket (``features["bucket"]``); None when it is not known."""
        return None if self.features is ABSENT else self.features.get("bucket")

    def to_flashrag(self) -> dict[str, Any]:
        """The record as a FlashRAG benchmark line, ``{id, question, golden_answers, metadata}``."""
        return {"id": self.id, "question": self.question, "golden_answers": self.answers, "metadata": self.metadata}


def present(value: Any) -> Any:
    """``value``, or None for a field the record does not have (:data:`ABSENT`): what a record's optional field
    reads as where None means "not known" (a question's evidence, its type)."""
    return None if value is ABSENT else value


def read_questions(path: Path) -> list[QuestionRecord]:
    """The question records of a file the qa stage (or the rl stage's gathering) wrote: ``train.jsonl``,
    ``dev.jsonl``, ``heldout.jsonl``, ``questions.jsonl``."""
    from searchlab.jsonl import read_jsonl

    return [QuestionRecord.from_json(line) for line in read_jsonl(path)]
