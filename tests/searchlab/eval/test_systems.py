"""The evaluated systems played by a real tiny model (steered by scripts), a real tokenizer and a real BM25 index."""

from __future__ import annotations

import pytest

from searchlab.agent import instruction
from searchlab.agent.rollout import rollout
from searchlab.eval.systems import run_system
from tests.searchlab.agent.test_rollout import (
    Scripted,
    expected_block,
    params,
    strip_time,
)

PENICILLIN = "Who discovered penicillin?"  # scripted: search "who discovered penicillin", then answer


def test_direct_answers_in_one_turn_and_never_searches(model, tok, bm25):
    bm25.calls.clear()
    [episode] = run_system("direct", Scripted(model, tok), tok, bm25, [PENICILLIN], params())
    assert bm25.calls == []  # the search the model asked for was not run
    assert (episode.turns, episode.answer, episode.retrieved) == (1, None, [])
    assert episode.searches == ["who discovered penicillin"] and episode.prompt == instruction(PENICILLIN)


def test_rag_shows_the_passages_of_the_question_then_lets_the_model_answer_once(model, tok, bm25):
    p = params()
    bm25.calls.clear()
    [episode] = run_system("rag", Scripted(model, tok), tok, bm25, [PENICILLIN], p)
    assert bm25.calls == [([PENICILLIN], p.topk)]
    block = expected_block(bm25, PENICILLIN, p, tok)
    assert "(Title: Alexander Fleming)" in block
    assert episode.prompt == instruction(PENICILLIN) + f"<search> {PENICILLIN} </search>" + block
    # the script sees one environment reply already, so the model writes its answering turn
    assert (episode.turns, episode.answer, episode.searches) == (1, "Alexander Fleming", [])
    assert episode.retrieved == [[hit.id for hit in bm25.search([PENICILLIN], p.topk)[0]]]


def test_agent_is_the_multi_turn_rollout(model, tok, bm25):
    questions = [PENICILLIN, "What is the capital of Norway?"]
    agent = run_system("agent", Scripted(model, tok), tok, bm25, questions, params())
    assert strip_time(agent) == strip_time(rollout(Scripted(model, tok), tok, bm25, questions, params()))
    assert [e.answer for e in agent] == ["Alexander Fleming", "Oslo"] and [e.turns for e in agent] == [2, 2]


def test_an_unknown_system_is_named(model, tok, bm25):
    with pytest.raises(ValueError, match="unknown system 'oracle'; expected one of direct, rag, agent"):
        run_system("oracle", model, tok, bm25, [PENICILLIN], params())
