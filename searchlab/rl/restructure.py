"""CLPO's adaptive problem restructuring for search questions, built and checked by the qa stage's own code.

CLPO (Zhang et al., "CLPO: Curriculum Learning meets Policy Optimization for LLM Reasoning", arXiv:2509.25004)
simplifies the problems the policy cannot solve and diversifies the ones it half solves. Here a problem is a
synthesized chain question (``single``, ``bridge``, ``compose``: every constraint an ``op == "hop"`` fact, each
hop's value the next hop's subject), and both rewrites come from its own evidence chain:

* ``easier``: the chain without its first hop, so the entity the first hop reached is named instead of
  described ("When was Althouhelm founded?" from "When was the city where Stimina Rembroumsen was born
  founded?"); a four-hop question becomes a three-hop one, and so on down to the last hop;
* ``rephrased``: the same chain in other words (another draw of the synthesis templates).

Either keeps the source's final fact, so the answers, the verifiable reward, stay the same. Questions are
phrased by :class:`searchlab.synth.generate.Builder` itself, held to the given chain (:class:`_ChainBuilder`),
and a built question is used only if it passes the qa stage's checks again (:meth:`Restructurer.verify`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from pathlib import Path

from searchlab.corpus.kb import KB, Entity, Fact
from searchlab.questions.record import QuestionRecord, present
from searchlab.scoring import cover_exact_match, normalize_answer
from searchlab.synth.generate import Builder, Question
# the qa stage's own check that each constraint is stated by its passage: a rewrite passes exactly that check
from searchlab.synth.pipeline import evidence_matched
from searchlab.synth.solvers import RuleReader

__all__ = ["EASIER", "NO_CANDIDATE", "REPHRASED", "Restructured", "Restructurer", "chain_facts", "clpo_restructurer"]

EASIER, REPHRASED = "easier", "rephrased"  # the two rewrites, as questions' ``restructure`` field names them
OK = "ok"  # the reason logged for a rewrite that passed every check
# The reasons that say a question is no candidate for the rewrite at all (a comparison, a one-hop question
# asked to get easier), rather than that a rewrite failed.
NO_CANDIDATE = frozenset({"not_a_chain", "single_hop"})


@dataclass
class Restructured:
    """One rewrite: the training question (None when none could be built), whether it passed the checks, why not."""

    kind: str
    question: QuestionRecord | None
    verified: bool
    reason: str


def _chain_kind(hops: int) -> str:
    """The synthesis type of a chain of ``hops`` facts (``Builder.build``'s kind)."""
    return "single" if hops == 1 else "bridge" if hops == 2 else "compose"


def chain_facts(kb: KB, question: QuestionRecord) -> list[Fact] | str:
    """The KB facts the hops of ``question`` are, in order; or why there are none (the reason to log).

    A hop's fact is found by subject, predicate, value and passage, so a question whose facts the KB no longer
    has (another corpus, a changed world) is refused rather than rebuilt from something else.
    """
    constraints = present(question.constraints) or []
    if not constraints or any(c["op"] != "hop" for c in constraints):
        return "not_a_chain"
    facts = []
    for c in constraints:
        subject = kb.entities.get(c["subject"])
        found = [f for f in (subject.facts.get(c["predicate"], ()) if subject else ())
                 if f.value == c["value"] and f.passage == c["passage"]]
        if not found:
            return "fact_not_in_kb"
        facts.append(found[0])
    if any(f.value != g.subject for f, g in zip(facts, facts[1:])):
        return "not_a_chain"  # a hop that does not start where the previous one ended
    return facts


class _ChainBuilder(Builder):
    """A synthesis :class:`Builder` held to one chain of facts: its walk is the chain's relation hops and its
    final fact the chain's last, each only if the Builder would have chosen it itself (functional, phrasable,
    nameable, no entity revisited). Everything else, the phrasing, the constraints, the evidence, the answers and
    the Builder's own refusals (``ambiguous_name``, ``answer_in_question``, ...), is the Builder's."""

    def __init__(self, kb: KB, rng: random.Random, chain: list[Fact]):
        super().__init__(kb, rng)
        self.chain = chain

    def _walk(self, start: Entity, steps: int) -> list[Fact] | None:
        seen, here = {start.id}, start
        for f in self.chain[:-1]:
            if f.value in seen or f not in super()._functional(here, relation=True):
                return None
            seen.add(f.value)
            here = self.kb[f.value]
        return self.chain[:-1]

    def _functional(self, e: Entity, relation: bool | None = None, asked: bool = False) -> list[Fact]:
        options = super()._functional(e, relation, asked)
        # asked: the final fact is being chosen; only the chain's own may be
        return [f for f in options if f == self.chain[-1]] if asked else options


class Restructurer:
    """Builds and verifies CLPO rewrites of chain questions over one KB.

    ``tries``: how many template draws a rephrasing gets to come out worded differently from its source.
    Every draw is seeded by the caller's ``seed`` string, so the same call gives the same question.
    """

    def __init__(self, kb: KB, tries: int = 8):
        self.kb, self.tries = kb, tries
        self.reader = RuleReader(kb)

    def easier(self, question: QuestionRecord, seed: str, taken: set[str] = frozenset()) -> Restructured:
        """``question`` without its first hop (the entity it reached named instead); refused unless multi-hop.

        ``taken``: the normalised texts of the questions already in the pool (a duplicate is refused).
        """
        chain = chain_facts(self.kb, question)
        if isinstance(chain, str):
            return Restructured(EASIER, None, False, chain)
        if len(chain) < 2:
            return Restructured(EASIER, None, False, "single_hop")
        built = self.build(chain[1:], f"{question.id}~{EASIER}", random.Random(f"{seed}/{EASIER}"))
        if isinstance(built, str):
            return Restructured(EASIER, None, False, built)
        return self._finish(EASIER, question, built, taken)

    def rephrase(self, question: QuestionRecord, seed: str, taken: set[str] = frozenset()) -> Restructured:
        """The same chain as ``question`` in other words: the first of ``tries`` template draws that differs."""
        chain = chain_facts(self.kb, question)
        if isinstance(chain, str):
            return Restructured(REPHRASED, None, False, chain)
        source = normalize_answer(question.question)
        reason = "no_new_phrasing"
        for attempt in range(self.tries):
            built = self.build(chain, f"{question.id}~{REPHRASED}",
                               random.Random(f"{seed}/{REPHRASED}/{attempt}"))
            if isinstance(built, str):
                reason = built  # e.g. a wording that gives the answer away: another draw may not
                continue
            text = normalize_answer(built.question)
            if text != source and text not in taken:
                return self._finish(REPHRASED, question, built, taken)
        return Restructured(REPHRASED, None, False, reason)

    def build(self, chain: list[Fact], qid: str, rng: random.Random) -> Question | str:
        """The synthesis Builder's question over ``chain``, or the Builder's reason for refusing it."""
        builder = _ChainBuilder(self.kb, rng, chain)
        built = builder.build(_chain_kind(len(chain)), chain[0].subject, qid)
        if built is None:
            return next(iter(builder.reasons), "not_built")
        return built

    def _finish(self, kind: str, source: QuestionRecord, built: Question, taken: set[str]) -> Restructured:
        """The verified rewrite as a training question carrying its source, or the check it failed."""
        record = replace(built.to_record(), derived_from=source.id, restructure=kind,
                         features={"bucket": source.bucket, "hops": built.hops, "cues": len(built.constraints)})
        reason = self.verify(built, source, taken)
        return Restructured(kind, record, reason == OK, reason)

    def verify(self, q: Question, source: QuestionRecord, taken: set[str] = frozenset()) -> str:
        """``"ok"``, or the first of the qa stage's checks that ``q`` fails:

        * ``evidence_unmatched``: a constraint's passage does not state it (the qa stage's evidence check);
        * ``not_unique``: following the hops from the named entity through every fact the KB has reaches
          other values than the gold one (another entity shares the name, or a hop has several values);
        * ``gold_evidence_unanswerable``: the qa stage's gold-evidence reader does not find the answer;
        * ``answer_changed``: the answers differ from the source's (the reward would change meaning);
        * ``duplicate``: a question with this text is already in ``taken``.
        """
        if not evidence_matched(self.kb, q, None):
            return "evidence_unmatched"
        if self._reached(q) != {q.constraints[-1].value}:
            return "not_unique"
        if not cover_exact_match(self.reader.answer(q, q.evidence), q.answers):
            return "gold_evidence_unanswerable"
        if sorted(q.answers) != sorted(source.answers):
            return "answer_changed"
        if normalize_answer(q.question) in taken:
            return "duplicate"
        return OK

    def _reached(self, q: Question) -> set:
        """Every value the question's hops lead to from every entity bearing the name it starts from."""
        start = self.kb[q.constraints[0].subject].name.lower()
        here = {e.id for e in self.kb.entities.values() if e.name.lower() == start}
        for c in q.constraints:
            here = {f.value for e in here if e in self.kb.entities
                    for f in self.kb[e].facts.get(c.predicate, ())}
        return here


def clpo_restructurer(kinds, clpo, corpus_dir: Path) -> Restructurer | None:
    """The :class:`Restructurer` the rl stage's ``clpo`` curriculum needs, over ``corpus_dir``'s KB; None when
    the curriculum rewrites nothing (``clpo`` off, or both ``rl.clpo.restructure`` and ``rl.clpo.diversify``
    off). Raises ``ValueError`` before loading anything when the corpus has no ``kb.jsonl``."""
    if "clpo" not in kinds or not (clpo.restructure or clpo.diversify):
        return None
    if not (Path(corpus_dir) / "kb.jsonl").is_file():
        raise ValueError(f"rl.clpo.restructure (and rl.clpo.diversify): rewriting questions needs the knowledge "
                         f"base {Path(corpus_dir) / 'kb.jsonl'}, which this corpus lacks (corpus.source synthetic "
                         "or records has one); set rl.clpo.restructure and rl.clpo.diversify to false")
    return Restructurer(KB.load(corpus_dir))
