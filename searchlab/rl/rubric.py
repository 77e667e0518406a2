"""Citation-aware rubrics (CaRR, "Chaining the Evidence", Zhang et al. 2026): did the episode show its evidence chain?

A question's evidence chain (its ``constraints``, as QA synthesis writes them)
becomes *rubrics*, one verifiable single-hop fact each: a hidden entity or
value the trajectory must name, and the id of the passage that states it. An
episode satisfies a rubric when

* it *names* the entity in its own text (everything but the environment's
  information blocks and messages: its thinking, queries, citations and answer),
  compared on whole tokens after :func:`searchlab.scoring.normalize_answer`,
  punctuation counting as a space except inside numbers ("6,726" is 6726,
  "949-kilometre" names 949); and
* it *cites* (see the citation convention in :mod:`searchlab.agent.protocol`)
  that very passage, and the passage as its information block showed it
  contains the entity (a token budget may have cut it off).

:func:`rubric_score` is the share of rubrics satisfied. The cited passage must
be the chain's own: a passage that merely mentions the entity (its own page,
found by searching a guessed name) proves nothing about the hop, and citing a
passage that does not state the entity earns nothing for that hop. CaRR's
third condition, evidence *connectivity* (the satisfied rubrics must link up
to the answer), holds by construction here: the rubrics are the gold chain's
own hops, never facts the agent picked, so only the share of the chain shown
varies.

Which constraints become rubrics (``op``, see :class:`searchlab.synth.generate.Constraint`):

* ``hop`` (single, bridge, compose: the bridge entities and the answer),
  ``compare`` (each compared value, e.g. the two years) and ``range`` (the exact
  value behind "in the 7th century"): the constraint's ``value_text``, stated by
  its ``passage``;
* ``via`` (an oblique cue through a described entity): that entity's name
  (``value_text``), stated both by the cue's passage and by the passage of the
  description (``via["passage"]``), two rubrics;
* ``eq`` (an oblique cue whose value the question itself gives): the value is
  not hidden, the subject is: the answer, stated by the cue's passage.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from searchlab.agent.episode import Rollout
from searchlab.agent.protocol import citations, environment_spans
from searchlab.scoring import cover_exact_match

# Any tag-shaped token of the model's text: the protocol's tags, <cite>, and whatever it makes up.
_TAG_RE = re.compile(r"</?[A-Za-z]+>")
_NUMBER_SEPARATOR_RE = re.compile(r"(\d)[.,](?=\d)")
_PUNCTUATION_RE = re.compile(r"[^\w\s]")

__all__ = ["Rubric", "RubricCheck", "check_rubrics", "rubric_score", "rubrics"]


@dataclass(frozen=True, slots=True)
class Rubric:
    """One verifiable single-hop fact: the ``entity`` to name, the id of the ``passage`` stating it, its ``fact``."""

    entity: str
    passage: str
    fact: str = ""


@dataclass(frozen=True, slots=True)
class RubricCheck:
    """How an episode fared on one rubric: whether it ``named`` the entity and cited a passage that ``supported`` it."""

    rubric: Rubric
    named: bool
    supported: bool

    @property
    def satisfied(self) -> bool:
        """Both: the entity named and its passage cited."""
        return self.named and self.supported


def _constraint_rubrics(c: Mapping[str, Any], answer: str) -> list[Rubric]:
    """The rubrics of one constraint (see the module docstring for the rule per ``op``)."""
    op, fact = c["op"], c.get("text", "")
    value = c.get("value_text") or str(c["value"])  # older records may lack value_text
    if op in ("hop", "compare", "range"):
        return [Rubric(value, c["passage"], fact)]
    if op == "via":
        return [Rubric(value, c["passage"], fact), Rubric(value, c["via"]["passage"], fact)]
    if op == "eq":
        return [Rubric(answer, c["passage"], fact)]
    raise ValueError(f"no rubric rule for constraint op {op!r}")


def rubrics(chain: Sequence[Mapping[str, Any]], answers: str | Sequence[str]) -> list[Rubric]:
    """The rubrics of a question: its ``constraints`` (dicts, as in ``train.jsonl``) and its gold ``answers``.

    The first gold names the answer entity (``eq`` cues need it). A rubric
    repeated by two constraints is kept once; an empty chain has none.

    >>> [r.entity for r in rubrics([{"op": "hop", "value_text": "Althouhelm", "passage": "e0-1"},
    ...                              {"op": "hop", "value_text": "1167", "passage": "e406-1"}], ["1167"])]
    ['Althouhelm', '1167']
    """
    answer = answers if isinstance(answers, str) else answers[0]
    found: list[Rubric] = []
    seen: set[tuple[str, str]] = set()
    for c in chain:
        for r in _constraint_rubrics(c, answer):
            if (r.entity, r.passage) not in seen:
                seen.add((r.entity, r.passage))
                found.append(r)
    return found


def _own_text(completion: str) -> str:
    """The model's own words in ``completion``: everything the environment did not insert, tags made spaces.

    Normalisation drops punctuation, so a tag left in would glue itself to the
    word beside it (``"<think>Althouhelm"`` -> ``"thinkalthouhelm"``).
    """
    pieces, position = [], 0
    for start, end in environment_spans(completion):
        pieces.append(completion[position:start])
        position = end
    pieces.append(completion[position:])
    return _TAG_RE.sub(" ", " ".join(pieces))


def _spaced(text: str) -> str:
    """``text`` with its punctuation made spaces, but for the separators inside numbers ("6,726" -> "6726").

    Normalisation deletes ASCII punctuation and keeps the rest, which glues
    words together: a passage's "949-kilometre" or "(1930–2007)" must still
    name 949 and 2007.
    """
    return _PUNCTUATION_RE.sub(" ", _NUMBER_SEPARATOR_RE.sub(r"\1", text))


def _mentions(text: str, entity: str) -> bool:
    """Whether ``text`` names ``entity``: whole normalised tokens (:func:`~searchlab.scoring.cover_exact_match`)."""
    return bool(cover_exact_match(_spaced(text), _spaced(entity)))


def check_rubrics(episode: Rollout, checked: Sequence[Rubric]) -> list[RubricCheck]:
    """Per rubric, whether ``episode`` named its entity and cited its passage showing the entity.

    Citations are resolved with the episode's ``retrieved`` ids
    (:func:`~searchlab.agent.protocol.citations`), so only passages the
    environment really showed can support a rubric.
    """
    own = _own_text(episode.completion)
    cited = [(c.passage_id, c.passage) for c in citations(episode.completion, episode.retrieved)
             if c.passage_id is not None]
    return [RubricCheck(r, named=_mentions(own, r.entity),
                        supported=any(pid == r.passage and _mentions(shown, r.entity) for pid, shown in cited))
            for r in checked]


def rubric_score(episode: Rollout, chain: Sequence[Mapping[str, Any]], answers: str | Sequence[str]) -> float | None:
    """The share of the question's rubrics that ``episode`` satisfies, in [0, 1]; ``None`` when it has none.

    ``chain`` and ``answers`` are the question's ``constraints`` and gold
    answers (see :func:`rubrics`).
    """
    checked = rubrics(chain, answers)
    if not checked:
        return None
    return sum(c.satisfied for c in check_rubrics(episode, checked)) / len(checked)
