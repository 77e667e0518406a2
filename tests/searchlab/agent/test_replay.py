"""A written trajectory replayed through the environment is the episode a live rollout writing it gets: the real
tiny model steered to write the scripts (tests/toyworld.py's Scripted), a real BM25 index."""

from __future__ import annotations

import json

import pytest

from searchlab.agent.replay import demonstration_turns, model_turns, replay
from searchlab.agent.rollout import rollout
from tests.toyworld import SCRIPTS, Scripted, params, strip_time

pytestmark = pytest.mark.usefixtures("one_thread")

# scripts that end in an answer within their turns, and one that is cut off by max_turns
REPLAYED = ["Who discovered penicillin?", "What is the capital of Norway?", "Where was Marie Curie born?",
            "What is the highest mountain?"]


@pytest.mark.parametrize("max_turns", [4, 1])
def test_a_replayed_script_is_the_episode_the_live_rollout_of_it_gets(model, tok, bm25, max_turns):
    p = params(max_turns=max_turns)
    live = strip_time(rollout(Scripted(model, tok), tok, bm25, REPLAYED, p))
    for episode, question in zip(live, REPLAYED):
        turns = [t.split("</answer>")[0] + "</answer>" if "</answer>" in t else t for t in SCRIPTS[question]]
        if "maybe Paris" in turns[0]:  # the live turn ends with the EOS the Scripted model is forced to write
            turns[0] += tok.eos_token
        assert replay(tok, bm25, question, turns, p) == episode, question
    assert any(e.invalid_actions for e in live)
    # four turns: searches ran; one: the searching scripts are cut off in their first turn, their search not run
    assert any(e.retrieved for e in live) if max_turns > 1 else not any(e.finished or e.retrieved
                                                                         for e in live if e.searches)


def test_model_turns_are_what_lies_between_the_environment_insertions(tmp_path):
    completion = ("<think>a</think>\n<search> x </search>\n\n<information>Doc 1(Title: X) x</information>\n\n"
                  "<think>b</think>\n<answer> y </answer>")
    assert model_turns(completion) == ["<think>a</think>\n<search> x </search>", "<think>b</think>\n<answer> y </answer>"]
    demos = tmp_path / "demos.jsonl"
    demos.write_text(json.dumps({"id": "q1", "role": "solver", "completion": completion}) + "\n"
                     + json.dumps({"id": "p1", "role": "proposer", "completion": "<question> z </question>"}) + "\n")
    assert demonstration_turns(demos) == {"q1": model_turns(completion)}


def test_an_episode_continued_from_its_first_search_is_the_episode_played_in_one_go(model, tok, bm25):
    from searchlab.agent.replay import continued, prefix_through_search

    p = params()
    question = "Who discovered penicillin?"
    [whole] = strip_time(rollout(Scripted(model, tok), tok, bm25, [question], p))
    text, tokens, turns = prefix_through_search(tok, whole, 1)
    assert (turns, text.endswith("</information>\n\n")) == (1, True) and text == whole.completion[:len(text)]
    # the policy continues from the prompt and the prefix, with the turns the episode has left
    [rest] = rollout(Scripted(model, tok), tok, bm25, [question], params(max_turns=p.max_turns - turns),
                     [whole.prompt + text])
    assert continued(whole, tokens, turns, 1, rest) == whole
    with pytest.raises(ValueError, match="information blocks"):
        prefix_through_search(tok, whole, 2)
