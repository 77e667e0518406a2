"""One pretraining worker process: ``python -m searchlab.train.pretrain_job JOB_FILE``, started by
:func:`searchlab.train.base.build_base` under ``accelerate launch``; only the main process writes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from searchlab.model import load_model
from searchlab.params import ModelParams
from searchlab.train.launch import run_job
from searchlab.train.pretrain import pretrain_lm


def main(job: dict) -> None:
    """Pretrain the model at ``job["start"]`` into ``job["out_dir"]``; the main process writes the figures."""
    params = ModelParams(**job["model"])
    model, tokenizer = load_model(job["start"], params.trust_remote_code, params.dtype, device="cpu")
    figures = pretrain_lm(params.tiny.pretrain, params.tiny.seed, model, tokenizer, Path(job["corpus"]),
                          Path(job["out_dir"]), Path(job["checkpoint_dir"]))
    if figures is not None:
        Path(job["result"]).write_text(json.dumps(figures))


if __name__ == "__main__":
    run_job(main, sys.argv[1])
