"""Evaluate model folders on the built benchmark suites with the evaluate stage's code, outside the pipeline.

    python bench/eval_models.py --model sft=data/sft --model selfplay=/tmp/sp150 --out /tmp/eval150 \
        [--set eval.systems=[agent] ...]

Reads the project's built ``data/`` (index, benchmarks; ``runtime.data_dir`` may point elsewhere) and the params
file (default ``params/default.yaml`` with the overrides), evaluates each ``NAME=FOLDER`` in the given order (a
later model is paired-tested against each earlier one), writes the stage's outputs (``report.md``,
``metrics.json``, predictions) to ``--out`` and prints the report. For a policy a bench trained
(``bench/selfplay_rounds.py``) beside the pipeline's own, without rebuilding stages whose code changed since.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from searchlab.eval.run import run_evaluation
    from searchlab.model import load_agent
    from searchlab.params import load_params
    from searchlab.retrieval import open_retriever
    from tasks.evaluate import load_benchmarks, torch_threads

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", required=True, help="NAME=FOLDER, in comparison order")
    parser.add_argument("--out", required=True)
    parser.add_argument("--params", default=str(ROOT / "params/default.yaml"))
    parser.add_argument("--set", action="append", default=[], help="params overrides")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    p = load_params(args.params, args.set)
    data = ROOT / p.runtime.data_dir
    folders = dict(spec.split("=", 1) for spec in args.model)
    loaders = {name: (lambda folder=folder: load_agent(folder, p.model, p.rollout)) for name, folder in folders.items()}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    benchmarks = load_benchmarks(p.eval, data / "benchmarks", ROOT)
    with torch_threads(p.eval.threads), open_retriever(p.retriever, data / "index") as retriever:
        run_evaluation(loaders, p.eval.model_systems(), benchmarks, retriever, p.rollout, out, out / "shards",
                       p.eval.resamples, p.eval.seed, progress=logging.getLogger("eval").info)
    print((out / "report.md").read_text())


if __name__ == "__main__":
    main()
