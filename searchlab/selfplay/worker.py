"""One self-play worker process: ``python -m searchlab.selfplay.worker JOB_FILE``, started by
:func:`searchlab.selfplay.train.run_selfplay`; every process opens its own retriever, the main one writes."""

from __future__ import annotations

import json
import sys

from searchlab.model import load_model
from searchlab.retrieval import open_retriever
from searchlab.selfplay.train import SelfPlayJob, train_selfplay
from searchlab.train.launch import check_device, run_job


def main(job: SelfPlayJob) -> None:
    """Self-play from the policy at ``job.start``; the main process writes the figures to ``job.result``."""
    import torch

    from searchlab.corpus.kb import KB

    model_params, selfplay = job.model, job.selfplay
    check_device(selfplay.use_vllm, "selfplay.use_vllm")
    if selfplay.threads and not torch.cuda.is_available():
        torch.set_num_threads(selfplay.threads)
    model, tokenizer = load_model(str(job.start), model_params.trust_remote_code, model_params.dtype, device="cpu")
    kb = KB.load(job.corpus) if (job.corpus / "kb.jsonl").is_file() else None
    proposer = load_model(job.proposer, model_params.trust_remote_code, model_params.dtype, device="cpu") \
        if job.proposer else None
    with open_retriever(job.retriever, job.index) as retriever:
        figures = train_selfplay(job, model, tokenizer, retriever, kb, proposer)
    if figures is not None:  # the main process
        job.result.write_text(json.dumps(figures))


if __name__ == "__main__":
    run_job(main, sys.argv[1], SelfPlayJob)
