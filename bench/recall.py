"""Recall or reading? Greedy agent EM of policies on training questions against dev and held-out ones, per type.

    python bench/recall.py                                          # data/sft
    python bench/recall.py data/.work/rl-ablation-32r/grpo data/.work/rl-ablation-32r/renamed

Run by hand after `make demo` built ``data/``. The qa stage's training
questions have answers the sft demonstrations showed; the dev split's and the
held-out suites' answers were never shown. A policy that scores much higher
on training questions than on held-out ones of the same type answers partly
from memory of the names it was trained on; an RL run that raises the first
and not the second was paid for recalling them. Training questions that an RL
run's kept trajectories show it drew (``trajectories.jsonl`` beside each
policy) are left out, so the training column is about questions no policy
here was trained on by RL. Every policy is scored as evaluation runs it
(``rollout`` params: greedy, extractive answers, real BM25) on the same
seeded sample of ``--questions`` per split.

Output: stdout only: a Markdown table, one row per policy and split (EM, then EM and question count per
question type); writes no file.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def splits(data: Path, drawn: set[str], n: int, seed: int) -> dict[str, list[dict]]:
    """Seeded samples of ``n`` training questions (none of ``drawn``), the dev split and ``n`` held-out ones."""
    from searchlab.jsonl import read_jsonl

    rng = random.Random(seed)
    train = [q for q in read_jsonl(data / "qa/train.jsonl") if q["id"] not in drawn]
    heldout = read_jsonl(data / "qa/heldout.jsonl")
    return {"train": rng.sample(train, min(n, len(train))), "dev": read_jsonl(data / "qa/dev.jsonl"),
            "held-out": rng.sample(heldout, min(n, len(heldout)))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("policies", nargs="*", type=Path, help="policy folders beside data/sft")
    parser.add_argument("--params", default="params/default.yaml")
    parser.add_argument("--questions", type=int, default=200, help="training and held-out questions sampled")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    from searchlab.agent.rollout import rollout
    from searchlab.jsonl import read_jsonl
    from searchlab.model import load_agent
    from searchlab.params import load_params
    from searchlab.retrieval import open_retriever
    from searchlab.scoring import exact_match
    from searchlab.eval.inputs import torch_threads

    p = load_params(ROOT / args.params)
    data = ROOT / p.runtime.data_dir
    policies = [data / "sft", *args.policies]
    drawn = {r["id"] for folder in policies if (folder / "trajectories.jsonl").is_file()
             for r in read_jsonl(folder / "trajectories.jsonl")}
    questions = splits(data, drawn, args.questions, args.seed)
    types = sorted({q["type"] for qs in questions.values() for q in qs})
    print(f"| policy | split | EM | {' | '.join(types)} |\n|---|---|---|{'---|' * len(types)}")
    with torch_threads(p.eval.threads), open_retriever(p.retriever, data / "index") as retriever:
        for folder in policies:
            model, tokenizer = load_agent(str(folder), p.model, p.rollout)
            for split, qs in questions.items():
                episodes = rollout(model, tokenizer, retriever, [q["question"] for q in qs], p.rollout)
                by_type: dict[str, list[float]] = {}
                for episode, q in zip(episodes, qs):
                    by_type.setdefault(q["type"], []).append(exact_match(episode.answer or "", q["answers"]))
                em = sum(map(sum, by_type.values())) / len(qs)
                cells = [f"{sum(v) / len(v):.2f} ({len(v)})" if (v := by_type.get(t)) else "—" for t in types]
                print(f"| {folder.name} | {split} | {em:.3f} | {' | '.join(cells)} |", flush=True)


if __name__ == "__main__":
    main()
