"""What every searchlab training run shares: Trainer settings for exact resume and the device, and the figures."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("searchlab.train")


def trainer_settings(checkpoint_dir: Path, seed: int, save_steps: int, logging_steps: int,
                     activation_checkpointing: bool | None = None, cpu_bf16: bool = False) -> dict[str, Any]:
    """Keyword arguments for ``SFTConfig`` that SFT and pretraining share.

    Checkpoints keep optimizer, scheduler and RNG states (what makes a resume
    exact), the two newest are kept; bf16 mixed precision on GPUs that have it, and on a CPU with ``cpu_bf16``
    (autocast: weights and optimizer stay float32).
    Activation (gradient) checkpointing (TRL's default; ``activation_checkpointing`` None)
    saves GPU memory on a real model; on a CPU it is off unless asked for, as
    it only recomputes the forward pass there.
    """
    import torch

    cuda = torch.cuda.is_available()
    return dict(
        output_dir=str(checkpoint_dir), seed=seed, data_seed=seed, report_to=[], lr_scheduler_type="cosine",
        save_steps=save_steps, save_total_limit=2, save_only_model=False, logging_steps=logging_steps,
        bf16=torch.cuda.is_bf16_supported() if cuda else cpu_bf16, use_cpu=not cuda, dataloader_num_workers=0,
        activation_checkpointing=cuda if activation_checkpointing is None else activation_checkpointing,
        include_num_input_tokens_seen="non_padding",
    )


class ProgressLog:
    """The console's view of a training run: one line ``<what> k/N  <figures>  (s/step, ETA)`` about ``lines``
    times per run, in place of the Trainer's progress bar and printed log dicts (:func:`quiet_console`).

    ``shown`` maps a label to a logged metric; a log record holding the first one is a step's (RL's ``reward``,
    SFT's ``loss``). ``total`` defaults to the Trainer's ``max_steps``. ``callback`` is the TrainerCallback.
    """

    def __init__(self, what: str, shown: dict[str, str], total: int | None = None, lines: int = 20) -> None:
        from transformers import TrainerCallback

        self.what, self.shown, self.total, self.lines = what, shown, total, lines
        self.started, self.first, self.due = 0.0, None, 0
        self.latest: dict = {}
        parent, trigger = self, next(iter(shown.values()))

        class Callback(TrainerCallback):
            def on_train_begin(self, args, state, control, **kwargs):
                parent.total = parent.total or state.max_steps

            def on_log(self, args, state, control, logs=None, **kwargs):  # after the step's metrics are in
                parent.latest.update(logs or {})
                if trigger in (logs or {}):
                    parent.step(state.global_step)

        self.callback = Callback()

    def step(self, done: int) -> None:
        """Log the line for ``done`` steps if one is due (and always at the last step)."""
        now = time.perf_counter()
        if self.first is None:  # the rate counts from here: not the start-up, not the steps before a resume
            self.first, self.started, self.due = done, now, done
        if done < self.due and done != self.total:
            return
        self.due = done + max(1, (self.total or 0) // self.lines)
        # a figure not logged yet (the first eval loss), or logged as None (a step whose rows were all fillers): -
        figures = "  ".join(f"{label} {_shown(self.latest.get(key))}" for label, key in self.shown.items())
        if done == self.first:
            log.info("%s %d/%d  %s", self.what, done, self.total or done, figures)
            return
        rate = (now - self.started) / (done - self.first)
        eta = rate * max((self.total or done) - done, 0)
        log.info("%s %d/%d  %s  (%.1f s/step, ETA %d:%02d)", self.what, done, self.total or done, figures, rate,
                 eta // 60, eta % 60)


def quiet_console(trainer) -> None:
    """Take the Trainer's own console output away (a tqdm bar, and a printed dict per log record, hundreds in a
    demo): a :class:`ProgressLog` line says the same in one line per phase, and ``train_log.jsonl`` keeps it all."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    trainer.remove_callback(ProgressCallback)
    trainer.remove_callback(PrinterCallback)


def peft_config(lora) -> Any:
    """TRL's ``peft_config`` for ``lora`` (a :class:`searchlab.config.LoraParams`): a causal-LM ``LoraConfig``, or
    None when LoRA is off (full fine-tuning)."""
    if not lora.enabled:
        return None
    from peft import LoraConfig

    return LoraConfig(task_type="CAUSAL_LM", r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                      target_modules=lora.target_modules)


def save_trained(trainer, out_dir: Path) -> None:
    """Save the trained model to ``out_dir`` as a plain Hugging Face folder, from the main process only.

    A LoRA run's adapters are merged into the weights first: downstream stages
    (RL, evaluation, the registry) load an ordinary checkpoint, whichever way it
    was trained. The Trainer's ``training_args.bin`` is left out: it pickles the
    run's absolute paths, so it would make two runs of the same training differ,
    and nothing loads it (the params say how the model was trained).
    """
    model = trainer.accelerator.unwrap_model(trainer.model)
    if not hasattr(model, "merge_and_unload"):
        trainer.save_model(str(out_dir))
    elif trainer.is_world_process_zero():
        model.merge_and_unload().save_pretrained(str(out_dir))
    if trainer.is_world_process_zero():
        (out_dir / "training_args.bin").unlink(missing_ok=True)


def content_log(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Trainer's log history without its speed fields (``train_runtime``, ``eval_samples_per_second``, TRL's
    ``step_time``...): two runs of the same training then log the same bytes; the run's speed is in the stage's
    build record (``train_seconds``, ``tokens_per_s``)."""
    def is_speed(key: str) -> bool:
        return key.endswith(("_runtime", "_per_second")) or key == "step_time"

    return [{k: v for k, v in row.items() if not is_speed(k)} for row in history]


# what the Trainer can load a checkpoint's model from: full or sharded weights, LoRA adapters, or the states
# FSDP (``pytorch_model_fsdp*``) and DeepSpeed (``global_step*``) save instead
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json", "adapter_model.safetensors", "adapter_model.bin")
WEIGHT_PREFIXES = ("pytorch_model_fsdp", "global_step")


def complete_checkpoint(folder: Path) -> bool:
    """Whether the Trainer finished writing checkpoint ``folder``: its model weights and a readable trainer_state.json.

    The Trainer writes ``trainer_state.json`` last, after the weights,
    optimizer, scheduler and RNG states, so a kill or a full disk during a
    save leaves it missing or cut short; resuming from such a folder fails.
    """
    try:
        json.loads((folder / "trainer_state.json").read_text())
        return any((folder / name).exists() for name in WEIGHT_FILES) or any(
            entry.name.startswith(WEIGHT_PREFIXES) for entry in folder.iterdir())
    except (OSError, ValueError):  # OSError also when another process deletes the folder as we look
        return False


def resume_point(checkpoint_dir: Path) -> str | None:
    """The newest complete checkpoint in ``checkpoint_dir`` (created if missing), or None to start afresh.

    Incomplete ``checkpoint-N`` folders (see :func:`complete_checkpoint`) are
    deleted, with a warning, by the main process: resuming from one fails on
    every rerun, and Trainer's rotation would count it among the checkpoints
    it keeps.
    """
    from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    steps = {}
    for folder in checkpoint_dir.glob(f"{PREFIX_CHECKPOINT_DIR}-*"):
        step = folder.name.removeprefix(f"{PREFIX_CHECKPOINT_DIR}-")
        if step.isdigit() and folder.is_dir():
            steps[folder] = int(step)
    complete = [folder for folder in steps if complete_checkpoint(folder)]
    # every process looks, the main one deletes; RANK, not accelerate's state, which would start the process
    # group before the Trainer's arguments set its backend and timeout
    if os.environ.get("RANK", "0") == "0":
        for folder in sorted(steps.keys() - set(complete)):
            log.warning("deleting incomplete checkpoint %s: its save was cut short (killed, or the disk full); "
                        "training resumes from the newest complete checkpoint, if any", folder)
            shutil.rmtree(folder, ignore_errors=True)
    return str(max(complete, key=steps.get)) if complete else None


def tokens_seen(checkpoint: str | None) -> int:
    """Tokens trained on up to ``checkpoint`` (read before training: rotation may delete it), for an honest tokens/s."""
    if not checkpoint:
        return 0
    return json.loads((Path(checkpoint) / "trainer_state.json").read_text()).get("num_input_tokens_seen", 0)


def train_and_save(trainer, tokenizer, resume: str | None, out_dir: Path) -> tuple[dict[str, Any], Any] | None:
    """Train from checkpoint ``resume`` (None: afresh) and save the model to ``out_dir`` (:func:`save_trained`);
    the main process also saves the tokenizer and ``train_log.jsonl`` (the Trainer's log history) there.

    Returns ``(figures, result)`` on the main process: :func:`run_figures` of the run and what
    ``trainer.train`` returned; None on the others.
    """
    from searchlab.jsonl import write_jsonl

    tokens_before, started = tokens_seen(resume), time.perf_counter()
    quiet_console(trainer)
    result = trainer.train(resume_from_checkpoint=resume)
    seconds = time.perf_counter() - started
    save_trained(trainer, out_dir)
    if not trainer.is_world_process_zero():
        return None
    tokenizer.save_pretrained(str(out_dir))
    write_jsonl(out_dir / "train_log.jsonl", content_log(trainer.state.log_history))
    return run_figures(trainer, resume, tokens_before, seconds), result


def run_figures(trainer, resume: str | None, tokens_before: int, seconds: float) -> dict[str, Any]:
    """Steps, the step resumed from, wall seconds and trained tokens/s of this process's part of the run."""
    return {"steps": trainer.state.global_step,
            "resumed_from_step": int(Path(resume).name.split("-")[-1]) if resume else 0,
            "train_seconds": round(seconds, 2),
            "tokens_per_s": round((trainer.state.num_input_tokens_seen - tokens_before) / seconds, 1)}


# TRL 1.16 reads transformers' deprecated ``model.is_gradient_checkpointing`` whenever it unwraps the policy for
# generation (``trl.models.utils``: every RL step, dev scoring), and PEFT when it wraps a model in LoRA adapters: a
# FutureWarning of theirs on every RL step. It is ignored by its exact message, from the module that raises it, and
# nothing else; tests/searchlab/rl/test_trl_private.py fails once the installed TRL no longer triggers it, so the
# filter goes then (after a look at PEFT's use).
TRL_DEPRECATION = (r"`is_gradient_checkpointing` is deprecated and will be removed in v6\. "
                   r"Use `is_activation_checkpointing` instead\.")
TRL_DEPRECATION_MODULE = r"transformers\.modeling_utils"


def ignore_trl_deprecation() -> None:
    """Ignore :data:`TRL_DEPRECATION` in this process (idempotent: the warnings module keeps one copy)."""
    import warnings

    warnings.filterwarnings("ignore", message=TRL_DEPRECATION, category=FutureWarning, module=TRL_DEPRECATION_MODULE)


#: transformers' line when the checkpoints it rotates were saved less than a second apart, which it reads as a
#: filesystem with fake modification times; it then orders them by step number, which is right. A small model saves
#: that fast on any filesystem, so the line alarms about nothing.
FAST_CHECKPOINTS = "mtime may not be reliable on this filesystem"


class FastCheckpointsFilter(logging.Filter):
    """Drops :data:`FAST_CHECKPOINTS` records."""

    def filter(self, record: logging.LogRecord) -> bool:
        return FAST_CHECKPOINTS not in record.getMessage()


def ignore_fast_checkpoints() -> None:
    """Drop :data:`FAST_CHECKPOINTS` from ``transformers.trainer_utils``'s log, and nothing else (idempotent)."""
    log_of = logging.getLogger("transformers.trainer_utils")
    if not any(isinstance(f, FastCheckpointsFilter) for f in log_of.filters):
        log_of.addFilter(FastCheckpointsFilter())


def make_sft_trainer(seed: int, **kwargs):
    """TRL's ``SFTTrainer`` (``kwargs``) with a mildly length-grouped training order drawn from ``seed`` and the epoch
    alone, the LM head run on the labeled positions only on a CPU, and padding-free rows attended within: see
    :class:`searchlab.train.sft_trainer.SeededSFTTrainer` for why."""
    from searchlab.train.packed import attend_within_rows
    from searchlab.train.sft_trainer import SeededSFTTrainer

    if getattr(kwargs["args"], "padding_free", False):
        attend_within_rows(kwargs["model"])
    ignore_trl_deprecation()
    ignore_fast_checkpoints()
    return SeededSFTTrainer(order_seed=seed, **kwargs)


def _shown(value) -> str:
    return "-" if value is None else f"{value:.3f}"
