"""One RL worker process: ``python -m searchlab.rl.worker JOB_FILE``, started by :func:`searchlab.rl.train.run_rl`.

Under ``accelerate launch`` every process runs this with its own retriever over
the index; only the main process writes the outputs.
"""

from __future__ import annotations

import json
import sys

from searchlab.model import load_model
from searchlab.retrieval import open_retriever
from searchlab.rl.train import RLJob, train_rl
from searchlab.train.launch import check_device, run_job


def main(job: RLJob) -> None:
    """GRPO from the policy at ``job.start``; the main process writes the figures to ``job.result``."""
    import torch

    rl = job.rl
    check_device(rl.use_vllm, "rl.use_vllm")
    if rl.threads and not torch.cuda.is_available():
        torch.set_num_threads(rl.threads)
    # on the CPU in full precision; the Trainer moves it to this rank's device and mixes precision itself
    model, tokenizer = load_model(str(job.start), job.model.trust_remote_code, job.model.dtype, device="cpu")
    with open_retriever(job.retriever, job.index) as retriever:
        figures = train_rl(job, model, tokenizer, retriever)
    if figures is not None:  # the main process
        job.result.write_text(json.dumps(figures))


if __name__ == "__main__":
    run_job(main, sys.argv[1], RLJob)
