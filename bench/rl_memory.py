"""Peak memory and time of a few RL steps at several ``rl.grad_accum`` (run by hand, after `make demo` built data/).

    python bench/rl_memory.py                        # grad_accum 1, 4 and 8; 3 steps each
    python bench/rl_memory.py --accum 1 8 --steps 5
    python bench/rl_memory.py --phases               # what an rl worker holds before training: RSS after each load

Each setting runs in a process of its own (so each peak is its own): ``--steps`` GRPO steps of the demo's ``rl``
params from ``data/sft`` (no dev scoring, no samples), the whole step's episodes rolled out at once
and the loss's forward and backward split into ``grad_accum`` micro-batches. The loss reads every token of an
episode (prompt, turns, information blocks) and the tiny model's vocabulary is 4,096, so the logits of a micro-batch
(episodes x tokens x vocabulary, float32, kept for the backward) are what grows with it. With ``rl.loss_type: grpo``
the gradient is the same (each micro-batch's mean over its episodes is divided by ``grad_accum``).

Output: stdout only: one line per ``grad_accum`` (seconds of the steps, of their rollouts, peak RSS in
GB); with ``--phases`` one line per load (RSS in MB). Trains in temporary folders, deleted.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def one_run(accum: int, steps: int, params: str) -> None:
    """``steps`` RL steps at ``rl.grad_accum`` = ``accum``; prints seconds and this process's peak RSS."""
    import torch

    from searchlab.model import load_model
    from searchlab.params import load_params
    from searchlab.retrieval import open_retriever
    from searchlab.rl.train import rl_job, train_rl

    torch.set_num_threads(2)
    p = load_params(ROOT / params)
    data = ROOT / p.runtime.data_dir
    rl = p.rl.model_copy(update={"steps": steps, "save_steps": steps, "samples": 0, "grad_accum": accum,
                                 "dev": p.rl.dev.model_copy(update={"questions": 0})})
    with tempfile.TemporaryDirectory() as tmp, open_retriever(p.retriever, data / "index") as retriever:
        model, tokenizer = load_model(str(data / "sft"), device="cpu")
        started = time.perf_counter()
        figures = train_rl(rl_job(p, data, data / "sft", Path(tmp) / "rl", Path(tmp) / "rl-work", rl=rl), model, tokenizer,
                           retriever)
        wall = time.perf_counter() - started
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"grad_accum {accum} (micro-batch {p.rl.questions_per_step * p.rl.num_generations // accum}): "
          f"{steps} steps {wall:.1f} s, of which rollouts {figures['rollout_seconds']:.1f} s; "
          f"peak RSS {peak_gb:.2f} GB", flush=True)


def phases(params: str) -> None:
    """The resident memory of one process after each thing an rl worker loads, before any training."""
    import psutil

    process = psutil.Process()

    def show(what: str) -> None:
        print(f"{what:34s} {process.memory_info().rss / 2**20:6.0f} MB", flush=True)

    show("python")
    import torch  # noqa: F401
    show("import torch")
    import transformers  # noqa: F401
    show("import transformers")
    from trl import GRPOTrainer  # noqa: F401
    show("import TRL's GRPOTrainer")
    from searchlab.model import load_model
    from searchlab.params import load_params
    from searchlab.retrieval import open_retriever

    p = load_params(ROOT / params)
    data = ROOT / p.runtime.data_dir
    with open_retriever(p.retriever, data / "index") as retriever:
        show("BM25 searcher open (the JVM)")
        for _ in range(20):
            retriever.search(["who founded the college in the north"] * 32, k=p.rollout.topk)
        show("640 searches")
        load_model(str(data / "sft"), device="cpu")
        show("the sft policy loaded")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params/default.yaml")
    parser.add_argument("--accum", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--phases", action="store_true", help="only the memory of each load, before training")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child process's own setting
    args = parser.parse_args()
    if args.phases:
        phases(args.params)
        return
    if args.one is not None:
        one_run(args.one, args.steps, args.params)
        return
    if not (ROOT / "data/sft/manifest.json").is_file():
        sys.exit("bench/rl_memory.py: no data/sft; run `make demo` first")
    for accum in args.accum:  # one after another: two torch jobs at once slow each other down
        subprocess.run([sys.executable, __file__, "--params", args.params, "--steps", str(args.steps),
                        "--one", str(accum)], check=True)


if __name__ == "__main__":
    main()
