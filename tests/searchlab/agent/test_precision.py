"""Decoding in bfloat16 (``rollout.decode_dtype``): a real tiny model's bfloat16 copy holds the model's current
weights, reads what the model reads up to bfloat16 rounding, and plays well-kept episodes over a real BM25 index."""

from __future__ import annotations

import torch

from searchlab.agent.precision import decoding_model
from searchlab.agent.rollout import rollout
from tests.searchlab.agent.test_rollout import check_invariants
from tests.searchlab.rl.rlworld import QUESTIONS, ROLLOUT


def test_the_bfloat16_copy_follows_the_models_weights_and_reads_what_it_reads(model, tok):
    assert decoding_model(model, "model") is model
    copy = decoding_model(model, "bfloat16")
    assert copy is not model and {p.dtype for p in copy.parameters()} == {torch.bfloat16}
    assert {p.dtype for p in model.parameters()} == {torch.float32}  # the model itself is untouched
    ids = torch.tensor([tok("Who discovered penicillin?")["input_ids"]])
    with torch.inference_mode():
        full, half = model(input_ids=ids).logits[0, -1], copy(input_ids=ids).logits[0, -1].float()
    assert torch.allclose(full, half, atol=0.05 * full.abs().max().item())
    weight = next(model.parameters())
    with torch.no_grad():
        weight.add_(1.0)  # a training step, as RL takes between rollouts
    try:
        again = decoding_model(model, "bfloat16")
        assert again is copy and torch.equal(next(again.parameters()), weight.to(torch.bfloat16))
    finally:
        with torch.no_grad():
            weight.sub_(1.0)
    assert decoding_model(copy, "bfloat16") is copy  # a bfloat16 model decodes as it is


def test_bfloat16_rollouts_keep_the_token_bookkeeping(model, tok, bm25):
    params = ROLLOUT.model_copy(update={"decode_dtype": "bfloat16", "temperature": 1.0, "max_new_tokens": 16})
    questions = [q for _, q, *_ in QUESTIONS]
    episodes = rollout(model, tok, bm25, questions, params)
    assert len(episodes) == len(questions) and all(r.turns > 0 for r in episodes)
    for r in episodes:
        check_invariants(r, tok)
