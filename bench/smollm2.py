"""SmolLM2-135M on this CPU (run by hand after `searchlab run base --params params/smollm2.yaml`): throughput of
rollouts and of training, full fine-tuning against LoRA, and which learns more in the same wall time.

    python bench/smollm2.py                       # every part, 6-minute training budgets
    python bench/smollm2.py --budget 300 --parts rollout train

In one run, from the base stage's converted model (``data/base``), the qa stage's demonstrations and the
benchmarks stage's held-out questions:

1. ``rollout``: the agent's batched multi-turn rollouts (the profile's ``rollout`` params) on ``--questions``
   held-out questions: the model's own generated tokens per second.
2. ``train``: ``--steps`` SFT steps of the profile's ``sft`` params with LoRA and with full fine-tuning, each
   with and without gradient checkpointing: tokens the loss read per second, and peak RSS of this process.
3. ``knowledge``: closed-book EM and cover-EM of the base model on ``examples/eval/general-knowledge.jsonl``
   (real-world questions) with the consensus filter's plain question prompt (``backend: hf`` closed-book
   solver), beside the evaluate stage's ``direct`` system, which asks inside the agent's search instruction.
4. ``rl-memory``: one GRPO step of the profile's ``rl`` params from ``data/sft``, in a fresh process per
   ``rl.grad_accum`` of 1 and 4: seconds and peak RSS (the step's log-probabilities over a 49k vocabulary).
5. ``em``: full fine-tuning and LoRA, each trained for ``--budget`` seconds of wall time from the base model,
   then the agent's exact match on the same ``--questions`` held-out questions (greedy).

Output: stdout only: one line per figure, then one JSON line with all of them; trains in a temporary folder, deleted.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def held_out(data: Path, count: int) -> list[dict]:
    """``count`` held-out questions, as evenly as possible from every world suite (first ones of each file)."""
    from searchlab.jsonl import read_jsonl

    suites = [read_jsonl(path) for path in sorted((data / "benchmarks").glob("world-*.jsonl"))]
    suites = [s for s in suites if s]
    picked, i = [], 0
    while len(picked) < count and any(i < len(s) for s in suites):
        picked += [s[i] for s in suites if i < len(s)]
        i += 1
    return picked[:count]


def rollout_figures(folder: str, questions: list[dict], params, retriever) -> dict:
    from searchlab.agent.rollout import rollout, summarize
    from searchlab.model import load_model
    from searchlab.scoring import exact_match

    model, tokenizer = load_model(folder, dtype=params.model.dtype)
    started = time.perf_counter()
    episodes = rollout(model, tokenizer, retriever, [q["question"] for q in questions], params.rollout)
    seconds = time.perf_counter() - started
    generated = sum(e.generated_tokens for e in episodes)
    hits = [exact_match(e.answer, q["golden_answers"]) for e, q in zip(episodes, questions)]
    return {"rollout_seconds": round(seconds, 1), "generated_tokens": generated,
            "generated_tokens_per_s": round(generated / seconds, 1), "em": round(sum(hits) / len(hits), 3),
            **{k: round(v, 3) for k, v in summarize(episodes).items()}}


class StopAfter:
    """A TrainerCallback that ends training once ``seconds`` of wall time have passed since it started."""

    def __new__(cls, seconds: float):
        from transformers import TrainerCallback

        class _Stop(TrainerCallback):
            def on_train_begin(self, args, state, control, **kwargs):
                self.began = time.perf_counter()

            def on_step_end(self, args, state, control, **kwargs):
                if time.perf_counter() - self.began >= seconds:
                    control.should_training_stop = True

        return _Stop()


def knowledge_figures(folder: str, path: Path) -> dict:
    from searchlab.jsonl import read_jsonl
    from searchlab.scoring import cover_exact_match, exact_match
    from searchlab.synth.config import SolverParams
    from searchlab.synth.models import ModelSolver

    records = read_jsonl(path)
    solver = ModelSolver(SolverParams(name="smollm2", role="closed_book", backend="hf", model=folder))
    with solver:
        answers = [a[0] for a in solver.answer([r["question"] for r in records], [[] for _ in records])]
    n = len(records)
    return {"questions": n, "em": round(sum(exact_match(a, r["answer"]) for a, r in zip(answers, records)) / n, 3),
            "cover_em": round(sum(cover_exact_match(a, r["answer"]) for a, r in zip(answers, records)) / n, 3),
            "examples": [f"{r['question']} -> {a}" for a, r in zip(answers[:5], records)]}


def rl_step(params, accum: int) -> dict:
    """One GRPO step with ``rl.grad_accum = accum`` in this process: seconds, peak RSS, tokens/s."""
    from searchlab.model import load_model
    from searchlab.retrieval import open_retriever
    from searchlab.rl.train import rl_job, train_rl

    data = ROOT / params.runtime.data_dir
    rl = params.rl.model_copy(update={"grad_accum": accum, "steps": 1, "samples": 0})
    model, tokenizer = load_model(str(data / "sft"), dtype=params.model.dtype, device="cpu")
    with open_retriever(params.retriever, data / "index") as retriever, tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        figures = train_rl(rl_job(params, data, data / "base", Path(tmp) / "out", Path(tmp) / "work", rl=rl),
                           model.train(), tokenizer, retriever)
    return {"grad_accum": accum, "seconds": round(time.perf_counter() - started, 1),
            "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
            "tokens_per_s": figures["tokens_per_s"]}


def train(params, start: str, demos: Path, out_dir: Path, *, lora: bool, checkpointing: bool,
          max_steps: int, budget: float | None = None) -> dict:
    from searchlab.model import load_model
    from searchlab.train.sft import train_sft

    sft = params.sft.model_copy(update={
        "lora": params.sft.lora.model_copy(update={"enabled": lora}), "activation_checkpointing": checkpointing,
        "max_steps": max_steps, "save_steps": 10**6, "eval_steps": 10**6, "learning_rate": (
            params.sft.learning_rate if lora else FULL_LEARNING_RATE),
        # no warm-up: a share of max_steps would be most of a time-budgeted run, whose max_steps is a bound only
        "warmup_ratio": 0.0})
    model, tokenizer = load_model(start, dtype=params.model.dtype, device="cpu")
    callbacks = [StopAfter(budget)] if budget else None
    figures = train_sft(sft, model, tokenizer, demos, out_dir, out_dir / "checkpoints", callbacks=callbacks)
    return {k: figures[k] for k in ("steps", "train_seconds", "tokens_per_s", "train_loss", "trainable_parameters")}


# LoRA's adapters start at zero and take a larger step than full fine-tuning of a pretrained model can bear
FULL_LEARNING_RATE = 5e-5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params/smollm2.yaml")
    parser.add_argument("--parts", nargs="+", default=["rollout", "train", "knowledge", "rl-memory", "em"],
                        choices=["rollout", "train", "knowledge", "rl-memory", "em"])
    parser.add_argument("--questions", type=int, default=40, help="held-out questions for rollouts and EM")
    parser.add_argument("--steps", type=int, default=4, help="SFT steps per throughput measurement")
    parser.add_argument("--budget", type=float, default=360, help="training seconds per method for the EM part")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rl-step", type=int, help=argparse.SUPPRESS)  # internal: one RL step in this process
    args = parser.parse_args()

    import torch

    from searchlab.params import load_params
    from searchlab.retrieval import open_retriever

    torch.set_num_threads(args.threads)
    params = load_params(ROOT / args.params)
    data = ROOT / params.runtime.data_dir
    base, demos = str(data / "base"), data / "qa" / "demos.jsonl"
    if not (data / "base" / "config.json").is_file():
        sys.exit(f"no converted model in {data / 'base'}: run `searchlab run base --params {args.params}` first")
    if args.rl_step:
        print(json.dumps(rl_step(params, args.rl_step)))
        return
    questions = held_out(data, args.questions)
    figures: dict = {"questions": len(questions), "threads": args.threads}
    with open_retriever(params.retriever, data / "index") as retriever, tempfile.TemporaryDirectory() as tmp:
        if "rollout" in args.parts:
            figures["rollout"] = rollout_figures(base, questions, params, retriever)
            print("rollout (base model):", json.dumps(figures["rollout"]), flush=True)
        if "train" in args.parts:
            for lora in (True, False):
                for checkpointing in (False, True):
                    name = f"{'lora' if lora else 'full'}{'+checkpointing' if checkpointing else ''}"
                    figures[name] = train(params, base, demos, Path(tmp) / name, lora=lora,
                                          checkpointing=checkpointing, max_steps=args.steps)
                    print(f"train {name}:", json.dumps(figures[name]), flush=True)
        if "knowledge" in args.parts:
            figures["knowledge"] = knowledge_figures(base, ROOT / "examples" / "eval" / "general-knowledge.jsonl")
            print("closed-book knowledge (base model):", json.dumps(figures["knowledge"]), flush=True)
        if "rl-memory" in args.parts:
            for accum in (1, 4):  # a fresh process each: peak RSS is per process
                out = subprocess.run([sys.executable, __file__, "--params", args.params, "--threads",
                                      str(args.threads), "--rl-step", str(accum)], capture_output=True, text=True,
                                     check=True).stdout
                figures[f"rl-grad_accum-{accum}"] = json.loads(out.strip().splitlines()[-1])
                print(f"rl step, grad_accum {accum}:", json.dumps(figures[f"rl-grad_accum-{accum}"]), flush=True)
        if "em" in args.parts:
            for lora in (True, False):
                name = f"{'lora' if lora else 'full'}-{int(args.budget)}s"
                out = Path(tmp) / name
                figures[name] = train(params, base, demos, out, lora=lora, checkpointing=False, max_steps=10**6,
                                      budget=args.budget)
                figures[name].update(rollout_figures(str(out), questions, params, retriever))
                print(f"em {name}:", json.dumps(figures[name]), flush=True)
    figures["peak_rss_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
