"""SmolLM2-135M's rollouts and training on this CPU against what the machine allows, per lever, in one run.

    python bench/smollm2_speed.py                      # after `searchlab run base --params params/smollm2.yaml`
    python bench/smollm2_speed.py --data /other/data   # the world (index, benchmarks, demos) from another data dir

1. ``bounds``: this machine's memory bandwidth (GB/s reading a 1 GiB tensor) and matrix-multiply peak (GFLOP/s of
   a 2048-cube product) in float32 and bfloat16.
2. ``rollout``: the agent's rollouts (the profile's ``rollout`` params) of the base model on ``--questions`` held-out
   questions, for ``rollout.decode_dtype`` ``model`` (float32) and ``bfloat16`` and each ``--batches`` size:
   generated tokens/s against the bound ``batch x bandwidth / bytes of the weights`` (a decode step reads every
   weight once; the keys and values it also reads make the real bound lower), and a digest of the episodes'
   completions, so that what changed is visible (float32 decoding at another batch size gives the same greedy
   episodes up to rounding).
3. ``train``: ``--steps`` SFT steps of the profile's ``sft`` params from the base model, float32 and under
   bfloat16 autocast (``sft.cpu_bf16``): trained tokens/s against the FLOP bound (peak / (6 x parameters)).

Output: stdout only: one line per figure, then one JSON line with all of them; trains in a temporary folder, deleted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def bandwidth_gb_s() -> float:
    """GB/s of reading a 1 GiB float32 tensor (the best of 5 sums)."""
    import torch

    x = torch.ones(2**28)
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - started)
    return x.numel() * 4 / best / 1e9


def matmul_gflop_s(dtype) -> float:
    """GFLOP/s of a 2048 x 2048 x 2048 product in ``dtype`` (the best of 5)."""
    import torch

    a, b = torch.randn(2048, 2048).to(dtype), torch.randn(2048, 2048).to(dtype)
    a @ b
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - started)
    return 2 * 2048**3 / best / 1e9


def rollout_figures(folder: str, questions: list[dict], rollout_params, retriever, weight_bytes: int,
                    bandwidth: float) -> dict:
    from searchlab.agent.rollout import rollout
    from searchlab.agent.samples import protocol_rates
    from searchlab.questions.record import QuestionRecord
    from searchlab.model import load_model

    model, tokenizer = load_model(folder, dtype="float32")
    rollout(model, tokenizer, retriever, [q["question"] for q in questions[:2]], rollout_params)  # warm up
    started = time.perf_counter()
    episodes = rollout(model, tokenizer, retriever, [q["question"] for q in questions], rollout_params)
    seconds = time.perf_counter() - started
    generated = sum(e.generated_tokens for e in episodes)
    bytes_per_weight = 2 if rollout_params.decode_dtype == "bfloat16" else 4
    bound = rollout_params.batch_size * bandwidth * 1e9 / (weight_bytes * bytes_per_weight)
    digest = hashlib.sha256("\x00".join(e.completion for e in episodes).encode()).hexdigest()[:12]
    rates = protocol_rates(episodes, [QuestionRecord(id=q["id"], question=q["question"], answers=q["golden_answers"])
                                      for q in questions])
    return {"seconds": round(seconds, 1), "generated_tokens": generated,
            "generated_tokens_per_s": round(generated / seconds, 1), "bound_tokens_per_s": round(bound),
            "share_of_bound": round(generated / seconds / bound, 3), "digest": digest,
            **{k: rates[k] for k in ("searched", "well_formed", "answered", "exact_match")}}


def train_figures(params, start: str, demos: Path, out_dir: Path, steps: int, cpu_bf16: bool, peak: float,
                  parameters: int) -> dict:
    from searchlab.model import load_model
    from searchlab.train.sft import train_sft

    sft = params.sft.model_copy(update={"max_steps": steps, "save_steps": 10**6, "eval_steps": 10**6,
                                        "warmup_ratio": 0.0, "cpu_bf16": cpu_bf16, "samples": 0})
    model, tokenizer = load_model(start, dtype="float32", device="cpu")
    figures = train_sft(sft, model, tokenizer, demos, out_dir, out_dir / "checkpoints")
    bound = peak * 1e9 / (6 * parameters)
    return {"steps": figures["steps"], "train_seconds": figures["train_seconds"],
            "tokens_per_s": figures["tokens_per_s"], "bound_tokens_per_s": round(bound),
            "share_of_bound": round(figures["tokens_per_s"] / bound, 3), "train_loss": figures["train_loss"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params/smollm2.yaml")
    parser.add_argument("--data", type=Path, help="the data folder with index/, benchmarks/, qa/ (default: the "
                                                  "profile's runtime.data_dir)")
    parser.add_argument("--model", type=Path, help="the model folder (default: base/ of the profile's data dir)")
    parser.add_argument("--parts", nargs="+", default=["bounds", "rollout", "train"],
                        choices=["bounds", "rollout", "train"])
    parser.add_argument("--questions", type=int, default=32, help="held-out questions per rollout")
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 32], help="rollout.batch_size values")
    parser.add_argument("--steps", type=int, default=4, help="SFT steps per training measurement")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch

    from searchlab.params import load_params
    from searchlab.retrieval import open_retriever
    from smollm2 import held_out

    torch.set_num_threads(args.threads)
    params = load_params(ROOT / args.params)
    data = args.data or ROOT / params.runtime.data_dir
    model_dir = args.model or ROOT / params.runtime.data_dir / "base"
    if not (model_dir / "config.json").is_file():
        sys.exit(f"no converted model in {model_dir}: run `searchlab run base --params {args.params}` first")
    figures: dict = {"threads": args.threads, "model": str(model_dir)}
    from searchlab.model import load_model

    parameters = sum(p.numel() for p in load_model(str(model_dir), dtype="float32")[0].parameters())
    figures["parameters"] = parameters
    bandwidth = bandwidth_gb_s()
    peaks = {"float32": matmul_gflop_s(torch.float32), "bfloat16": matmul_gflop_s(torch.bfloat16)}
    figures["bounds"] = {"bandwidth_gb_s": round(bandwidth, 1),
                         **{f"matmul_gflop_s_{k}": round(v, 1) for k, v in peaks.items()}}
    print("bounds:", json.dumps(figures["bounds"]), flush=True)
    if "rollout" in args.parts:
        questions = held_out(data, args.questions)
        if not questions:
            sys.exit(f"smollm2_speed.py: no held-out questions in {data}/benchmarks/world-*.jsonl "
                     "(run `searchlab run benchmarks`)")
        with open_retriever(params.retriever, data / "index") as retriever:
            for decode_dtype in ("model", "bfloat16"):
                for batch in args.batches:
                    name = f"rollout-{decode_dtype}-batch{batch}"
                    rollout_params = params.rollout.model_copy(update={"decode_dtype": decode_dtype,
                                                                       "batch_size": batch})
                    figures[name] = rollout_figures(str(model_dir), questions, rollout_params, retriever,
                                                    parameters, bandwidth)
                    print(f"{name}:", json.dumps(figures[name]), flush=True)
    if "train" in args.parts:
        with tempfile.TemporaryDirectory() as tmp:
            for cpu_bf16 in (False, True):
                name = f"train-{'bf16-autocast' if cpu_bf16 else 'float32'}"
                figures[name] = train_figures(params, str(model_dir), data / "qa" / "demos.jsonl", Path(tmp) / name,
                                              args.steps, cpu_bf16, peaks["bfloat16" if cpu_bf16 else "float32"],
                                              parameters)
                print(f"{name}:", json.dumps(figures[name]), flush=True)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
