"""The RL budget curve on the built demo: dev and held-out EM against episodes, for RL and for continued SFT.

    python bench/rl_budget.py --episodes 1000 4000 16000 --set rl.guidance.enabled=true
    python bench/rl_budget.py --episodes 1000 4000 --name plain          # the profile's own rl section

Run by hand after `make demo` (or `searchlab run sft`) built ``data/``. For
every budget of ``--episodes`` it trains one RL run from the sft policy
(``--sft``, default ``data/sft``) with the profile's ``rl`` params, ``--set``
on top and as many steps as that many episodes take (``rl.questions_per_step``
× ``rl.num_generations`` a step): a run of its own, so its learning-rate
schedule and ``keep`` act over its own budget, as the stage's would. Then the
continued-SFT control (``bench/sft_control.py``) for the same wall time as that
run's training. Every policy, sft included, is scored on the same dev questions
(greedy, ``rl.dev.questions`` of qa's dev split, never trained on) and evaluated
by the evaluate stage's code on the built held-out suites (agent system), each
paired-tested against sft and each RL run against the control of its budget.

Written to ``--out`` (default ``<data_dir>/.work/rl-budget/<name>``): one
folder per run (``rl-<episodes>``, ``control-<episodes>``), ``eval/``,
``budget.md`` (the tables) and ``budget.png`` (dev and mean held-out EM against
episodes). A run whose policy is there already is not trained again, so a
larger budget can be added later.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def dev_scores(p, folders: dict[str, Path], retriever) -> dict[str, float]:
    """Greedy dev EM of every policy of ``folders`` on the first ``rl.dev.questions`` of qa's dev split."""
    from searchlab.model import load_model
    from searchlab.rl.dev import dev_em, dev_questions

    questions = dev_questions(ROOT / p.runtime.data_dir / "qa/dev.jsonl", p.rl.dev.questions or 48)
    scores = {}
    for name, folder in folders.items():
        model, tokenizer = load_model(str(folder), device="cpu")
        scores[name] = round(dev_em(model.eval(), tokenizer, retriever, questions, p.rollout), 4)
    return scores


def tables(results: dict, budgets: list[int], dev: dict[str, float], figures: dict[str, dict]) -> str:
    """Markdown: per budget and arm, wall time, dev EM, held-out EM per suite [95% interval]; then each arm's
    difference from sft and RL's from the control of its budget (paired bootstrap, p)."""
    suites = list(results["benchmarks"])

    def em(name: str, suite: str) -> str:
        s = results["benchmarks"][suite]["systems"][f"{name}/agent"]["em"]
        return f"{s['mean']:.3f} [{s['low']:.2f}, {s['high']:.2f}]"

    def versus(name: str, against: str, suite: str) -> str:
        c = results["benchmarks"][suite]["comparisons"][f"{name}/agent vs {against}/agent"]
        return f"{c['difference']:+.3f} (p {c['p_value']:.3f})"

    arms = [(e, arm) for e in budgets for arm in ("rl", "control")]
    head = "| episodes | arm | train s | dev EM | " + " | ".join(suites) + " |"
    rule = "|---" * (len(suites) + 4) + "|"
    lines = [head, rule, f"| 0 | sft | — | {dev['sft']:.3f} | " + " | ".join(em("sft", s) for s in suites) + " |"]
    gains = ["| episodes | arm | against | " + " | ".join(suites) + " |", "|---" * (len(suites) + 3) + "|"]
    for e, arm in arms:
        name = f"{arm}-{e}"
        seconds = figures[name].get("train_seconds_total", "—")
        lines.append(f"| {e} | {arm} | {seconds} | {dev[name]:.3f} | " + " | ".join(em(name, s) for s in suites)
                     + " |")
        gains.append(f"| {e} | {arm} | sft | " + " | ".join(versus(name, "sft", s) for s in suites) + " |")
        if arm == "rl":
            gains.append(f"| {e} | rl | control-{e} | " + " | ".join(versus(name, f"control-{e}", s)
                                                                    for s in suites) + " |")
    return "\n".join(["Dev EM (greedy) and held-out EM per suite, agent system, 95% bootstrap intervals:", "", *lines,
                      "", "Differences (paired bootstrap, two-sided p):", "", *gains, ""])


def chart(path: Path, results: dict, budgets: list[int], dev: dict[str, float]) -> None:
    """``budget.png``: dev EM (left) and mean held-out EM over the suites (right) against episodes; the control
    at the episodes RL trained in the same wall time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    suites = list(results["benchmarks"])

    def held_out(name: str) -> float:
        return sum(results["benchmarks"][s]["systems"][f"{name}/agent"]["em"]["mean"] for s in suites) / len(suites)

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for arm, style in (("rl", "o-"), ("control", "s--")):
        xs = [0, *budgets]
        names = ["sft", *(f"{arm}-{e}" for e in budgets)]
        left.plot(xs, [dev[n] for n in names], style, label=arm)
        right.plot(xs, [held_out(n) for n in names], style, label=arm)
    for axis, label in ((left, "greedy dev EM"), (right, f"held-out EM, mean of {len(suites)} suites")):
        axis.set_xticks([0, *budgets])
        axis.set_xlabel("RL episodes (control: the same wall time of SFT)")
        axis.set_ylabel(label)
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params/default.yaml")
    parser.add_argument("--episodes", type=int, nargs="+", default=[1000, 4000, 16000], help="the RL budgets")
    parser.add_argument("--name", default="curve", help="the curve's folder under <data_dir>/.work/rl-budget")
    parser.add_argument("--sft", type=Path, help="the policy every run starts from; default <data_dir>/sft")
    parser.add_argument("--out", type=Path, help="default <data_dir>/.work/rl-budget/<name>")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="KEY=VALUE for every RL run")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    from rl_ablation import evaluate_agents, train_row
    from searchlab.params import load_params
    from searchlab.retrieval import open_retriever
    from sft_control import train_control
    from searchlab.eval.inputs import torch_threads

    p = load_params(ROOT / args.params, args.overrides)
    data = ROOT / p.runtime.data_dir
    args.sft = (args.sft or data / "sft").resolve()
    if not (args.sft / "config.json").is_file():
        sys.exit(f"bench/rl_budget.py: {args.sft} holds no policy; run `make demo` (or `searchlab run sft`) first")
    out = (args.out or data / ".work/rl-budget" / args.name).resolve()
    out.mkdir(parents=True, exist_ok=True)
    per_step = p.rl.questions_per_step * p.rl.num_generations
    budgets = sorted(args.episodes)
    figures: dict[str, dict] = {}
    with torch_threads(p.rl.threads or p.eval.threads), open_retriever(p.retriever, data / "index") as retriever:
        for episodes in budgets:
            steps = math.ceil(episodes / per_step)
            logging.info("budget: rl for %d episodes (%d steps)", episodes, steps)
            run = argparse.Namespace(as_configured=True, params=args.params, overrides=args.overrides, steps=steps,
                                     sft=args.sft)
            figures[f"rl-{episodes}"] = train_row(f"rl-{episodes}", [], run, out, retriever)
            seconds = figures[f"rl-{episodes}"]["train_seconds_total"]
            logging.info("budget: continued SFT for %.0f s (rl's %d episodes)", seconds, episodes)
            figures[f"control-{episodes}"] = train_control(ROOT / args.params, args.overrides, args.sft, seconds,
                                                           out / f"control-{episodes}")
        # sft and the controls first: evaluation compares each policy with those before it
        controls_first = sorted(figures, key=lambda name: not name.startswith("control"))
        folders = {"sft": args.sft, **{name: out / name for name in controls_first}}
        logging.info("budget: dev EM of %d policies", len(folders))
        dev = dev_scores(p, folders, retriever)
        results = evaluate_agents(p, folders, retriever, out / "eval")
    report = tables(results, budgets, dev, figures)
    (out / "budget.md").write_text(f"RL overrides: {' '.join(args.overrides) or 'none'}; {per_step} episodes a "
                                   f"step; sft: {args.sft}\n\n{report}")
    (out / "dev.json").write_text(json.dumps(dev, indent=1))
    chart(out / "budget.png", results, budgets, dev)
    print(report)
    print(f"written: {out}/budget.md, budget.png, eval/report.md")


if __name__ == "__main__":
    main()
