"""Import a user's semi-structured records as a knowledge base: ``corpus.jsonl`` and ``kb.jsonl``.

Input: a JSON file holding a list of objects, a JSON Lines file (one object a
line; ``.jsonl`` or ``.jsonl.gz``), or a folder of such files (read in name
order; a file is JSON when its name ends in ``.json``, JSON Lines otherwise).
Each object is one record; with ``corpus.records`` set to
``{type_field: type, references: [director, studio]}``::

    {"id": "metropolis", "type": "film", "name": "Metropolis", "year": 1927,
     "genre": ["science fiction", "drama"], "director": "fritz-lang", "studio": "ufa"}
    {"id": "fritz-lang", "type": "director", "name": "Fritz Lang", "birth_year": 1890}

- ``id_field`` (default ``id``): a string or integer without whitespace, unique
  across the input; it becomes the entity id, and its passages are
  ``<id>-0``, ``<id>-1``, ...;
- ``name_field`` (default ``name``): the entity's name, the passages' title;
- ``type_field``: the entity type (a record without it, or no ``type_field``,
  gets ``default_type``);
- ``attributes``: the fields stated as attribute facts; by default every field
  holding a scalar (string, number, boolean) or a list of scalars, other than the
  id, name, type and reference fields. A list gives one fact per element; null,
  missing and empty values give none. Values keep their JSON type;
- ``references``: fields holding the id (or a list of ids) of other records,
  stated as relation facts whose ``value`` is the target's id and ``text`` its
  name. A reference to an id that is not in the input is skipped, counted
  (``missing_references``) and the first few are logged.

Each record is rendered into passages of a few plain sentences, one a fact
("Metropolis's year is 1927.", "UFA is based in Potsdam." for a field ending in a
preposition, "Aruba is not landlocked." for a boolean, "Ada Lovelace died in 1852."
or "UFA was founded in 1917." for a year in a field named by a verb), at most
:data:`FACTS_PER_PASSAGE` facts a passage, the first passage opening with
"Metropolis is a film." (see :func:`boolean_text` and :func:`verb_form`). ``kb.jsonl`` has the same form as
the synthetic world's (:mod:`searchlab.corpus.world`): each fact names the passage
that states it, and its ``text`` is the exact string that passage contains.

A malformed record (not an object; a missing, invalid or duplicate id; no name;
an object where a value or an id belongs) raises
:class:`~searchlab.jsonl.RecordError` naming the file and line, or with
``on_error="skip"`` is skipped and counted. Two passes: the first checks every
record and keeps its id, name and facts in memory; the second resolves
references by id and writes the passages.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from searchlab.corpus.importers import OnError, _files, _Writer, jsonl_records
from searchlab.jsonl import RecordError, decode_text
from searchlab.params import RecordsParams

log = logging.getLogger(__name__)

FACTS_PER_PASSAGE = 6
_LOGGED_MISSING = 5  # missing references logged one by one; the rest are only counted
_PREPOSITIONS = {"in", "at", "on", "of", "by", "from", "for", "to", "with", "into", "near"}
_JSON_SPACE = re.compile(r"[ \t\n\r]*")


@dataclass
class _Entity:
    """A valid record: where it came from, and its facts before rendering."""

    file: Path
    line: int
    id: str
    name: str
    type: str
    attributes: list[tuple[str, Any]] = field(default_factory=list)  # (field, value)
    references: list[tuple[str, str]] = field(default_factory=list)  # (field, target id)


def import_records(path: Path, out_dir: Path, records: RecordsParams, on_error: OnError = "fail") -> dict[str, int]:
    """Write ``out_dir/corpus.jsonl`` and ``out_dir/kb.jsonl`` from the records at ``path``; return counts.

    Returns ``{"entities", "passages", "facts", "skipped", "missing_references"}``.
    Raises ``FileNotFoundError`` for a missing path, ``ValueError`` for an
    unreadable file, invalid JSON (naming file and line), an input without
    records or fields named both as attributes and references, and
    :class:`~searchlab.jsonl.RecordError` for a malformed record unless
    ``on_error`` is ``"skip"``.
    """
    both = set(records.attributes or ()) & set(records.references)
    if both:
        raise ValueError(f"corpus.records: fields {sorted(both)} are listed both as attributes and references")
    out_dir = Path(out_dir)
    with _Writer(out_dir / "corpus.jsonl", on_error) as writer:
        entities, seen_fields, total = _collect(path, records, writer)  # pass 1: validate, collect ids and names
        if total == 0:
            raise ValueError(f"{path}: no records")
        for name in [*(records.attributes or ()), *records.references]:
            if name not in seen_fields:
                log.warning("%s: field %r (corpus.records) has a value in no record", path, name)
        names = {e.id: e.name for e in entities}
        facts = missing = 0
        with open(out_dir / "kb.jsonl", "w", encoding="utf-8") as kb:  # pass 2: render and write
            for e in entities:
                relations = []
                for predicate, target in e.references:
                    if target in names:
                        relations.append((predicate, target, names[target]))
                        continue
                    missing += 1
                    if missing <= _LOGGED_MISSING:
                        log.warning("%s:%d: reference %r of %r names unknown id %r; skipped",
                                    e.file, e.line, predicate, e.id, target)
                passages, kb_facts = render_record(e.id, e.name, e.type, e.attributes, relations)
                for pid, contents in passages:
                    writer.add(pid, contents, e.file, e.line)
                kb.write(json.dumps({"id": e.id, "type": e.type, "subtype": "", "name": e.name,
                                     "passages": [pid for pid, _ in passages], "facts": kb_facts},
                                    ensure_ascii=False) + "\n")
                facts += len(kb_facts)
    if missing > _LOGGED_MISSING:
        log.warning("%s: %d references to unknown ids skipped (first %d logged)", path, missing, _LOGGED_MISSING)
    counts = writer.counts(path)  # raises if every record was skipped
    return {"entities": len(entities), "passages": counts["passages"], "facts": facts,
            "skipped": counts["skipped"], "missing_references": missing}


# ------------------------------------------------------------------ rendering
def render_record(eid: str, name: str, etype: str, attributes: list[tuple[str, Any]],
                  relations: list[tuple[str, str, str]]) -> tuple[list[tuple[str, str]], list[dict]]:
    """``([(passage id, contents)], kb facts)`` for one entity.

    ``attributes`` are ``(field, value)``, ``relations`` ``(field, target id,
    target name)``. One sentence a fact, at most :data:`FACTS_PER_PASSAGE` facts
    a passage (spread evenly); the first passage opens with "{name} is a {type}.".
    """
    stated = [(f, v, "attribute", boolean_text(f, v) if isinstance(v, bool) else _text(v)) for f, v in attributes]
    stated += [(f, target, "relation", target_name) for f, target, target_name in relations]
    n = max(1, -(-len(stated) // FACTS_PER_PASSAGE))  # passages, with the facts spread evenly (7: 4 + 3)
    passages, facts = [], []
    for k in range(n):
        pid = f"{eid}-{k}"
        sentences = [f"{name} is {_a(_words(etype))}."] if k == 0 else []
        for predicate, value, kind, text in stated[k * len(stated) // n:(k + 1) * len(stated) // n]:
            sentences.append(_sentence(name, predicate, text, value))
            facts.append({"predicate": predicate, "value": value, "kind": kind, "passage": pid, "text": text})
        passages.append((pid, f'"{name}"\n' + " ".join(sentences)))
    return passages, facts


def _sentence(name: str, predicate: str, text: str, value: Any = None) -> str:
    """"Metropolis's year is 1927."; for a field ending in a preposition "UFA is based in Potsdam."; for a boolean
    "Aruba is not landlocked." (``text`` is then :func:`boolean_text`); for a year in a field named by a verb
    "Ada Lovelace died in 1852." or "UFA was founded in 1917." (:func:`verb_form`)."""
    words = _words(predicate)
    verb = verb_form(predicate) if is_year(value) else None
    if isinstance(value, bool):
        said = f"{name} {text}"
    elif verb is not None:
        said = f"{name} {verb[0] if verb[1] else 'was ' + verb[0]} in {text}"
    elif words.rsplit(" ", 1)[-1] in _PREPOSITIONS:
        said = f"{name} is {words} {text}"
    else:
        said = f"{name}'s {words} is {text}"
    return said if said.endswith((".", "!", "?")) else said + "."


def _words(name: str) -> str:
    """Field name as words: ``"runtime_min"`` → ``"runtime min"``, ``"birthYear"`` → ``"birth year"``."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", name)
    return " ".join(re.sub(r"[_\-.]+", " ", spaced).split()).lower()


field_words = _words


# ------------------------------------------------------------------ booleans and verbs
# A boolean field's first word, when it is a verb, decides how the fact is said:
# (affirmative, negative, yes/no question); {w}: the other words, {s}: the subject.
_BOOLEAN_FORMS = {
    "is": ("is {w}", "is not {w}", "Is {s} {w}?"),
    "are": ("is {w}", "is not {w}", "Is {s} {w}?"),
    "was": ("was {w}", "was not {w}", "Was {s} {w}?"),
    "were": ("was {w}", "was not {w}", "Was {s} {w}?"),
    "has": ("has {w}", "has no {w}", "Does {s} have {w}?"),
    "have": ("has {w}", "has no {w}", "Does {s} have {w}?"),
    "had": ("had {w}", "had no {w}", "Did {s} have {w}?"),
    "can": ("can {w}", "cannot {w}", "Can {s} {w}?"),
    "does": ("does {w}", "does not {w}", "Does {s} {w}?"),
    "did": ("did {w}", "did not {w}", "Did {s} {w}?"),
}
# Any other field: "is" for an adjective or participle ("landlocked") or several words ("open_on_sundays"),
# "has" for a one-word noun ("colour": "has no colour", "subtitles": "has subtitles").
_ADJECTIVE_ENDINGS = ("ed", "al", "ic", "ous", "ive", "able", "ible", "ful", "less", "ant", "ent", "ary", "ory",
                      "ish", "ile", "ian", "ese")
_ADJECTIVES = frozenset(
    "free open dead alive extinct safe new old live online offline official real fake main primary secret silent "
    "complete current valid blind deaf royal urban rural native wild local foreign sovereign true false big small "
    "large busy empty full hot cold famous notable senior junior major minor clean dry wet adult male female vegan "
    "premium member student citizen single twin mobile remote hidden broken frozen stolen written spoken chosen "
    "fallen known shown proven missing existing ongoing living working running pending remaining upcoming "
    "operating visible invisible done active inactive".split())


def _boolean_form(predicate: str) -> tuple[tuple[str, str, str], str, str]:
    """``(forms, verb, other words)`` of a boolean field."""
    words = _words(predicate)
    first, _, rest = words.partition(" ")
    if first in _BOOLEAN_FORMS and rest:
        return _BOOLEAN_FORMS[first], first, rest
    if rest or words in _ADJECTIVES or words.endswith(_ADJECTIVE_ENDINGS):
        return _BOOLEAN_FORMS["is"], "", words
    return _BOOLEAN_FORMS["has"], "has", words


def boolean_text(predicate: str, value: bool) -> str:
    """How a passage states a boolean fact after the subject's name, in words (never "yes"/"no").

    >>> boolean_text("landlocked", False), boolean_text("is_married", True), boolean_text("has_coast", False)
    ('is not landlocked', 'is married', 'has no coast')
    >>> boolean_text("canFly", False), boolean_text("has_a_navy", False), boolean_text("colour", True)
    ('cannot fly', 'has no navy', 'has colour')
    """
    forms, verb, rest = _boolean_form(predicate)
    if not value and verb in ("has", "have", "had"):
        rest = re.sub(r"^(a|an|any) ", "", rest)  # "has a navy" → "has no navy"
    return (forms[0] if value else forms[1]).format(w=rest)


def boolean_question(predicate: str) -> str:
    """The yes/no question for a boolean field, ``{s}`` the subject: ``"Is {s} landlocked?"``, ``"Does {s} have
    coast?"`` (``has_coast``), ``"Can {s} fly?"`` (``can_fly``)."""
    forms, _, rest = _boolean_form(predicate)
    return forms[2].replace("{w}", rest)


# Past forms that read "{subject} died in 1852" (active; with their base form for "When did ... die?"); any
# other verb reads "{subject} was founded in 1917" (passive).
_ACTIVE = {"died": "die", "retired": "retire", "opened": "open", "closed": "close", "premiered": "premiere",
           "debuted": "debut", "began": "begin", "ended": "end", "started": "start", "arrived": "arrive",
           "emigrated": "emigrate", "dissolved": "dissolve", "merged": "merge", "collapsed": "collapse",
           "erupted": "erupt", "disbanded": "disband", "graduated": "graduate", "married": "marry",
           "flourished": "flourish", "reigned": "reign"}
_PARTICIPLES = {"born", "built", "made", "written", "drawn", "sold", "held", "shot", "begun", "sung", "known"}
_NOT_VERBS = {"hundred", "kindred", "seed", "speed", "breed", "need", "feed", "bed", "red", "shed", "sled"}
_ADVERBS = {"first", "last", "originally", "officially", "formally", "initially", "finally", "formerly"}


def verb_form(predicate: str) -> tuple[str, str | None] | None:
    """``(words, base form or None)`` of a field named by a past verb, for a year it holds: ``"died"`` →
    ``("died", "die")`` (active: "Ada died in 1852"), ``"founded"`` → ``("founded", None)`` (passive: "UFA was
    founded in 1917"), ``"first_published"`` → ``("first published", None)``; None for a noun (``"year"``,
    ``"birth_year"``).

    >>> verb_form("died"), verb_form("founded"), verb_form("born"), verb_form("year"), verb_form("year_founded")
    (('died', 'die'), ('founded', None), ('born', None), None, None)
    """
    words = _words(predicate)
    *before, last = words.split(" ") if words else [""]
    if any(w not in _ADVERBS for w in before) or last in _NOT_VERBS:
        return None
    if last in _ACTIVE and not before:
        return words, _ACTIVE[last]
    if last in _PARTICIPLES or (last.endswith("ed") and len(last) > 4 and not last.endswith("eed")):
        return words, None
    return None


def is_year(value: Any) -> bool:
    """An integer that reads as a year (1 to 2999): a field named by a verb holding one is said with "in"."""
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 2999


def _a(phrase: str) -> str:
    return ("an " if phrase[:1] in tuple("aeiou") else "a ") + phrase


def _text(value: Any) -> str:
    """How a passage states a value: ``1927``, ``2.5``, a string as is (a boolean: :func:`boolean_text`)."""
    return str(value)


# ------------------------------------------------------------------ reading and checking
def _collect(path: Path, params: RecordsParams, writer: _Writer) -> tuple[list[_Entity], set[str], int]:
    """Pass 1: ``(valid entities, fields with a value somewhere, records read)``; problems go to ``writer``."""
    entities: list[_Entity] = []
    where: dict[str, str] = {}  # id -> "file:line" of its record, to name the first of two duplicates
    seen_fields: set[str] = set()
    total = 0
    for file in _files(path, ("*.json", "*.jsonl", "*.jsonl.gz")):
        for line, label, record in _read(file):
            total += 1
            try:
                if isinstance(record, RecordError):
                    raise record
                entity = _entity(record, params, file, line, label)
                if entity.id in where:
                    raise RecordError(file, line, f"{label}duplicate id {entity.id!r} (first at {where[entity.id]})")
            except RecordError as err:
                writer.problem(err)
                continue
            where[entity.id] = f"{file}:{line}"
            seen_fields.update(k for k, v in record.items() if v is not None)
            entities.append(entity)
    return entities, seen_fields, total


def _read(file: Path) -> Iterator[tuple[int, str, Any]]:
    """Yield ``(line, label, record or RecordError)``; ``label`` is ``"item N: "`` in a JSON list, else ``""``."""
    if not file.name.endswith(".json"):
        for line, record in jsonl_records(file):
            yield line, "", record
        return
    try:
        text = decode_text(file, file.read_bytes())
    except OSError as err:
        raise ValueError(f"{file}: cannot read: {err}") from err
    try:
        items = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{file}:{err.lineno}: not valid JSON ({err.msg} at column {err.colno}); "
                         f"a JSON Lines file should be named *.jsonl") from None
    if not isinstance(items, list):
        raise ValueError(f"{file}: expected a JSON list of records, got a {type(items).__name__} "
                         f"(a JSON Lines file should be named *.jsonl)")
    # The text is valid JSON: decode it again item by item to learn the line each item starts on.
    decoder, pos, line = json.JSONDecoder(), text.index("[") + 1, 1
    line += text.count("\n", 0, pos)
    for index in range(len(items)):
        start = _JSON_SPACE.match(text, pos).end()
        line += text.count("\n", pos, start)
        record, end = decoder.raw_decode(text, start)
        yield line, f"item {index}: ", record
        line += text.count("\n", start, end)
        pos = _JSON_SPACE.match(text, end).end() + 1  # past the comma (or the closing bracket)
        line += text.count("\n", end, pos)


def _entity(record: Any, params: RecordsParams, file: Path, line: int, label: str) -> _Entity:
    """The checked facts of one record, or :class:`RecordError` saying what is wrong with it."""
    def bad(problem: str) -> RecordError:
        return RecordError(file, line, label + problem)

    if not isinstance(record, dict):
        raise bad(f"expected a JSON object, got {type(record).__name__}")
    eid = record.get(params.id_field)
    if eid is None or isinstance(eid, bool) or not isinstance(eid, (str, int)) or str(eid).strip() == "":
        raise bad(f"missing or invalid {params.id_field!r} (a non-empty string or integer)")
    eid = str(eid)
    if any(c.isspace() for c in eid):
        raise bad(f"id {eid!r} contains whitespace")
    name = record.get(params.name_field)
    if isinstance(name, bool) or not isinstance(name, (str, int, float)) or not str(name).strip():
        raise bad(f"record {eid!r} has no {params.name_field!r} (a non-empty string)")
    etype = record.get(params.type_field) if params.type_field else None
    if etype is not None and not isinstance(etype, str):
        raise bad(f"{params.type_field!r} of {eid!r} is not a string")
    etype = " ".join((etype or "").split()) or params.default_type
    entity = _Entity(file, line, eid, " ".join(str(name).split()), etype)

    if params.attributes is None:
        taken = {params.id_field, params.name_field, params.type_field, *params.references}
        fields = [k for k, v in record.items() if k not in taken and _scalars(v) is not None]
    else:
        fields = params.attributes
    for f in fields:
        values = _scalars(record.get(f))
        if values is None:
            raise bad(f"attribute {f!r} of {eid!r} is not a scalar or a list of scalars")
        entity.attributes += [(f, v) for v in values]

    for f in params.references:
        targets = _scalars(record.get(f))
        if targets is None or any(isinstance(t, (bool, float)) for t in targets):
            raise bad(f"reference {f!r} of {eid!r} is not an id or a list of ids")
        entity.references += [(f, str(t)) for t in targets]
    return entity


def _scalars(value: Any) -> list | None:
    """A value (or list of values) as a list of non-empty scalars (strings with whitespace runs
    made single spaces); ``[]`` for null/missing/empty; ``None`` when it holds an object or a nested list."""
    items = value if isinstance(value, list) else [value]
    out = []
    for v in items:
        if isinstance(v, str):
            v = " ".join(v.split())
            if v:
                out.append(v)
        elif isinstance(v, (int, float)):  # bool is an int
            out.append(v)
        elif v is not None:
            return None
    return out
