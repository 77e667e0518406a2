"""One SFT worker process: ``python -m searchlab.train.sft_job JOB_FILE``, started by :func:`searchlab.train.sft.run_sft`.

Under ``accelerate launch`` every process runs this; the Trainer finds its rank
and device from the environment accelerate sets, and only the main process
writes. The job pretrains the tiny model first when it says so
(:mod:`searchlab.train.pretrain`), then fine-tunes; each phase resumes from its
own checkpoints, and a finished pretraining is not redone.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from searchlab.model import load_model
from searchlab.params import ModelParams, SFTParams
from searchlab.train.launch import run_job
from searchlab.train.pretrain import pretrain_lm
from searchlab.train.sft import train_sft


def _pretrained(job: dict, model_params: ModelParams) -> tuple[str, dict]:
    """The folder of the pretrained tiny model (trained now unless a finished one is there) and its figures."""
    from accelerate import PartialState

    work = Path(job["work_dir"])
    done, partial = work / "pretrained", work / "pretrained.partial"
    if not (done / "pretrain.json").is_file():
        spec = model_params.tiny
        model, tokenizer = load_model(job["start"], model_params.trust_remote_code, model_params.dtype, device="cpu")
        figures = pretrain_lm(spec.pretrain, spec.seed, model, tokenizer, Path(job["corpus"]), partial,
                              work / "pretrain-checkpoints")
        if figures is not None:  # the main process publishes the folder whole, or not at all
            (partial / "pretrain.json").write_text(json.dumps(figures))
            shutil.rmtree(done, ignore_errors=True)
            partial.rename(done)
        PartialState().wait_for_everyone()
    return str(done), json.loads((done / "pretrain.json").read_text())


def main(job: dict) -> None:
    """Pretrain when the job says so, fine-tune, and (main process) write the figures to ``job["result"]``."""
    model_params, sft_params = ModelParams(**job["model"]), SFTParams(**job["sft"])
    start, pretrain = _pretrained(job, model_params) if job["pretrain"] else (job["start"], {})
    # loaded on the CPU ("auto": full precision there); the Trainer moves it to this rank's device and mixes
    # precision itself (bf16 autocast on GPUs that have it)
    model, tokenizer = load_model(start, model_params.trust_remote_code, model_params.dtype, device="cpu")
    corpus = Path(job["corpus"]) if job["corpus"] else None
    figures = train_sft(sft_params, model, tokenizer, Path(job["demos"]), Path(job["out_dir"]),
                        Path(job["checkpoint_dir"]), corpus_jsonl=corpus)
    if figures is not None:  # the main process
        figures.update({f"pretrain_{name}": value for name, value in pretrain.items()})
        Path(job["result"]).write_text(json.dumps(figures))


if __name__ == "__main__":
    run_job(main, sys.argv[1])
