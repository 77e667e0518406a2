"""The KB check of self-play questions on a real synthetic world: the qa stage's chain questions pass it, and the
same questions with another answer, or with the facts that single out the answer removed, do not."""

from __future__ import annotations

import random

from searchlab.selfplay.verify import KBCheck, novelty
from searchlab.synth.generate import Builder

# kb: the KB of the session's real 400-entity world (tests/searchlab/conftest.py)


def _chain_questions(kb, kind, n=40):
    builder = Builder(kb, random.Random(1))
    out = []
    for target in kb.entities:
        q = builder.build(kind, target, f"{kind}-{target}")
        if q is not None:
            out.append(q)
        if len(out) == n:
            return out
    return out


def test_chain_questions_are_right_and_unique_and_a_wrong_answer_is_not(kb):
    check = KBCheck(kb)
    for kind in ("single", "bridge"):
        questions = _chain_questions(kb, kind)
        passed = [q for q in questions if check.right_and_unique(q.question, q.answers[0])]
        assert len(passed) >= 0.7 * len(questions), (kind, [q.question for q in questions if q not in passed][:5])
        others = [q.answers[0] for q in questions[1:]] + [questions[0].answers[0]]
        wrong = [q for q, other in zip(questions, others)
                 if other != q.answers[0] and check.right_and_unique(q.question, other)]
        assert not wrong, [(q.question, q.answers[0]) for q in wrong]


def test_a_question_naming_no_entity_is_not_confirmed(kb):
    check = KBCheck(kb)
    q = _chain_questions(kb, "single", 1)[0]
    start = kb[q.mentions[0]].name
    assert check.named(q.question) and q.mentions[0] in check.named(q.question)
    assert not check.right_and_unique(q.question.replace(start, "someone"), q.answers[0])


def test_novelty_is_the_share_of_questions_the_qa_stage_did_not_ask():
    assert novelty(["What is X?", "Who is Y?"], {"what is x"}) == 0.5
    assert novelty([], set()) == 1.0
