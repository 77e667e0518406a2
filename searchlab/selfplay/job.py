"""One self-play worker process: ``python -m searchlab.selfplay.job JOB_FILE``, started by
:func:`searchlab.selfplay.train.run_selfplay`; every process opens its own retriever, the main one writes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from searchlab.model import load_model
from searchlab.params import ModelParams, QAParams, RetrieverParams, RolloutParams, SelfPlayParams
from searchlab.retrieval import open_retriever
from searchlab.rl.train import check_device
from searchlab.selfplay.train import train_selfplay
from searchlab.train.launch import run_job


def main(job: dict) -> None:
    """Self-play from the policy at ``job["start"]``; the main process writes the figures to ``job["result"]``."""
    import torch

    from searchlab.synth.kb import KB

    selfplay = SelfPlayParams(**job["selfplay"])
    model_params, rollout, qa = ModelParams(**job["model"]), RolloutParams(**job["rollout"]), QAParams(**job["qa"])
    rl = selfplay.as_rl()
    check_device(rl)
    if rl.threads and not torch.cuda.is_available():
        torch.set_num_threads(rl.threads)
    model, tokenizer = load_model(job["start"], model_params.trust_remote_code, model_params.dtype, device="cpu")
    corpus = Path(job["corpus"])
    kb = KB.load(corpus) if (corpus / "kb.jsonl").is_file() else None
    proposer = load_model(job["proposer"], model_params.trust_remote_code, model_params.dtype, device="cpu") if job.get(
        "proposer") else None
    with open_retriever(RetrieverParams(**job["retriever"]), Path(job["index"])) as retriever:
        figures = train_selfplay(selfplay, qa, rollout, model, tokenizer, retriever, corpus, Path(job["qa_dir"]),
                                 Path(job["out_dir"]), Path(job["work_dir"]), kb, proposer=proposer)
    if figures is not None:  # the main process
        Path(job["result"]).write_text(json.dumps(figures))


if __name__ == "__main__":
    run_job(main, sys.argv[1])
