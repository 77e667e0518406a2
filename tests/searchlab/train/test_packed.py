"""Padding-free batches (searchlab.train.packed): TRL's collator joins the rows; the loss is the padded batch's."""

from __future__ import annotations

import copy

import torch
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

from searchlab.train.lm_head import IGNORE, labeled_loss
from searchlab.train.packed import PACKED_SDPA, attend_within_rows


def rows(vocab_size: int) -> list[dict[str, list[int]]]:
    """Three examples of different lengths, each with a prompt and an environment span that carry no loss."""
    generator = torch.Generator().manual_seed(0)
    examples = []
    for length in (9, 14, 6):
        ids = torch.randint(2, vocab_size, (length,), generator=generator).tolist()
        labels = [IGNORE] * 3 + ids[3:]
        labels[5:7] = [IGNORE] * len(labels[5:7])
        examples.append({"input_ids": ids, "labels": labels})
    return examples


def test_a_padding_free_batch_has_the_padded_batch_s_loss_and_gradient(model, tok):
    padded_model, packed_model = copy.deepcopy(model).float(), copy.deepcopy(model).float()
    attend_within_rows(packed_model)
    assert packed_model.config._attn_implementation == PACKED_SDPA
    examples = rows(model.config.vocab_size)
    padded = DataCollatorForLanguageModeling(pad_token_id=tok.pad_token_id)(copy.deepcopy(examples))
    packed = DataCollatorForLanguageModeling(pad_token_id=tok.pad_token_id, padding_free=True)(copy.deepcopy(examples))
    assert padded["input_ids"].shape == (3, 14) and packed["input_ids"].shape == (1, 29)
    assert packed["cu_seq_lens_q"].tolist() == [0, 9, 23, 29]

    padded_loss, packed_loss = labeled_loss(padded_model, padded), labeled_loss(packed_model, packed)
    assert torch.allclose(packed_loss, padded_loss, atol=1e-6)
    packed_loss.backward(), padded_loss.backward()
    for (name, a), b in zip(packed_model.named_parameters(), padded_model.parameters()):
        assert torch.allclose(a.grad, b.grad, atol=1e-6), name


def test_without_row_boundaries_the_model_attends_as_with_sdpa_and_its_padding_mask(model):
    """What the trained model meets outside a training batch: left-padded prompts, as rollouts batch them."""
    packed_model = copy.deepcopy(model)
    attend_within_rows(packed_model)
    input_ids = torch.randint(2, model.config.vocab_size, (2, 8), generator=torch.Generator().manual_seed(1))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, :3] = 0
    with torch.no_grad():
        expected = model(input_ids=input_ids, attention_mask=attention_mask).logits
        logits = packed_model(input_ids=input_ids, attention_mask=attention_mask).logits
    assert torch.allclose(logits[attention_mask == 1], expected[attention_mask == 1], atol=1e-5)
