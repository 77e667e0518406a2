"""The CPU loss pass (searchlab.rl.loss_pass) against TRL's own: the same log-probabilities, entropies and
gradients where the loss reads them, and micro-batches whose trimming changes no value."""

from __future__ import annotations

import copy

import pytest
import torch

from searchlab.rl.loss_pass import length_sorted, scored_logps_and_entropies, trimmed
from searchlab.train.lm_head import plain_head_applies

TEMPERATURE = 0.7


def rollout_batch(vocab: int) -> dict:
    """Three episodes as TRL holds them: prompts left-padded, completions right-padded (pad id 1), a tool mask of
    inserted tokens."""
    generator = torch.Generator().manual_seed(0)
    prompt_lengths, completion_lengths, width_p, width_c = [3, 5, 4], [6, 9, 2], 7, 12
    prompt_ids = torch.ones(3, width_p, dtype=torch.long)
    prompt_mask = torch.zeros(3, width_p, dtype=torch.long)
    completion_ids = torch.ones(3, width_c, dtype=torch.long)
    completion_mask = torch.zeros(3, width_c, dtype=torch.long)
    for row, (p, c) in enumerate(zip(prompt_lengths, completion_lengths)):
        prompt_ids[row, width_p - p:] = torch.randint(2, vocab, (p,), generator=generator)
        prompt_mask[row, width_p - p:] = 1
        completion_ids[row, :c] = torch.randint(2, vocab, (c,), generator=generator)
        completion_mask[row, :c] = 1
    tool_mask = torch.ones(3, width_c, dtype=torch.long)
    tool_mask[:, 1:3] = 0  # an information block in every episode
    return {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
            "completion_mask": completion_mask, "tool_mask": tool_mask,
            "advantages": torch.tensor([0.5, -1.0, 0.25]), "episode_correct": torch.tensor([True, False, True]),
            "num_items_in_batch": torch.tensor(17)}


def joined(batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    return (torch.cat([batch["prompt_ids"], batch["completion_ids"]], 1),
            torch.cat([batch["prompt_mask"], batch["completion_mask"]], 1))


def test_the_plain_head_gives_trls_fused_log_probabilities_entropies_and_gradients(model):
    from trl.trainer.utils import add_fused_lm_head

    ours, theirs = copy.deepcopy(model).float(), copy.deepcopy(model).float()
    add_fused_lm_head(theirs, temperature=TEMPERATURE, outputs=("log_probs", "entropy"))
    assert plain_head_applies(ours)
    batch = rollout_batch(model.config.vocab_size)
    input_ids, attention_mask = joined(batch)
    width = batch["completion_ids"].size(1)
    scored = batch["completion_mask"] * batch["tool_mask"]

    logps, entropy = scored_logps_and_entropies(ours, input_ids, attention_mask, scored, TEMPERATURE, True)
    labels = input_ids.masked_fill(attention_mask == 0, -100)
    labels[:, :-width] = -100
    fused = theirs(input_ids=input_ids, attention_mask=attention_mask, labels=labels, fused_lm_head=True)
    where = scored.bool()
    assert torch.allclose(logps[where], fused.log_probs[:, -width:][where], atol=1e-5)
    assert torch.allclose(entropy[where], fused.entropy[:, -width:][where], atol=1e-5)
    assert not logps[~where].any() and not entropy[~where].any()  # tool tokens and padding: not scored

    (logps * scored).sum().backward()
    (fused.log_probs[:, -width:] * scored).sum().backward()
    for (name, a), b in zip(ours.named_parameters(), theirs.parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-4), name


def test_trimmed_micro_batches_keep_every_row_and_score_it_the_same(model):
    batch = rollout_batch(model.config.vocab_size)
    ordered = length_sorted(batch)
    assert (ordered["completion_mask"].sum(-1) + ordered["prompt_mask"].sum(-1)).tolist() == [14, 9, 6]
    assert ordered["advantages"].tolist() == [-1.0, 0.5, 0.25]  # every field moved with its row
    assert ordered["num_items_in_batch"].item() == 17

    short = trimmed({key: value[1:] if value.ndim else value for key, value in ordered.items()})
    assert short["prompt_ids"].shape == (2, 4) and short["completion_ids"].shape == (2, 6)
    assert short["tool_mask"].shape == (2, 6) and short["advantages"].shape == (2,)

    def scored_logps(part: dict) -> list[float]:
        input_ids, attention_mask = joined(part)
        with torch.no_grad():
            logps, _ = scored_logps_and_entropies(model, input_ids, attention_mask, part["completion_mask"],
                                                  TEMPERATURE, False)
        return logps[part["completion_mask"].bool()].tolist()  # row by row

    padded = scored_logps({key: value[1:] if value.ndim else value for key, value in ordered.items()})
    assert scored_logps(short) == pytest.approx(padded, abs=1e-5)
