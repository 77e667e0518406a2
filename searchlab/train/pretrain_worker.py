"""One pretraining worker process: ``python -m searchlab.train.pretrain_worker JOB_FILE``, started by
:func:`searchlab.train.base.build_base` under ``accelerate launch``; only the main process writes."""

from __future__ import annotations

import json
import sys

from searchlab.model import load_model
from searchlab.train.base import PretrainJob
from searchlab.train.launch import run_job
from searchlab.train.pretrain import pretrain_lm


def main(job: PretrainJob) -> None:
    """Pretrain the model at ``job.start`` into ``job.out_dir``; the main process writes the figures."""
    params = job.model
    model, tokenizer = load_model(str(job.start), params.trust_remote_code, params.dtype, device="cpu")
    figures = pretrain_lm(params.tiny.pretrain, params.tiny.seed, model, tokenizer, job.corpus, job.out_dir,
                          job.checkpoint_dir)
    if figures is not None:
        job.result.write_text(json.dumps(figures))


if __name__ == "__main__":
    run_job(main, sys.argv[1], PretrainJob)
