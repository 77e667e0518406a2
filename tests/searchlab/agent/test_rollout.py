"""Batched multi-turn rollouts with a real (tiny) Qwen2 model, a real BPE tokenizer and a real BM25 index.

A random model almost never writes protocol tags, so most tests *steer* it:
:class:`Scripted` wraps the real model and, on every ``generate`` call, adds a
logits processor that forces each row to write its question's scripted turn
(the turn is chosen from the row's own context: how many times the environment
has spoken). Everything else is real: left-padded batches, per-row stopping,
turns continued from the KV cache, retrieval, environment text and masks.
:class:`Recording` checks that every context the model attended to was exactly
an episode's ids so far. The unsteered model checks determinism, sampling
seeds, batch-size invariance and cache reuse against re-reading.
"""

from __future__ import annotations

import itertools
import sys
import types

import pytest
import torch

from searchlab.agent import (
    INFORMATION_OPEN,
    INVALID_ACTION_FEEDBACK,
    INVALID_ACTION_MESSAGE,
    PREFILLS,
    environment_spans,
    instruction,
    parse_trajectory,
)
from searchlab.agent.episode import Rollout
from searchlab.agent.rollout import is_vllm, rollout, summarize
from searchlab.agent.text import encode_completion, encode_prompt
from tests.toyworld import (
    LONG_THINK,
    QUESTIONS,
    SCRIPTS,
    Recording,
    Scripted,
    expected_block,
    make_model,
    make_tokenizer,
    params,
    strip_time,
)

# the toy world (tests/toyworld.py); the fixtures tok, model and bm25 (a real BM25 index of DOCS whose retriever
# records its calls) are tests/searchlab/conftest.py's
pytestmark = pytest.mark.usefixtures("one_thread")


def decode(tok, ids) -> str:
    return tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def check_invariants(r: Rollout, tok) -> None:
    """Ids, text and mask agree: env-masked tokens decode to exactly the environment spans of the completion."""
    assert r.prompt_ids == encode_prompt(tok, r.prompt) == tok(r.prompt).input_ids
    assert len(r.env_mask) == len(r.completion_ids) and set(r.env_mask) <= {0, 1}
    assert decode(tok, r.completion_ids) == r.completion
    assert r.generated_tokens == r.env_mask.count(0)
    spans, model_texts, position = [], [], 0
    for flag, group in itertools.groupby(zip(r.env_mask, r.completion_ids), key=lambda pair: pair[0]):
        text = decode(tok, [i for _, i in group])
        if flag:
            spans.append((position, position + len(text)))
        else:
            model_texts.append(text)
        position += len(text)
    assert position == len(r.completion)
    if not any(INFORMATION_OPEN in t or INVALID_ACTION_MESSAGE in t for t in model_texts):
        assert environment_spans(r.completion) == spans
    assert len(model_texts) == r.turns


# ---------------------------------------------------------------- scripted episodes


def test_one_answers_at_once_the_other_searches_then_answers(model, tok, bm25):
    scripted = Scripted(model, tok)
    japan, penicillin = QUESTIONS[0], QUESTIONS[1]
    p = params()
    bm25.calls.clear()
    [a, b] = rollout(scripted, tok, bm25, [japan, penicillin], p)
    assert bm25.calls == [(["who discovered penicillin"], 2)]  # one retriever call, in turn 1 only
    assert scripted.batches == [[japan, penicillin], [penicillin]]  # the finished episode left the batch
    assert scripted.cached == [False, True]  # turn 2 continued from turn 1's cache, with row 0 dropped from it
    assert scripted.saw_exactly_the_episodes([a, b])

    # generation stopped at </answer> for row 0 (the babble after it was never kept), not for row 1
    assert a.completion == "<think>I know it.</think>\n<answer>Tokyo</answer>"
    assert (a.answer, a.finished, a.turns, a.searches, a.invalid_actions) == ("Tokyo", True, 1, [], 0)
    assert a.env_mask == [0] * len(a.completion_ids) and a.generated_tokens == len(a.completion_ids)
    assert a.completion_ids == encode_completion(tok, a.completion)

    block = expected_block(bm25, "who discovered penicillin", p, tok)
    assert "(Title: Alexander Fleming)" in block
    assert b.completion == SCRIPTS[penicillin][0] + block + SCRIPTS[penicillin][1]
    assert (b.answer, b.finished, b.turns, b.searches) == ("Alexander Fleming", True, 2, ["who discovered penicillin"])
    assert a.retrieved == [] and b.retrieved == [[hit.id for hit in bm25.search(["who discovered penicillin"], 2)[0]]]
    turn1, turn2 = (encode_completion(tok, t) for t in SCRIPTS[penicillin])
    env = encode_completion(tok, block)
    assert b.completion_ids == turn1 + env + turn2
    assert b.env_mask == [0] * len(turn1) + [1] * len(env) + [0] * len(turn2)
    assert b.generated_tokens == len(turn1) + len(turn2)
    assert decode(tok, [i for i, m in zip(b.completion_ids, b.env_mask) if m]) == block
    assert parse_trajectory(b.completion).problems() == []
    assert b.seconds >= a.seconds > 0
    for r in (a, b):
        check_invariants(r, tok)


def test_invalid_action_gets_feedback_and_counts(model, tok, bm25):
    curie, chess = QUESTIONS[2], QUESTIONS[6]
    bm25.calls.clear()
    scripted = Scripted(model, tok)
    [r, long] = rollout(scripted, tok, bm25, [curie, chess], params(max_new_tokens=30))
    assert scripted.saw_exactly_the_episodes([r, long])
    assert bm25.calls == []  # no search: the retriever is never asked
    eos = "<|endoftext|>"
    # the EOS the model wrote stays in the ids and the text; the feedback follows it
    assert r.completion == SCRIPTS[curie][0] + eos + INVALID_ACTION_FEEDBACK + SCRIPTS[curie][1]
    assert (r.answer, r.turns, r.invalid_actions, r.finished) == ("Warsaw", 2, 1, True)
    first = encode_completion(tok, SCRIPTS[curie][0]) + [tok.eos_token_id]
    assert r.completion_ids[:len(first)] == first and r.env_mask[:len(first)] == [0] * len(first)
    assert parse_trajectory(r.completion).problems()[0].startswith("invalid action before")

    # a turn cut by max_new_tokens is invalid too: exactly 30 model tokens, then the feedback
    cut = encode_completion(tok, LONG_THINK)[:30]
    assert long.completion_ids[:30] == cut and long.env_mask[:31] == [0] * 30 + [1]
    assert long.completion == decode(tok, cut) + INVALID_ACTION_FEEDBACK + "<answer>Chess</answer>"
    assert (long.answer, long.invalid_actions) == ("Chess", 1)
    assert long.generated_tokens == 30 + len(encode_completion(tok, "<answer>Chess</answer>"))
    for x in (r, long):
        check_invariants(x, tok)
    assert summarize([r, long])["invalid_action_rate"] == 0.5


def test_max_turns_cuts_the_episode_off(model, tok, bm25):
    old, norway = QUESTIONS[5], QUESTIONS[4]
    p = params(max_turns=2)
    bm25.calls.clear()
    scripted = Scripted(model, tok)
    [r, n] = rollout(scripted, tok, bm25, [old, norway], p)
    assert scripted.saw_exactly_the_episodes([r, n])
    # turn 1: both search, in one call; turn 2: Norway answers, the other is cut off without searching again
    assert bm25.calls == [(["imperial seat of Japan", "capital of Norway"], 2)]
    assert scripted.batches == [[old, norway], [old, norway]]
    assert (r.finished, r.answer, r.turns) == (False, None, 2)
    assert r.searches == ["imperial seat of Japan", "Kyoto capital"]  # the last one was not run
    assert len(r.retrieved) == 1 and len(n.retrieved) == 1  # nothing retrieved for the search that did not run
    block = expected_block(bm25, "imperial seat of Japan", p, tok)
    assert r.completion == SCRIPTS[old][0] + block + SCRIPTS[old][1]
    assert r.env_mask[-1] == 0
    assert (n.finished, n.answer) == (True, "Oslo")
    for x in (r, n):
        check_invariants(x, tok)
        assert parse_trajectory(x.completion).searches == x.searches
    stats = summarize([r, n])
    assert stats["answered"] == 0.5 and stats["mean_turns"] == 2.0 and stats["mean_searches"] == 1.5


def test_an_episode_that_would_outgrow_the_model_s_positions_ends_cut_off(model, tok, bm25, monkeypatch):
    question, p = "Who discovered penicillin?", params()
    [full] = rollout(Scripted(model, tok), tok, bm25, [question], p)
    assert full.finished and full.turns == 2
    first_turn = full.env_mask.index(1)
    block = full.env_mask.count(1)
    # room for the first turn, but not for the information block and a second turn
    limit = len(full.prompt_ids) + first_turn + block + p.max_new_tokens
    monkeypatch.setattr(model.config, "max_position_embeddings", limit)
    scripted = Scripted(model, tok)
    [r] = rollout(scripted, tok, bm25, [question], p)
    assert (r.finished, r.answer, r.turns, r.searches) == (False, None, 1, ["who discovered penicillin"])
    assert r.completion_ids == full.completion_ids[:first_turn] and set(r.env_mask) == {0}
    assert all(len(seen) + p.max_new_tokens < limit for seen in scripted.seen)
    # a prompt with no room for one turn never reaches the model
    monkeypatch.setattr(model.config, "max_position_embeddings", len(full.prompt_ids) + p.max_new_tokens)
    scripted = Scripted(model, tok)
    [r] = rollout(scripted, tok, bm25, [question], p)
    assert (r.finished, r.turns, r.completion_ids, scripted.seen) == (False, 0, [], [])


def test_the_batch_never_grows_wider_than_the_model_s_positions(model, tok, bm25, monkeypatch):
    questions, p = QUESTIONS[:4], params()
    scripted = Scripted(model, tok)
    first = rollout(scripted, tok, bm25, questions, p)
    # every context the model read fits a table this long, but the KV cache's holes made the batch wider
    limit = max(map(len, scripted.seen)) + p.max_new_tokens + 1
    assert max(scripted.widths) + p.max_new_tokens > limit
    monkeypatch.setattr(model.config, "max_position_embeddings", limit)
    scripted = Scripted(model, tok)
    assert strip_time(rollout(scripted, tok, bm25, questions, p)) == strip_time(first)
    assert max(scripted.widths) + p.max_new_tokens < limit and False in scripted.cached[1:]


def test_an_answer_cut_by_eos_finishes_the_episode(model, tok, bm25):
    [r] = rollout(Scripted(model, tok), tok, bm25, [QUESTIONS[7]], params())
    assert (r.answer, r.finished, r.turns) == ("Tokyo", True, 1)
    assert r.completion == SCRIPTS[QUESTIONS[7]][0] + "<|endoftext|>"
    assert r.completion_ids[-1] == tok.eos_token_id and r.env_mask[-1] == 0
    check_invariants(r, tok)


def test_chunks_of_batch_size_give_the_same_episodes(model, tok, bm25):
    questions = QUESTIONS[:5]
    bm25.calls.clear()
    chunked = Scripted(model, tok)
    small = rollout(chunked, tok, bm25, questions, params(batch_size=2))
    q = questions
    assert chunked.batches == [[q[0], q[1]], [q[1]], [q[2], q[3]], [q[2]], [q[4]], [q[4]]]
    assert bm25.calls == [(["who discovered penicillin"], 2), (["capital of Norway"], 2)]  # per chunk, per turn

    bm25.calls.clear()
    whole = Scripted(model, tok)
    big = rollout(whole, tok, bm25, questions, params(batch_size=8))
    assert whole.batches == [q, [q[1], q[2], q[4]]]
    assert bm25.calls == [(["who discovered penicillin", "capital of Norway"], 2)]
    assert strip_time(small) == strip_time(big)
    fresh = Scripted(model, tok)
    assert strip_time(rollout(fresh, tok, bm25, questions, params(), reuse_cache=False)) == strip_time(big)
    assert fresh.cached == [False, False]
    assert chunked.saw_exactly_the_episodes(small) and whole.saw_exactly_the_episodes(big)
    assert fresh.saw_exactly_the_episodes(big)
    assert [r.question for r in big] == questions
    assert [r.answer for r in big] == ["Tokyo", "Alexander Fleming", "Warsaw", "Mount Everest", "Oslo"]
    for r in big:
        check_invariants(r, tok)


@pytest.mark.parametrize("prefill, first_turn", [
    ("think", "I will look it up.</think>\n<search>who discovered penicillin</search>"),
    ("search", "who discovered penicillin</search>"),
])
def test_a_prefilled_tag_opens_the_first_turn_as_environment_text(model, tok, bm25, monkeypatch, prefill, first_turn):
    penicillin = QUESTIONS[1]
    monkeypatch.setitem(SCRIPTS, penicillin, [first_turn, SCRIPTS[penicillin][1]])  # turns that continue the tag
    scripted = Scripted(model, tok)
    p = params(prefill=prefill)
    [r] = rollout(scripted, tok, bm25, [penicillin], p)
    assert scripted.saw_exactly_the_episodes([r])  # the model continued the prompt and the tag

    tag = PREFILLS[prefill]
    block = expected_block(bm25, "who discovered penicillin", p, tok)
    assert r.completion == tag + first_turn + block + SCRIPTS[penicillin][1]
    assert (r.searches, r.answer, r.turns) == (["who discovered penicillin"], "Alexander Fleming", 2)
    assert parse_trajectory(r.completion).problems() == []  # the protocol reads the tag as the turn's start
    tag_ids = encode_completion(tok, tag)
    assert r.completion_ids[:len(tag_ids)] == tag_ids and r.env_mask[:len(tag_ids)] == [1] * len(tag_ids)
    assert r.env_mask[len(tag_ids)] == 0 and r.generated_tokens == r.env_mask.count(0)  # never trained on
    assert decode(tok, r.completion_ids) == r.completion

    # force_answer (the one-turn baselines) opens <answer> itself: no prefill there
    [forced] = rollout(Scripted(model, tok), tok, bm25, [QUESTIONS[0]], p, force_answer=True)
    assert forced.prompt.endswith("<answer>") and set(forced.env_mask) == {0}


def test_custom_prompts_are_used_as_given(model, tok, bm25):
    q = QUESTIONS[3]
    prompt = "System: be brief.\n" + instruction(q)
    [r] = rollout(Scripted(model, tok), tok, bm25, [q], params(), prompts=[prompt])
    assert r.prompt == prompt and r.prompt_ids == tok(prompt).input_ids and r.answer == "Mount Everest"
    with pytest.raises(ValueError, match="1 prompts for 2 questions"):
        rollout(model, tok, bm25, [q, q], params(), prompts=[prompt])


# ---------------------------------------------------------------- stop strings spanning several tokens


def test_tags_split_over_tokens_stop_and_overhang(bm25, monkeypatch):
    """The production case (Qwen's vocabulary has no tag tokens): stop strings span tokens and may end inside one."""
    tok = make_tokenizer(tags_special=False)
    model = make_model(tok)
    assert len(encode_completion(tok, "</search>")) > 1
    *_, last = encode_completion(tok, "<search>x</search>.")
    assert decode(tok, [last]) == ">."  # the stop string ends inside this token

    norway = QUESTIONS[4]
    monkeypatch.setitem(SCRIPTS, norway, ["<think>hm</think><search>capital of Norway</search>. and no more",
                                          "<answer>Oslo</answer>!!"])
    p = params()
    scripted = Scripted(model, tok)
    [r] = rollout(scripted, tok, bm25, [norway], p)
    block = expected_block(bm25, "capital of Norway", p, tok)
    # the token ">." is kept whole: the "." after the tag stays, in ids and text; nothing after it
    assert r.completion == "<think>hm</think><search>capital of Norway</search>." + block + "<answer>Oslo</answer>"
    assert (r.answer, r.searches, r.turns) == ("Oslo", ["capital of Norway"], 2)
    check_invariants(r, tok)


def test_a_tag_spelled_in_pieces_still_ends_the_turn(model, tok, bm25, monkeypatch):
    """Where the tags are special tokens the model can still write "</search>" byte by byte: cut there."""
    pieces = tok.convert_tokens_to_ids(list("</search>"))
    assert tok.unk_token_id not in pieces and decode(tok, pieces) == "</search>"
    head = encode_completion(tok, "<think>hm</think><search>capital of Norway")
    norway = QUESTIONS[4]
    monkeypatch.setitem(SCRIPTS, norway, [head + pieces + encode_completion(tok, " and babble after it"),
                                          "<answer>Oslo</answer>"])
    p = params()
    scripted = Scripted(model, tok)
    [r] = rollout(scripted, tok, bm25, [norway], p)
    assert scripted.saw_exactly_the_episodes([r])  # the dropped babble is in the cache, masked out
    block = expected_block(bm25, "capital of Norway", p, tok)
    assert r.completion == "<think>hm</think><search>capital of Norway</search>" + block + "<answer>Oslo</answer>"
    assert r.completion_ids[:len(head) + len(pieces)] == head + pieces  # the model's own ids, babble dropped
    assert r.generated_tokens == len(head) + len(pieces) + len(encode_completion(tok, "<answer>Oslo</answer>"))
    assert r.searches == ["capital of Norway"]
    check_invariants(r, tok)


# ---------------------------------------------------------------- the unsteered model


def test_greedy_is_deterministic_and_independent_of_batching(model, tok, bm25, monkeypatch):
    questions = QUESTIONS[:3]
    p = params(max_new_tokens=12, max_turns=3, batch_size=3)
    recording = Recording(model, tok)
    first = rollout(recording, tok, bm25, questions, p)
    assert recording.cached == [False, True, True] and recording.saw_exactly_the_episodes(first)
    assert strip_time(rollout(model, tok, bm25, questions, p)) == strip_time(first)
    # the params decide how to decode, not the model's shipped generation config (Qwen's samples with top-k 20)
    for name, value in dict(do_sample=True, temperature=0.7, top_k=3, repetition_penalty=1.5).items():
        monkeypatch.setattr(model.generation_config, name, value)
    assert strip_time(rollout(model, tok, bm25, questions, p)) == strip_time(first)
    monkeypatch.undo()
    # continuing from the KV cache (holes and all) reads the same contexts as re-reading them each turn
    assert strip_time(rollout(model, tok, bm25, questions, p, reuse_cache=False)) == strip_time(first)
    # left padding and chunking do not change greedy episodes
    assert strip_time(rollout(model, tok, bm25, questions, p.model_copy(update={"batch_size": 1}))) == strip_time(first)
    for r in first:
        check_invariants(r, tok)
        assert r.turns >= 1 and r.generated_tokens <= r.turns * 12


def test_sampling_is_seeded(model, tok, bm25):
    questions = QUESTIONS[:2]
    p = params(max_new_tokens=12, max_turns=2, temperature=1.0)
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a = rollout(model, tok, bm25, questions, p)
    assert torch.rand(1) == before  # the caller's random state is untouched
    b = rollout(model, tok, bm25, questions, p)
    c = rollout(model, tok, bm25, questions, p.model_copy(update={"seed": 1}))
    assert strip_time(a) == strip_time(b)
    assert [r.completion_ids for r in a] != [r.completion_ids for r in c]
    for r in a + c:
        check_invariants(r, tok)


# ---------------------------------------------------------------- helpers


def test_encode_prompt_adds_no_second_bos(tok):
    from tokenizers import Tokenizer
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer.from_str(tok.backend_tokenizer.to_str())
    bos_id = backend.token_to_id("<|endoftext|>")
    backend.post_processor = TemplateProcessing(single="<|endoftext|> $A", special_tokens=[("<|endoftext|>", bos_id)])
    with_bos = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<|endoftext|>", eos_token="<|endoftext|>")
    text = instruction("Who wrote Hamlet?")
    ids = encode_prompt(with_bos, text)
    assert ids[0] == bos_id and ids[1] != bos_id and ids == with_bos(text).input_ids
    assert encode_prompt(with_bos, "<|endoftext|>" + text) == ids  # a rendered template's BOS is not doubled
    assert encode_completion(with_bos, text) == ids[1:]
    assert encode_prompt(tok, text) == tok(text).input_ids  # no BOS: the default encoding as is


def test_summarize():
    def r(**kw):
        return Rollout("q", "p", **kw)

    rollouts = [r(answer="a", searches=["x", "y"], turns=3, generated_tokens=30, invalid_actions=1, finished=True),
                r(answer=None, searches=[], turns=4, generated_tokens=50, invalid_actions=3),
                r(answer="", turns=1, generated_tokens=10, finished=True)]
    assert summarize(rollouts) == {
        "rollouts": 3, "answered": 2 / 3, "mean_searches": 2 / 3, "mean_turns": 8 / 3,
        "mean_generated_tokens": 30.0, "invalid_action_rate": 4 / 8,
    }
    assert summarize([]) == {"rollouts": 0, "answered": 0.0, "mean_searches": 0.0, "mean_turns": 0.0,
                             "mean_generated_tokens": 0.0, "invalid_action_rate": 0.0}


class StandInVLLM:
    """The slice of ``vllm.LLM`` the rollout adapter uses, run by a Hugging Face model (vLLM itself needs CUDA).

    ``generate(requests, sampling_params, use_tqdm)``: per request its
    ``prompt_token_ids``, decoded greedily up to ``max_tokens``, stopping after
    a stop string (kept in the output, as ``include_stop_str_in_output`` asks)
    or a ``stop_token_ids`` token (kept too).
    """

    __module__ = "vllm"  # what is_vllm() looks at

    def __init__(self, model, tokenizer):
        self.model, self.tok = model, tokenizer
        self.llm_engine = types.SimpleNamespace(model_config=types.SimpleNamespace(
            max_model_len=model.config.max_position_embeddings))

    def generate(self, requests, sampling_params, use_tqdm=True):
        outputs = []
        for request, sampling in zip(requests, sampling_params):
            assert sampling.include_stop_str_in_output and sampling.temperature == 0
            ids = torch.tensor([request["prompt_token_ids"]])
            out = self.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                      max_new_tokens=sampling.max_tokens, do_sample=False, tokenizer=self.tok,
                                      stop_strings=sampling.stop, eos_token_id=sampling.stop_token_ids,
                                      pad_token_id=self.tok.pad_token_id)
            new = out[0, ids.shape[1]:].tolist()
            outputs.append(types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=new)]))
        return outputs


def test_a_vllm_engine_plays_the_same_episodes_as_hugging_face(model, tok, bm25, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(SamplingParams=types.SimpleNamespace))
    p = params(max_turns=3, batch_size=4)  # two chunks; one episode is cut off, one gets invalid-action feedback
    expected = rollout(Scripted(model, tok), tok, bm25, QUESTIONS, p)
    engine = StandInVLLM(Scripted(model, tok), tok)
    assert is_vllm(engine) and not is_vllm(model)
    assert strip_time(rollout(engine, tok, bm25, QUESTIONS, p)) == strip_time(expected)
