"""Self-play rounds from an existing sft policy with the current code, outside the pipeline: no stage is rebuilt.

    python bench/selfplay_rounds.py --rounds 30 --out /tmp/sp30 [--set selfplay.seeds=values ...]
    python bench/selfplay_rounds.py --rounds 4 --out /tmp/sp-smol --set selfplay.proposer=smollm2-135m-instruct

Reads the project's built ``data/`` (corpus, index, qa, sft) and the params file (default ``params/default.yaml``
with the overrides), plays ``--rounds`` rounds with :func:`searchlab.selfplay.train.run_selfplay` into ``--out``
(checkpoints and round files in ``--out``-work) and prints its figures as JSON; ``--out/rounds.jsonl`` and
``--out/questions.jsonl`` hold the per-round figures and every proposal. Useful to compare self-play settings
without retraining base and sft, which any code change to the params schema would otherwise cause.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from searchlab.params import load_params
    from searchlab.selfplay.train import SelfPlayJob, run_selfplay
    from tasks.selfplay import proposer

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--out", required=True)
    parser.add_argument("--params", default=str(ROOT / "params/default.yaml"))
    parser.add_argument("--set", action="append", default=[], help="params overrides")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    p = load_params(args.params, [f"selfplay.rounds={args.rounds}", "selfplay.samples=0", *args.set])
    data = ROOT / p.runtime.data_dir
    out, work = Path(args.out), Path(args.out + "-work")
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    stage_dirs = {name: data / name for name in ("base", "sft")}
    figures = run_selfplay(SelfPlayJob(model=p.model, rollout=p.rollout, selfplay=p.selfplay, qa=p.qa,
                                       retriever=p.retriever, start=data / "sft", corpus=data / "corpus",
                                       qa_dir=data / "qa", index=data / "index", out_dir=out, work_dir=work,
                                       proposer=proposer(p, ROOT, stage_dirs)))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
