"""The consensus filter's solvers: who can answer a question from what.

Each solver has a role: ``closed_book`` (the question alone), ``one_shot``
(the top-k BM25 passages for the whole question) or ``gold`` (the question's
gold evidence). Its pass rate on a question is its mean cover-EM over its
samples (:mod:`searchlab.scoring`). Backends:

- ``rules`` (built in, no model): :class:`RuleReader` reads the given passages,
  recognising names and values in them through the KB's passage annotations,
  links them from the entities the question names, and answers with the linked
  value the question asks for; closed-book, it answers from priors (the most
  common value, the most referenced entity) unless the question leaks its answer.
- ``hf`` / ``openai``: :class:`~searchlab.synth.models.ModelSolver`, for larger profiles.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import cached_property

from searchlab.corpus.kb import KB
from searchlab.scoring import cover_exact_match, normalize_answer
from searchlab.synth.config import SolverParams
from searchlab.synth.generate import Question

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the of in on at to by for and or is was were which what who whom whose where when how "
                  "did does do that this it its with from as be been name identify".split())


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


class RuleReader:
    """A model-free reader over passages, for the built-in solvers (see the module docstring)."""

    def __init__(self, kb: KB):
        self.kb = kb

    def answer(self, q: Question, passages: list[str]) -> str:
        """The reader's answer to ``q`` from the passages with these ids ("" when it finds none)."""
        kb = self.kb
        given = [p for p in passages if p in kb.passage_subject]
        dist = self._reach(q.mentions, given)
        if q.compare:
            return self._compare(q, given)
        words = content_words(q.question)
        predicate, wanted_type = q.slot.get("predicate"), q.slot.get("type")
        if predicate:  # a value: the linked fact of the asked predicate, farthest along the chain
            found = [(dist.get(f.subject, -1), len(words & content_words(kb.passages[p])), kb.answer_text(f))
                     for p in given for f in kb.passage_facts[p] if f.predicate == predicate]
            return max(found)[2] if found else ""
        scores: Counter[str] = Counter()  # an entity of the wanted type: the one whose passages fit the question best
        for p in given:
            subject = kb.passage_subject[p]
            if kb[subject].type == wanted_type and subject not in q.mentions:
                scores[subject] += len(words & content_words(kb.passages[p]))
        return kb[max(scores, key=lambda e: (scores[e], e))].name if scores else ""

    def _reach(self, start: list[str], passages: list[str]) -> dict[str, int]:
        """Hops from the named entities to every entity the passages link them to."""
        dist = {e: 0 for e in start}
        changed = True
        while changed:
            changed = False
            for p in passages:
                d = dist.get(self.kb.passage_subject[p])
                if d is None:
                    continue
                for f in self.kb.passage_facts[p]:
                    if f.relation and f.value not in dist:
                        dist[f.value] = d + 1
                        changed = True
        return dist

    def _compare(self, q: Question, passages: list[str]) -> str:
        predicate, values = q.compare["predicate"], {}
        for p in passages:
            for f in self.kb.passage_facts[p]:
                if f.predicate == predicate and f.subject in q.compare["options"]:
                    values[f.subject] = f.value
        if len(values) < 2:
            return ""
        pick = max if q.compare["direction"] == "max" else min
        return self.kb[pick(values, key=values.get)].name

    # ------------------------------------------------------------------ closed book
    def guess(self, q: Question) -> str:
        """Closed book: a leaked answer if the question contains one, else the prior for what is asked."""
        text = normalize_answer(q.question)
        for a in q.answers:
            if cover_exact_match(text, a):
                return a
        if q.compare:
            return self.kb[max(q.compare["options"], key=lambda e: (self.kb.in_degree[e], e))].name
        if "predicate" in q.slot:
            return self._common_value.get(q.slot["predicate"], "")
        return self._popular.get(q.slot.get("type"), "")

    @cached_property
    def _common_value(self) -> dict[str, str]:
        counts: dict[str, Counter] = {}
        for (predicate, value), subjects in self.kb.by_value.items():
            counts.setdefault(predicate, Counter())[value] += len(subjects)
        out = {}
        for predicate, counter in counts.items():
            value = counter.most_common(1)[0][0]
            if isinstance(value, bool):
                out[predicate] = "yes" if value else "no"  # a yes/no question's prior: the more common answer
            else:
                out[predicate] = (self.kb[value].name if isinstance(value, str) and value in self.kb.entities
                                  else str(value))
        return out

    @cached_property
    def _popular(self) -> dict[str, str]:
        return {t: self.kb[max(ids, key=lambda e: (self.kb.in_degree[e], e))].name for t, ids in self.kb.by_type.items()}


class Roster:
    """Runs every configured solver on a batch of questions and returns pass rates by role."""

    def __init__(self, solvers: list[SolverParams], kb: KB):
        self.solvers, self.kb = solvers, kb
        self.reader = RuleReader(kb)
        self._models: dict[str, object] = {}

    def pass_rates(self, questions: list[Question], one_shot_passages: list[list[str]]) -> list[dict[str, float]]:
        """Per question: ``{solver name: rate}`` plus ``{"role:<role>": mean over that role's solvers}``."""
        rates: list[dict[str, float]] = [{} for _ in questions]
        for s in self.solvers:
            contexts = [self._context(s, q, hits) for q, hits in zip(questions, one_shot_passages)]
            if s.backend == "rules":
                answers = [[self.reader.guess(q) if s.role == "closed_book" else self.reader.answer(q, c)]
                           for q, c in zip(questions, contexts)]
            else:
                texts = [[self.kb.passages[p] for p in c] for c in contexts]
                answers = self._model(s).answer([q.question for q in questions], texts)
            for r, q, drawn in zip(rates, questions, answers):
                r[s.name] = sum(cover_exact_match(a, q.answers) for a in drawn) / len(drawn)
        for r in rates:
            for role in ("closed_book", "one_shot", "gold"):
                names = [s.name for s in self.solvers if s.role == role]
                if names:
                    r[f"role:{role}"] = sum(r[n] for n in names) / len(names)
        return rates

    @staticmethod
    def _context(s: SolverParams, q: Question, one_shot: list[str]) -> list[str]:
        return [] if s.role == "closed_book" else one_shot[: s.topk] if s.role == "one_shot" else q.evidence

    def _model(self, s: SolverParams):
        if s.name not in self._models:
            from searchlab.synth.models import ModelSolver  # torch/transformers only when a profile asks for them
            self._models[s.name] = ModelSolver(s)
        return self._models[s.name]

    def close(self) -> None:
        for m in self._models.values():
            m.close()
        self._models.clear()
