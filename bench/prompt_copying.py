"""How often a model's searches copy the protocol's own words instead of searching for the question, per wording.

    python bench/prompt_copying.py --model data-world-files/base              # this checkout's wording
    git worktree add /tmp/old <commit>
    python bench/prompt_copying.py --model data-world-files/base --code /tmp/old   # an older commit's wording

A model that cannot search yet copies what the instruction or the environment's correction message shows it:
SmolLM2 zero-shot queried the literal word "query" of ``<search> query </search>``. This rolls ``--model`` out on
``--questions`` held-out world questions (``<data>/benchmarks/world-*.jsonl``), sampled at the RL temperature
(``--temperature``, the profile's ``rl.temperature`` by default) with the profile's ``rollout`` params, using the
protocol of the checkout ``--code`` (default: this one), the first turn opened by ``--prefill`` if given. A query
counts as copied when every word of it (normalised as answers are) is a word of that checkout's instruction or
correction message, the question left out. Prints a JSON line: the shares that searched, were well-formed and
answered, the searches made, the share copied, and the most frequent queries.

Output: stdout only, the one JSON line; writes no file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params/world-files.yaml")
    parser.add_argument("--model", type=Path, required=True, help="a model folder (e.g. a base stage's output)")
    parser.add_argument("--data", type=Path, default=ROOT / "data", help="the demo's data (index/, benchmarks/)")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose protocol (wording) to use")
    parser.add_argument("--questions", type=int, default=64)
    parser.add_argument("--temperature", type=float, help="default: the profile's rl.temperature")
    parser.add_argument("--prefill", choices=["none", "think", "search"], help="default: the profile's "
                        "rollout.prefill (this checkout's protocol only)")
    args = parser.parse_args()
    sys.path[:0] = [str(args.code), str(ROOT / "bench")]

    from searchlab.agent.protocol import INVALID_ACTION_MESSAGE, instruction, parse_trajectory
    from searchlab.agent.rollout import rollout
    from searchlab.model import load_model
    from searchlab.params import load_params
    from searchlab.retrieval import open_retriever
    from searchlab.scoring import normalize_answer
    from smollm2 import held_out

    params = load_params(ROOT / args.params)
    temperature = params.rl.temperature if args.temperature is None else args.temperature
    settings = params.rollout.model_copy(update={"temperature": temperature, "seed": params.rl.seed})
    if args.prefill is not None:
        settings = settings.model_copy(update={"prefill": args.prefill})
    questions = held_out(args.data, args.questions)
    if not questions:
        sys.exit(f"prompt_copying.py: no held-out questions in {args.data}/benchmarks/world-*.jsonl")
    prompt_words = set(normalize_answer(instruction("") + " " + INVALID_ACTION_MESSAGE).split())
    model, tokenizer = load_model(str(args.model), dtype="float32")
    with open_retriever(params.retriever, args.data / "index") as retriever:
        episodes = rollout(model, tokenizer, retriever, [q["question"] for q in questions], settings)
    queries = [query for e in episodes for query in e.searches]
    copied = [q for q in queries if normalize_answer(q).split() and
              all(word in prompt_words for word in normalize_answer(q).split())]
    n = len(episodes)
    print(json.dumps({
        "code": str(args.code), "model": str(args.model), "episodes": n, "temperature": temperature,
        "prefill": getattr(settings, "prefill", "none"),
        "searched": round(sum(bool(e.searches) for e in episodes) / n, 3),
        "well_formed": round(sum(bool(e.searches) and not parse_trajectory(e.completion).problems()
                                 for e in episodes) / n, 3),
        "answered": round(sum(e.answer is not None for e in episodes) / n, 3),
        "searches": len(queries), "copied_share": round(len(copied) / len(queries), 3) if queries else 0.0,
        "top_queries": Counter(q.strip() for q in queries).most_common(5)}))


if __name__ == "__main__":
    main()
