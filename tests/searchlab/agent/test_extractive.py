"""Extractive answers: the rule, the sources, and real rollouts of a real (random, tiny) Qwen2 model under it."""

from __future__ import annotations

import pytest
import torch
import transformers

from searchlab.agent import information_block, instruction
from searchlab.agent.extractive import ExtractiveAnswers, allows, answer_sources
from searchlab.agent.rollout import rollout
from searchlab.agent.text import encode_completion
from searchlab.retrieval.base import Hit
from tests.toyworld import Recording, params

# tok, model (the session's real tokenizer and random tiny Qwen2) and bm25 (over tests/toyworld.py's DOCS) are
# tests/searchlab/conftest.py's fixtures

SOURCES = "Question: where was Stimina born?\nDoc 1(Title: Stimina) She was born in Olsadarn in 1736. It has 2,572 people."


@pytest.mark.parametrize(("answer", "piece", "ok"), [
    ("", " ", True),  # whitespace before the answer
    (" ", "Ols", True),  # the start of a word of the sources
    (" Ols", "adarn", True),
    (" ", "sadarn", False),  # not where a word starts
    (" Olsadarn", " in", True),  # several words
    (" Olsadarn", " on", False),
    (" Olsadarn", "</answer>", True),
    (" Olsadarn ", "</answer>", True),  # trailing space before the tag
    (" Ols", "</answer>", False),  # not where a word ends
    (" ", "</answer>", False),  # empty
    (" 17", "36", True),
    (" 1", "7", True),
    (" 17", "</answer>", False),  # "17" is not a whole number of the sources
    (" 2,", "572", True),
    (" 2,572", "</", True),  # a closing tag over several tokens
    (" 2,572", "answer>", False),  # "answer>" alone does not continue the tag
    (" 2,5", "</", False),
    (" Paris", "", False),  # nowhere in the sources
])
def test_allows_copies_of_whole_words_of_the_sources(answer, piece, ok):
    assert allows(answer, piece, SOURCES) is ok


def test_sources_are_the_question_and_information_blocks_not_the_models_own_words():
    block = information_block([Hit("d1", '"Olsadarn"\nOlsadarn is a town of 2,572 people.', 1.0)])
    shown = instruction("How big is Olsadarn?") + "<think>I think it is Paris, 99.</think>\n<search> Olsadarn </search>"
    sources = answer_sources("How big is Olsadarn?", shown + block + "<think>Still Paris.</think>")
    assert "2,572" in sources and "How big is Olsadarn?" in sources
    assert "Paris" not in sources and "99" not in sources
    # the instruction's wording is not a source either, not even where it names the tags
    assert "Reason inside" not in sources and " and " not in sources


def test_the_processor_masks_what_the_sources_do_not_hold(tok):
    processor = ExtractiveAnswers(tok, tok.pad_token_id)
    processor.begin_turn(["Tokyo is the capital of Japan."])
    opened = encode_completion(tok, "<think>Paris.</think>\n<answer> ")
    ids = torch.tensor([opened])
    scores = torch.zeros(1, len(tok))
    paris = encode_completion(tok, "Paris")[0]
    scores[0, paris] = 10.0  # the model's favourite is nowhere in the sources
    out = processor(ids[:, :0], scores.clone())  # turn starts at column 0: every id is this turn's
    out = processor(ids, scores.clone())
    best = tok.decode([int(out[0].argmax())])
    assert out[0, paris] < -1e30 and "Tokyo is the capital of Japan.".find(best.strip()) >= 0
    # outside an answer nothing changes
    processor.begin_turn(["Tokyo is the capital of Japan."])
    thinking = torch.tensor([encode_completion(tok, "<think>I")])
    processor(thinking[:, :0], scores.clone())
    assert torch.equal(processor(thinking, scores.clone()), scores)


def test_a_turn_read_as_it_grows_is_constrained_as_one_read_whole(tok):
    """The processor follows a turn token by token (joining their pieces until ``<answer>`` shows); at every
    step its mask equals that of a processor reading the turn so far in one go, with the tag as its own token
    or spelled in pieces."""
    sources = "Tokyo is the capital of Japan."
    for tag in (["<answer>"], ["<", "answer", ">"]):
        turn = [i for piece in ["<think>", "Paris", ".</think>\n", *tag, " Tok", "yo", "</answer>"]
                for i in encode_completion(tok, piece)]
        scores = torch.randn(1, len(tok), generator=torch.Generator().manual_seed(0))
        growing = ExtractiveAnswers(tok, tok.pad_token_id)
        growing.begin_row_turn("row", sources)
        masked = 0
        for end in range(len(turn) + 1):
            fresh = ExtractiveAnswers(tok, tok.pad_token_id)
            fresh.begin_row_turn("row", sources)
            expected = fresh.constrain(["row"], [turn[:end]], scores.clone())
            assert torch.equal(growing.constrain(["row"], [turn[:end]], scores.clone()), expected), (tag, end)
            masked += not torch.equal(expected, scores)
        assert masked >= 2  # inside the answer: " Tok" and "yo" were chosen under the mask


class OpenAnswer(Recording):
    """The real model; each row is made to write ``<think>…</think>\\n<answer>`` first, then decodes freely."""

    def __init__(self, model, tokenizer, opening: str):
        super().__init__(model, tokenizer)
        self.opening = encode_completion(tokenizer, opening)

    def generate(self, input_ids, attention_mask, **kwargs):
        start, opening = input_ids.shape[1], self.opening

        def force(batch_ids, scores):
            s = batch_ids.shape[1] - start
            if s >= len(opening):
                return scores
            forced = torch.full_like(scores, float("-inf"))
            forced[:, opening[s]] = 0.0
            return forced

        processors = transformers.LogitsProcessorList([force, *kwargs.pop("logits_processor", [])])
        return super().generate(input_ids, attention_mask, logits_processor=processors, **kwargs)


def test_rollout_answers_copy_whole_words_of_the_question_or_passages(model, tok, bm25):
    questions = ["Who discovered penicillin?", "Where was Marie Curie born?", "What is the capital of Japan?",
                 "Which river flows into the Mediterranean Sea?"]
    wrapped = OpenAnswer(model, tok, "<think>Paris.</think>\n<answer>")
    free = rollout(wrapped, tok, bm25, questions, params(max_new_tokens=24, max_turns=1))
    held = rollout(wrapped, tok, bm25, questions, params(max_new_tokens=24, max_turns=1, extractive_answers=True))
    # the random model, left alone, writes text that is nowhere in the question
    assert not any(r.answer and r.answer.strip() and r.answer.strip() in r.question for r in free)
    answered = [r for r in held if r.answer]
    assert answered, "no row closed its answer"
    for r in answered:
        assert r.answer.strip() and r.answer.strip() in r.question
        assert "Paris" not in r.answer  # the model's own think is not a source


def test_vllm_engines_refuse_extractive_answers(tok):
    class FakeVLLM:  # only its module name matters: rollout refuses before generating anything
        pass

    FakeVLLM.__module__ = "vllm.entrypoints.llm"
    with pytest.raises(ValueError, match="extractive_answers"):
        rollout(FakeVLLM(), tok, None, ["q?"], params(extractive_answers=True))


def test_the_processor_s_shortcut_allows_exactly_the_tokens_a_check_of_every_candidate_allows(tok):
    processor = ExtractiveAnswers(tok, tok.pad_token_id)
    processor.begin_turn([SOURCES])
    # prefixes of copies (from word starts, at every character), with and without spaces around them,
    # unfinished closing tags, and text that is nowhere in the sources
    starts = [i for i in range(len(SOURCES)) if i == 0 or not SOURCES[i - 1].isalnum()]
    answers = {"", " ", "  Paris", " Olsadarn </", " 2,572</", " Olsadarn</ans", "Olsadarn\n", " xyzzy"}
    for start in starts:
        for end in range(start + 1, min(start + 14, len(SOURCES)) + 1):
            answers |= {SOURCES[start:end], " " + SOURCES[start:end], " " + SOURCES[start:end] + " "}
    for answer in sorted(answers):
        every = {t for t in processor._candidates(0) if allows(answer, processor._piece(t), SOURCES)}
        shortcut = {t for t in processor._viable(0, answer) if allows(answer, processor._piece(t), SOURCES)}
        assert shortcut == every, answer
    assert len(processor._viable(0, " Olsadarn")) < len(processor._candidates(0)) / 4  # the point of it
