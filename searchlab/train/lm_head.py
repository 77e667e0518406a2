"""The LM head run only where a loss reads it, for CPU training of small models.

A causal LM's forward projects every position onto the vocabulary. In this
project's training data most positions are read by no loss: the prompts and the
information blocks the environment inserted (labels ``-100`` in sft, outside the
tool mask in GRPO), and padding. For a small model on a CPU that projection and
its log-softmax are a large share of a step. :func:`labeled_loss` (sft and
pretraining) and :func:`searchlab.rl.loss_pass.scored_logps_and_entropies` (GRPO)
run the model's backbone on the whole rows and its LM head on the chosen
positions only; the loss and its gradient are the model's own.
"""

from __future__ import annotations

from typing import Any

import torch

IGNORE = -100  # the label PyTorch's cross-entropy skips
SCALED = ("final_logit_softcapping", "logit_scale", "output_multiplier", "lm_head_multiplier", "logits_scaling")


def plain_head_applies(model) -> bool:
    """Whether ``model`` (a causal LM, or a PEFT model around one) is on a CPU and its logits are its LM head's
    output, neither soft-capped nor scaled: what :func:`hidden_and_head` assumes."""
    config = model.config.get_text_config()
    return model.device.type == "cpu" and not any(getattr(config, name, None) is not None for name in SCALED)


def hidden_and_head(model, **inputs: Any) -> tuple[torch.Tensor, torch.nn.Module]:
    """The backbone's last hidden states of ``inputs`` (``input_ids``, ``attention_mask``...) and the LM head."""
    core = model.get_base_model() if hasattr(model, "get_base_model") else model
    hidden = core.base_model(**inputs, use_cache=False).last_hidden_state
    return hidden, core.get_output_embeddings()


def labeled_loss(model, inputs: dict[str, torch.Tensor], num_items_in_batch=None) -> torch.Tensor:
    """The model's own causal-LM loss on ``inputs`` (with ``labels``): cross-entropy of each labeled next token,
    summed and divided by ``num_items_in_batch`` (the Trainer's count over the accumulated batch), or the mean
    when it is None."""
    labels = inputs["labels"][:, 1:]
    where = labels != IGNORE
    hidden, head = hidden_and_head(model, **{k: v for k, v in inputs.items() if k != "labels"})
    logits = head(hidden[:, :-1][where]).float()
    loss = torch.nn.functional.cross_entropy(logits, labels[where], reduction="sum")
    return loss / (num_items_in_batch if num_items_in_batch is not None else where.sum().clamp(min=1))
