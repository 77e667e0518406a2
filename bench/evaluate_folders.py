"""Held-out EM of model folders on a profile's benchmarks: each as the systems you name, one table with 95% intervals.

    python bench/evaluate_folders.py --params params/world-files.yaml \\
        --model base=data-world-files/base:direct,rag,agent --model warm=data-world-files/sft:agent \\
        --compare warm/agent:base/rag --set eval.benchmarks.single.sample=30

Run by hand on a built project. Every ``--model NAME=FOLDER[:SYSTEMS]`` (systems comma-separated, default
``agent``) is evaluated by the evaluate stage's code (``bench/rl_ablation.py``'s ``evaluate_agents``) on the profile's
benchmarks (built-in suites and ``eval.benchmarks`` files, with their samples), with its ``rollout`` params and
retriever (its ``report.md`` per benchmark: every model paired against each earlier one on a system they share).
Prints each model and system's EM over all benchmarks pooled, with its bootstrap 95% interval, and the pooled
paired tests asked for with ``--compare A/SYSTEM:B/SYSTEM``; with ``--per-benchmark`` also each benchmark's
``report.md`` (EM per model and system, every later model paired against each earlier one). Written to ``--out``
(default ``<data_dir>/.work/evaluate-folders``): ``pooled.md`` (Markdown tables), the stage's outputs
(``report.md``, ``metrics.json``, ``predictions/<benchmark>/<model>-<system>.jsonl``) and resumable shards; a rerun
with the same models and questions reuses what is there (so delete ``--out`` after changing a model, a sample or a
param). Also for a policy a bench trained (``bench/selfplay_rounds.py``, ``bench/rl_ablation.py``) beside the
pipeline's own, without rebuilding stages whose code changed since.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def parse_model(text: str) -> tuple[str, Path, list[str]]:
    """``NAME=FOLDER[:SYSTEMS]`` -> (name, folder, systems)."""
    name, _, rest = text.partition("=")
    folder, _, systems = rest.partition(":")
    if not name or not folder:
        raise argparse.ArgumentTypeError(f"--model {text!r}: expected NAME=FOLDER[:SYSTEMS]")
    return name, Path(folder), systems.split(",") if systems else ["agent"]


def pooled_records(out: Path, keys: list[str]) -> dict[str, list[dict]]:
    """Per ``model/system`` key: its records of every benchmark together, ids made unique by the benchmark."""
    from searchlab.jsonl import read_jsonl

    pooled: dict[str, list[dict]] = {key: [] for key in keys}
    for folder in sorted((out / "predictions").iterdir()):
        for key in keys:
            name, system = key.split("/")
            pooled[key] += [{**r, "id": f"{folder.name}/{r['id']}"}
                            for r in read_jsonl(folder / f"{name}-{system}.jsonl")]
    return pooled


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params/default.yaml")
    parser.add_argument("--model", dest="models", action="append", type=parse_model, required=True,
                        metavar="NAME=FOLDER[:SYSTEMS]")
    parser.add_argument("--compare", action="append", default=[], metavar="NAME/SYSTEM:NAME/SYSTEM",
                        help="a pooled paired test of the first against the second (any two keys)")
    parser.add_argument("--out", type=Path, help="default <data_dir>/.work/evaluate-folders")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="KEY=VALUE params override")
    parser.add_argument("--per-benchmark", action="store_true",
                        help="also print report.md: each benchmark's EM per model/system and its paired tests")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

    from rl_ablation import evaluate_agents  # the same evaluation as the ablation's (bench/ is on the path)
    from searchlab.eval.metrics import compare, summarize
    from searchlab.params import load_params
    from searchlab.retrieval import open_retriever
    from searchlab.eval.inputs import torch_threads

    p = load_params(ROOT / args.params, args.overrides)
    data = ROOT / p.runtime.data_dir
    out = (args.out or data / ".work/evaluate-folders").resolve()
    for name, folder, _ in args.models:
        if not (folder / "config.json").is_file():
            sys.exit(f"bench/evaluate_folders.py: --model {name}={folder}: no model there (no config.json)")
    keys = [f"{name}/{system}" for name, _, systems in args.models for system in systems]
    for pair in args.compare:
        if any(key not in keys for key in pair.split(":")):
            sys.exit(f"bench/evaluate_folders.py: --compare {pair}: expected two of {', '.join(keys)}")
    with torch_threads(p.eval.threads), open_retriever(p.retriever, data / "index") as retriever:
        results = evaluate_agents(p, {name: folder for name, folder, _ in args.models}, retriever, out,
                                  {name: systems for name, _, systems in args.models})
    benchmarks = list(results["benchmarks"])
    pooled = pooled_records(out, keys)
    lines = [f"All {len(benchmarks)} benchmarks pooled ({', '.join(benchmarks)}); bootstrap 95% intervals.", "",
             "| model / system | questions | EM | 95% interval |", "|---|---:|---:|---|"]
    for key in keys:
        em = summarize(pooled[key], p.eval.resamples, p.eval.seed)["em"]
        lines.append(f"| {key} | {len(pooled[key])} | {em['mean']:.3f} | {em['low']:.3f}–{em['high']:.3f} |")
    if args.compare:
        lines += ["", "| paired test | difference | 95% interval | p |", "|---|---:|---|---:|"]
        for pair in args.compare:
            a, b = pair.split(":")
            c = compare(pooled[a], pooled[b], "em", p.eval.resamples, p.eval.seed)
            lines.append(f"| {a} − {b} | {c['difference']:+.3f} | {c['low']:+.3f}–{c['high']:+.3f} | "
                         f"{c['p_value']:.3f} |")
    report = "\n".join(lines) + f"\n\nPer benchmark, with paired tests: {out / 'report.md'}\n"
    (out / "pooled.md").write_text(report)
    if args.per_benchmark:
        print((out / "report.md").read_text())
    print(report)


if __name__ == "__main__":
    main()
