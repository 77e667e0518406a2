"""Seed variance on the built demo: is a claimed rl − sft gain larger than the noise between runs of one commit?

    python bench/seeds.py                          # sft and rl with seeds 0 1 2, the profile's params
    python bench/seeds.py --seeds 0 1 2 --rl-only  # one sft policy (data/sft), rl with three seeds
    python bench/seeds.py --set rl.extractive_answers=masked --set rl.dynamic_sampling=2   # params for every seed

Run by hand after `make demo` (or `searchlab run benchmarks sft`) built
``data/``. For every seed it trains sft (``sft.seed``; from the built base
model; skipped with ``--rl-only``, which starts every rl run from
``data/sft``) and rl from that policy (``rl.seed``), with the profile's params
and ``--set`` on top, then evaluates every policy as the agent on the built
benchmark suites (the evaluate stage's code). Reported per suite: each
policy's held-out EM by seed, its spread (min–max and standard deviation over
seeds), and the rl − sft difference per seed with its mean and a 95% t-interval
over seeds; a gain is larger than the seed noise when that interval excludes 0.

Written to ``--out`` (default ``<data_dir>/.work/seeds``): one folder per
(stage, seed) with the policy, ``eval/`` (reports and predictions) and
``seeds.md`` (the tables). A policy already in ``--out`` is not trained again.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# two-sided 95% t quantiles by degrees of freedom (n - 1 seeds)
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def train_sft_seed(p, seed: int, folder: Path, work: Path) -> None:
    """The sft policy of ``seed`` in ``folder`` (unless there already)."""
    from searchlab.train.base import start_model
    from searchlab.train.sft import SFTJob, run_sft

    if (folder / "config.json").is_file():
        return
    data = ROOT / p.runtime.data_dir
    sft = p.sft.model_copy(update={"seed": seed})
    run_sft(SFTJob(model=p.model, sft=sft, start=start_model(data / "base"), demos=data / "qa/demos.jsonl",
                   out_dir=folder, work_dir=work, corpus=data / "corpus/corpus.jsonl"))


def train_rl_seed(p, seed: int, start: Path, folder: Path, work: Path, retriever) -> None:
    """The rl policy of ``seed`` from ``start`` in ``folder`` (unless there already)."""
    from searchlab.model import load_model
    from searchlab.rl.train import rl_job, train_rl

    if (folder / "config.json").is_file():
        return
    data = ROOT / p.runtime.data_dir
    model, tokenizer = load_model(str(start), device="cpu")
    train_rl(rl_job(p, data, data / "sft", folder, work, rl=p.rl.model_copy(update={"seed": seed})), model,
             tokenizer, retriever)


def interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and 95% t-interval of ``values`` (one per seed); the interval is the mean alone for one value."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return mean, mean, mean
    half = T95.get(len(values) - 1, 1.96) * statistics.stdev(values) / len(values) ** 0.5
    return mean, mean - half, mean + half


def tables(results: dict, seeds: list[int], sft_names: dict[int, str]) -> str:
    """Per suite: EM by seed with spread for sft and rl, and rl − sft per seed with its mean and 95% t-interval."""
    lines = ["| suite | policy | " + " | ".join(f"seed {s}" for s in seeds) + " | min–max | sd |",
             "|---|---|" + "---|" * (len(seeds) + 2)]
    gains = ["| suite | " + " | ".join(f"seed {s}" for s in seeds) + " | mean [95% t-interval] |",
             "|---|" + "---|" * (len(seeds) + 1)]
    for suite, result in results["benchmarks"].items():
        em = {name: system["em"]["mean"] for name, system in
              ((key.split("/")[0], value) for key, value in result["systems"].items())}
        for stage in ("sft", "rl"):
            values = [em[sft_names[s] if stage == "sft" else f"rl-{s}"] for s in seeds]
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            lines.append(f"| {suite} | {stage} | " + " | ".join(f"{v:.3f}" for v in values)
                         + f" | {min(values):.3f}–{max(values):.3f} | {spread:.3f} |")
        differences = [em[f"rl-{s}"] - em[sft_names[s]] for s in seeds]
        mean, low, high = interval(differences)
        gains.append(f"| {suite} | " + " | ".join(f"{d:+.3f}" for d in differences)
                     + f" | {mean:+.3f} [{low:+.3f}, {high:+.3f}] |")
    return "\n".join(["Held-out EM of the agent by seed:", "", *lines, "", "rl − sft by seed:", "", *gains, ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params/default.yaml")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--rl-only", action="store_true", help="every rl run starts from the built data/sft")
    parser.add_argument("--out", type=Path, help="default <data_dir>/.work/seeds")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="KEY=VALUE for every seed")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    from rl_ablation import evaluate_agents  # the same evaluation as the ablation's (bench/ is on the path)
    from searchlab.eval.inputs import torch_threads
    from searchlab.params import load_params
    from searchlab.retrieval import open_retriever

    p = load_params(ROOT / args.params, args.overrides)
    data = ROOT / p.runtime.data_dir
    out = (args.out or data / ".work/seeds").resolve()
    out.mkdir(parents=True, exist_ok=True)
    folders, sft_names = {}, {}
    with torch_threads(p.rl.threads or p.eval.threads), open_retriever(p.retriever, data / "index") as retriever:
        for seed in args.seeds:
            if args.rl_only:
                sft_names[seed], folders["sft"] = "sft", data / "sft"
            else:
                sft_names[seed] = f"sft-{seed}"
                logging.info("seeds: sft with seed %d", seed)
                train_sft_seed(p, seed, out / f"sft-{seed}", out / f"sft-{seed}-work")
                folders[f"sft-{seed}"] = out / f"sft-{seed}"
            logging.info("seeds: rl with seed %d", seed)
            train_rl_seed(p, seed, folders[sft_names[seed]], out / f"rl-{seed}", out / f"rl-{seed}-work", retriever)
            folders[f"rl-{seed}"] = out / f"rl-{seed}"
        results = evaluate_agents(p, folders, retriever, out / "eval")
    report = tables(results, args.seeds, sft_names)
    (out / "seeds.md").write_text(f"Overrides: {' '.join(args.overrides) or 'none'}\n\n{report}")
    (out / "seeds.json").write_text(json.dumps({"seeds": args.seeds, "overrides": args.overrides}, indent=1))
    print(report)
    print(f"written: {out}/seeds.md, eval/report.md")


if __name__ == "__main__":
    main()
