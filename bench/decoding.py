"""Decoding benchmark (run by hand, after `make demo` built data/): what a decode step costs, and rows refilled.

    python bench/decoding.py
    python bench/decoding.py --questions 240 --repeats 4

On the demo's sft model (``data/sft``), in one run:

1. **A decode step by batch size**: one token for each of B rows of a KV cache
   250 tokens long (``searchlab.agent.continuous.read``), then a draw from B
   rows of next-token probabilities by ``torch.multinomial`` and by the
   inverse CDF the rollouts use (``searchlab.agent.rollout.draw``), in ms.
   A step's fixed cost is what continuous batching saves by running fewer
   steps; a row's cost is what it saves by dropping finished rows.
2. **Rows refilled against chunks**: the greedy agent (as evaluation decodes)
   on the first ``--questions`` questions of the demo's benchmark suites
   (48 of each), played by one ``rollout()`` call, where the row of an episode
   that ended takes the next question, against one call per ``batch_size``
   questions (each chunk lasts as long as its longest episode). Alternating
   ``--repeats`` times: seconds, model forwards, and a digest of the episodes
   (greedy: the same for both).

Output: stdout only: one line per figure, then one JSON line with all of them; writes no file.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params/default.yaml")
    parser.add_argument("--questions", type=int, default=240)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch

    from searchlab.agent.continuous import RaggedCache, read
    from searchlab.agent.rollout import draw, rollout
    from searchlab.jsonl import read_jsonl
    from searchlab.model import load_model
    from searchlab.params import load_params
    from searchlab.retrieval import open_retriever

    torch.set_num_threads(args.threads)
    p = load_params(ROOT / args.params)
    data = ROOT / p.runtime.data_dir
    if not (data / "sft" / "manifest.json").is_file():
        sys.exit("bench/decoding.py: no data/sft; run `make demo` (or `searchlab run sft`) first")
    model, tokenizer = load_model(str(data / "sft"), device="cpu")
    figures: dict = {"decode_step_ms": {}, "multinomial_ms": {}, "inverse_cdf_ms": {}}

    def ms(call, times: int = 40) -> float:
        started = time.perf_counter()
        for _ in range(times):
            call()
        return round((time.perf_counter() - started) / times * 1000, 2)

    with torch.inference_mode():
        for rows in (1, 8, 32, 64):
            cache = RaggedCache(rows)
            read(model, cache, None, [[5] * 250] * rows, 0)
            logits = read(model, cache, None, [[5]] * rows, 0)
            probs = torch.softmax(logits / 0.7, dim=-1)
            figures["decode_step_ms"][rows] = ms(lambda: read(model, cache, None, [[5]] * rows, 0))
            figures["multinomial_ms"][rows] = ms(lambda: torch.multinomial(probs, num_samples=1))
            figures["inverse_cdf_ms"][rows] = ms(lambda: draw(probs))
            print(f"{rows} rows: decode step {figures['decode_step_ms'][rows]} ms, torch.multinomial "
                  f"{figures['multinomial_ms'][rows]} ms, inverse CDF {figures['inverse_cdf_ms'][rows]} ms")

    questions = []
    for suite in sorted((data / "benchmarks").glob("*.jsonl")):
        questions += [r["question"] for r in read_jsonl(suite)][:48]
    questions = questions[:args.questions]
    params = p.rollout.model_copy(update={"temperature": 0.0})
    forwards = [0]
    model.register_forward_pre_hook(lambda module, inputs: forwards.__setitem__(0, forwards[0] + 1))

    def chunked(retriever):
        return [episode for start in range(0, len(questions), params.batch_size)
                for episode in rollout(model, tokenizer, retriever, questions[start:start + params.batch_size], params)]

    def refilled(retriever):
        return rollout(model, tokenizer, retriever, questions, params)

    seconds: dict[str, list[float]] = {"chunks": [], "refilled": []}
    with open_retriever(p.retriever, data / "index") as retriever:
        rollout(model, tokenizer, retriever, questions[:8], params)  # warm the JVM and the model
        for _ in range(args.repeats):
            for name, play in (("chunks", chunked), ("refilled", refilled)):
                forwards[0] = 0
                started = time.perf_counter()
                episodes = play(retriever)
                seconds[name].append(round(time.perf_counter() - started, 2))
                digest = hashlib.sha256(json.dumps([e.completion for e in episodes]).encode()).hexdigest()[:12]
                figures[f"{name}_forwards"], figures[f"{name}_digest"] = forwards[0], digest
                print(f"{name}: {seconds[name][-1]} s, {forwards[0]} forwards, episodes {digest}", flush=True)
    for name, runs in seconds.items():
        figures[f"{name}_s"] = runs
        figures[f"{name}_median_s"] = statistics.median(runs)
    print(f"greedy agent, {len(questions)} questions in rows of {params.batch_size}: chunks "
          f"{figures['chunks_median_s']} s, refilled {figures['refilled_median_s']} s (medians)")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
