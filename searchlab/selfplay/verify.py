"""Which self-play proposals become training questions: SSP's retrieval-augmented check and this project's filters.

A proposal is the proposer's episode for one seed answer. It is *verified*
when, in this order (the first failure is its ``reason``):

1. it ended with a non-empty ``<question>`` of at most ``max_question_words``
   words (``no_question``, ``too_long``), after at least one search
   (``no_search``: nothing to verify against), the question does not contain
   the answer (``names_answer``), and, with ``grounded``, it uses a name (a
   run of capitalised words) and every name it uses occurs in the passages
   the proposer read (``ungrounded``: a small model blends two names into one
   nobody has, or asks "How many people?" of nobody, and a weak solver still
   answers with the seed it saw in those passages);
2. the solver role answers it correctly in one turn given only the passages the
   proposer's searches returned, replayed as its own searches (``rag_failed``:
   SSP's RAG check; no knowledge-base label is used);
3. the solver does *not* answer it correctly without them (``closed_book``:
   a question the model answers from memory teaches no searching);
4. with ``kb_filter`` only, the knowledge base confirms it (``kb_wrong``);
5. it is not, normalised, a question already kept (``duplicate``), in an
   earlier round or earlier in this one (in a run of several processes, also
   by a process before this one: :func:`searchlab.selfplay.rounds.unique_across_processes`).

Where the corpus has a knowledge base, :class:`KBCheck` also says whether the
verified question is right and unique by the KB: reported beside the
verified share (how often the RAG check lets a wrong question through). By
default it never filters, so that self-play stays label-free; ``kb_filter``
(``selfplay.kb_filter``) makes it a check, for a solver too weak for the RAG
check to mean much (it answers with the seed whenever the passages name it).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field

from searchlab.corpus.kb import KB
from searchlab.eval.systems import searched_prompt
from searchlab.params import RolloutParams
from searchlab.retrieval.base import Hit
from searchlab.scoring import cover_exact_match, exact_match, normalize_answer
from searchlab.selfplay.config import SelfPlayParams
from searchlab.synth.lexicon import phrasing, words


# every reason a proposal can fail, in the order the checks run (the module doc): how far it got
CHECKS = ("no_question", "too_long", "no_search", "names_answer", "ungrounded", "rag_failed", "closed_book",
          "kb_wrong", "duplicate")


@dataclass
class Proposal:
    """One proposer episode and what became of it; :meth:`record` is its line in ``questions.jsonl``."""

    round: int
    answer: str  # the seed answer the proposer was given
    question: str | None
    searches: list[tuple[str, list[Hit]]]  # each search that ran: its query and the passages it returned
    trajectory: str
    verified: bool = False
    reason: str | None = None
    rag_answer: str | None = None
    closed_book_answer: str | None = None
    kb_correct: bool | None = None  # right and unique by the KB (None: no KB, or failed an earlier check)
    solver_success: float | None = None  # mean EM of the solver's group (verified proposals)
    solver_answers: list[str | None] = field(default_factory=list)

    def record(self) -> dict:
        """The proposal as JSON: passages by id, everything else as is."""
        data = asdict(self)
        data["searches"] = [{"query": query, "passages": [hit.id for hit in hits]} for query, hits in self.searches]
        return data


def screen(proposal: Proposal, max_question_words: int, grounded: bool = True) -> str | None:
    """The reason a proposal fails the text checks (step 1 of the module doc), or None."""
    question = (proposal.question or "").strip()
    if not question:
        return "no_question"
    if len(question.split()) > max_question_words:
        return "too_long"
    if not proposal.searches:
        return "no_search"
    if cover_exact_match(question, [proposal.answer]):
        return "names_answer"
    if grounded:
        read = "\n".join(hit.contents for _, hits in proposal.searches for hit in hits)
        names = names_in(question)
        if not names or any(name not in read and name.removeprefix("The ") not in read for name in names):
            return "ungrounded"
    return None


# words that open a question with a capital letter without being part of a name
_OPENERS = {"in", "which", "what", "who", "whom", "whose", "where", "when", "how", "is", "was", "are", "were", "did",
            "does", "do", "on", "at", "from", "for", "by", "to", "name", "after", "before", "during"}
_NAME = re.compile(r"[A-Z][\w'.-]*(?:\s+(?:(?:of|the|and|&|de|von|van)\s+)*[A-Z][\w'.-]*)*")


def names_in(question: str) -> list[str]:
    """The names a question uses: runs of capitalised words (with "of", "the", "&" ... inside), the opening
    question word left out. "Where did Maette Bromrul die?" -> ["Maette Bromrul"]."""
    text = question.strip()
    first = re.match(r"(\w+)\s*", text)
    if first and first.group(1).lower() in _OPENERS:
        text = text[first.end():]
    return [m.group(0).rstrip(".") for m in _NAME.finditer(text)]


def verify(proposals: Sequence[Proposal], model, tokenizer, retriever, params: RolloutParams,
           kept: set[str], selfplay: SelfPlayParams, kb_check: "KBCheck | None" = None) -> None:
    """Verify ``proposals`` in place (``verified``, ``reason``, the solver's answers, ``kb_correct``) by the checks
    ``selfplay`` turns on (``max_question_words``, ``grounded``, ``kb_filter``).

    ``kept`` holds the normalised questions kept so far; the newly verified
    ones are added. The model checks decode greedily, one batch each.
    """
    kb_filter = selfplay.kb_filter
    from searchlab.agent.rollout import rollout

    for p in proposals:
        p.reason = screen(p, selfplay.max_question_words, selfplay.grounded)
    candidates = [p for p in proposals if p.reason is None]
    if candidates:
        one_turn = params.model_copy(update={"max_turns": 1, "temperature": 0.0, "extractive_answers": False})
        questions = [p.question for p in candidates]
        prompts = [searched_prompt(tokenizer, p.question, p.searches, params) for p in candidates]
        with_passages = rollout(model, tokenizer, retriever, questions, one_turn, prompts, force_answer=True)
        without = rollout(model, tokenizer, retriever, questions, one_turn, force_answer=True)
        for p, rag, closed in zip(candidates, with_passages, without):
            p.rag_answer, p.closed_book_answer = rag.answer, closed.answer
            if not exact_match(rag.answer, [p.answer]):
                p.reason = "rag_failed"
            elif exact_match(closed.answer, [p.answer]):
                p.reason = "closed_book"
    for p in proposals:
        if p.reason is None and kb_check is not None:
            p.kb_correct = kb_check.right_and_unique(p.question, p.answer)
            if kb_filter and not p.kb_correct:
                p.reason = "kb_wrong"
        if p.reason is None:
            key = normalize_answer(p.question)
            if key in kept:
                p.reason = "duplicate"
                continue
            kept.add(key)
            p.verified = True


class KBCheck:
    """Is a free-text question right and unique by the knowledge base? A structural reading, not a parser.

    From every KB entity the question names, follow up to ``max_hops`` facts
    whose predicate the question mentions (one of its search keywords or its
    own words, :mod:`searchlab.synth.lexicon`). The question is *right* when
    one such chain ends at the answer, and *unique* when no chain as long as
    the longest ends at another value of the answer's kind (a number or a
    name): "Where was the founder of Ato Company born?" reaches the founder's
    birthplace and birth year, and only the birthplace is a name.
    """

    def __init__(self, kb: KB, max_hops: int = 3, max_name_words: int = 6) -> None:
        self.kb, self.max_hops, self.max_name_words = kb, max_hops, max_name_words
        self.by_name: dict[str, list[str]] = defaultdict(list)
        for entity in kb.entities.values():
            self.by_name[_words_key(entity.name)].append(entity.id)

    def named(self, question: str) -> list[str]:
        """Ids of the KB entities whose full name occurs in ``question`` (as whole words)."""
        tokens = _tokens(question)
        found = []
        for size in range(1, self.max_name_words + 1):
            for start in range(len(tokens) - size + 1):
                found += self.by_name.get(" ".join(tokens[start:start + size]), [])
        return list(dict.fromkeys(found))

    def right_and_unique(self, question: str, answer: str) -> bool:
        """Whether a chain of mentioned facts from a named entity ends at ``answer`` and at nothing else like it."""
        text = " ".join(_tokens(question))
        ends: dict[int, set[str]] = defaultdict(set)  # depth -> normalised values reached
        frontier = [entity for entity in self.named(question)]
        seen = set(frontier)
        for depth in range(1, self.max_hops + 1):
            following = []
            for entity_id in frontier:
                for predicate, facts in self.kb[entity_id].facts.items():
                    if not _mentions(text, predicate):
                        continue
                    for fact in facts:
                        ends[depth].add(normalize_answer(self.kb.value_text(fact)))
                        if fact.relation and fact.value not in seen:
                            seen.add(fact.value)
                            following.append(fact.value)
            frontier = following
        target = normalize_answer(answer)
        if not any(target in values for values in ends.values()):
            return False
        deepest = max(depth for depth, values in ends.items() if values)
        numeric = _is_number(target)
        rivals = {value for value in ends[deepest] if _is_number(value) == numeric} - {target}
        return not rivals and target in ends[deepest]


def _tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _words_key(name: str) -> str:
    return " ".join(_tokens(name))


def _is_number(text: str) -> bool:
    return bool(re.fullmatch(r"[0-9][0-9 ,.]*", text))


def _mentions(question_words: str, predicate: str) -> bool:
    """Whether the question (lower-case words joined by spaces) speaks of ``predicate``: it holds one of its search
    keywords or its own words, or every word of one of its question or noun-phrase templates."""
    ph = phrasing(predicate)
    padded, present = f" {question_words} ", set(question_words.split())
    for phrase in (*ph.keywords, words(predicate)):
        key = _words_key(phrase)
        if key and f" {key} " in padded:
            return True
    for template in (*ph.questions, *ph.phrases):
        needed = set(_tokens(re.sub(r"\{\w+\}", " ", template)))
        if needed and needed <= present:
            return True
    return False


def novelty(questions: Iterable[str], known: set[str]) -> float:
    """The share of ``questions`` whose normalised text is not in ``known`` (the qa stage's questions); 1.0 if none."""
    normalised = [normalize_answer(q) for q in questions]
    return sum(q not in known for q in normalised) / len(normalised) if normalised else 1.0
