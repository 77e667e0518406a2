"""The growing KV cache holds what transformers' own holds, writes in place, and serves a real model's generate."""

import torch
from transformers.cache_utils import DynamicLayer

from searchlab.agent.kv_cache import MIN_COLUMNS, GrowingLayer, growing_cache


def test_a_growing_layer_holds_the_same_keys_and_values_as_a_dynamic_layer_through_updates_and_row_selections():
    torch.manual_seed(0)
    growing, dynamic = GrowingLayer(), DynamicLayer()
    rows = 5
    for step, new in enumerate([300, 1, 1, 40, 1, 200, 1]):  # a prefill, decode steps, blocks: past the first room
        keys, values = torch.randn(rows, 2, new, 8), torch.randn(rows, 2, new, 8)
        got, expected = growing.update(keys, values), dynamic.update(keys, values)
        assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])
        assert growing.get_seq_length() == dynamic.get_seq_length()
        if step == 3:  # rows leave the batch
            kept = torch.tensor([0, 2, 4])
            growing.batch_select_indices(kept)
            dynamic.batch_select_indices(kept)
            rows = 3
            assert torch.equal(growing.keys, dynamic.keys) and torch.equal(growing.values, dynamic.values)
    growing.crop(-10)
    dynamic.crop(-10)
    assert torch.equal(growing.keys, dynamic.keys) and growing.get_seq_length() == dynamic.get_seq_length()
    growing.batch_repeat_interleave(2)
    dynamic.batch_repeat_interleave(2)
    keys, values = torch.randn(6, 2, 3, 8), torch.randn(6, 2, 3, 8)
    got, expected = growing.update(keys, values), dynamic.update(keys, values)
    assert torch.equal(got[0], expected[0]) and torch.equal(got[1], expected[1])


def test_a_decode_step_writes_into_the_buffer_rather_than_copying_it():
    layer = GrowingLayer()
    layer.update(torch.randn(2, 2, 10, 8), torch.randn(2, 2, 10, 8))
    buffer = layer.keys.data_ptr()
    for _ in range(MIN_COLUMNS - 10):
        layer.update(torch.randn(2, 2, 1, 8), torch.randn(2, 2, 1, 8))
    assert layer.keys.data_ptr() == buffer  # the same storage: nothing copied while there was room
    layer.update(torch.randn(2, 2, 1, 8), torch.randn(2, 2, 1, 8))
    assert layer.keys.data_ptr() != buffer and layer.get_seq_length() == MIN_COLUMNS + 1  # then it grew


def test_generate_with_a_growing_cache_gives_the_tokens_of_generate_with_its_own(model, tok):
    ids = torch.tensor([tok("Who discovered penicillin? Doc 1 Fleming")["input_ids"]] * 3)
    cache = growing_cache(model)
    assert cache is not None and all(isinstance(layer, GrowingLayer) for layer in cache.layers)
    with torch.inference_mode():
        own = model.generate(input_ids=ids, do_sample=False, max_new_tokens=20, min_new_tokens=20,
                             pad_token_id=tok.pad_token_id)
        grown = model.generate(input_ids=ids, do_sample=False, max_new_tokens=20, min_new_tokens=20,
                               pad_token_id=tok.pad_token_id, past_key_values=cache)
    assert torch.equal(own, grown) and cache.get_seq_length() == own.shape[1] - 1
