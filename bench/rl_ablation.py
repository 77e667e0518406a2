"""RL ablations on the demo (run by hand, after `make demo` or `searchlab run sft` built data/).

    python bench/rl_ablation.py                           # every row, 20 steps each
    python bench/rl_ablation.py --steps 30 --rows none sec igpo
    python bench/rl_ablation.py --rows none --set rl.learning_rate=0.0003   # any override for every row

Every row trains from the same sft policy (``data/sft``) with the same budget
(``--steps`` GRPO steps of the ``rl`` params, ``--set`` overrides on top) and
one change: the curriculum (``none``, ``difficulty``, ``sec``, ``noise``) or
the estimator (``stratified``, ``igpo``; ``none`` is plain GRPO without a
curriculum). Each trained agent then answers ``--per-type`` held-out questions
of every question type (``data/qa/heldout.jsonl``: the questions the benchmark
suites sample from) with the ``rollout`` params' decoding, as the sft agent
does. Printed: a Markdown table of EM per type and overall with 95% bootstrap
intervals, the paired difference against sft with its p-value, and one JSON
line per row.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ROWS = {
    "none": [],
    "difficulty": ["rl.curriculum=[difficulty]"],
    "sec": ["rl.curriculum=[sec]"],
    "noise": ["rl.curriculum=[noise]"],
    "stratified": ["rl.estimator=stratified"],
    "igpo": ["rl.estimator=igpo"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--params", default="params/default.yaml")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--per-type", type=int, default=40)
    parser.add_argument("--rows", nargs="+", default=list(ROWS), choices=list(ROWS))
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="KEY=VALUE for every row")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import torch

    from searchlab.agent.rollout import rollout
    from searchlab.eval.stats import bootstrap_ci, paired_bootstrap
    from searchlab.jsonl import read_jsonl
    from searchlab.model import load_model
    from searchlab.params import load_params
    from searchlab.retrieval import open_retriever
    from searchlab.rl.train import train_rl
    from searchlab.scoring import exact_match

    torch.set_num_threads(args.threads)
    base = load_params(ROOT / args.params, args.overrides)
    data = ROOT / base.runtime.data_dir
    if not (data / "sft/manifest.json").is_file():
        sys.exit("bench/rl_ablation.py: no data/sft; run `make demo` (or `searchlab run sft`) first")
    by_type: dict[str, list[dict]] = defaultdict(list)
    for q in read_jsonl(data / "qa/heldout.jsonl"):
        by_type[q["type"]].append(q)
    questions = [q for t in sorted(by_type) for q in by_type[t][:args.per_type]]

    def scores(folder: Path, retriever) -> list[float]:
        model, tokenizer = load_model(str(folder), device="cpu")
        episodes = rollout(model, tokenizer, retriever, [q["question"] for q in questions], base.rollout)
        return [exact_match(e.answer or "", q["answers"]) for e, q in zip(episodes, questions)]

    def cell(values: list[float]) -> str:
        ci = bootstrap_ci(values, resamples=2000, seed=0)
        return f"{ci.mean:.3f} [{ci.low:.2f}, {ci.high:.2f}]"

    types = sorted(by_type)
    header = "| row | " + " | ".join(types) + " | all | all − sft (p) | train s |"
    lines = [header, "|" + "---|" * (len(types) + 4)]
    with tempfile.TemporaryDirectory() as tmp, open_retriever(base.retriever, data / "index") as retriever:
        reference = scores(data / "sft", retriever)

        def row(name: str, values: list[float], seconds: float | None) -> str:
            cells = [cell([v for v, q in zip(values, questions) if q["type"] == t]) for t in types]
            versus = "—"
            if values is not reference:
                test = paired_bootstrap(values, reference, resamples=2000, seed=0)
                versus = f"{test.difference:+.3f} (p={test.p_value:.3f})"
            return f"| {name} | " + " | ".join(cells) + f" | {cell(values)} | {versus} | " + (
                f"{seconds:.0f} |" if seconds is not None else "— |")

        lines.append(row("sft (start)", reference, None))
        print(lines[-1], flush=True)
        for name in args.rows:
            p = load_params(ROOT / args.params, [*args.overrides, *ROWS[name], f"rl.steps={args.steps}",
                                                 f"rl.save_steps={args.steps}", "rl.samples=0"])
            model, tokenizer = load_model(str(data / "sft"), device="cpu")
            out, work = Path(tmp) / name, Path(tmp) / f"{name}-work"
            started = time.perf_counter()
            figures = train_rl(p.rl, p.rollout, model, tokenizer, retriever, data / "qa/train.jsonl",
                               data / "corpus/corpus.jsonl", out, work)
            seconds = time.perf_counter() - started
            values = scores(out, retriever)
            lines.append(row(name, values, seconds))
            print(lines[-1], flush=True)
            print(json.dumps({"row": name, "overrides": ROWS[name], "em": sum(values) / len(values),
                              "final_reward": figures.get("final_reward"), "train_s": round(seconds, 1)}), flush=True)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
