"""Question-answering benchmark files loaded into one uniform list of :class:`Question`, for evaluation.

Four file shapes are read (``FORMATS``):

- ``flashrag``: JSONL of ``{"id", "question", "golden_answers": [...], "metadata"?: {...}}``; the project's own
  world suites (``data/benchmarks/world-*.jsonl``, written by :mod:`searchlab.synth.benchmarks`) are in this shape.
- ``nq-open``: JSONL of ``{"question", "answer": [...]}``; ids are ``f"{name}-{line}"``.
- ``hotpotqa``: one JSON list of ``{"_id", "question", "answer": "...", ...}``; the big ``context`` and
  ``supporting_facts`` lists are dropped.
- ``json``: one JSON list of ``{"question", "answer" or "answers": str | [str, ...]}``; ids are
  ``f"{name}-{index}"`` unless a record has ``"id"``.

Every problem is a :class:`BenchmarkError` naming the file and, for a bad record, where it is — ``line N``
(1-based) in a JSONL file, ``record N`` (the 0-based list index, as in ``jq '.[N]'``) in a JSON file — and the
key at fault. Loading is strict: answers must be non-blank strings (a number or a boolean is an error, not
converted), so a benchmark never scores against something its file did not say.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from searchlab.jsonl import RecordError, decode_text, iter_jsonl

__all__ = ["FORMATS", "BenchmarkError", "Question", "detect_format", "load_benchmark"]

FORMATS = ("flashrag", "nq-open", "hotpotqa", "json")

# Which container each format lives in: JSON Lines (positions are 1-based lines) or one JSON list (0-based indexes).
_CONTAINER = {"flashrag": "jsonl", "nq-open": "jsonl", "hotpotqa": "json", "json": "json"}
_EXTENSION = {".jsonl": "jsonl", ".json": "json"}
# HotpotQA's paragraphs and supporting facts are the bulk of each record and of no use when the agent searches itself.
_HOTPOTQA_DROPPED = frozenset({"context", "supporting_facts"})


@dataclass(frozen=True)
class Question:
    """One benchmark question: its id, text, gold answers (non-empty, each a non-blank string) and the rest."""

    id: str
    question: str
    answers: list[str]
    metadata: dict


class BenchmarkError(ValueError):
    """A benchmark that cannot be loaded; ``str()`` names the file, and for a bad record its position and key."""


# ---------------------------------------------------------------- public API
def detect_format(path: Path | str) -> str:
    """The format of a benchmark file, told from its extension and its first record's keys."""
    path = Path(path)
    _require_file(path)
    container = _container_of(path)
    records = _read_records(path, container)
    _require_records(path, records)
    return _format_of(path, container, records[0])


def load_benchmark(path: Path | str, name: str, format: str = "auto", sample: int | None = None,
                   seed: int = 0) -> list[Question]:
    """The questions of a benchmark file, in file order; ``name`` prefixes the ids the file does not give.

    ``format`` is one of ``FORMATS`` or ``"auto"`` (see :func:`detect_format`). With ``sample``, a seeded
    random subset of that many questions (``random.Random(seed)``), still in file order; all of them if the
    file has no more than ``sample``.
    """
    path = Path(path)
    _check_arguments(path, name, format, sample)
    _require_file(path)
    container = _CONTAINER[format] if format != "auto" else _container_of(path)
    records = _read_records(path, container)
    _require_records(path, records)
    if format == "auto":
        format = _format_of(path, container, records[0])
    to_question = _PARSERS[format]
    questions = [to_question(path, name, position, record) for position, record in records]
    _reject_duplicate_ids(path, container, [position for position, _ in records], questions)
    return _sample(questions, sample, seed)


# ---------------------------------------------------------------- reading files
def _check_arguments(path: Path, name: str, format: str, sample: int | None) -> None:
    """Reject bad arguments before reading anything, so a typo costs no time on a large file."""
    if format != "auto" and format not in FORMATS:
        raise BenchmarkError(f"{path}: unknown benchmark format {format!r}; "
                             f"expected 'auto' or one of {', '.join(map(repr, FORMATS))}")
    if not isinstance(name, str) or not name.strip():
        raise BenchmarkError(f"{path}: the benchmark name must be a non-blank string (it prefixes ids), got {name!r}")
    if sample is not None and (isinstance(sample, bool) or not isinstance(sample, int) or sample < 1):
        raise BenchmarkError(f"{path}: sample must be a whole number >= 1 (or None for all questions), got {sample!r}")


def _require_file(path: Path) -> None:
    """A clear error for a path that is not a readable file, instead of a bare ``OSError`` later."""
    if not path.exists():
        raise BenchmarkError(f"{path}: no such benchmark file")
    if not path.is_file():
        raise BenchmarkError(f"{path}: not a file")


def _container_of(path: Path) -> str:
    """``"jsonl"`` or ``"json"`` from the file extension; anything else cannot be auto-detected."""
    container = _EXTENSION.get(path.suffix.lower())
    if container is None:
        raise BenchmarkError(f"{path}: cannot tell the benchmark format from the extension {path.suffix!r} "
                             f"(expected .jsonl or .json); pass format= one of {', '.join(FORMATS)}")
    return container


def _read_records(path: Path, container: str) -> list[tuple[int, Any]]:
    """``(position, record)`` pairs: 1-based line numbers of a JSONL file, or 0-based indexes of a JSON list."""
    try:
        if container == "jsonl":
            return list(iter_jsonl(path))
        return list(enumerate(_read_json_list(path)))
    except RecordError as err:  # also bytes that are not UTF-8, with their line
        raise BenchmarkError(f"{err.path}: line {err.line}: {err.problem}") from None


def _read_json_list(path: Path) -> list[Any]:
    """The records of a file holding one JSON list."""
    text = decode_text(path, path.read_bytes())
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise BenchmarkError(f"{path}: line {err.lineno}: not valid JSON ({err.msg} at column {err.colno})") from None
    if not isinstance(data, list):
        raise BenchmarkError(f"{path}: expected a JSON list of records, got a JSON {_json_type(data)}")
    return data


def _require_records(path: Path, records: list[tuple[int, Any]]) -> None:
    """An empty benchmark would evaluate to a meaningless score (or a division by zero), so it is an error."""
    if not records:
        raise BenchmarkError(f"{path}: the benchmark has no records")


def _format_of(path: Path, container: str, first: tuple[int, Any]) -> str:
    """The format told from the first record's keys; an error naming the keys seen when they fit no format."""
    position, record = first
    record = _as_object(path, _where(container, position), record)
    keys = sorted(record)
    if container == "jsonl":
        if "golden_answers" in record:
            return "flashrag"
        if "answer" in record:
            return "nq-open"
        expected = "'golden_answers' (flashrag) or 'answer' (nq-open)"
    else:
        if "_id" in record and ("supporting_facts" in record or "context" in record):
            return "hotpotqa"
        if "answer" in record or "answers" in record:
            return "json"
        expected = "'_id' with 'supporting_facts' or 'context' (hotpotqa), or 'answer'/'answers' (json)"
    raise BenchmarkError(f"{path}: cannot tell the benchmark format: the first record ({_where(container, position)}) "
                         f"has keys {keys}; expected {expected}")


# ---------------------------------------------------------------- one record per format
def _flashrag(path: Path, name: str, line: int, record: Any) -> Question:
    """A FlashRAG record; any top-level keys besides the four known ones join its ``metadata``."""
    where = _where("jsonl", line)
    record = _as_object(path, where, record)
    metadata = record.get("metadata")
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, dict):
        raise _record_error(path, where, "metadata", f"must be a JSON object, got {_show(metadata)}")
    extras = _extras(record, {"id", "question", "golden_answers", "metadata"})
    clashing = sorted(set(extras) & set(metadata))
    if clashing:
        raise _record_error(path, where, clashing[0], "is both a top-level key and a key of 'metadata'")
    answers = _answer_list(path, where, "golden_answers", _required(path, where, record, "golden_answers"))
    return Question(id=_id(path, where, record, "id"), question=_question_text(path, where, record),
                    answers=answers, metadata={**metadata, **extras})


def _nq_open(path: Path, name: str, line: int, record: Any) -> Question:
    """An NQ-open record; it has no id, so the id is the benchmark name and the line (unless it has ``"id"``)."""
    where = _where("jsonl", line)
    record = _as_object(path, where, record)
    return Question(id=_id(path, where, record, "id") if "id" in record else f"{name}-{line}",
                    question=_question_text(path, where, record),
                    answers=_answer_list(path, where, "answer", _required(path, where, record, "answer")),
                    metadata=_extras(record, {"id", "question", "answer"}))


def _hotpotqa(path: Path, name: str, index: int, record: Any) -> Question:
    """A HotpotQA record: its one answer string becomes a one-element list, ``type``/``level``/… the metadata."""
    where = _where("json", index)
    record = _as_object(path, where, record)
    return Question(id=_id(path, where, record, "_id"), question=_question_text(path, where, record),
                    answers=_answer_string(path, where, "answer", _required(path, where, record, "answer")),
                    metadata=_extras(record, {"_id", "question", "answer", *_HOTPOTQA_DROPPED}))


def _plain_json(path: Path, name: str, index: int, record: Any) -> Question:
    """A plain JSON record: ``answer`` or ``answers``, a string or a list of them; id from ``"id"`` or the index."""
    where = _where("json", index)
    record = _as_object(path, where, record)
    if "answer" in record and "answers" in record:
        raise _record_error(path, where, "answers", "given together with 'answer'; keep one of them")
    if "answer" not in record and "answers" not in record:
        raise _record_error(path, where, "answer",
                            f"is missing, and so is 'answers' (the record has keys {sorted(record)})")
    key = "answers" if "answers" in record else "answer"
    value = record[key]
    if not isinstance(value, (str, list)):
        raise _record_error(path, where, key, f"must be a string or a list of strings, got {_show(value)}")
    as_list = _answer_string if isinstance(value, str) else _answer_list
    answers = as_list(path, where, key, value)
    return Question(id=_id(path, where, record, "id") if "id" in record else f"{name}-{index}",
                    question=_question_text(path, where, record), answers=answers,
                    metadata=_extras(record, {"id", "question", "answer", "answers"}))


_PARSERS = {"flashrag": _flashrag, "nq-open": _nq_open, "hotpotqa": _hotpotqa, "json": _plain_json}


# ---------------------------------------------------------------- checks on one record
def _as_object(path: Path, where: str, record: Any) -> dict:
    """The record, which must be a JSON object."""
    if not isinstance(record, dict):
        raise BenchmarkError(f"{path}: {where}: expected a JSON object, got a JSON {_json_type(record)}")
    return record


def _required(path: Path, where: str, record: dict, key: str) -> Any:
    """The value of a key the record must have."""
    if key not in record:
        raise _record_error(path, where, key, f"is missing (the record has keys {sorted(record)})")
    return record[key]


def _id(path: Path, where: str, record: dict, key: str) -> str:
    """The record's own id: a non-blank string, or an integer (some files number their questions)."""
    value = _required(path, where, record, key)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise _record_error(path, where, key, f"must be a non-blank string or an integer, got {_show(value)}")
    return value


def _question_text(path: Path, where: str, record: dict) -> str:
    """The question, a non-blank string, kept exactly as written."""
    value = _required(path, where, record, "question")
    if not isinstance(value, str) or not value.strip():
        raise _record_error(path, where, "question", f"must be a non-blank string, got {_show(value)}")
    return value


def _answer_list(path: Path, where: str, key: str, value: Any) -> list[str]:
    """Gold answers given as a list: non-empty, each a non-blank string.

    Numbers and booleans are errors, not converted: scoring compares text, and a silent ``str(1.0)`` would make
    a gold that no answer could match.
    """
    if not isinstance(value, list):
        raise _record_error(path, where, key, f"must be a list of answer strings, got {_show(value)}")
    if not value:
        raise _record_error(path, where, key, "is an empty list; a question needs at least one gold answer")
    for i, answer in enumerate(value):
        if not isinstance(answer, str) or not answer.strip():
            raise _record_error(path, where, key, f"item {i} must be a non-blank string, got {_show(answer)}")
    return list(value)


def _answer_string(path: Path, where: str, key: str, value: Any) -> list[str]:
    """A single gold answer given as a string, as a one-element list."""
    if not isinstance(value, str) or not value.strip():
        raise _record_error(path, where, key, f"must be a non-blank string, got {_show(value)}")
    return [value]


def _extras(record: dict, known: set[str] | frozenset[str]) -> dict:
    """The record's keys other than the known ones: what goes to ``metadata``."""
    return {key: value for key, value in record.items() if key not in known}


# ---------------------------------------------------------------- whole benchmark
def _reject_duplicate_ids(path: Path, container: str, positions: list[int], questions: list[Question]) -> None:
    """Two questions with one id would merge in any per-question result table, so duplicates are errors."""
    first_seen: dict[str, int] = {}
    for position, question in zip(positions, questions):
        if question.id in first_seen:
            earlier = _where(container, first_seen[question.id])
            raise BenchmarkError(f"{path}: duplicate id {question.id!r} at {earlier} and {_where(container, position)}")
        first_seen[question.id] = position


def _sample(questions: list[Question], sample: int | None, seed: int) -> list[Question]:
    """A seeded subset of ``sample`` questions in file order, or all of them if there are no more than that."""
    if sample is None or sample >= len(questions):
        return questions
    chosen = sorted(random.Random(seed).sample(range(len(questions)), sample))
    return [questions[i] for i in chosen]


# ---------------------------------------------------------------- messages
def _where(container: str, position: int) -> str:
    """``"line 3"`` in a JSONL file (1-based) or ``"record 3"`` in a JSON list (0-based index)."""
    return f"line {position}" if container == "jsonl" else f"record {position}"


def _record_error(path: Path, where: str, key: str, problem: str) -> BenchmarkError:
    """The error for one bad key of one record."""
    return BenchmarkError(f"{path}: {where}: key {key!r} {problem}")


def _show(value: Any) -> str:
    """A short ``repr`` of a bad value: enough to recognise it without flooding the message."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _json_type(value: Any) -> str:
    """The JSON name of a parsed value's type, for messages."""
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "list"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return "number"
