"""The GRPO loss pass on a CPU: micro-batches of similar lengths without shared padding, and log-probabilities
computed only where the loss reads them.

TRL pads a step's episodes to the longest of the whole rollout batch, shuffles
them and splits them into ``grad_accum`` micro-batches, so every micro-batch
carries that longest episode's width. :func:`length_sorted` orders the episodes
by length before the split and :func:`trimmed` cuts each micro-batch to its own
longest row; for every loss but ``bnpo`` a micro-batch's share of the loss does
not depend on which episodes it holds (``grpo``: a mean over its episodes,
divided by ``grad_accum``), so the gradient is the same.

TRL's fused LM head scores every position of every row on devices without
Triton (tile by tile, recomputed in the backward). An episode's completion is
mostly the information blocks the environment inserted, whose log-probabilities
the loss multiplies by zero: :func:`scored_logps_and_entropies` runs the LM head
on the positions it is asked for only (:mod:`searchlab.train.lm_head`).
"""

from __future__ import annotations

import torch

from searchlab.train.lm_head import hidden_and_head

PROMPT_KEYS = ("prompt_ids", "prompt_mask")  # left-padded; every other 2-D field is completion-wide, right-padded


def _permuted(batch: dict, order: torch.Tensor) -> dict:
    def permute(value):
        if isinstance(value, torch.Tensor) and value.ndim >= 1:
            return value[order]
        if isinstance(value, list):
            return [value[i] for i in order.tolist()]
        return value

    return {key: permute(value) for key, value in batch.items()}


def length_sorted(batch: dict) -> dict:
    """``batch`` (TRL's rollout batch: one row per episode) with its rows ordered by their real length, longest
    first; rows of equal length keep their order."""
    lengths = batch["prompt_mask"].sum(-1) + batch["completion_mask"].sum(-1)
    return _permuted(batch, torch.sort(lengths, descending=True, stable=True).indices)


def trimmed(batch: dict) -> dict:
    """``batch`` without the columns that are padding in every row: the prompts' left columns, the completions'
    right ones (every 2-D tensor as wide as ``completion_ids``)."""
    prompt_used = batch["prompt_mask"].any(0).nonzero()
    first = int(prompt_used.min()) if len(prompt_used) else batch["prompt_mask"].size(1) - 1
    completion_used = batch["completion_mask"].any(0).nonzero()
    end = int(completion_used.max()) + 1 if len(completion_used) else 1
    width = batch["completion_ids"].size(1)
    out = {}
    for key, value in batch.items():
        if key in PROMPT_KEYS:
            value = value[:, first:]
        elif isinstance(value, torch.Tensor) and value.ndim == 2 and value.size(1) == width:
            value = value[:, :end]
        out[key] = value
    return out


def scored_logps_and_entropies(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, scored: torch.Tensor,
                               temperature: float, compute_entropy: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probabilities (and entropies) of the last ``scored.size(1)`` tokens of every row under
    ``model`` at ``temperature``, where ``scored`` is 1; 0 elsewhere. Shapes as ``scored``.

    ``model`` is a causal LM (or a PEFT model around one); its backbone runs on the whole rows, its LM head on
    the scored positions only.
    """
    hidden, head = hidden_and_head(model, input_ids=input_ids, attention_mask=attention_mask)
    width = scored.size(1)
    positions = scored.bool()
    # the position before each completion token predicts it
    logits = head(hidden[:, -width - 1:-1][positions]).float() / temperature
    log_probs = logits.log_softmax(-1)
    targets = input_ids[:, -width:][positions]
    logps = log_probs.gather(-1, targets[:, None]).squeeze(-1)
    spread = logps.new_zeros(positions.shape)
    entropy = None
    if compute_entropy:
        entropy = spread.masked_scatter(positions, -(log_probs.exp() * log_probs).sum(-1))
    return spread.masked_scatter(positions, logps), entropy
