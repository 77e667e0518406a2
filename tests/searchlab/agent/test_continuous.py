"""Continuous batching: rows of a ragged KV cache read what a plain forward reads, and episodes that take their
turns on their own clocks, in rows that the next waiting episode takes over, play the same greedy episodes as
turn-by-turn ``generate`` (a real tiny model taught to search, a real BM25 index)."""

from __future__ import annotations

import json

import pytest
import torch

from searchlab.agent.continuous import RaggedCache, read, supports
from searchlab.agent.rollout import rollout
from searchlab.agent.text import encode_completion
from searchlab.agent.turns import turn_ends
from tests.searchlab.agent.test_rollout import check_invariants
from tests.searchlab.rl.rlworld import QUESTIONS, ROLLOUT, searching_policy
from tests.toyworld import Recording, make_tokenizer, strip_time


def _last_logits(model, ids: list[int]) -> torch.Tensor:
    with torch.inference_mode():
        return model(input_ids=torch.tensor([ids])).logits[0, -1]


def test_rows_read_on_their_own_clocks_get_the_logits_of_their_whole_sequences(model, tok):
    texts = ["Who discovered penicillin?", "Doc 1 Fleming discovered penicillin in 1928 in London.", "Oslo"]
    seqs = [tok(t)["input_ids"] for t in texts]
    cache = RaggedCache(3)

    def check(rows, logits):
        for row, got in zip(rows, logits):
            assert torch.allclose(got, _last_logits(model, seqs[row]), atol=1e-4)

    with torch.inference_mode():
        check([0, 1, 2], read(model, cache, [0, 1, 2], seqs, tok.pad_token_id))  # prompts of different lengths
        assert cache.lengths.tolist() == [len(s) for s in seqs]
        for step in range(3):  # rows 0 and 2 decode; row 1 sits out (it reads nothing)
            new = [[40 + step], [], [50 + step]]
            seqs[0] += new[0]
            seqs[2] += new[2]
            logits = read(model, cache, None, new, tok.pad_token_id)
            check([0, 2], logits[[0, 2]])
        block = tok(" Doc 2 Tokyo is the capital of Japan.")["input_ids"]
        seqs[1] += block
        check([1], read(model, cache, [1], [block], tok.pad_token_id))  # row 1 alone reads a block
        cache.lengths[0] -= 2  # row 0 forgets its last two tokens, then continues
        seqs[0] = seqs[0][:-2] + [77]
        cache.keep(torch.tensor([2, 0]))  # row 1's episode is over; rows 2 and 0 go on, in that order
        seqs = [seqs[2], seqs[0]]
        seqs[0] += [60]
        check([0, 1], read(model, cache, None, [[60], [77]], tok.pad_token_id))


def test_a_turn_ends_at_the_token_that_completes_a_tag_spelled_over_several():
    tok = make_tokenizer(tags_special=False)
    ids = encode_completion(tok, "<think>ok</think>\n<search> capital of Norway </search>. more")
    ends = turn_ends(tok, [tok.eos_token_id])
    texts = [tok.decode(ids[:n]) for n in range(1, len(ids) + 1)]
    first = next(n for n, text in enumerate(texts, 1) if "</search>" in text)
    assert len(encode_completion(tok, "</search>")) > 1
    assert [ends(ids[:n]) for n in range(1, len(ids) + 1)] == [n == first for n in range(1, len(ids) + 1)]
    assert ends(ids[:3] + [tok.eos_token_id])


def test_only_torch_modules_with_transformers_own_generate_and_full_attention_are_played_continuously(model, tok):
    assert supports(model)
    assert not supports(Recording(model, tok))  # a wrapper that steers generate keeps generate

    class OwnDecoding(type(model)):
        def generate(self, *args, **kwargs):
            return super().generate(*args, **kwargs)

    assert not supports(OwnDecoding(model.config))
    sliding = type(model)(model.config.__class__(**{**model.config.to_dict(), "sliding_window": 8,
                                                    "use_sliding_window": True}))
    assert not supports(sliding)


@pytest.fixture(scope="module")
def taught(tmp_path_factory, bm25):
    """The rl tests' tokenizer and questions, and the tiny model taught to search and answer about evenly."""
    tok = make_tokenizer(tags_special=True)
    path = tmp_path_factory.mktemp("continuous") / "train.jsonl"
    path.write_text("".join(json.dumps({"id": i, "question": q, "answers": a}) + "\n" for i, q, a, *_ in QUESTIONS))
    return tok, searching_policy(tok, bm25, path).eval(), [q for _, q, *_ in QUESTIONS]


@pytest.mark.slow
@pytest.mark.parametrize("changes", [{}, {"extractive_answers": True}, {"max_turns": 2}, {"batch_size": 3}],
                         ids=["plain", "extractive", "cut-off", "three-rows"])
def test_continuous_batching_plays_the_greedy_episodes_of_turn_by_turn_generate(taught, bm25, changes):
    tok, model, questions = taught
    params = ROLLOUT.model_copy(update=changes)
    questions = questions * 2  # 16 episodes in rows of 8 (or 3): they end turns at different steps, and rows refill
    continuous = rollout(model, tok, bm25, questions, params)
    turn_by_turn = rollout(Recording(model, tok), tok, bm25, questions, params)
    assert strip_time(continuous) == strip_time(turn_by_turn)
    assert any(r.searches for r in continuous) and any(r.answer for r in continuous)
    assert len({(r.turns, r.answer is None) for r in continuous}) > 1  # episodes of different shapes
    for r in continuous:
        check_invariants(r, tok)


def test_sampled_continuous_episodes_are_seeded_and_keep_the_token_bookkeeping(model, tok, bm25):
    params = ROLLOUT.model_copy(update={"temperature": 1.0, "max_new_tokens": 16})
    questions = [q for _, q, *_ in QUESTIONS]
    episodes = rollout(model, tok, bm25, questions, params)
    assert strip_time(episodes) == strip_time(rollout(model, tok, bm25, questions, params))
    other = rollout(model, tok, bm25, questions, params.model_copy(update={"seed": 1}))
    assert strip_time(other) != strip_time(episodes)
    for r in episodes:
        check_invariants(r, tok)
        assert 0 < r.turns <= params.max_turns and r.seconds is not None
