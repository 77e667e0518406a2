"""The LM head on labeled positions only (searchlab.train.lm_head) against the model's own loss."""

from __future__ import annotations

import copy

import torch

from searchlab.train.lm_head import IGNORE, labeled_loss, plain_head_applies


def test_the_labeled_positions_loss_is_the_models_own_loss_and_gradient(model):
    ours, theirs = copy.deepcopy(model).float(), copy.deepcopy(model).float()
    assert plain_head_applies(ours)
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(2, model.config.vocab_size, (3, 10), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[2, 7:] = 0  # a padded row
    labels = input_ids.clone()
    labels[:, :4] = IGNORE  # a prompt
    labels[0, 6:8] = IGNORE  # an information block
    labels[attention_mask == 0] = IGNORE
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}

    for count in (None, torch.tensor(40)):  # the mean, and the Trainer's count over an accumulated batch
        ours.zero_grad(), theirs.zero_grad()
        loss = labeled_loss(ours, inputs, count)
        expected = theirs(**inputs, num_items_in_batch=count).loss
        assert torch.allclose(loss, expected, atol=1e-6)
        loss.backward(), expected.backward()
        for (name, a), b in zip(ours.named_parameters(), theirs.parameters()):
            assert torch.allclose(a.grad, b.grad, atol=1e-6), name
