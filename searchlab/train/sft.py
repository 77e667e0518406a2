"""Supervised fine-tuning on demonstrations: TRL's ``SFTTrainer``, loss only on the agent's own tokens.

A demonstration is ``prompt`` + ``completion`` in the agent protocol
(:mod:`searchlab.agent.protocol`). :func:`encode_demo` tokenizes it the way a
live rollout sees it (the prompt as :func:`~searchlab.agent.text.encode_prompt`
encodes it, then model text and environment insertions as separate pieces) and
labels only the model's pieces: the prompt and every ``<information>`` block
are ``-100``. :func:`train_sft` trains with checkpoints in ``checkpoint_dir``;
called again after a crash it resumes from the last checkpoint (weights,
optimizer, scheduler, RNG states and data position, as the Trainer saves them).
:func:`run_sft` runs it under ``accelerate launch`` (one process per device).
"""

from __future__ import annotations

from pathlib import Path
from typing import get_args

from searchlab.agent.protocol import environment_spans
from searchlab.agent.text import chat_prompt, encode_completion, encode_prompt
from searchlab.jsonl import read_jsonl
from searchlab.params import ModelParams
from searchlab.questions.record import Bucket, read_questions
from searchlab.train.config import SFTParams
from searchlab.train.common import (
    ProgressLog,
    make_sft_trainer,
    peft_config,
    resume_point,
    train_and_save,
    trainer_settings,
)
from searchlab.train.launch import Job, launch
from searchlab.train.lm_head import IGNORE
from searchlab.train.packed import padding_free_batches
from searchlab.train.renaming import corpus_titles, rename_demos

SFT_PROGRESS = {"loss": "loss", "eval loss": "eval_loss"}  # the console's line: label -> logged metric


def encode_demo(tokenizer, prompt: str, completion: str, max_length: int) -> dict[str, list[int]]:
    """``{"input_ids", "labels"}`` for one demonstration; labels are ``-100`` on the prompt and environment text.

    ``prompt`` is the user message (the demonstrations store the bare
    instruction); it goes through the tokenizer's chat template where it has one
    (:func:`~searchlab.agent.text.chat_prompt`), as live rollouts prompt.
    The completion ends with the tokenizer's EOS (learned, so the agent stops
    after its answer; an instruct model's end of turn). Longer examples keep
    their start, up to ``max_length``.
    """
    ids = encode_prompt(tokenizer, chat_prompt(tokenizer, prompt))
    labels = [IGNORE] * len(ids)
    position = 0
    for start, end in environment_spans(completion) + [(len(completion), len(completion))]:
        own = encode_completion(tokenizer, completion[position:start]) if start > position else []
        inserted = encode_completion(tokenizer, completion[start:end]) if end > start else []
        ids += own + inserted
        labels += own + [IGNORE] * len(inserted)
        position = end
    ids.append(tokenizer.eos_token_id)
    labels.append(tokenizer.eos_token_id)
    return {"input_ids": ids[:max_length], "labels": labels[:max_length]}


def demo_buckets(demos_jsonl: Path) -> dict[str, str]:
    """``{question id: difficulty bucket}`` of the demonstrations' questions (the qa stage's train and dev files
    beside ``demos_jsonl``)."""
    folder = demos_jsonl.parent
    return {q.id: q.bucket for name in ("train.jsonl", "dev.jsonl") if (folder / name).is_file()
            for q in read_questions(folder / name)}


def demo_datasets(tokenizer, demos_jsonl: Path, max_length: int, renamed_copies: int = 0,
                  corpus_jsonl: Path | None = None, seed: int = 0, buckets: list[str] | None = None):
    """(train, dev) ``datasets.Dataset`` of encoded demonstrations, split by the demos' ``split`` field.

    The training set gets ``renamed_copies`` more copies of each demonstration
    with the titles of ``corpus_jsonl``'s passages swapped (:mod:`searchlab.train.renaming`).
    ``buckets``: keep only the demonstrations of questions in these difficulty
    buckets (:func:`demo_buckets`); None keeps all.
    """
    from datasets import Dataset

    bucket_of = demo_buckets(demos_jsonl) if buckets is not None else {}
    demos = {"train": [], "dev": []}
    for d in read_jsonl(demos_jsonl):
        if buckets is None or bucket_of.get(d["id"]) in buckets:
            demos["dev" if d["split"] == "dev" else "train"].append(d)
    if not demos["train"]:
        raise ValueError(f"{demos_jsonl}: no training demonstrations" +
                         (f" in sft.buckets {buckets}" if buckets is not None else ""))
    if renamed_copies:
        if corpus_jsonl is None:
            raise ValueError("sft.renamed_copies needs the corpus, whose passage titles are swapped")
        demos["train"] += rename_demos(demos["train"], corpus_titles(corpus_jsonl), renamed_copies, seed)

    def encoded(split: str):
        return [encode_demo(tokenizer, d["prompt"], d["completion"], max_length) for d in demos[split]]

    return Dataset.from_list(encoded("train")), Dataset.from_list(encoded("dev")) if demos["dev"] else None


class SFTJob(Job):
    """An sft training job (:func:`run_sft`; its worker is :mod:`searchlab.train.sft_worker`): :func:`train_sft` of
    the model at ``start`` on the demonstrations of ``demos``."""

    model: ModelParams
    sft: SFTParams
    start: str  # the base stage's model (searchlab.train.base.start_model): a folder or a checkpoint's name
    demos: Path
    out_dir: Path
    work_dir: Path  # the job file and the checkpoints (checkpoint_dir): a rerun resumes from them
    corpus: Path | None = None  # corpus.jsonl, whose passage titles serve sft.renamed_copies

    @property
    def checkpoint_dir(self) -> Path:
        return self.work_dir / "checkpoints"


def run_sft(job: SFTJob, accelerate_config: str | None = None) -> dict:
    """:func:`train_sft` of ``job`` in ``job.sft.num_processes`` processes under ``accelerate launch``.

    Checkpoints go to ``job.work_dir`` (a rerun resumes from them); returns the figures of :func:`train_sft`.
    """
    return launch("searchlab.train.sft_worker", job, job.work_dir, job.sft.num_processes, accelerate_config)


def train_sft(params: SFTParams, model, tokenizer, demos_jsonl: Path, out_dir: Path, checkpoint_dir: Path,
              callbacks: list | None = None, corpus_jsonl: Path | None = None) -> dict | None:
    """Fine-tune ``model`` on the demonstrations, save it with its tokenizer to ``out_dir``; return the figures.

    Resumes from the newest checkpoint in ``checkpoint_dir`` if there is one.
    ``corpus_jsonl`` gives the titles for ``params.renamed_copies``. Writes
    ``out_dir/train_log.jsonl`` (the Trainer's log history: loss, learning
    rate, eval loss by step) for the caller to chart. In a
    multi-process run only the main process writes and returns figures; the
    others return None.
    """
    from trl import SFTConfig

    every = set(params.buckets) == set(get_args(Bucket))
    train, dev = demo_datasets(tokenizer, demos_jsonl, params.max_length, params.renamed_copies, corpus_jsonl,
                               params.seed, None if every else params.buckets)
    resume = resume_point(checkpoint_dir)
    args = SFTConfig(
        **trainer_settings(checkpoint_dir, params.seed, params.save_steps, params.logging_steps,
                           params.activation_checkpointing, params.cpu_bf16),
        num_train_epochs=params.epochs, max_steps=params.max_steps,
        per_device_train_batch_size=params.batch_size, per_device_eval_batch_size=params.batch_size,
        gradient_accumulation_steps=params.grad_accum, learning_rate=params.learning_rate,
        warmup_steps=params.warmup_ratio,  # a float < 1: a share of all steps
        weight_decay=params.weight_decay, eval_strategy="steps" if dev is not None else "no",
        eval_steps=params.eval_steps,
        # batches of similar lengths: demonstrations range from one search to four, and padding is wasted compute
        train_sampling_strategy="group_by_length", **padding_free_batches(params.max_length),  # encode_demo cuts
    )
    trainer = make_sft_trainer(params.seed, model=model, args=args, train_dataset=train, eval_dataset=dev,
                               processing_class=tokenizer, peft_config=peft_config(params.lora),
                               callbacks=[ProgressLog("sft: step", SFT_PROGRESS).callback, *(callbacks or [])])
    trainable = sum(t.numel() for t in trainer.model.parameters() if t.requires_grad)
    trained = train_and_save(trainer, tokenizer, resume, out_dir)
    if trained is None:  # not the main process
        return None
    run, result = trained
    evals = [row["eval_loss"] for row in trainer.state.log_history if "eval_loss" in row]
    figures = {**run, "train_examples": len(train),
               "dev_examples": len(dev) if dev is not None else 0, "train_loss": round(result.training_loss, 4),
               "parameters": sum(t.numel() for t in model.parameters()),
               "trainable_parameters": trainable}
    if evals:
        figures["eval_loss"] = round(evals[-1], 4)
    return figures
