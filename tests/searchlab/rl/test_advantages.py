"""Stratified GRPO and IGPO advantages: hand-computed numbers, token-by-token placement, and the gold-answer
log-probability checked against a manual computation on a tiny random Qwen2 (the rollout tests' model)."""

from __future__ import annotations

import math

import pytest
import torch

from searchlab.rl.advantages import (
    answer_logprobs,
    grpo_advantages,
    igpo_token_advantages,
    information_gains,
    stratified_grpo_advantages,
    turn_index,
)
from tests.toyworld import make_model, make_tokenizer

S2, S3 = math.sqrt(2), math.sqrt(3)


def close(actual, expected, atol=1e-6):
    expected = torch.tensor(expected, dtype=torch.float32)
    assert actual.shape == expected.shape, (actual, expected)
    assert torch.allclose(actual, expected, atol=atol), (actual.tolist(), expected.tolist())


# ---------------------------------------------------------------- Stratified GRPO


def test_stratified_hand_computed_one_group():
    # one group of 4: mean .5, unbiased std sqrt(1/3) -> A_glob = +-sqrt(3)/2
    # strata {0,1} and {2,3}, each rewards [1, 0]: std sqrt(1/2) -> A_strat = +-sqrt(2)/2
    a = stratified_grpo_advantages([1, 0, 1, 0], [1, 1, 2, 2], num_generations=4, alpha=0.5, eps=0.0)
    x = (S2 + S3) / 4
    close(a, [x, -x, x, -x])


def test_stratified_hand_computed_two_groups_batch_strata():
    rewards = [1, 0, 0, 0, 1, 1, 0, 1]
    counts = [0, 0, 1, 2, 1, 1, 2, 0]
    # groups: [1,0,0,0] mean .25 std .5 -> 1.5,-.5,-.5,-.5 ; [1,1,0,1] mean .75 std .5 -> .5,.5,-1.5,.5
    glob = [1.5, -0.5, -0.5, -0.5, 0.5, 0.5, -1.5, 0.5]
    close(grpo_advantages(rewards, 4, eps=0.0), glob)
    # batch strata: 0 searches = {0,1,7} rewards [1,0,1]: mean 2/3, std 1/sqrt3 -> sqrt3/3, -2sqrt3/3, sqrt3/3
    #               1 search   = {2,4,5} rewards [0,1,1] -> -2sqrt3/3, sqrt3/3, sqrt3/3
    #               2 searches = {3,6}   rewards [0,0]   -> 0, 0 (no spread)
    u, d = S3 / 3, -2 * S3 / 3
    strat = [u, d, d, 0.0, u, u, 0.0, u]
    close(stratified_grpo_advantages(rewards, counts, 4, alpha=1.0, eps=0.0), strat)
    a = stratified_grpo_advantages(rewards, counts, 4, alpha=0.5, eps=0.0)
    close(a, [0.5 * (u + 1.5), 0.5 * (d - 0.5), 0.5 * (d - 0.5), -0.25,
              0.5 * (u + 0.5), 0.5 * (u + 0.5), -0.75, 0.5 * (u + 0.5)])
    # strata within each group instead: {0,1} [1,0] -> +-sqrt2/2; {4,5} [1,1] -> 0; the rest are singletons -> 0
    close(stratified_grpo_advantages(rewards, counts, 4, alpha=1.0, eps=0.0, strata="group"),
          [S2 / 2, -S2 / 2, 0, 0, 0, 0, 0, 0])


def test_singleton_strata_get_no_stratified_part():
    # strata {0}, {1,2}, {3}: only {1,2} (rewards [0,1], std sqrt(1/2)) has a stratified part
    close(stratified_grpo_advantages([1, 0, 1, 0], [0, 1, 1, 2], 4, alpha=1.0, eps=0.0), [0, -S2 / 2, S2 / 2, 0])
    g = S3 / 2
    close(stratified_grpo_advantages([1, 0, 1, 0], [0, 1, 1, 2], 4, alpha=0.5, eps=0.0),
          [0.5 * g, 0.5 * (-S2 / 2 - g), 0.5 * (S2 / 2 + g), -0.5 * g])
    # all strata singletons: pure SAN is all zeros
    close(stratified_grpo_advantages([1, 0, 1, 0], [0, 1, 2, 3], 4, alpha=1.0), [0, 0, 0, 0])


def test_alpha_zero_is_trl_grpo_and_alpha_one_is_pure_stratified():
    torch.manual_seed(0)
    rewards = torch.rand(12)
    counts = torch.randint(0, 3, (12,))
    # TRL GRPOTrainer's inline formula (scale_rewards="group")
    g = rewards.view(-1, 4)
    trl = ((g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + 1e-4)).view(-1)
    close(stratified_grpo_advantages(rewards, counts, 4, alpha=0.0), trl.tolist())
    close(grpo_advantages(rewards, 4), trl.tolist())
    pure = torch.zeros(12)
    for c in counts.unique():
        m = counts == c
        if m.sum() > 1:
            pure[m] = (rewards[m] - rewards[m].mean()) / (rewards[m].std() + 1e-4)
    close(stratified_grpo_advantages(rewards, counts, 4, alpha=1.0), pure.tolist())
    mid = stratified_grpo_advantages(rewards, counts, 4, alpha=0.3)
    close(mid, (0.3 * pure + 0.7 * trl).tolist())


def test_stratified_rejects_bad_input():
    with pytest.raises(ValueError):
        stratified_grpo_advantages([1, 0, 1], [0, 0, 0], 2)
    with pytest.raises(ValueError):
        stratified_grpo_advantages([1, 0], [0], 2)
    with pytest.raises(ValueError):
        stratified_grpo_advantages([1, 0], [0, 0], 2, alpha=1.5)
    with pytest.raises(ValueError):
        stratified_grpo_advantages([1, 0], [0, 0], 2, strata="prompt")


# ---------------------------------------------------------------- IGPO placement

# turn 0 (3 tokens) | block 0 (2) | turn 1 (2) | block 1 (3) | answer turn 2 (2) | padding (2)
MASK = [1, 1, 1, 0, 0, 1, 1, 0, 0, 0, 1, 1, 0, 0]
TURNS = [0, 0, 0, -1, -1, 1, 1, -1, -1, -1, 2, 2, -1, -1]


def test_turn_index():
    close(turn_index(MASK).float(), TURNS)
    two = turn_index(torch.tensor([MASK, [1, 1, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0]]))
    assert two.tolist() == [TURNS, [0, 0, -1, 1, 1, 1, -1, -1, -1, -1, -1, -1, -1, -1]]


def test_gains_land_on_the_searching_turns_token_by_token():
    add = igpo_token_advantages([0.5, -0.25], TURNS, MASK, gain_weight=2.0)
    close(add, [1, 1, 1, 0, 0, -0.5, -0.5, 0, 0, 0, 0, 0, 0, 0])
    # discounted: turn 0 also gets 0.5 * the gain of block 1
    add = igpo_token_advantages([0.5, -0.25], TURNS, MASK, gain_weight=2.0, discount=0.5)
    close(add, [0.75, 0.75, 0.75, 0, 0, -0.5, -0.5, 0, 0, 0, 0, 0, 0, 0])


def test_env_tokens_get_zero_even_if_the_turn_map_labels_them():
    turns = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 2, 2, 2, 2]  # env tokens labelled with the turn before them
    close(igpo_token_advantages([0.5, -0.25], turns, MASK), [0.5] * 3 + [0, 0] + [-0.25] * 2 + [0] * 7)


def test_batch_with_ragged_gains():
    mask = torch.tensor([MASK, [1, 1, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0]])
    add = igpo_token_advantages([[0.5, -0.25], [0.3]], turn_index(mask), mask)
    close(add, [[0.5, 0.5, 0.5, 0, 0, -0.25, -0.25, 0, 0, 0, 0, 0, 0, 0],
                [0.3, 0.3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]])
    padded = igpo_token_advantages(torch.tensor([[0.5, -0.25], [0.3, 0.0]]), turn_index(mask), mask)
    assert torch.equal(add, padded)


# ---------------------------------------------------------------- gold-answer log-probability


@pytest.fixture(scope="module")
def tok():
    return make_tokenizer(tags_special=True)


@pytest.fixture(scope="module")
def model(tok):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield make_model(tok)
    torch.set_num_threads(threads)


def manual_score(model, prefix_ids, answer_ids) -> float:
    """Unbatched, token by token: mean of log P(a_j | prefix, a_<j)."""
    total = 0.0
    for j, a in enumerate(answer_ids):
        ctx = torch.tensor([prefix_ids + answer_ids[:j]])
        with torch.no_grad():
            logits = model(input_ids=ctx).logits[0, -1].double()
        total += torch.log_softmax(logits, -1)[a].item()
    return total / len(answer_ids)


def test_answer_logprobs_match_a_manual_computation(model, tok):
    prefixes = ["Who discovered penicillin?", "<search>who discovered penicillin</search>",
                "Alexander Fleming was a Scottish physician who discovered penicillin in 1928. The answer is"]
    answer = " Alexander Fleming"
    calls = []
    hook = model.register_forward_hook(lambda *a: calls.append(1))
    try:
        got = answer_logprobs(model, tok, prefixes, answer)
    finally:
        hook.remove()
    assert len(calls) == 1  # one batched forward
    a_ids = tok(answer, add_special_tokens=False)["input_ids"]
    assert len(a_ids) > 1
    want = [manual_score(model, tok(p, add_special_tokens=False)["input_ids"], a_ids) for p in prefixes]
    close(got, want, atol=1e-4)
    assert len(set(round(w, 4) for w in want)) == 3  # the prefixes matter, so a mix-up would show
    # ids are accepted as well as strings, and per-prefix answers
    ids = [tok(p, add_special_tokens=False)["input_ids"] for p in prefixes]
    close(answer_logprobs(model, tok, ids, [a_ids] * 3), want, atol=1e-4)
    other = answer_logprobs(model, tok, prefixes, [answer, " Tokyo", answer])
    close(other[[0, 2]], [want[0], want[2]], atol=1e-4)
    tokyo = tok(" Tokyo", add_special_tokens=False)["input_ids"]
    assert abs(other[1].item() - manual_score(model, ids[1], tokyo)) < 1e-4


def test_information_gains_are_score_differences_around_each_block(model, tok):
    enc = lambda s: tok(s, add_special_tokens=False)["input_ids"]  # noqa: E731
    prompt = enc("Who discovered penicillin?")
    parts = [(enc("<search>who discovered penicillin</search>"), 1),
             (enc("<information>Alexander Fleming was a Scottish physician.</information>"), 0),
             (enc("<search>penicillin</search>"), 1),
             (enc("<information>Penicillin is an antibiotic made by moulds.</information>"), 0),
             (enc("<answer>Alexander Fleming</answer>"), 1)]
    comp = [i for p, _ in parts for i in p]
    mask = [m for p, m in parts for _ in p] + [0, 0]  # trailing padding is no block
    comp = comp + [tok.pad_token_id] * 2
    answer = enc(" Alexander Fleming")
    gains = information_gains(model, tok, prompt, comp, mask, answer)
    n = [len(p) for p, _ in parts]
    b0, e0 = n[0], n[0] + n[1]
    b1, e1 = e0 + n[2], e0 + n[2] + n[3]
    want = [manual_score(model, prompt + comp[:e0], answer) - manual_score(model, prompt + comp[:b0], answer),
            manual_score(model, prompt + comp[:e1], answer) - manual_score(model, prompt + comp[:b1], answer)]
    close(gains, want, atol=1e-4)
    # and they land on the searching turns
    add = igpo_token_advantages(gains, turn_index(mask), mask)
    expected = [want[0]] * n[0] + [0] * n[1] + [want[1]] * n[2] + [0] * (n[3] + n[4] + 2)
    close(add, expected, atol=1e-4)
