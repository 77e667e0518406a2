"""Demonstrations: the trajectory a competent agent would follow for a question, through the real retriever.

Each question becomes a plan of searches derived from its constraints (for a
chain: the current entity's name plus words for the relation sought; for an
oblique question: its cues). Searches run in batches through the real
retriever; a search whose results miss the passage it needs is retried with
another phrasing, and a question whose plan cannot be completed gets no
demonstration (the caller drops it). The trajectory is rendered and checked by
the agent protocol (:mod:`searchlab.agent.protocol`), the same code SFT, RL and
evaluation use, and no query may contain the answer (except in a comparison,
whose answer is one of the two names it asks about). With ``cite``, the turn
after each search cites the passage stating the fact that search was for
(``<cite> Doc N </cite>`` after its think), so SFT teaches the citations the
citation-aware rubric reward (:mod:`searchlab.rl.rubric`) looks for.

:meth:`DemoWriter.write_proposals` writes the search self-play *proposer's*
demonstrations for the same questions: given only the answer, it walks the
evidence chain backwards (the answer's name and the relation's words find the
passage that states the last hop, whose subject leads to the hop before), and
ends with the question in ``<question>`` tags, so SFT teaches both roles.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

from searchlab.agent.protocol import DemoStep, parse_trajectory, render_demonstration
from searchlab.corpus.kb import KB
from searchlab.retrieval.base import Hit, Retriever
from searchlab.scoring import cover_exact_match
from searchlab.synth.generate import Constraint, Question
from searchlab.synth.lexicon import (
    about,
    backward_question,
    compare_words,
    describe,
    is_person,
    phrasing,
    words,
)


@dataclass
class _Need:
    """One search the plan needs: phrasings to try, the passage it must surface, and what to think around it."""

    queries: list[str]
    passage: str
    before: str
    after: str
    optional: bool = False  # oblique cues: a miss skips the cue instead of dropping the question
    first: str = ""  # the think to use instead of ``before`` when this is the trajectory's first search


@dataclass
class _Plan:
    question: Question
    needs: list[_Need]
    final: str
    steps: list[tuple[_Need, DemoStep]] = field(default_factory=list)
    at: int = 0  # the need being searched
    attempt: int = 0  # the phrasing being tried
    failed: bool = False
    min_found: int = 1  # searches that must succeed for a demonstration
    proposal: bool = False  # a self-play proposer's demonstration: it ends with the question, not the answer

#: Question types whose constraints form a chain of hops the proposer can walk back from the answer.
PROPOSAL_TYPES = ("single", "bridge", "compose")


class DemoWriter:
    """Writes demonstrations for batches of questions with one retriever."""

    def __init__(self, kb: KB, retriever: Retriever, topk: int, max_rephrasings: int, rng: random.Random,
                 cite: bool = False):
        self.kb, self.retriever, self.topk = kb, retriever, topk
        self.max_rephrasings, self.rng = max_rephrasings, rng
        self.cite = cite  # solver demonstrations cite each needed passage (proposer ones never do)
        self.reasons: Counter[str] = Counter()  # why questions got no demonstration

    def write(self, questions: list[Question]) -> list[str | None]:
        """One completion text per question (everything after the prompt), or None when retrieval cannot support it."""
        return self._write([self._plan(q) for q in questions])

    def write_proposals(self, questions: list[Question]) -> list[str | None]:
        """Per question, the self-play proposer's completion for its answer (prompt:
        :func:`~searchlab.agent.protocol.proposer_instruction` of ``answers[0]``), or None: a type outside
        :data:`PROPOSAL_TYPES`, or a backward search that retrieval cannot support."""
        plans = [self._proposal_plan(q) if q.type in PROPOSAL_TYPES and not q.slot.get("yes_no") else None
                 for q in questions]
        written = iter(self._write([p for p in plans if p is not None]))
        return [None if p is None else next(written) for p in plans]

    def _write(self, plans: list[_Plan]) -> list[str | None]:
        for p in plans:
            p.needs = [n for n in p.needs if n.queries or not n.optional]
            if any(not n.queries for n in p.needs):
                p.failed = True
                self.reasons["demo_query_would_name_answer"] += 1
        while True:
            active = [p for p in plans if not p.failed and p.at < len(p.needs)]
            if not active:
                break
            queries = [p.needs[p.at].queries[p.attempt] for p in active]
            for plan, query, hits in zip(active, queries, self.retriever.search(queries, self.topk)):
                self._advance(plan, query, hits)
        for p in plans:
            if not p.failed and len(p.steps) < p.min_found:
                p.failed = True
                self.reasons["demo_retrieval_miss"] += 1
        return [None if p.failed else self._render(p) for p in plans]

    def _advance(self, plan: _Plan, query: str, hits: list[Hit]) -> None:
        need = plan.needs[plan.at]
        if any(h.id == need.passage for h in hits):
            plan.steps.append((need, DemoStep(think=need.before, query=query, hits=hits)))
            plan.at, plan.attempt = plan.at + 1, 0
        elif plan.attempt + 1 < min(len(need.queries), self.max_rephrasings + 1):
            plan.attempt += 1
        elif need.optional:
            plan.at, plan.attempt = plan.at + 1, 0
        else:
            plan.failed = True
            self.reasons["demo_retrieval_miss"] += 1

    def _render(self, plan: _Plan) -> str:
        # The think before a step reports what the previous step found, so shift the "after" notes forward.
        steps, previous = [], ""
        for need, step in plan.steps:
            think = need.first if need.first and not previous else need.before
            cite = (need.passage,) if self.cite and not plan.proposal else ()
            steps.append(DemoStep(think=previous + think, query=step.query, hits=step.hits, cite=cite))
            previous = need.after + " "
        final = previous + plan.final
        q = plan.question
        text = (render_demonstration(steps, final, None, question=q.question) if plan.proposal
                else render_demonstration(steps, final, q.answers[0]))
        problems = parse_trajectory(text).problems()
        if problems:
            raise ValueError(f"demonstration for {q.id} breaks the protocol: {problems}")
        return text

    # ------------------------------------------------------------------ plans
    def _plan(self, q: Question) -> _Plan:
        if q.type == "compare":
            return self._compare_plan(q)
        if q.type == "oblique":
            return self._oblique_plan(q)
        return self._chain_plan(q)

    def _queries(self, q: Question, name: str, predicate: str) -> list[str]:
        """Phrasings for "the ``predicate`` of ``name``", best first; none may contain the answer."""
        keywords = list(phrasing(predicate).keywords) or [words(predicate)]
        self.rng.shuffle(keywords)
        out = [f"{name} {k}" for k in keywords] + [name]
        if q.type != "compare":  # an empty list (every phrasing names the answer) fails the plan
            out = [x for x in out if not cover_exact_match(x, q.answers)]
        return out

    def _chain_plan(self, q: Question) -> _Plan:
        needs = []
        for i, c in enumerate(q.constraints):
            name = self.kb[c.subject].name
            want = describe(c.predicate, name, c.value)
            before = ("I need to find " if i == 0 else "Now I need ") + want + "."
            needs.append(_Need(self._queries(q, name, c.predicate), c.passage, before, c.text))
        return _Plan(q, needs, final=f"So the answer is {q.answers[0]}.")

    def _proposal_plan(self, q: Question) -> _Plan:
        """Backwards along the chain: for each hop, last first, search its value's name with the relation's words
        for the passage that states it (its subject is the next value back)."""
        needs = []
        for i, c in enumerate(reversed(q.constraints)):
            value = c.value_text or str(c.value)
            keywords = list(phrasing(c.predicate).keywords) or [words(c.predicate)]
            self.rng.shuffle(keywords)
            lead = f"I need facts that lead to {q.answers[0]}. " if i == 0 else ""
            subject = self.kb[c.subject]
            before = lead + backward_question(c.predicate, value, c.value, is_person(subject.type, subject.facts))
            needs.append(_Need([f"{value} {k}" for k in keywords] + [value], c.passage, before, c.text))
        return _Plan(q, needs, final="These facts lead to the answer without naming it.", proposal=True)

    def _compare_plan(self, q: Question) -> _Plan:
        p = q.compare["predicate"]
        # the names in the question's order, and first the two copied as one span ("X or Y", "X and Y"): a
        # contiguous copy is what a small model does best, and it puts the second name into the thinking, so
        # "Now <second>" need not find it in the question
        sides = sorted(q.constraints, key=lambda c: q.question.find(self.kb[c.subject].name))
        names = [self.kb[c.subject].name for c in sides]
        first_at, second_at = (q.question.find(name) for name in names)
        candidates = (q.question[first_at:second_at + len(names[1])] if first_at < second_at
                      else " and ".join(names))
        needs = []
        wanted = compare_words(p)[0]
        for i, (c, name) in enumerate(zip(sides, names)):
            lead = (f"Two candidates: {candidates}. I need {wanted}. First {name}." if i == 0
                    else f"Now {name}.")
            needs.append(_Need(self._queries(q, name, p), c.passage, lead, c.text))
        wanted, larger, smaller = compare_words(p)
        final = larger if q.compare["direction"] == "max" else smaller
        return _Plan(q, needs, final=final.format(x=q.answers[0]))

    def _oblique_plan(self, q: Question) -> _Plan:
        """One search per cue, most selective first; a cue whose search misses the target's passage is skipped,
        but at least two cues (all, if there are only two) must be confirmed by what the searches return."""
        target = self.kb[q.answer_entity]
        cues = sorted(q.constraints, key=lambda c: c.matches or 0)
        needs = []
        for c in cues:
            queries = [c.text]
            if not isinstance(c.value, bool):  # a boolean's cue is its only phrasing: "that is not landlocked"
                queries += [f"{self._cue_anchor(c)} {k}" for k in phrasing(c.predicate).keywords[:2]]
            queries = [x for x in queries if x.strip() and not cover_exact_match(x, q.answers)]
            needs.append(_Need(queries, c.passage, f"Next clue: {c.text}.", f"{about(target.name, c.text)}.",
                               optional=True, first=f"I will check the clues one at a time, the most specific "
                                                    f"first: {c.text}."))
        return _Plan(q, needs, final=f"{target.name} fits every clue.", min_found=min(2, len(needs)))

    def _cue_anchor(self, c: Constraint) -> str:
        if c.via and isinstance(c.via.get("value"), str) and c.via["value"] in self.kb.entities:
            return self.kb[c.via["value"]].name
        if isinstance(c.value, str) and c.value in self.kb.entities:
            return self.kb[c.value].name
        return str(c.value)
