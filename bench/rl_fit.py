"""Can the RL loop fit what it is shown? GRPO from the sft agent on a fixed handful of training questions.

    python bench/rl_fit.py                                # 16 questions sft gets wrong, 40 steps
    python bench/rl_fit.py --questions 32 --pick first    # the first 32 training questions, whatever sft does
    python bench/rl_fit.py --set rl.learning_rate=1e-5 --set rl.guidance.enabled=true   # any rl override

Run by hand after `make demo` (or `searchlab run sft`) built ``data/``. The
check that comes before any claim that RL improves the agent: every step trains
on the same ``--questions`` training questions (``rl.questions_per_step`` is
their count, no curriculum, so each step's uniform draw is all of them), with
the stage's real reward and the profile's ``rl`` params (``--set`` on top), and
the training EM on exactly those questions is scored greedily, as evaluation
decodes, at the start and every ``--every`` steps (``rl.dev`` on the same file).
A loop that works drives it towards 1.0 within some tens of steps.

``--pick wrong`` (the default) takes the first questions the sft agent answers
wrongly when decoding greedily: the ones there is something to fit.

Written to ``--out`` (default ``<data_dir>/.work/rl-fit/<name>``): the
questions, the run's ``train_log.jsonl`` and ``curves.png``, and ``fit.md``: EM
on the fixed questions by step with the step's reward, outcome and share of
uniform groups. ``--name`` (default from the overrides) keeps runs apart.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from searchlab.jsonl import read_jsonl, write_jsonl  # noqa: E402  (after the path is set)


def pick_questions(model, tokenizer, retriever, train: list[dict], n: int, pick: str, rollout) -> list[dict]:
    """``n`` training questions: the first ones (``first``) or the first the greedy agent gets wrong (``wrong``)."""
    from searchlab.agent.rollout import rollout as play
    from searchlab.scoring import exact_match

    if pick == "first":
        return train[:n]
    chosen = []
    for start in range(0, len(train), 64):
        part = train[start:start + 64]
        episodes = play(model, tokenizer, retriever, [q["question"] for q in part], rollout)
        chosen += [q for q, e in zip(part, episodes) if not exact_match(e.answer or "", q["answers"])]
        if len(chosen) >= n:
            return chosen[:n]
    raise SystemExit(f"bench/rl_fit.py: only {len(chosen)} training questions are answered wrongly; use --pick first")


def fit_table(history: list[dict]) -> str:
    """The Markdown table of a run: per scored step the EM on the fixed questions, with the step's training figures."""
    by_step = {}
    for row in history:
        by_step.setdefault(row["step"], {}).update(row)
    lines = ["| step | greedy EM (fixed questions) | sampled EM | reward | outcome | uniform groups | guided |",
             "|---:|---:|---:|---:|---:|---:|---:|"]
    for step in sorted(by_step):
        row = by_step[step]
        if "dev/em" not in row:
            continue

        def cell(key: str) -> str:
            return f"{row[key]:.3f}" if key in row else "—"

        lines.append(f"| {step} | {row['dev/em']:.3f} | {cell('dev/sampled_em')} | {cell('reward')} | "
                     f"{cell('episode/outcome')} | {cell('groups/uniform_trained')} | {cell('guidance/guided')} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params/default.yaml")
    parser.add_argument("--questions", type=int, default=16, help="fixed training questions (every step)")
    parser.add_argument("--pick", choices=["wrong", "first"], default="wrong")
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--every", type=int, default=5, help="score the fixed questions every this many steps")
    parser.add_argument("--sft", type=Path, help="the starting policy; default <data_dir>/sft")
    parser.add_argument("--out", type=Path, help="default <data_dir>/.work/rl-fit/<name>")
    parser.add_argument("--name", help="the run's folder name; default: from the overrides")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="KEY=VALUE for the rl params")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    from searchlab.eval.inputs import torch_threads
    from searchlab.model import load_model
    from searchlab.params import load_params
    from searchlab.retrieval import open_retriever
    from searchlab.rl.train import rl_job, train_rl

    p = load_params(ROOT / args.params, args.overrides)
    data = ROOT / p.runtime.data_dir
    start = (args.sft or data / "sft").resolve()
    if not (start / "config.json").is_file():
        sys.exit(f"bench/rl_fit.py: {start} holds no policy; run `make demo` (or `searchlab run sft`) first")
    name = args.name or ("default" if not args.overrides else
                         hashlib.sha256(" ".join(args.overrides).encode()).hexdigest()[:8])
    out = (args.out or data / ".work/rl-fit" / name).resolve()
    out.mkdir(parents=True, exist_ok=True)
    fixed = {"rl.questions_per_step": args.questions, "rl.curriculum": [], "rl.dynamic_sampling": 0,
             "rl.steps": args.steps, "rl.save_steps": args.every, "rl.keep": "last", "rl.samples": 0,
             "rl.dev.questions": args.questions}
    # the fit's own settings last: the question set is fixed whatever the profile's rl says
    p = load_params(ROOT / args.params, [*args.overrides, *(f"{k}={json.dumps(v)}" for k, v in fixed.items())])
    with torch_threads(p.rl.threads or p.eval.threads), open_retriever(p.retriever, data / "index") as retriever:
        model, tokenizer = load_model(str(start), device="cpu")
        questions_jsonl = out / "questions.jsonl"
        if not questions_jsonl.is_file():
            train = read_jsonl(data / "qa/train.jsonl")
            write_jsonl(questions_jsonl, pick_questions(model, tokenizer, retriever, train, args.questions, args.pick,
                                                        p.rollout))
        started = time.perf_counter()
        figures = train_rl(rl_job(p, data, data / "sft", out / "policy", out / "work", questions=questions_jsonl)
                           .model_copy(update={"dev": questions_jsonl}), model, tokenizer, retriever)
    seconds = time.perf_counter() - started
    table = fit_table(read_jsonl(out / "policy/train_log.jsonl"))
    header = (f"RL fit: {args.questions} fixed training questions ({args.pick}), {args.steps} steps of "
              f"{args.questions} x {p.rl.num_generations} episodes, from {start}; overrides: "
              f"{' '.join(args.overrides) or 'none'}; {seconds:.0f} s ({seconds / args.steps:.1f} s/step)")
    (out / "fit.md").write_text(f"{header}\n\n{table}\n")
    (out / "figures.json").write_text(json.dumps(figures, indent=1))
    print(header, table, f"written: {out}/fit.md", sep="\n\n")


if __name__ == "__main__":
    main()
