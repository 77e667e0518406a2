"""sft's trainer tokens/s with padded batches against padding-free ones (run by hand, after `make demo`).

    python bench/sft_batches.py                  # 150 steps each, two rounds, alternating
    python bench/sft_batches.py --steps 300 --rounds 3

In one run, on the demo's data (``data/base``, ``data/qa``, ``data/corpus``):
``--steps`` steps of :func:`searchlab.train.sft.train_sft` with the demo's
``sft`` params from the base model, once with the batches padded to their
longest row (the sft of before, forced here) and once padding-free (the
default on a CPU: :mod:`searchlab.train.packed`), alternating for ``--rounds``
rounds. The same batches, in the same order, so the training loss of the two
should agree to float rounding. Prints one line per run and a JSON line with
all of them.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--params", default=str(ROOT / "params/default.yaml"))
    parser.add_argument("--data", default=str(ROOT / "data"))
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    from searchlab.progress import quiet_libraries

    quiet_libraries()  # before the libraries load: one line per run, not their progress bars
    import searchlab.train.sft as sft_module
    from searchlab.model import load_model
    from searchlab.params import load_params

    data, params = Path(args.data), load_params(args.params)
    missing = [s for s in ("base", "qa", "corpus") if not (data / s / "manifest.json").is_file()]
    if missing:
        sys.exit(f"{data}: no {', '.join(missing)} stage output; run `make demo` (or `searchlab run sft`) first")
    sft = params.sft.model_copy(update={"max_steps": args.steps, "save_steps": args.steps,
                                        "eval_steps": args.steps})
    padding_free = sft_module.padding_free_batches

    def padded(max_length: int) -> dict:
        return {"padding_free": False, "max_length": max_length}

    runs = []
    for round_ in range(args.rounds):
        for layout, batches in (("padded", padded), ("padding-free", padding_free)):
            sft_module.padding_free_batches = batches
            model, tokenizer = load_model(str(data / "base"), device="cpu")
            with tempfile.TemporaryDirectory() as tmp:
                figures = sft_module.train_sft(sft, model, tokenizer, data / "qa/demos.jsonl", Path(tmp) / "sft",
                                               Path(tmp) / "work", corpus_jsonl=data / "corpus/corpus.jsonl")
            run = {"round": round_ + 1, "batches": layout, "tokens_per_s": figures["tokens_per_s"],
                   "train_seconds": figures["train_seconds"], "train_loss": figures["train_loss"]}
            runs.append(run)
            print(f"round {run['round']} {layout:>12}: {run['tokens_per_s']:,.0f} tokens/s, "
                  f"{run['train_seconds']} s for {args.steps} steps, train loss {run['train_loss']}", flush=True)
    print(json.dumps({"steps": args.steps, "runs": runs}))


if __name__ == "__main__":
    main()
