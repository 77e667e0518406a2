"""The trainer of sft and pretraining: TRL's ``SFTTrainer`` with a seeded length-grouped order and, on a CPU, the
LM head run on the labeled positions only. Imported when a trainer is made (it loads TRL):
:func:`searchlab.train.common.make_sft_trainer`."""

from __future__ import annotations

import torch
import transformers
from transformers.trainer_pt_utils import LengthGroupedSampler, get_length_grouped_indices
from trl import SFTTrainer

from searchlab.train.lm_head import labeled_loss, plain_head_applies

MEGA_BATCH = 4  # batches whose examples are sorted by length together
# what labeled_loss reads: all a batch holds, padded or padding-free (the rows' boundaries)
LOSS_INPUTS = {"input_ids", "attention_mask", "position_ids", "labels", "cu_seq_lens_q", "cu_seq_lens_k",
               "max_length_q", "max_length_k", "seq_idx"}


class EpochSeededLengthGroupedSampler(LengthGroupedSampler):
    """The Trainer's length-grouped sampler, ``MEGA_BATCH`` batches sorted together, epoch ``e`` drawn from
    ``seed + e``."""

    def __init__(self, batch_size: int, lengths: list[int], seed: int) -> None:
        super().__init__(batch_size, lengths=lengths)
        self.seed = seed

    def set_epoch(self, epoch: int) -> None:
        self.generator = torch.Generator().manual_seed(self.seed + epoch)

    def __iter__(self):
        return iter(get_length_grouped_indices(self.lengths, self.batch_size, MEGA_BATCH, self.generator))


class SeededSFTTrainer(SFTTrainer):
    """TRL's ``SFTTrainer`` with a mildly length-grouped training order drawn from ``order_seed`` and the epoch
    alone.

    The Trainer groups by length over 50 batches at a time: every batch then
    holds examples of one length, which on this data are examples of one kind,
    and the tiny model learned far less from such batches (an induction head
    that forms in 750 steps of random batches did not form at all). Sorting
    only ``MEGA_BATCH`` random batches at a time keeps most of the randomness
    and still saves most of the padding.

    The Trainer's own length-grouped sampler draws each epoch's order from the
    global random state as it is when the epoch starts. A run resumed in a later
    epoch restores that state only after the epoch began, so it would see the
    epoch in another order than the run it continues, and end with another
    model. Here epoch ``e``'s order is drawn from a generator seeded with
    ``order_seed + e`` (accelerate's data loader calls ``set_epoch`` every epoch).

    On a CPU the loss is the model's own cross-entropy on the labels, with the
    LM head run on the labeled positions only (:func:`searchlab.train.lm_head.labeled_loss`:
    the demonstrations' prompts and information blocks are most of their tokens).
    TRL's default, a fused LM head that computes log-probabilities, entropy and
    top-1 accuracy tile by tile, spares a GPU the logits of a 150k-token
    vocabulary but is pure overhead for the tiny model: it took half of every
    step (measured: pretraining ran twice as fast without it and without
    gradient checkpointing, with the same loss).

    Padding-free batches (``args.padding_free``: sft's on a CPU) make the
    model attend within each joined row (:mod:`searchlab.train.packed`).
    """

    def __init__(self, *args, order_seed: int, **kwargs) -> None:
        self.order_seed = order_seed
        super().__init__(*args, **kwargs)

    def _get_train_sampler(self, train_dataset=None):
        sampler = super()._get_train_sampler(train_dataset)
        if type(sampler) is not LengthGroupedSampler:
            return sampler
        seeded = EpochSeededLengthGroupedSampler(sampler.batch_size, sampler.lengths, self.order_seed)
        seeded.set_epoch(0)
        return seeded

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if not self.args.use_cpu:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        if (return_outputs or model is not self.accelerator.unwrap_model(model) or not plain_head_applies(model)
                or not set(inputs) <= LOSS_INPUTS):
            return transformers.Trainer.compute_loss(self, model, inputs, return_outputs, num_items_in_batch)
        # the Trainer divides a model's loss by the accumulation steps itself unless the model takes the count;
        # the backbone is called past the forward that accelerate wrapped in autocast, so autocast is entered here
        with self.accelerator.autocast():
            return labeled_loss(model, inputs, num_items_in_batch if self.model_accepts_loss_kwargs else None)
