"""The simulated search engine with a real (tiny, randomly initialised) Qwen2 model and a real BPE tokenizer.

The passages of a random model are gibberish; what is checked is the retriever's contract: k hits per query,
ids that mark the mode, the noise probability, reproducibility, the length bound, the rollout loop and the
logging helpers.
"""

from __future__ import annotations

import pytest
import torch

from searchlab.agent import parse_trajectory
from searchlab.agent.rollout import rollout
from searchlab.retrieval.base import Retriever
from searchlab.rl.simulated import SimulatedRetriever, is_simulated, passage_prompt, simulated_counts
from tests.toyworld import SCRIPTS, Scripted, make_model, params

# tok and model: the session's toy tokenizer and random tiny Qwen2 (tests/searchlab/conftest.py)
pytestmark = pytest.mark.usefixtures("one_thread")

QUERIES = ["who discovered penicillin", "capital of Norway", "Mount Everest height"]


def simulator(model, tok, **kw) -> SimulatedRetriever:
    return SimulatedRetriever(model, tok, **{"passage_tokens": 12, "seed": 7, **kw})


def test_k_hits_per_query_in_order_with_descending_scores(model, tok):
    retriever = simulator(model, tok)
    assert isinstance(retriever, Retriever)
    results = retriever.search(QUERIES, k=3)
    assert [len(hits) for hits in results] == [3, 3, 3]
    for hits in results:
        scores = [h.score for h in hits]
        assert scores == sorted(scores, reverse=True) and len(set(scores)) == 3
        for hit in hits:
            title, _, text = hit.contents.partition("\n")
            assert title.startswith('"') and title.endswith('"') and "\n" not in text
    assert [h.contents.split("\n")[0] for h in results[1]] == ['"Norway"'] * 3  # useful: the query's name
    ids = [h.id for hits in results for h in hits]
    assert len(set(ids)) == 9 and retriever.passages == 9 and retriever.seconds > 0


def test_noise_probability_zero_is_all_useful_and_one_all_noisy(model, tok):
    retriever = simulator(model, tok, noise_probability=0.0)
    useful = [h for hits in retriever.search(QUERIES, k=4) for h in hits]
    assert all(h.id.startswith("sim:useful:") for h in useful) and retriever.noisy == 0
    retriever.noise_probability = 1.0  # settable between calls, as the trainer's schedule does
    noisy = [h for hits in retriever.search(QUERIES, k=4) for h in hits]
    assert all(h.id.startswith("sim:noisy:") for h in noisy) and retriever.noisy == 12
    assert {h.contents.split("\n")[0] for h in noisy[4:8]} == {'"capital"'}  # a namesake, not Norway


def test_mixed_modes_follow_the_probability(model, tok):
    retriever = simulator(model, tok, noise_probability=0.5, passage_tokens=4)
    ids = [h.id for hits in retriever.search(QUERIES * 10, k=2) for h in hits]
    share = sum(i.startswith("sim:noisy:") for i in ids) / len(ids)
    assert 0.3 < share < 0.7 and retriever.noisy == sum(i.startswith("sim:noisy:") for i in ids)


def test_same_seed_same_passages_other_seed_others(model, tok):
    def contents(seed):
        r = simulator(model, tok, noise_probability=0.5, seed=seed)
        return [[(h.id, h.contents) for h in hits] for _ in range(2) for hits in r.search(QUERIES, k=2)]

    torch.manual_seed(123)
    caller_state = torch.random.get_rng_state()
    first = contents(1)
    assert torch.equal(torch.random.get_rng_state(), caller_state)  # the caller's random state is untouched
    assert contents(1) == first
    assert contents(2) != first


class Measured:
    """The real model, unchanged; records how many new tokens each ``generate`` call returned per row."""

    def __init__(self, model):
        self.model, self.new_tokens = model, []

    def __getattr__(self, name):  # device, generation_config, eval, train, ...
        return getattr(self.model, name)

    def generate(self, input_ids, **kwargs):
        out = self.model.generate(input_ids=input_ids, **kwargs)
        self.new_tokens.append(out.shape[1] - input_ids.shape[1])
        return out


def test_passages_hold_at_most_passage_tokens_tokens(model, tok):
    for limit in (4, 9):
        measured = Measured(model)
        retriever = simulator(measured, tok, passage_tokens=limit)
        texts = [h.contents.split("\n", 1)[1] for hits in retriever.search(QUERIES, k=3) for h in hits]
        assert len(measured.new_tokens) == 1 and measured.new_tokens[0] <= limit  # one batched call, bounded
        # re-encoding a random model's text need not give its tokens back, but every word took one at least
        assert all(0 < len(text.split()) <= limit for text in texts)


def test_invalid_noise_probability_is_rejected_clearly(model, tok):
    with pytest.raises(ValueError, match=r"noise_probability must be a number in \[0, 1\], got 1.5"):
        simulator(model, tok, noise_probability=1.5)
    retriever = simulator(model, tok)
    for bad in (-0.1, float("nan"), "0.5"):
        with pytest.raises(ValueError, match="noise_probability"):
            retriever.noise_probability = bad
    assert retriever.noise_probability == 0.0


def test_bad_requests_and_closed_retriever(model, tok):
    retriever = simulator(model, tok)
    with pytest.raises(ValueError, match="k must be a positive integer"):
        retriever.search(QUERIES, k=0)
    assert retriever.search([], k=2) == []
    retriever.close()
    with pytest.raises(RuntimeError, match="closed"):
        retriever.search(QUERIES, k=1)


def test_use_swaps_the_model_and_restores_its_training_mode(tok):
    first, second = make_model(tok, seed=1), make_model(tok, seed=2)
    retriever = simulator(first, tok)
    second.train()
    retriever.use(second)
    retriever.search(QUERIES, k=1)
    assert retriever.model is second and second.training  # written in eval mode, then left as the trainer had it
    retriever.close()
    assert second.training  # the policy is not the retriever's to free


def test_rollout_with_the_simulated_retriever_shows_only_simulated_blocks(model, tok):
    retriever = simulator(model, tok, noise_probability=0.5, passage_tokens=10)
    questions = [q for q, turns in SCRIPTS.items() if any("<search>" in t for t in turns)]
    results = rollout(Scripted(model, tok), tok, retriever, questions, params(topk=2, max_information_tokens=200))
    blocks = [ids for r in results for ids in r.retrieved]
    assert blocks and all(len(ids) == 2 and all(is_simulated(i) for i in ids) for ids in blocks)
    for r in results:
        shown = [s.content for s in parse_trajectory(r.completion).segments if s.kind == "information"]
        assert len(shown) == len(r.retrieved) and all("Doc 1(Title:" in info for info in shown)
    counts = simulated_counts(blocks)
    assert counts["blocks"] == counts["simulated_blocks"] == len(blocks)
    assert counts["simulated_passages"] == counts["passages"] == retriever.passages
    assert counts["noisy_passages"] == retriever.noisy


def test_helpers_tell_simulated_from_corpus_passages():
    assert is_simulated("sim:useful:0") and is_simulated("sim:noisy:12") and not is_simulated("e0-1")
    counts = simulated_counts([["e0-1", "e2-0"], ["sim:useful:0", "sim:noisy:1"], ["sim:noisy:2"], []])
    assert counts == {"blocks": 4, "simulated_blocks": 2, "passages": 5, "simulated_passages": 3,
                      "noisy_passages": 2}


def test_prompt_ends_where_a_passage_text_begins():
    assert passage_prompt("Drel Deillerez born in", noisy=False) == ("Drel Deillerez", '"Drel Deillerez"\n')
    assert passage_prompt("Drel Deillerez born in", noisy=True) == ("Deillerez born", '"Deillerez born"\n')
    assert passage_prompt("Feidanholm Institute of Technology", noisy=False)[0] == "Feidanholm Institute of Technology"
    assert passage_prompt("Anoport", noisy=True)[0] == "Anoport (disambiguation)"
    assert passage_prompt("Return to Rihasder genre", noisy=True)[0] == "Rihasder genre"  # no leading filler word
