"""Pretraining of the tiny model before SFT: the corpus passages, and copy drills.

A model initialised from scratch knows no language at all. A real base model
(a Qwen2.5 checkpoint) arrives pretrained; the tiny one gets a short
pretraining instead, on two kinds of examples:

* the corpus passages, with the usual next-token loss: the names, and how the
  facts are phrased;
* *copy drills*: 3 to 12 random title words set inside passage text, a
  separator and more text, then the same words again, with the loss on the
  repeat only. An agent must copy names it has read (from the question into
  its query, from a passage into its answer); a small transformer does that
  with an *induction head* (find the earlier occurrence of the current token,
  copy what followed it), which on passages alone does not form within a
  laptop's budget. In a drill only induction predicts the repeat. The text
  around the words matters: drills that start every example with the words
  and repeat them right after a fixed separator are solved by position (copy
  the token as far from the start as I am from the separator), and that
  skill copies nothing anywhere else; random text before and between moves
  both copies, so only looking up the content works.

Examples are pre-tokenized with labels (``-100`` where no loss is taken), like
the SFT demonstrations, and trained with TRL's ``SFTTrainer``, resumable from
checkpoints like SFT.
"""

from __future__ import annotations

import random
from pathlib import Path

from searchlab.corpus.importers import split_contents
from searchlab.jsonl import iter_jsonl
from searchlab.params import TinyPretrainParams
from searchlab.train.common import ProgressLog, make_sft_trainer, resume_point, train_and_save, trainer_settings
from searchlab.train.lm_head import IGNORE

DRILL_WORDS = (3, 12)  # fewest and most words to copy in a drill
TEXT_BEFORE, TEXT_BETWEEN = 30, 15  # most words of passage text before the words, and between the two copies
SEPARATORS = (".", ".\n", ",", ";", " and", ":")


def title_words(passages: list[str]) -> list[str]:
    """The distinct words of the passages' titles, sorted: what drills and the copy probe draw from."""
    return sorted({word for contents in passages for word in split_contents(contents)[0].split()})


def copy_drills(passages: list[str], n: int, seed: int) -> list[tuple[str, str]]:
    """``n`` drills as (context, repeat) from passage contents; ``repeat`` is the title words the context holds.

    The context is a random stretch of passage text, the words, a separator and
    another stretch; each word of the repeat, like each in the context, starts
    with a space, so both copies are the same tokens.
    """
    rng = random.Random(seed)
    words = title_words(passages)
    texts = [text.split() for text in (split_contents(contents)[1] for contents in passages) if text.split()]

    def stretch(most: int) -> str:
        text = rng.choice(texts)
        start, length = rng.randrange(len(text)), rng.randint(0, most)
        return "".join(" " + word for word in text[start:start + length])

    drills = []
    for _ in range(n):
        listed = "".join(" " + word for word in rng.sample(words, min(rng.randint(*DRILL_WORDS), len(words))))
        drills.append((stretch(TEXT_BEFORE) + listed + rng.choice(SEPARATORS) + stretch(TEXT_BETWEEN), listed))
    return drills


def copy_accuracy(model, tokenizer, passages: list[str], seed: int, lists: int = 40, size: int = 8) -> float:
    """How much of a repeated list of title words ``model`` predicts: the measure of its copying skill.

    Each of ``lists`` lists holds ``size`` random title words inside a sentence
    unlike any drill, then the same words again; the score is the share of the
    repeat's tokens, after its first, that the model predicts greedily. An
    untrained model scores about 0, one with an induction head close to 1.
    """
    import torch

    rng = random.Random(seed)
    words = title_words(passages)
    hits = total = 0
    model.eval()
    for _ in range(lists):
        listed = "".join(" " + word for word in rng.sample(words, min(size, len(words))))
        context = tokenizer(" We met" + listed + ". Then, once more, we met", add_special_tokens=False)["input_ids"]
        repeat = tokenizer(listed, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logits = model(torch.tensor([context + repeat], device=model.device)).logits[0]
        predicted = logits[len(context):-1].argmax(-1).tolist()  # the prediction of each repeat token after the first
        hits += sum(p == t for p, t in zip(predicted, repeat[1:]))
        total += len(repeat) - 1
    return hits / total


def pretraining_examples(tokenizer, passages: list[str], params: TinyPretrainParams, seed: int) -> list[dict]:
    """Tokenized passage contents (loss on every token) and copy drills (loss on the repeat), shuffled with ``seed``."""
    def ids(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    eos, examples = tokenizer.eos_token_id, []
    for contents in passages:
        tokens = ids(contents)[:params.max_length - 1] + [eos]
        examples.append({"input_ids": tokens, "labels": tokens})
    for first, repeat in copy_drills(passages, params.copy_drills, seed):
        head, tail = ids(first), ids(repeat) + [eos]
        examples.append({"input_ids": head + tail, "labels": [IGNORE] * len(head) + tail})
    random.Random(seed).shuffle(examples)
    return examples


def pretrain_lm(params: TinyPretrainParams, seed: int, model, tokenizer, corpus_jsonl: Path, out_dir: Path,
                checkpoint_dir: Path) -> dict | None:
    """Pretrain ``model`` on :func:`pretraining_examples`, save it with its tokenizer and ``train_log.jsonl`` to
    ``out_dir`` (:func:`searchlab.train.common.train_and_save`); the figures.

    Resumes from the newest checkpoint in ``checkpoint_dir``. In a
    multi-process run only the main process saves and returns figures.
    """
    from datasets import Dataset
    from trl import SFTConfig

    passages = [record["contents"] for _, record in iter_jsonl(corpus_jsonl)]
    examples = Dataset.from_list(pretraining_examples(tokenizer, passages, params, seed))
    resume = resume_point(checkpoint_dir)
    args = SFTConfig(
        **{**trainer_settings(checkpoint_dir, seed, params.save_steps, logging_steps=20),
           # the copying skill forms late in the run; a decaying rate slowed it down (measured)
           "lr_scheduler_type": "constant_with_warmup"},
        num_train_epochs=params.epochs, per_device_train_batch_size=params.batch_size,
        learning_rate=params.learning_rate, warmup_steps=0.05, max_length=params.max_length,
        train_sampling_strategy="group_by_length",  # passages and drills differ in length
    )
    trainer = make_sft_trainer(seed, model=model, args=args, train_dataset=examples, processing_class=tokenizer,
                               callbacks=[ProgressLog("base: pretraining step", {"loss": "loss"}).callback])
    trained = train_and_save(trainer, tokenizer, resume, out_dir)
    if trained is None:  # not the main process
        return None
    figures, result = trained
    return {**figures, "examples": len(examples), "train_loss": round(result.training_loss, 4),
            "copy_accuracy": round(copy_accuracy(trainer.model, tokenizer, passages, seed), 4)}
