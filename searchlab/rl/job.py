"""One RL worker process: ``python -m searchlab.rl.job JOB_FILE``, started by :func:`searchlab.rl.train.run_rl`.

Under ``accelerate launch`` every process runs this with its own retriever over
the index; only the main process writes the outputs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from searchlab.model import load_model
from searchlab.params import ModelParams, RetrieverParams, RLParams, RolloutParams
from searchlab.retrieval import open_retriever
from searchlab.rl.train import check_device, train_rl
from searchlab.train.launch import run_job


def main(job: dict) -> None:
    """GRPO from the policy at ``job["start"]``; the main process writes the figures to ``job["result"]``."""
    import torch

    model_params, rl, rollout = ModelParams(**job["model"]), RLParams(**job["rl"]), RolloutParams(**job["rollout"])
    check_device(rl)
    if rl.threads and not torch.cuda.is_available():
        torch.set_num_threads(rl.threads)
    # on the CPU in full precision; the Trainer moves it to this rank's device and mixes precision itself
    model, tokenizer = load_model(job["start"], model_params.trust_remote_code, model_params.dtype, device="cpu")
    with open_retriever(RetrieverParams(**job["retriever"]), Path(job["index"])) as retriever:
        figures = train_rl(rl, rollout, model, tokenizer, retriever, Path(job["questions"]), Path(job["corpus"]),
                           Path(job["out_dir"]), Path(job["work_dir"]), dev_jsonl=job["dev"] and Path(job["dev"]))
    if figures is not None:  # the main process
        Path(job["result"]).write_text(json.dumps(figures))


if __name__ == "__main__":
    run_job(main, sys.argv[1])
