"""Question files in the field's formats, each loaded into one uniform list of :class:`Question` (the question record),
for evaluation and for the qa stage's import of training questions.

Five file shapes are read (``FORMATS``):

- ``flashrag``: JSONL of ``{"id", "question", "golden_answers": [...], "metadata"?: {...}}``; the project's own
  world suites (``data/benchmarks/world-*.jsonl``, written by :mod:`searchlab.synth.benchmarks`) are in this shape.
- ``nq-open``: JSONL of ``{"question", "answer": [...] or "..."}``; R1-Searcher's eval sets (one answer string)
  are in this shape.
- ``hotpotqa``: one JSON list of ``{"_id", "question", "answer": "...", ...}``; the big ``context`` and
  ``supporting_facts`` lists are dropped, the supporting facts' titles kept (``metadata.supporting_titles``).
- ``json``: one JSON list of ``{"question", "answer" or "answers": str | [str, ...]}``.
- ``search-r1``: Search-R1's verl rows, JSONL or Parquet, of ``{"data_source", "prompt": [{"role", "content"}],
  "ability", "reward_model": {"ground_truth": ...}, "extra_info"}``, with ``ground_truth`` as ``{"target": [...]
  or "..."}`` (Search-R1's own files), a list or a plain string (other projects' verl files). The question is the
  row's ``question`` (or ``extra_info.question``), else the user message after its last ``Question:`` (where
  Search-R1's prompt template puts it) or, without one, the whole user message (the bare question); ``prompt``,
  ``reward_model`` and ``golden_answers`` are dropped.

Gold answers are one string or a list of strings in every format (a string becomes a one-element list).

Ids, the same way for every format: the record's own id when it has one (``id``; ``_id`` in HotpotQA; in
search-r1 ``f"{data_source}-{id}"``, since Search-R1 merges FlashRAG sets whose ids repeat, e.g. ``test_0``),
else (no such key, or null) ``f"{name}-{index}"`` with ``index`` the record's 0-based place among the file's
records (blank JSONL lines not counted), so one set of questions gets the same ids as JSONL, a JSON list or
Parquet.

Every problem is a :class:`BenchmarkError` naming the file and, for a bad record, where it is — ``line N``
(1-based) in a JSONL file, ``record N`` (the 0-based list index, as in ``jq '.[N]'``) in a JSON file, ``row N``
(0-based) in a Parquet file — and the key at fault. A ``format`` given explicitly must be the one the first record
looks like, when it looks like one: otherwise the error names the format it looks like. Loading is strict:
answers must be non-blank strings (a number or a boolean is an error, not converted), so a benchmark never scores
against something its file did not say.
"""

from __future__ import annotations

import json
import random
from dataclasses import replace
from pathlib import Path
from typing import Any, get_args

from searchlab.jsonl import RecordError, decode_text, iter_jsonl
from searchlab.questions.config import BenchmarkFormat
from searchlab.questions.record import QuestionRecord

__all__ = ["FORMATS", "BenchmarkError", "Question", "detect_format", "load_benchmark"]

FORMATS: tuple[str, ...] = tuple(f for f in get_args(BenchmarkFormat) if f != "auto")  # the schema's list

# The containers each format can live in: JSON Lines (positions are 1-based lines), one JSON list (0-based
# indexes) or Parquet (0-based rows). A format given explicitly is read from the container the extension names if
# it is one of these, else from the first.
_CONTAINERS = {"flashrag": ("jsonl",), "nq-open": ("jsonl",), "hotpotqa": ("json",), "json": ("json",),
               "search-r1": ("jsonl", "parquet")}
_EXTENSION = {".jsonl": "jsonl", ".json": "json", ".parquet": "parquet"}
# What auto-detection looks for in the first record, by container, for the message when nothing fits.
_EXPECTED = {"jsonl": "'prompt' with 'reward_model' (search-r1), 'golden_answers' (flashrag) or 'answer' (nq-open)",
             "json": "'supporting_facts' or '_id' with 'context' (hotpotqa), or 'answer'/'answers' (json)",
             "parquet": "'prompt' with 'reward_model' (search-r1)"}
# HotpotQA's paragraphs and supporting facts are the bulk of each record and of no use when the agent searches itself.
_HOTPOTQA_DROPPED = frozenset({"context", "supporting_facts"})
# A search-r1 row's prompt template and reward spec (and FlashRAG's answers again) are not question metadata.
_SEARCH_R1_DROPPED = frozenset({"prompt", "reward_model", "golden_answers"})


#: A benchmark question: the stored question record with its id, text, gold answers (non-empty, each a non-blank
#: string), metadata (the record's other keys) and ``where`` it was read.
Question = QuestionRecord


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

    ``format`` is one of ``FORMATS`` or ``"auto"`` (see :func:`detect_format`); a given format the file does not
    look like is an error naming the one it does. With ``sample``, a seeded random subset of that many questions
    (``random.Random(seed)``), still in file order; all of them if the file has no more than ``sample``.
    """
    path = Path(path)
    _check_arguments(path, name, format, sample)
    _require_file(path)
    if format == "auto":
        container = _container_of(path)
        records = _read_records(path, container)
        _require_records(path, records)
        format = _format_of(path, container, records[0])
    else:
        container = _container_for(path, format)
        records = _read_given(path, container, format)
        _require_records(path, records)
        _require_looks_like(path, container, format, records[0])
    wheres = [_where(container, position) for position, _ in records]
    to_question = _PARSERS[format]
    questions = [replace(to_question(path, where, f"{name}-{index}", record), where=f"{path}: {where}")
                 for index, (where, (_, record)) in enumerate(zip(wheres, records))]
    _reject_duplicate_ids(path, wheres, questions)
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
    """``"jsonl"``, ``"json"`` or ``"parquet"`` from the file extension; anything else cannot be auto-detected."""
    container = _EXTENSION.get(path.suffix.lower())
    if container is None:
        raise BenchmarkError(f"{path}: cannot tell the benchmark format from the extension {path.suffix!r} "
                             f"(expected .jsonl, .json or .parquet); pass format= one of {', '.join(FORMATS)}")
    return container


def _container_for(path: Path, format: str) -> str:
    """The container a given format is read from: the extension's, if the format can live in it, else its first."""
    containers = _CONTAINERS[format]
    by_extension = _EXTENSION.get(path.suffix.lower())
    return by_extension if by_extension in containers else containers[0]


def _read_records(path: Path, container: str) -> list[tuple[int, Any]]:
    """``(position, record)`` pairs: 1-based line numbers of a JSONL file, 0-based indexes of a JSON list or
    0-based rows of a Parquet file."""
    if container != "parquet" and _is_parquet(path):
        raise BenchmarkError(f"{path}: a Parquet file, not {'JSON Lines' if container == 'jsonl' else 'a JSON list'}")
    try:
        if container == "jsonl":
            return list(iter_jsonl(path))
        if container == "parquet":
            return list(enumerate(_read_parquet(path)))
        return list(enumerate(_read_json_list(path)))
    except RecordError as err:  # also bytes that are not UTF-8, with their line
        raise BenchmarkError(f"{err.path}: line {err.line}: {err.problem}") from None


def _read_given(path: Path, container: str, format: str) -> list[tuple[int, Any]]:
    """The records for a given format; a file that cannot be read so says which format it looks like, if any."""
    try:
        return _read_records(path, container)
    except BenchmarkError as err:
        seen = _first_record_by_extension(path)
        looks = _looks_like(seen[0], seen[2]) if seen else None
        if looks is None or looks == format:
            raise
        container, position, record = seen
        raise BenchmarkError(f"{err}; the file looks like {looks!r} (its first record, {_where(container, position)}, "
                             f"has keys {sorted(record)}), not {format!r}: set format: {looks}, or auto") from None


def _first_record_by_extension(path: Path) -> tuple[str, int, Any] | None:
    """``(container, position, record)`` of the file's first record, read as its extension says; None if it cannot
    be read so."""
    try:
        container = _container_of(path)
        records = _read_records(path, container)
    except BenchmarkError:
        return None
    return (container, *records[0]) if records else None


def _is_parquet(path: Path) -> bool:
    """Whether a file starts with Parquet's magic bytes (so reading it as text would only report binary noise)."""
    with open(path, "rb") as f:
        return f.read(4) == b"PAR1"


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


def _read_parquet(path: Path) -> list[dict]:
    """The rows of a Parquet file as plain Python objects (list columns become lists, structs dicts)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = path.read_bytes()  # an unreadable file is an OSError, as for the JSON formats
    try:
        return pq.read_table(pa.BufferReader(data)).to_pylist()
    except pa.ArrowException as err:
        raise BenchmarkError(f"{path}: not a readable Parquet file ({err})") from None


def _require_records(path: Path, records: list[tuple[int, Any]]) -> None:
    """An empty benchmark would evaluate to a meaningless score (or a division by zero), so it is an error."""
    if not records:
        raise BenchmarkError(f"{path}: the benchmark has no records")


def _looks_like(container: str, record: Any) -> str | None:
    """The format a record's keys point to in its container, or None when they fit none."""
    if not isinstance(record, dict):
        return None
    if container in ("jsonl", "parquet") and "prompt" in record and "reward_model" in record:
        return "search-r1"
    if container == "jsonl":
        if "golden_answers" in record:
            return "flashrag"
        if "answer" in record:
            return "nq-open"
    if container == "json":
        if "supporting_facts" in record or ("_id" in record and "context" in record):
            return "hotpotqa"
        if "answer" in record or "answers" in record:
            return "json"
    return None


def _format_of(path: Path, container: str, first: tuple[int, Any]) -> str:
    """The format told from the first record's keys; an error naming the keys seen when they fit no format."""
    position, record = first
    record = _as_object(path, _where(container, position), record)
    format = _looks_like(container, record)
    if format is None:
        raise BenchmarkError(f"{path}: cannot tell the benchmark format: the first record "
                             f"({_where(container, position)}) has keys {sorted(record)}; "
                             f"expected {_EXPECTED[container]}")
    return format


def _require_looks_like(path: Path, container: str, format: str, first: tuple[int, Any]) -> None:
    """A given format must be the one the first record looks like, when it looks like one: reading a file in
    another format's terms would fail later with a message about keys, or quietly take the wrong ones."""
    position, record = first
    looks = _looks_like(container, record)
    if looks is not None and looks != format:
        raise BenchmarkError(f"{path}: {_where(container, position)}: format {format!r} was given, but the file "
                             f"looks like {looks!r} (its first record has keys {sorted(record)}); "
                             f"set format: {looks}, or auto")


# ---------------------------------------------------------------- one record per format
# Each takes the file, the record's position for messages (``where``), the id it gets if it has none of its own
# (``default_id``) and the record.
def _flashrag(path: Path, where: str, default_id: str, record: Any) -> Question:
    """A FlashRAG record; any top-level keys besides the four known ones join its ``metadata``."""
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
    answers = _answers(path, where, "golden_answers", _required(path, where, record, "golden_answers"))
    return Question(id=_id(path, where, record, "id", default_id), question=_question_text(path, where, record),
                    answers=answers, metadata={**metadata, **extras})


def _nq_open(path: Path, where: str, default_id: str, record: Any) -> Question:
    """An NQ-open record (or R1-Searcher's, whose ``answer`` is one string)."""
    record = _as_object(path, where, record)
    return Question(id=_id(path, where, record, "id", default_id), question=_question_text(path, where, record),
                    answers=_answers(path, where, "answer", _required(path, where, record, "answer")),
                    metadata=_extras(record, {"id", "question", "answer"}))


def _hotpotqa(path: Path, where: str, default_id: str, record: Any) -> Question:
    """A HotpotQA record: ``type``/``level``/… become the metadata, its paragraphs are dropped; the titles of its
    supporting facts, in order and once each, are kept as ``supporting_titles`` (what a demonstration made from the
    question searches after the question itself: :mod:`searchlab.labeled.demos`)."""
    record = _as_object(path, where, record)
    metadata = _extras(record, {"_id", "question", "answer", *_HOTPOTQA_DROPPED})
    facts = record.get("supporting_facts")
    titles = [fact[0] for fact in facts if isinstance(fact, list) and fact and isinstance(fact[0], str)] \
        if isinstance(facts, list) else []
    if titles:
        metadata["supporting_titles"] = list(dict.fromkeys(titles))
    return Question(id=_id(path, where, record, "_id", default_id), question=_question_text(path, where, record),
                    answers=_answers(path, where, "answer", _required(path, where, record, "answer")),
                    metadata=metadata)


def _plain_json(path: Path, where: str, default_id: str, record: Any) -> Question:
    """A plain JSON record: ``answer`` or ``answers`` (one of them), a string or a list of them."""
    record = _as_object(path, where, record)
    if "answer" in record and "answers" in record:
        raise _record_error(path, where, "answers", "given together with 'answer'; keep one of them")
    if "answer" not in record and "answers" not in record:
        raise _record_error(path, where, "answer",
                            f"is missing, and so is 'answers' (the record has keys {sorted(record)})")
    key = "answers" if "answers" in record else "answer"
    return Question(id=_id(path, where, record, "id", default_id), question=_question_text(path, where, record),
                    answers=_answers(path, where, key, record[key]),
                    metadata=_extras(record, {"id", "question", "answer", "answers"}))


def _search_r1(path: Path, where: str, default_id: str, record: Any) -> Question:
    """A Search-R1 (verl) row: answers from ``reward_model.ground_truth.target``, the question as the module says."""
    record = _as_object(path, where, record)
    source = _text(path, where, "data_source", _required(path, where, record, "data_source"))
    reward_model = _object(path, where, "reward_model", _required(path, where, record, "reward_model"))
    ground_truth = _required(path, where, reward_model, "ground_truth", within="reward_model")
    if isinstance(ground_truth, dict):  # Search-R1's own files: {"target": [...]}; other projects' verl files: the answers
        answers = _answers(path, where, "reward_model.ground_truth.target",
                           _required(path, where, ground_truth, "target", within="reward_model.ground_truth"))
    else:
        answers = _answers(path, where, "reward_model.ground_truth", ground_truth)
    own_id = _id(path, where, record, "id", None)
    return Question(id=f"{source}-{own_id}" if own_id is not None else default_id,
                    question=_search_r1_question(path, where, record), answers=answers,
                    metadata=_extras(record, {"id", "question", *_SEARCH_R1_DROPPED}))


def _search_r1_question(path: Path, where: str, record: dict) -> str:
    """The row's ``question``, else ``extra_info.question``, else the last user message: after its last
    ``Question:`` (Search-R1's template ends ``... Question: <q>\\n``), or the whole message when it has none (the
    bare question, as other projects' verl files have it)."""
    if record.get("question") is not None:
        return _question_text(path, where, record)
    extra = record.get("extra_info")
    if isinstance(extra, dict) and extra.get("question") is not None:
        return _text(path, where, "extra_info.question", extra["question"])
    prompt = _required(path, where, record, "prompt")
    if not isinstance(prompt, list):
        raise _record_error(path, where, "prompt", f"must be a list of chat messages, got {_show(prompt)}")
    users = [m.get("content") for m in prompt if isinstance(m, dict) and m.get("role") == "user"]
    if not users or not isinstance(users[-1], str):
        raise _record_error(path, where, "prompt", "has no user message with text content to take the question from")
    _, _, question = users[-1].rpartition("Question:")
    if not question.strip():
        raise _record_error(path, where, "prompt", "has a user message with no question in it (nothing after its "
                                                   "last 'Question:'), and the row has no 'question' or "
                                                   "'extra_info.question' to take the question from")
    return question.strip()


_PARSERS = {"flashrag": _flashrag, "nq-open": _nq_open, "hotpotqa": _hotpotqa, "json": _plain_json,
            "search-r1": _search_r1}


# ---------------------------------------------------------------- checks on one record
def _as_object(path: Path, where: str, record: Any) -> dict:
    """The record, which must be a JSON object."""
    if not isinstance(record, dict):
        raise BenchmarkError(f"{path}: {where}: expected a JSON object, got a JSON {_json_type(record)}")
    return record


def _object(path: Path, where: str, key: str, value: Any) -> dict:
    """A nested value that must be a JSON object (``key`` is its dotted path, for the message)."""
    if not isinstance(value, dict):
        raise _record_error(path, where, key, f"must be a JSON object, got {_show(value)}")
    return value


def _required(path: Path, where: str, record: dict, key: str, within: str = "") -> Any:
    """The value of a key the record (or its nested object at dotted path ``within``) must have."""
    if key not in record:
        raise _record_error(path, where, f"{within}.{key}" if within else key,
                            f"is missing (the {repr(within) if within else 'record'} has keys {sorted(record)})")
    return record[key]


def _id(path: Path, where: str, record: dict, key: str, default: str | None) -> str | None:
    """The record's own id (a non-blank string, or an integer: some files number their questions), or ``default``
    when it has none (no such key, or null: a Parquet column's missing value)."""
    if record.get(key) is None:
        return default
    value = record[key]
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str) or not value.strip():
        raise _record_error(path, where, key, f"must be a non-blank string or an integer, got {_show(value)}")
    return value


def _text(path: Path, where: str, key: str, value: Any) -> str:
    """A value that must be a non-blank string, kept exactly as written."""
    if not isinstance(value, str) or not value.strip():
        raise _record_error(path, where, key, f"must be a non-blank string, got {_show(value)}")
    return value


def _question_text(path: Path, where: str, record: dict) -> str:
    """The question, a non-blank string, kept exactly as written."""
    return _text(path, where, "question", _required(path, where, record, "question"))


def _answers(path: Path, where: str, key: str, value: Any) -> list[str]:
    """Gold answers: one non-blank string (as a one-element list) or a non-empty list of them.

    Numbers and booleans are errors, not converted: scoring compares text, and a silent ``str(1.0)`` would make
    a gold that no answer could match.
    """
    if isinstance(value, str):
        return [_text(path, where, key, value)]
    if not isinstance(value, list):
        raise _record_error(path, where, key, f"must be an answer string or a list of them, got {_show(value)}")
    if not value:
        raise _record_error(path, where, key, "is an empty list; a question needs at least one gold answer")
    for i, answer in enumerate(value):
        if not isinstance(answer, str) or not answer.strip():
            raise _record_error(path, where, key, f"item {i} must be a non-blank string, got {_show(answer)}")
    return list(value)


def _extras(record: dict, known: set[str] | frozenset[str]) -> dict:
    """The record's keys other than the known ones: what goes to ``metadata``."""
    return {key: value for key, value in record.items() if key not in known}


# ---------------------------------------------------------------- whole benchmark
def _reject_duplicate_ids(path: Path, wheres: list[str], questions: list[Question]) -> None:
    """Two questions with one id would merge in any per-question result table, so duplicates are errors."""
    first_seen: dict[str, str] = {}
    for where, question in zip(wheres, questions):
        if question.id in first_seen:
            raise BenchmarkError(f"{path}: duplicate id {question.id!r} at {first_seen[question.id]} and {where}")
        first_seen[question.id] = where


def _sample(questions: list[Question], sample: int | None, seed: int) -> list[Question]:
    """A seeded subset of ``sample`` questions in file order, or all of them if there are no more than that."""
    if sample is None or sample >= len(questions):
        return questions
    chosen = sorted(random.Random(seed).sample(range(len(questions)), sample))
    return [questions[i] for i in chosen]


# ---------------------------------------------------------------- messages
def _where(container: str, position: int) -> str:
    """``"line 3"`` in a JSONL file (1-based), ``"record 3"`` in a JSON list or ``"row 3"`` in Parquet (0-based)."""
    if container == "jsonl":
        return f"line {position}"
    return f"row {position}" if container == "parquet" else f"record {position}"


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
