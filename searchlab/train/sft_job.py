"""One SFT worker process: ``python -m searchlab.train.sft_job JOB_FILE``, started by :func:`searchlab.train.sft.run_sft`.

Under ``accelerate launch`` every process runs this; the Trainer finds its rank
and device from the environment accelerate sets, and only the main process
writes. The model it starts from is the base stage's (:mod:`searchlab.train.base`).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from searchlab.model import load_model
from searchlab.params import ModelParams, SFTParams
from searchlab.train.launch import run_job
from searchlab.train.sft import train_sft


def main(job: dict) -> None:
    """Fine-tune the model at ``job["start"]``; the main process writes the figures to ``job["result"]``."""
    model_params, sft_params = ModelParams(**job["model"]), SFTParams(**job["sft"])
    # loaded on the CPU ("auto": full precision there); the Trainer moves it to this rank's device and mixes
    # precision itself (bf16 autocast on GPUs that have it)
    model, tokenizer = load_model(job["start"], model_params.trust_remote_code, model_params.dtype, device="cpu")
    corpus = Path(job["corpus"]) if job["corpus"] else None
    figures = train_sft(sft_params, model, tokenizer, Path(job["demos"]), Path(job["out_dir"]),
                        Path(job["checkpoint_dir"]), corpus_jsonl=corpus)
    if figures is not None:  # the main process
        Path(job["result"]).write_text(json.dumps(figures))


if __name__ == "__main__":
    run_job(main, sys.argv[1])
