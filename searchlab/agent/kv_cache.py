"""A KV cache whose layers grow in place: a decode step writes one column instead of copying the whole cache.

Transformers' ``DynamicLayer`` appends each step's keys and values with
``torch.cat``, which copies every cached column, so a turn of ``n`` tokens over
a context of ``T`` copies about ``n × T`` columns per layer. A rollout's
contexts are long (the information blocks) and its turns short: on a CPU,
writing in place made the demo's greedy agent about 15% faster
(docs/results/rl.md, with the other changes of that table). :class:`GrowingLayer`
keeps the columns in a buffer with room to spare and returns views of its filled
part; the keys and values the model reads are the same, so the episodes are too.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import DynamicCache, DynamicLayer

SPARE = 0.25  # the share of room added when a buffer grows: each column is copied a few times at most, amortized
MIN_COLUMNS = 256


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` whose ``keys`` and ``values`` are views of buffers with spare columns."""

    def lazy_initialization(self, key_states: Any, value_states: Any) -> None:
        super().lazy_initialization(key_states, value_states)
        self.length = 0
        self._keys = self._values = None

    def _room_for(self, shape: tuple[int, ...]) -> None:
        """Buffers of at least ``length + shape[-2]`` columns, for rows and heads of ``shape``."""
        needed = self.length + shape[-2]
        if self._keys is not None and needed <= self._keys.shape[-2]:
            return
        columns = max(MIN_COLUMNS, needed + int(needed * SPARE))
        keys = torch.empty((*shape[:-2], columns, shape[-1]), dtype=self.dtype, device=self.device)
        values = torch.empty_like(keys)
        if self.length:
            keys[..., :self.length, :] = self.keys
            values[..., :self.length, :] = self.values
        self._keys, self._values = keys, values

    def _expose(self) -> None:
        self.keys, self.values = self._keys[..., :self.length, :], self._values[..., :self.length, :]

    def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        new = key_states.shape[-2]
        self._room_for(tuple(key_states.shape))
        self._keys[..., self.length:self.length + new, :] = key_states
        self._values[..., self.length:self.length + new, :] = value_states
        self.length += new
        self._expose()
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length if self.is_initialized else 0

    def crop(self, tokens_to_remove: int) -> None:
        super().crop(tokens_to_remove)  # checks the argument and cuts the views
        if self.is_initialized:
            self.length = self.keys.shape[-2]

    def batch_select_indices(self, indices: Any) -> None:
        if self.get_seq_length() > 0:
            self._keys, self._values = self._keys[indices], self._values[indices]
            self._expose()

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.get_seq_length() > 0:
            self._keys = self._keys.repeat_interleave(repeats, dim=0)
            self._values = self._values.repeat_interleave(repeats, dim=0)
            self._expose()

    def reorder_cache(self, beam_idx: Any) -> None:
        self.batch_select_indices(beam_idx.to(self.device))


def growing_cache(model: Any) -> DynamicCache | None:
    """An empty cache of :class:`GrowingLayer` for ``model``, or None where its layers are not plain
    ``DynamicLayer`` (a sliding window, a recurrent state): there ``generate`` makes its own."""
    config = getattr(model, "config", None)
    if config is None:
        return None
    cache = DynamicCache(config=config)
    if not cache.layers or any(type(layer) is not DynamicLayer for layer in cache.layers):
        return None
    cache.layers = [GrowingLayer() for _ in cache.layers]
    return cache
