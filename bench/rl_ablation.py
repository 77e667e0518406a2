"""RL ablation on the built demo: the same GRPO budget for each technique, one table against plain GRPO.

    python bench/rl_ablation.py                               # grpo, llds, cgrpo, clpo, simulated
    python bench/rl_ablation.py --rows grpo sec igpo --steps 60
    python bench/rl_ablation.py --sft data-cite/sft --set eval.sample=100   # any params override for every row
    python bench/rl_ablation.py --as-configured --rows grpo extractive-masked dynamic \\
        --row "chosen=rl.extractive_answers=masked;rl.dynamic_sampling=2"    # rows against the profile's own rl

Run by hand after `make demo` (or `searchlab run sft`) built ``data/``. Every
row trains from the same sft policy (``--sft``, default ``data/sft``) with the
``rl`` params, the overrides of :data:`COMMON` (no curriculum; every rollout
batch used for two optimizer steps, so that LLDS has a displacement to act on),
``--steps`` optimizer steps and ``--set`` on top, and one change of its own
(:data:`ROWS`, or ``--row "NAME=KEY=VALUE;KEY=VALUE"``). ``--as-configured``
drops :data:`COMMON`: the reference row is then the profile's own ``rl``
section (its curriculum, one pass per batch). The trained policies and the sft one are then evaluated by the
evaluate stage's code on the built benchmark suites (agent system, the
``rollout`` params, real BM25 retrieval for every row, simulated search
included), each row paired-tested against ``grpo``.

Written to ``--out`` (default ``<data_dir>/.work/rl-ablation``): one folder
per row (the policy, ``train_log.jsonl``, ``curves.png``, kept trajectories and,
for clpo, ``restructured.jsonl``), ``eval/`` (the evaluate stage's report and
predictions), ``likelihood.png`` (mean log-likelihood of correct and incorrect
training responses per step, per row: LLDS's curves), ``dev.png`` (dev EM and
training reward by step, per row) and ``ablation.md`` (the tables). A row whose policy is already in ``--out`` is not trained again.
Each row is also an MLflow run in the experiment ``rl-ablation`` of the
project's store (params, EM with intervals per suite, difference and p-value
against grpo), so the rows compare side by side in the MLflow UI.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from searchlab.jsonl import read_jsonl  # noqa: E402  (after the path is set)

#: Every row's overrides, before its own.
COMMON = ["rl.curriculum=[]", "rl.num_iterations=2", "rl.samples=0"]

#: Each row's change against plain GRPO (the row ``grpo``).
ROWS = {
    "grpo": [],
    "llds": ["rl.llds.coef=1.0"],
    "cgrpo": ["rl.reward.rubric_weight=0.3"],  # the paper's weight
    "clpo": ["rl.curriculum=[clpo]"],
    "simulated": ["rl.search.backend=simulated"],
    "sec": ["rl.curriculum=[sec]"],
    "difficulty": ["rl.curriculum=[difficulty]"],
    "noise": ["rl.curriculum=[noise]"],
    "stratified": ["rl.estimator=stratified"],
    "igpo": ["rl.estimator=igpo"],
    "extractive-masked": ["rl.extractive_answers=masked"],  # train the policy evaluation runs, answer out of loss
    "extractive-scored": ["rl.extractive_answers=scored"],  # ... the copied answer in the loss
    "dynamic": ["rl.dynamic_sampling=2"],  # DAPO's dynamic sampling: uniform groups replaced, up to 2 extra draws
    "learnability": ["rl.curriculum=[sec]", "rl.sec.reward=learnability", "rl.sec.temperature=0.25"],
    "dapo-loss": ["rl.loss_type=dapo"],
    "dr-grpo": ["rl.loss_type=dr_grpo"],
    "batch-scale": ["rl.scale_rewards=batch"],
    "renamed": ["rl.renamed=true"],  # episodes in a world whose titles are permuted: recall of sft's names cannot pay
    "guidance": ["rl.guidance.enabled=true"],  # the demonstration in groups with no right episode (LUFFY)
    "graded": ["rl.reward.evidence_share=0.5"],  # David-GRPO's share of evidence retrieved, whatever the answer
    "near-miss": ["rl.near_miss=true"],  # re-roll the best partial episode of a failed group (David-GRPO)
    "all-three": ["rl.guidance.enabled=true", "rl.reward.evidence_share=0.5", "rl.near_miss=true"],
}
DEFAULT_ROWS = ["grpo", "llds", "cgrpo", "clpo", "simulated"]
REFERENCE = "grpo"


def train_row(name: str, overrides: list[str], args, out: Path, retriever) -> dict:
    """Train row ``name`` (unless its policy is in ``out/name``); its figures, also kept as ``figures.json``."""
    from searchlab.model import load_model
    from searchlab.params import load_params
    from searchlab.rl.train import rl_job, train_rl

    folder = out / name
    if (folder / "figures.json").is_file():
        return json.loads((folder / "figures.json").read_text())
    common = [] if args.as_configured else COMMON
    p = load_params(ROOT / args.params, [*common, *args.overrides, *overrides, f"rl.steps={args.steps}"])
    data = ROOT / p.runtime.data_dir
    model, tokenizer = load_model(str(args.sft), device="cpu")
    started = time.perf_counter()
    figures = train_rl(rl_job(p, data, data / "sft", folder, out / f"{name}-work"), model, tokenizer, retriever)
    figures["train_seconds_total"] = round(time.perf_counter() - started, 1)
    figures["overrides"] = [*common, *args.overrides, *overrides]
    figures.update(signal_shares(read_jsonl(folder / "train_log.jsonl")))
    (folder / "figures.json").write_text(json.dumps(figures, indent=1))
    return figures


def evaluate_agents(p, folders: dict[str, Path], retriever, out: Path,
                    systems: tuple[str, ...] | dict[str, list[str]] = ("agent",)) -> dict:
    """The evaluate stage's code on the built suites: every policy of ``folders`` run as each of ``systems``
    (``agent``, ``sampled``; or per policy, a dict of its name to its systems), paired-tested; outputs and
    resumable shards in ``out``."""
    from searchlab.eval.inputs import load_benchmarks
    from searchlab.eval.run import run_evaluation
    from searchlab.model import load_agent

    loaders = {name: (lambda folder=folder: load_agent(str(folder), p.model, p.rollout))
               for name, folder in folders.items()}
    benchmarks = load_benchmarks(p.eval, ROOT / p.runtime.data_dir / "benchmarks", ROOT)
    return run_evaluation(loaders, systems if isinstance(systems, dict) else list(systems), benchmarks, retriever,
                          p.rollout, out, out / "shards", p.eval)


def signal_shares(history: list[dict]) -> dict[str, float]:
    """Over a run's steps: the mean share of groups whose episodes all earned the same reward (no advantage) in
    the first draw of questions and in the batch trained on (they differ under dynamic sampling); with guidance
    the share of groups with no right episode and the groups guided per step, with near-miss the re-rolls per step
    and how many of them answered right."""
    shares = {}
    for key, name in (("groups/uniform_first_draw", "uniform_first_draw"), ("groups/uniform_trained",
                                                                            "uniform_trained"),
                      ("guidance/all_wrong", "all_wrong"), ("guidance/guided", "guided_per_step"),
                      ("near_miss/rerolled", "rerolled_per_step"), ("near_miss/solved", "rerolls_solved_per_step")):
        values = [row[key] for row in history if key in row]
        if values:
            shares[name] = round(sum(values) / len(values), 3)
    return shares


def chart_dev(out: Path, rows: list[str], window: int = 10) -> None:
    """``dev.png``: per row, greedy dev EM at each scored checkpoint (top) and the training reward as a running
    mean over ``window`` steps (bottom)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    for colour, name in enumerate(rows):
        history = read_jsonl(out / name / "train_log.jsonl")
        dev = [(row["step"], row["dev/em"]) for row in history if "dev/em" in row]
        if dev:
            top.plot(*zip(*dev), "o-", color=f"C{colour}", label=name)
        rewards = [row["reward"] for row in history if "reward" in row]
        means = [sum(rewards[max(0, j - window + 1):j + 1]) / len(rewards[max(0, j - window + 1):j + 1])
                 for j in range(len(rewards))]
        bottom.plot(range(1, len(means) + 1), means, color=f"C{colour}", label=name)
    top.set_ylabel("greedy dev EM")
    top.legend(fontsize="small", ncol=2)
    bottom.set_ylabel(f"training reward ({window}-step mean)")
    bottom.set_xlabel("optimizer step")
    figure.tight_layout()
    figure.savefig(out / "dev.png", dpi=80)
    plt.close(figure)


def chart_likelihood(out: Path, rows: list[str], window: int = 10) -> None:
    """``likelihood.png``: each row's mean log-likelihood of correct (solid) and incorrect (dashed) responses, as a
    running mean over ``window`` logged steps (each step's batch holds other questions, so raw points are noisy)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def running_mean(values: list[float]) -> list[float]:
        return [sum(values[max(0, j - window + 1):j + 1]) / len(values[max(0, j - window + 1):j + 1])
                for j in range(len(values))]

    figure, axis = plt.subplots(figsize=(8, 4.5))
    for colour, name in enumerate(rows):
        history = read_jsonl(out / name / "train_log.jsonl")
        for key, style in (("likelihood/correct", "-"), ("likelihood/incorrect", "--")):
            logged = [row for row in history if key in row]
            if logged:
                axis.plot([row["step"] for row in logged], running_mean([row[key] for row in logged]), style,
                          color=f"C{colour}", label=f"{name} {key.split('/')[1]}")
    axis.set_xlabel("optimizer step")
    axis.set_ylabel(f"log-likelihood per model token ({window}-step mean)")
    axis.legend(fontsize="small", ncol=2)
    figure.tight_layout()
    figure.savefig(out / "likelihood.png", dpi=80)
    plt.close(figure)


def versus_sft(results: dict, rows: list[str], system: str, against: str = "sft") -> list[str]:
    """A Markdown table: each row's difference from ``against`` (sft) as ``system`` (paired bootstrap, p) per
    suite."""
    suites = list(results["benchmarks"])
    lines = ["| row | " + " | ".join(suites) + " |", "|---" * (len(suites) + 1) + "|"]
    for name in rows:
        cells = []
        for suite in suites:
            c = results["benchmarks"][suite]["comparisons"][f"{name}/{system} vs {against}/{system}"]
            cells.append(f"{c['difference']:+.3f} (p {c['p_value']:.3f})")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def headroom(out: Path, name: str, suite: str) -> float:
    """The share of ``suite``'s questions that ``name``'s greedy agent gets wrong while one of its sampled episodes
    gets right: what a policy that learned from its own right episodes could gain in greedy EM."""
    def by_id(path: Path) -> dict[str, float]:
        return {r["id"]: r["em"] for r in read_jsonl(path)}

    greedy = by_id(out / f"eval/predictions/{suite}/{name}-agent.jsonl")
    sampled = by_id(out / f"eval-sampled/predictions/{suite}/{name}-sampled.jsonl")
    return sum(greedy[i] == 0 and sampled[i] > 0 for i in greedy) / len(greedy)


def sampled_table(results: dict, rows: list[str], out: Path) -> str:
    """The Markdown tables of the ``sampled`` system: mean EM over k samples per suite with the headroom
    (:func:`headroom`), and the difference from sft."""
    suites = list(results["benchmarks"])
    em = ["| row | " + " | ".join(suites) + " |", "|---" * (len(suites) + 1) + "|"]
    for name in ["sft", *rows]:
        em.append(f"| {name} | " + " | ".join(
            f"{results['benchmarks'][suite]['systems'][f'{name}/sampled']['em']['mean']:.3f} "
            f"({headroom(out, name, suite):.2f})" for suite in suites) + " |")
    return "\n".join(["Held-out EM, sampled system (mean over k sampled episodes per question; in brackets the "
                      "share of questions greedy gets wrong and a sample right):", "", *em, "",
                      "Sampled: difference against sft (paired bootstrap, two-sided p):", "",
                      *versus_sft(results, rows, "sampled"), ""])


def tables(results: dict, rows: list[str], figures: dict[str, dict], control: str | None = None) -> str:
    """The Markdown tables: EM [95% interval] per suite and row; difference against grpo, against sft and against
    the continued-SFT ``control`` (if any) (p) per suite and row."""
    suites = list(results["benchmarks"])
    em = ["| row | " + " | ".join(suites) + " | train s | rollout s/step | uniform groups (drawn → trained) | "
          "all-wrong groups | dev EM start → last |", "|---" * (len(suites) + 6) + "|"]
    versus = ["| row | " + " | ".join(suites) + " |", "|---" * (len(suites) + 1) + "|"]
    for name in ["sft", *([control] if control else []), *rows]:
        cells = []
        for suite in suites:
            s = results["benchmarks"][suite]["systems"][f"{name}/agent"]["em"]
            cells.append(f"{s['mean']:.3f} [{s['low']:.2f}, {s['high']:.2f}]")
        f = figures.get(name, {})
        shares = f"{f['uniform_first_draw']:.2f} → {f['uniform_trained']:.2f}" if "uniform_trained" in f else "—"
        dev = f"{f['dev_em_start']:.2f} → {f['dev_em_last']:.2f}" if f.get("dev_em_start") is not None else "—"
        em.append(f"| {name} | " + " | ".join(cells) + f" | {f.get('train_seconds_total', '—')} | "
                  f"{f.get('rollout_seconds_per_step', '—')} | {shares} | {f.get('all_wrong', '—')} | {dev} |")
        if name in (REFERENCE, "sft", control):
            continue
        cells = []
        for suite in suites:
            c = results["benchmarks"][suite]["comparisons"][f"{name}/agent vs {REFERENCE}/agent"]
            cells.append(f"{c['difference']:+.3f} (p {c['p_value']:.3f})")
        versus.append(f"| {name} | " + " | ".join(cells) + " |")
    against_control = [] if not control else [
        f"Difference against the continued-SFT control {control} (paired bootstrap, two-sided p):", "",
        *versus_sft(results, rows, "agent", control), ""]
    return "\n".join(["Held-out EM, agent system, 95% bootstrap intervals:", "", *em, "",
                      f"Difference against {REFERENCE} (paired bootstrap, two-sided p):", "", *versus, "",
                      "Difference against sft (paired bootstrap, two-sided p):", "",
                      *versus_sft(results, [*([control] if control else []), *rows], "agent"), "",
                      *against_control])


def log_to_mlflow(p, results: dict, rows: list[str], figures: dict[str, dict], args) -> None:
    """One MLflow run per row in experiment ``rl-ablation``: its overrides, EM per suite with intervals, and the
    difference and p-value against grpo."""
    import mlflow

    from tasks.tracking import tracking_uri

    mlflow.set_tracking_uri(tracking_uri(p.tracking, ROOT))
    mlflow.set_experiment("rl-ablation")
    for name in rows:
        with mlflow.start_run(run_name=f"{name} · {args.steps} steps"):
            mlflow.log_params({"row": name, "sft": str(args.sft), "steps": args.steps,
                               "overrides": " ".join(figures[name].get("overrides", []))[:500]})
            metrics = {k: v for k, v in figures[name].items() if isinstance(v, (int, float))}
            for suite, result in results["benchmarks"].items():
                em = result["systems"][f"{name}/agent"]["em"]
                metrics.update({f"eval/{suite}/em": em["mean"], f"eval/{suite}/em_low": em["low"],
                                f"eval/{suite}/em_high": em["high"]})
                if name != REFERENCE:
                    c = result["comparisons"][f"{name}/agent vs {REFERENCE}/agent"]
                    metrics.update({f"vs_{REFERENCE}/{suite}/difference": c["difference"],
                                    f"vs_{REFERENCE}/{suite}/p_value": c["p_value"]})
            mlflow.log_metrics(metrics)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params/default.yaml")
    parser.add_argument("--steps", type=int, default=40, help="optimizer steps per row")
    parser.add_argument("--rows", nargs="+", default=DEFAULT_ROWS, choices=list(ROWS))
    parser.add_argument("--row", action="append", default=[], metavar="NAME=KEY=VALUE;...",
                        help="a row of your own: its overrides, separated by ;")
    parser.add_argument("--as-configured", action="store_true",
                        help="no common overrides: rows change the profile's own rl section")
    parser.add_argument("--sft", type=Path, help="the policy every row starts from; default <data_dir>/sft")
    parser.add_argument("--out", type=Path, help="default <data_dir>/.work/rl-ablation")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="KEY=VALUE for every row")
    parser.add_argument("--control", type=float, nargs="?", const=0.0, metavar="SECONDS",
                        help="also train the continued-SFT control (bench/sft_control.py) for SECONDS of training "
                             "(default: the longest row's training time) and compare every row with it")
    parser.add_argument("--sampled", nargs="*", metavar="ROW",
                        help="also evaluate sft and these rows (all, if none named) as the sampled system "
                             "(eval.sampling: k episodes per question at the training temperature)")
    args = parser.parse_args()
    for row in args.row:
        name, _, overrides = row.partition("=")
        ROWS[name] = overrides.split(";")
        args.rows.append(name)
    if REFERENCE not in args.rows:
        args.rows.insert(0, REFERENCE)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    from searchlab.eval.inputs import torch_threads
    from searchlab.params import load_params
    from searchlab.retrieval import open_retriever

    p = load_params(ROOT / args.params, args.overrides)
    data = ROOT / p.runtime.data_dir
    args.sft = (args.sft or data / "sft").resolve()
    out = (args.out or data / ".work/rl-ablation").resolve()
    if not (args.sft / "config.json").is_file():
        sys.exit(f"bench/rl_ablation.py: {args.sft} holds no policy; run `make demo` (or `searchlab run sft`) first")
    out.mkdir(parents=True, exist_ok=True)
    figures: dict[str, dict] = {}
    with torch_threads(p.rl.threads or p.eval.threads), open_retriever(p.retriever, data / "index") as retriever:
        for name in args.rows:
            logging.info("ablation: training row %s (%s)", name, " ".join(ROWS[name]) or "plain GRPO")
            figures[name] = train_row(name, ROWS[name], args, out, retriever)
        control = None
        if args.control is not None:
            from bench.sft_control import train_control

            seconds = args.control or max(figures[name]["train_seconds_total"] for name in args.rows)
            control = f"sft-control-{seconds:.0f}s"
            logging.info("ablation: training the continued-SFT control for %.0f s", seconds)
            figures[control] = train_control(ROOT / args.params, args.overrides, args.sft, seconds, out / control)
        # the control right after sft: every row is then compared with it too
        results = evaluate_agents(p, {"sft": args.sft, **({control: out / control} if control else {}),
                                      **{name: out / name for name in args.rows}}, retriever, out / "eval")
        if args.sampled is not None:
            sampled_rows = args.sampled or args.rows
            sampled = evaluate_agents(p, {"sft": args.sft, **{name: out / name for name in sampled_rows}},
                                      retriever, out / "eval-sampled", systems=("sampled",))
    chart_likelihood(out, args.rows)
    chart_dev(out, args.rows)
    report = tables(results, args.rows, figures, control)
    if args.sampled is not None:
        report += "\n" + sampled_table(sampled, sampled_rows, out)
    (out / "ablation.md").write_text(report)
    log_to_mlflow(p, results, args.rows, figures, args)
    print(report)
    print(f"written: {out}/ablation.md, likelihood.png, eval/report.md; MLflow experiment rl-ablation")


if __name__ == "__main__":
    main()
