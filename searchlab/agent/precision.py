"""Decoding a float32 model in bfloat16 on a CPU (``rollout.decode_dtype: bfloat16``).

A decode step reads every weight once, and every cached key and value, so
halving the bytes could nearly halve a bandwidth-bound step. For SmolLM2 on
two cores it did not: the real rollouts ran 8-13% slower than in float32
(bench/smollm2_speed.py, docs/results/smollm2.md), so it is off by default. Training keeps float32 weights (a bfloat16 weight cannot take a 1e-5
update), so the rollout decodes with a bfloat16 *copy*: made once per model,
its weights refreshed from the model's at every rollout (a copy of 135M
weights takes a fraction of a second, a rollout tens of seconds). Buffers (the
rotary frequencies) stay float32, as the model computes positions from them
in float32 anyway. Measured in ``bench/smollm2_speed.py``.
"""

from __future__ import annotations

import copy
import weakref
from typing import Any

import torch

_COPIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> its bfloat16 copy, gone with the model


def decoding_model(model: Any, decode_dtype: str) -> Any:
    """The module to decode with: ``model`` itself, or for ``decode_dtype`` ``bfloat16`` and a float32 torch module
    on a CPU, its bfloat16 copy holding the model's current weights (in the model's train or eval mode)."""
    if decode_dtype == "model" or not isinstance(model, torch.nn.Module):
        return model
    first = next(model.parameters(), None)
    if first is None or first.dtype != torch.float32 or first.device.type != "cpu":
        return model
    shadow = _COPIES.get(model)
    if shadow is None:
        shadow = copy.deepcopy(model)
        for parameter in shadow.parameters():
            parameter.requires_grad_(False)
            parameter.grad = None
            parameter.data = parameter.data.to(torch.bfloat16)
        _COPIES[model] = shadow
    else:
        with torch.no_grad():
            for mine, theirs in zip(shadow.parameters(), model.parameters(), strict=True):
                mine.copy_(theirs)
    return shadow.train(model.training)
