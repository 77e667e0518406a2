"""What every searchlab training run shares: Trainer settings for exact resume and the device, and the figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def trainer_settings(checkpoint_dir: Path, seed: int, save_steps: int, logging_steps: int) -> dict[str, Any]:
    """Keyword arguments for ``SFTConfig`` that SFT and pretraining share.

    Checkpoints keep optimizer, scheduler and RNG states (what makes a resume
    exact), the two newest are kept; bf16 mixed precision on GPUs that have it.
    Gradient checkpointing (TRL's default) saves GPU memory on a real model; on
    a CPU, which trains the tiny model, it only recomputes the forward pass.
    """
    import torch

    cuda = torch.cuda.is_available()
    return dict(
        output_dir=str(checkpoint_dir), seed=seed, data_seed=seed, report_to=[], lr_scheduler_type="cosine",
        save_steps=save_steps, save_total_limit=2, save_only_model=False, logging_steps=logging_steps,
        bf16=cuda and torch.cuda.is_bf16_supported(), use_cpu=not cuda, dataloader_num_workers=0,
        gradient_checkpointing=cuda,
        include_num_input_tokens_seen="non_padding",
    )


def resume_point(checkpoint_dir: Path) -> str | None:
    """The newest checkpoint in ``checkpoint_dir`` (created if missing), or None to start afresh."""
    from transformers.trainer_utils import get_last_checkpoint

    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    return get_last_checkpoint(str(checkpoint_dir))


def tokens_seen(checkpoint: str | None) -> int:
    """Tokens trained on up to ``checkpoint`` (read before training: rotation may delete it), for an honest tokens/s."""
    if not checkpoint:
        return 0
    return json.loads((Path(checkpoint) / "trainer_state.json").read_text()).get("num_input_tokens_seen", 0)


def run_figures(trainer, resume: str | None, tokens_before: int, seconds: float) -> dict[str, Any]:
    """Steps, the step resumed from, wall seconds and trained tokens/s of this process's part of the run."""
    return {"steps": trainer.state.global_step,
            "resumed_from_step": int(Path(resume).name.split("-")[-1]) if resume else 0,
            "train_seconds": round(seconds, 2),
            "tokens_per_s": round((trainer.state.num_input_tokens_seen - tokens_before) / seconds, 1)}


MEGA_BATCH = 4  # batches whose examples are sorted by length together


def make_trainer(seed: int, **kwargs):
    """TRL's ``SFTTrainer`` with a mildly length-grouped training order drawn from ``seed`` and the epoch alone.

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
    ``seed + e`` (accelerate's data loader calls ``set_epoch`` every epoch).

    On a CPU the loss is the model's own cross-entropy on the labels. TRL's
    default, a fused LM head that computes log-probabilities, entropy and top-1
    accuracy tile by tile, spares a GPU the logits of a 150k-token vocabulary
    but is pure overhead for the tiny model: it took half of every step
    (measured: pretraining ran twice as fast without it and without
    gradient checkpointing, with the same loss).
    """
    import torch
    import transformers
    from transformers.trainer_pt_utils import (
        LengthGroupedSampler,
        get_length_grouped_indices,
    )
    from trl import SFTTrainer

    class EpochSeededLengthGroupedSampler(LengthGroupedSampler):
        def set_epoch(self, epoch: int) -> None:
            self.generator = torch.Generator().manual_seed(seed + epoch)

        def __iter__(self):
            return iter(get_length_grouped_indices(self.lengths, self.batch_size, MEGA_BATCH, self.generator))

    class Trainer(SFTTrainer):
        def _get_train_sampler(self, train_dataset=None):
            sampler = super()._get_train_sampler(train_dataset)
            if type(sampler) is not LengthGroupedSampler:
                return sampler
            seeded = EpochSeededLengthGroupedSampler(sampler.batch_size, lengths=sampler.lengths)
            seeded.set_epoch(0)
            return seeded

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            if self.args.use_cpu:
                return transformers.Trainer.compute_loss(self, model, inputs, return_outputs, num_items_in_batch)
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)

    return Trainer(**kwargs)
