"""The inverse-CDF draw samples exactly the distribution transformers' warpers leave."""

import math

import torch

from searchlab.agent.sampling import InverseCdfSample, sampling_processors


def draw(processors, probs, rows=20000):
    scores = torch.log(torch.tensor(probs)).expand(rows, -1).clone()
    for processor in processors:
        scores = processor(None, scores)
    finite = torch.isfinite(scores)
    assert finite.sum(dim=1).eq(1).all(), "exactly one token is left finite in each row"
    return scores.argmax(dim=1).bincount(minlength=len(probs)).double() / rows


def close(frequencies, expected, rows=20000):
    for f, p in zip(frequencies.tolist(), expected):
        assert abs(f - p) <= 5 * math.sqrt(p * (1 - p) / rows) + 1e-12, (frequencies, expected)


def test_draw_follows_the_distribution_and_never_picks_a_token_of_probability_zero():
    torch.manual_seed(0)
    probs = [0.0, 0.5, 0.0, 0.3, 0.2, 0.0]
    frequencies = draw([InverseCdfSample()], probs)
    close(frequencies, probs)
    assert frequencies[0] == frequencies[2] == frequencies[5] == 0


def test_temperature_and_top_p_are_applied_before_the_draw():
    torch.manual_seed(1)
    probs = [0.6, 0.3, 0.1]
    # temperature 0.5 squares the probabilities; top-p 0.9 then keeps the two tokens reaching 0.9
    squared = [p * p for p in probs]
    nucleus = [squared[0] / sum(squared[:2]), squared[1] / sum(squared[:2]), 0.0]
    frequencies = draw(sampling_processors(0.5, 0.9), probs)
    close(frequencies, nucleus)
    assert frequencies[2] == 0


def test_the_same_seed_draws_the_same_tokens():
    scores = torch.randn(64, 50)
    torch.manual_seed(7)
    first = InverseCdfSample()(None, scores.clone()).argmax(dim=1)
    torch.manual_seed(7)
    second = InverseCdfSample()(None, scores.clone()).argmax(dim=1)
    assert torch.equal(first, second)
    torch.manual_seed(8)
    assert not torch.equal(first, InverseCdfSample()(None, scores.clone()).argmax(dim=1))
