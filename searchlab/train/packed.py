"""Padding-free training batches on a CPU: a batch's rows joined into one sequence, attention kept within each row.

The length-grouped order (:func:`searchlab.train.common.make_sft_trainer`) sorts
only a few batches at a time, so a padded batch of the demo's demonstrations
is 12.5% padding, and its attention needs a mask, which keeps PyTorch off its
causal kernel. TRL's padding-free collator (``padding_free=True``) joins the
rows of a batch into one sequence and passes where each row starts
(``cu_seq_lens_q``); flash attention reads those boundaries on a GPU, and
:func:`packed_sdpa` does on a CPU, with PyTorch's causal attention row by row.
The loss is the same (position ids restart with each row); the step is
cheaper (measured: docs/results/demo-cost.md). Pretraining's batches stay
padded: 32 short rows attended one by one made the base stage slower.
"""

from __future__ import annotations

PACKED_SDPA = "sdpa_packed"  # the attention implementation's registered name


def packed_sdpa(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None,
                **kwargs):
    """Attention for transformers' attention interface: causal within each row of a joined sequence.

    Inputs without row boundaries (an evaluation outside training, a
    generation) go to transformers' own SDPA attention with their mask
    (:func:`padding_mask`).
    """
    import torch
    from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

    bounds = kwargs.get("cu_seq_lens_q")
    if bounds is None or query.shape[0] != 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    groups = getattr(module, "num_key_value_groups", 1)
    key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    # split, not a slice per row: a slice's gradient is a zero tensor of the whole sequence with the row's part
    # filled in, one per row, then summed; split's is one concatenation (sft about 5% faster, the same bits)
    lengths = (bounds[1:] - bounds[:-1]).tolist()
    rows = [torch.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True,
                                                             scale=scaling)
            for q, k, v in zip(query.split(lengths, 2), key.split(lengths, 2), value.split(lengths, 2)) if q.shape[2]]
    return torch.cat(rows, dim=2).transpose(1, 2).contiguous(), None


def padding_mask(attention_mask=None, **kwargs):
    """The attention mask for transformers' mask interface: ``sdpa``'s where the inputs have a padding mask, none
    where they have not (joined rows: :func:`packed_sdpa` keeps each row to itself without one, and building the
    block-diagonal mask took 3.5% of an sft step)."""
    from transformers.masking_utils import sdpa_mask

    return None if attention_mask is None else sdpa_mask(attention_mask=attention_mask, **kwargs)


def padding_free_batches(max_length: int) -> dict:
    """``SFTConfig`` keywords for sft's batches: padding-free on a CPU, padded to their longest row on a GPU. TRL
    does not cut padding-free rows, so the examples must already end at ``max_length`` tokens."""
    import torch

    padding_free = not torch.cuda.is_available()
    return dict(padding_free=padding_free, max_length=None if padding_free else max_length)


def attend_within_rows(model) -> None:
    """Make ``model`` (a transformers model) attend with :func:`packed_sdpa`, registered once."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    AttentionInterface.register(PACKED_SDPA, packed_sdpa)
    AttentionMaskInterface.register(PACKED_SDPA, padding_mask)
    model.set_attn_implementation(PACKED_SDPA)
