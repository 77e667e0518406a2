"""The evaluated systems played by a real tiny model, a real tokenizer and a real BM25 index.

Most tests steer the model with scripts (:class:`~tests.toyworld.Scripted`); the
baseline tests use a real tiny model *trained* to search first, the habit that made one-turn baselines ask for a
search they would never get.
"""

from __future__ import annotations

import pytest
import torch

from searchlab.agent import ANSWER_OPEN, DemoStep, instruction, render_demonstration
from searchlab.agent.extractive import answer_sources
from searchlab.agent.rollout import rollout
from searchlab.agent.text import encode_completion, encode_prompt
from searchlab.eval.systems import describe, run_system
from tests.toyworld import Scripted, expected_block, make_model, params, strip_time

PENICILLIN = "Who discovered penicillin?"  # scripted: search "who discovered penicillin", then answer


def test_direct_answers_in_one_turn_and_never_searches(model, tok, bm25):
    bm25.calls.clear()
    [episode] = run_system("direct", Scripted(model, tok), tok, bm25, [PENICILLIN], params())
    assert bm25.calls == []
    # the script thinks, then searches, which is not run: the answer tag is forced where its search began
    thought = episode.prompt.removeprefix(instruction(PENICILLIN)).removesuffix(ANSWER_OPEN)
    assert thought.startswith("<think>") and thought.endswith("</think>\n")
    # the script writes its search turn again after the forced tag: that is answer text, no search action
    assert episode.completion.endswith("<search>who discovered penicillin</search>")
    assert (episode.turns, episode.searches, episode.retrieved, episode.finished) == (1, [], [], True)
    assert episode.answer.endswith("<search>who discovered penicillin")


def test_rag_shows_the_passages_of_the_question_then_lets_the_model_answer_once(model, tok, bm25):
    p = params()
    bm25.calls.clear()
    [episode] = run_system("rag", Scripted(model, tok), tok, bm25, [PENICILLIN], p)
    assert bm25.calls == [([PENICILLIN], p.topk)]
    block = expected_block(bm25, PENICILLIN, p, tok)
    assert "(Title: Alexander Fleming)" in block
    # the script sees one environment reply already, so it writes its answering turn: nothing is forced
    assert episode.prompt == instruction(PENICILLIN) + f"<search> {PENICILLIN} </search>" + block
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


def test_each_system_is_described_in_one_line_for_the_report():
    p = params(topk=3, max_turns=5)
    assert describe("direct", p) == ("one turn, no search: the model thinks and answers; a search it starts is not "
                                     "run, `<answer>` replaces it after its thinking (greedy)")
    assert describe("rag", p).startswith("one turn, no search by the model: the question itself was searched and its "
                                         "top 3 passages shown; the model thinks and answers")
    assert describe("agent", params(temperature=0.7, extractive_answers=True)).endswith(
        "(sampled at temperature 0.7; answers copy words of the question or passages shown)")
    with pytest.raises(ValueError, match="unknown system 'oracle'"):
        describe("oracle", p)


# ---------------------------------------------------------------- a model trained to search first

SEARCHER = {"Who discovered penicillin?": "Alexander Fleming", "What is the capital of Japan?": "Tokyo",
            "What is the capital of Norway?": "Oslo", "Where was Marie Curie born?": "Warsaw",
            "What is the highest mountain?": "Mount Everest", "What game has a checkered board?": "Chess"}


@pytest.fixture(scope="module")
def searcher(tok, bm25):
    """The tests' tiny Qwen2, fine-tuned until it always searches first.

    Trained on one demonstration per question of :data:`SEARCHER` (search the question, read the passages,
    answer), loss on the completion, full batch, plain AdamW: a few seconds on a CPU. Asked as it was trained,
    it searches in its first turn every time, then answers right.
    """
    p = params()
    count = lambda text: len(encode_completion(tok, text))  # noqa: E731
    rows = []
    for question, answer in SEARCHER.items():
        [hits] = bm25.search([question], p.topk)
        completion = render_demonstration([DemoStep("I need to look this up.", question, hits)],
                                          f"It is {answer}.", answer, p.max_information_tokens, count)
        rows.append((encode_prompt(tok, instruction(question)),
                     encode_completion(tok, completion) + [tok.eos_token_id]))
    width = max(len(prompt) + len(completion) for prompt, completion in rows)
    ids = torch.full((len(rows), width), tok.pad_token_id)
    labels, mask = torch.full_like(ids, -100), torch.zeros_like(ids)
    for i, (prompt, completion) in enumerate(rows):
        end = len(prompt) + len(completion)
        ids[i, :end] = torch.tensor(prompt + completion)
        labels[i, len(prompt):end] = torch.tensor(completion)
        mask[i, :end] = 1
    model = make_model(tok)  # a fresh copy: the session's random model stays as the other tests expect
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(200):
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def test_a_model_that_always_searches_first_still_answers_every_one_turn_baseline(searcher, tok, bm25):
    questions = list(SEARCHER)
    # the habit: given one turn and the choice, it asks for a search every time (which nothing would run)
    one_turn = rollout(searcher, tok, bm25, questions, params(max_turns=1))
    assert all(e.searches and e.answer is None for e in one_turn)

    agent = run_system("agent", searcher, tok, bm25, questions, params())
    assert all(len(e.searches) == 1 for e in agent)  # the agent still searches ...
    assert [e.answer for e in agent] == list(SEARCHER.values())  # ... and then answers, as trained

    bm25.calls.clear()
    direct = run_system("direct", searcher, tok, bm25, questions, params())
    assert bm25.calls == []
    bm25.calls.clear()
    rag = run_system("rag", searcher, tok, bm25, questions, params())
    assert bm25.calls == [(questions, params().topk)]  # the question itself, nothing the model asked for
    for episode in direct:  # it thought first, as trained; the search it then began was replaced by the answer tag
        assert "I need to look this up." in episode.prompt and episode.prompt.endswith("</think>\n" + ANSWER_OPEN)
    for episode in direct + rag:
        assert episode.answer is not None and episode.finished and episode.turns == 1
        assert episode.searches == []


@pytest.mark.parametrize("system", ["direct", "rag"])
def test_a_forced_answer_is_still_extractive(searcher, tok, bm25, system):
    episodes = run_system(system, searcher, tok, bm25, list(SEARCHER), params(extractive_answers=True))
    for episode in episodes:
        # confined from its first token: a closed, non-empty copy of the question or the passages shown
        assert episode.completion.endswith("</answer>") and episode.answer and episode.searches == []
        assert episode.answer in answer_sources(episode.question, episode.prompt)
    if system == "direct":
        assert all(e.answer in e.question for e in episodes)  # closed book: the question is all there is
