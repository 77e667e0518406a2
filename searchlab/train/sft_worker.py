"""One SFT worker process: ``python -m searchlab.train.sft_worker JOB_FILE``, started by
:func:`searchlab.train.sft.run_sft`.

Under ``accelerate launch`` every process runs this; the Trainer finds its rank
and device from the environment accelerate sets, and only the main process
writes. The model it starts from is the base stage's (:mod:`searchlab.train.base`).
"""

from __future__ import annotations

import json
import sys

from searchlab.model import load_model
from searchlab.train.launch import run_job
from searchlab.train.sft import SFTJob, train_sft


def main(job: SFTJob) -> None:
    """Fine-tune the model at ``job.start``; the main process writes the figures to ``job.result``."""
    # loaded on the CPU ("auto": full precision there); the Trainer moves it to this rank's device and mixes
    # precision itself (bf16 autocast on GPUs that have it)
    model, tokenizer = load_model(job.start, job.model.trust_remote_code, job.model.dtype, device="cpu")
    figures = train_sft(job.sft, model, tokenizer, job.demos, job.out_dir, job.checkpoint_dir,
                        corpus_jsonl=job.corpus)
    if figures is not None:  # the main process
        job.result.write_text(json.dumps(figures))


if __name__ == "__main__":
    run_job(main, sys.argv[1], SFTJob)
