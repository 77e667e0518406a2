"""The control every RL claim needs: the same starting policy trained on with SFT for the same wall time.

    python bench/sft_control.py --seconds 150               # continue data/sft for 150 s on its demonstrations
    python bench/sft_control.py --seconds 600 --out data/.work/control-600 --set sft.learning_rate=1e-4

Run by hand after `make demo` (or `searchlab run sft`) built ``data/``. From the
sft policy (``--sft``, default ``data/sft``), SFT goes on over the qa stage's
training demonstrations (the demonstrations of the questions RL trains on)
with the profile's ``sft`` params and ``--set`` on top, and stops when
``--seconds`` of training have passed: RL's budget spent on imitation instead.
Its learning rate follows a cosine over those seconds of wall time (set
before every optimizer step), so it decays over the budget as RL's does over
its steps, whatever speed the machine gives it. ``bench/rl_ablation.py
--control SECONDS`` trains it beside the RL rows and evaluates it with them.

The default learning rate is RL's (``rl.learning_rate``), not sft's: the
control continues a trained policy, as RL does, with steps of the same size.
Written to ``--out`` (default ``<data_dir>/.work/sft-control-<seconds>``): the
policy, its ``train_log.jsonl`` and ``figures.json`` (steps and seconds trained).
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


def wall_clock_cosine(seconds: float, peak: float):
    """A TrainerCallback that sets the learning rate, before every optimizer step, to a cosine from ``peak`` to 0 over
    ``seconds`` of wall time since training began (the Trainer's own schedule counts steps, whose number a wall-clock
    budget does not know in advance)."""
    import math

    from transformers import TrainerCallback

    class _Cosine(TrainerCallback):
        def on_train_begin(self, args, state, control, **kwargs):
            self.began = time.perf_counter()

        def on_pre_optimizer_step(self, args, state, control, optimizer=None, **kwargs):
            share = min(1.0, (time.perf_counter() - self.began) / seconds)
            for group in optimizer.param_groups:
                group["lr"] = peak * 0.5 * (1 + math.cos(math.pi * share))

    return _Cosine()


def train_control(params_file: Path, overrides: list[str], start: Path, seconds: float, out: Path) -> dict:
    """Continue SFT of the policy at ``start`` for ``seconds``; the policy goes to ``out``; its figures."""
    from searchlab.model import load_model
    from searchlab.params import load_params
    from searchlab.train.sft import train_sft
    from smollm2 import StopAfter  # bench/smollm2.py's wall-clock stop (bench/ is on the path)

    if (out / "figures.json").is_file():
        return json.loads((out / "figures.json").read_text())
    p = load_params(params_file, overrides)
    data = ROOT / p.runtime.data_dir
    rate = {} if any(o.startswith("sft.learning_rate=") for o in overrides) else {"learning_rate": p.rl.learning_rate}
    # more steps than the budget holds: the wall clock stops training and sets the learning rate (the Trainer's
    # cosine over 10^6 steps stays at its peak meanwhile)
    sft = p.sft.model_copy(update={**rate, "max_steps": 10 ** 6, "save_steps": 10 ** 6, "warmup_ratio": 0.0})
    model, tokenizer = load_model(str(start), device="cpu")
    started = time.perf_counter()
    figures = train_sft(sft, model, tokenizer, data / "qa/demos.jsonl", out, out.parent / f"{out.name}-work",
                        callbacks=[StopAfter(seconds), wall_clock_cosine(seconds, sft.learning_rate)],
                        corpus_jsonl=data / "corpus/corpus.jsonl")
    figures.update({"budget_seconds": seconds, "learning_rate": sft.learning_rate,
                    "train_seconds_total": round(time.perf_counter() - started, 1)})
    (out / "figures.json").write_text(json.dumps(figures, indent=1))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params/default.yaml")
    parser.add_argument("--seconds", type=float, required=True, help="the training budget (RL's wall time)")
    parser.add_argument("--sft", type=Path, help="the starting policy; default <data_dir>/sft")
    parser.add_argument("--out", type=Path, help="default <data_dir>/.work/sft-control-<seconds>")
    parser.add_argument("--set", dest="overrides", action="append", default=[], help="KEY=VALUE")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")

    from searchlab.params import load_params

    data = ROOT / load_params(ROOT / args.params, args.overrides).runtime.data_dir
    start = (args.sft or data / "sft").resolve()
    if not (start / "config.json").is_file():
        sys.exit(f"bench/sft_control.py: {start} holds no policy; run `make demo` (or `searchlab run sft`) first")
    out = (args.out or data / f".work/sft-control-{args.seconds:g}").resolve()
    print(json.dumps(train_control(ROOT / args.params, args.overrides, start, args.seconds, out), indent=1))


if __name__ == "__main__":
    main()
