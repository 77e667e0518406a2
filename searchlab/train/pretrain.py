"""Pretraining of the tiny model before SFT: the corpus passages, and copy drills.

A model initialised from scratch knows no language at all. A real base model
(a Qwen2.5 checkpoint) arrives pretrained; the tiny one gets a short
pretraining instead, on two kinds of examples:

* the corpus passages, with the usual next-token loss: the names, and how the
  facts are phrased;
* *copy drills*: 3 to 12 random words from the passage titles, then the same
  words again, with the loss on the repeat only. An agent must copy names it
  has read (from the question into its query, from a passage into its
  answer); a small transformer does that with an *induction head* (find the
  earlier occurrence of the current token, copy what followed it), which on
  passages alone does not form within a laptop's budget. In a drill only
  induction predicts the repeat, and the varying length keeps the model from
  copying by a fixed offset instead.

Examples are pre-tokenized with labels (``-100`` where no loss is taken), like
the SFT demonstrations, and trained with TRL's ``SFTTrainer``, resumable from
checkpoints like SFT.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from searchlab.corpus.importers import split_contents
from searchlab.jsonl import iter_jsonl
from searchlab.params import TinyPretrainParams
from searchlab.train.common import (
    make_trainer,
    resume_point,
    run_figures,
    tokens_seen,
    trainer_settings,
)

IGNORE = -100
DRILL_WORDS = (3, 12)  # fewest and most words in a copy drill


def copy_drills(titles: list[str], n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` drills as (words, repeat): a random number (``DRILL_WORDS``) of random title words, twice."""
    rng = random.Random(seed)
    words = sorted({word for title in titles for word in title.split()})
    drills = []
    for _ in range(n):
        listed = " " + " ".join(rng.sample(words, min(rng.randint(*DRILL_WORDS), len(words))))
        drills.append((listed + ".\n", listed))  # both with a leading space: the same tokens twice
    return drills


def pretraining_examples(tokenizer, corpus_jsonl: Path, params: TinyPretrainParams, seed: int) -> list[dict]:
    """Tokenized passages (loss on every token) and copy drills (loss on the repeat), shuffled with ``seed``."""
    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    eos, examples, titles = tokenizer.eos_token_id, [], []
    for _, record in iter_jsonl(corpus_jsonl):
        titles.append(split_contents(record["contents"])[0])
        tokens = ids(record["contents"])[:params.max_length - 1] + [eos]
        examples.append({"input_ids": tokens, "labels": tokens})
    for first, repeat in copy_drills(titles, params.copy_drills, seed):
        head, tail = ids(first), ids(repeat) + [eos]
        examples.append({"input_ids": head + tail, "labels": [IGNORE] * len(head) + tail})
    random.Random(seed).shuffle(examples)
    return examples


def pretrain_lm(params: TinyPretrainParams, seed: int, model, tokenizer, corpus_jsonl: Path, out_dir: Path,
                checkpoint_dir: Path) -> dict | None:
    """Pretrain ``model`` on :func:`pretraining_examples`, save it with its tokenizer to ``out_dir``; the figures.

    Resumes from the newest checkpoint in ``checkpoint_dir``. In a
    multi-process run only the main process saves and returns figures.
    """
    from datasets import Dataset
    from trl import SFTConfig

    examples = Dataset.from_list(pretraining_examples(tokenizer, corpus_jsonl, params, seed))
    resume = resume_point(checkpoint_dir)
    args = SFTConfig(
        **trainer_settings(checkpoint_dir, seed, params.save_steps, logging_steps=20),
        num_train_epochs=params.epochs, per_device_train_batch_size=params.batch_size,
        learning_rate=params.learning_rate, warmup_steps=0.05, max_length=params.max_length,
        train_sampling_strategy="group_by_length",  # passages and drills differ in length
    )
    trainer = make_trainer(seed, model=model, args=args, train_dataset=examples, processing_class=tokenizer)
    tokens_before, started = tokens_seen(resume), time.perf_counter()
    result = trainer.train(resume_from_checkpoint=resume)
    seconds = time.perf_counter() - started
    trainer.save_model(str(out_dir))
    if not trainer.is_world_process_zero():
        return None
    tokenizer.save_pretrained(str(out_dir))
    return {**run_figures(trainer, resume, tokens_before, seconds), "examples": len(examples),
            "train_loss": round(result.training_loss, 4)}
