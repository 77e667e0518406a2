"""RL throughput benchmark (run by hand, after `make demo` built data/): where an RL step's time goes.

    python bench/rl.py                      # 10 RL steps of the demo's settings from data/sft
    python bench/rl.py --steps 20 --threads 2

In one run, on the demo's data (``data/sft``, ``data/base``, ``data/qa``, ``data/index``):

1. **Per-step split**: ``--steps`` GRPO steps of the ``rl`` params (``--params``)
   from the sft policy; the seconds in rollouts, in rewards, and the rest (TRL's
   log-probabilities, the loss's forward and backward, the optimizer), per step.
2. **Rollout tokens/s against plain ``generate``** at the same batch: the RL
   rollout (``rl.questions_per_step × rl.num_generations`` episodes, sampled at
   ``rl.temperature``) counts the model's own tokens per second; then one
   ``model.generate`` call on the same prompts samples exactly as many tokens per
   row as the rollouts' mean (``min_new_tokens = max_new_tokens``). Target: the
   ratio is at least 0.8. The batch's decode steps are at least its longest
   episode's tokens, so the mean episode's length over the longest's bounds the
   ratio (printed beside it), up to the cheaper steps of a batch that shrinks
   as its episodes end. So a second ``generate`` call samples each row exactly
   as many tokens as its episode (EOS banned before its last token, forced at
   it): the same tokens in the same number of steps, so that ratio is what the
   loop itself costs (searches, information blocks, turns). Both are split into the model's decode steps, its
   prefills (prompts and information blocks read at once) and the rest
   (sampling, logits processors, searches, Python), timed by forward hooks.
   The rollout (seeded: the same episodes each time) and both ``generate``
   calls run ``--repeats`` times, alternating, and the fastest of each counts:
   on this shared CPU one batch's rollout took from 1.0 to 2.0 s from one run
   to the next, so a single one said little.
3. **Trainer tokens/s against SFT's**: the tokens the loss read (prompts, model
   turns and information blocks of every episode) per second of the non-rollout
   part of the steps, against ``--sft-steps`` steps of the sft trainer on the
   demonstrations from ``data/base`` (its tokens/s), in the same run.

Output: stdout only: one line per figure, then one JSON line with all of them; trains in a temporary folder, deleted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


class ForwardTimes:
    """The model's forward calls while in the block, timed: decode steps (one new token per row) apart from
    prefills (a prompt, or a turn's information block, read at once)."""

    def __init__(self, model) -> None:
        self.model, self.decode_steps, self.decode_s, self.prefill_positions, self.prefill_s = model, 0, 0.0, 0, 0.0

    def __enter__(self) -> "ForwardTimes":
        def before(module, args, kwargs):
            self.started = time.perf_counter()

        def after(module, args, kwargs, output):
            seconds = time.perf_counter() - self.started
            ids = kwargs.get("input_ids", args[0] if args else None)
            if ids.shape[1] == 1:
                self.decode_steps, self.decode_s = self.decode_steps + 1, self.decode_s + seconds
            else:
                self.prefill_positions += ids.numel()
                self.prefill_s += seconds

        self.hooks = [self.model.register_forward_pre_hook(before, with_kwargs=True),
                      self.model.register_forward_hook(after, with_kwargs=True)]
        return self

    def __exit__(self, *exc) -> None:
        for hook in self.hooks:
            hook.remove()

    def split(self, seconds: float) -> dict:
        return {"decode_steps": self.decode_steps, "decode_s": round(self.decode_s, 2),
                "prefill_positions": self.prefill_positions, "prefill_s": round(self.prefill_s, 2),
                "rest_s": round(seconds - self.decode_s - self.prefill_s, 2)}


class RowLengths:
    """A logits processor: row ``r`` writes exactly ``lengths[r]`` tokens, the last of them EOS (banned before)."""

    def __init__(self, lengths: list[int], width: int, eos: int) -> None:
        import torch

        self.last, self.width, self.eos = torch.tensor(lengths) - 1, width, eos

    def __call__(self, input_ids, scores):
        ending = self.last == input_ids.shape[1] - self.width
        scores[:, self.eos] = float("-inf")
        scores[ending] = float("-inf")
        scores[ending, self.eos] = 0.0
        return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--params", default="params/default.yaml")
    parser.add_argument("--steps", type=int, default=10, help="at most 10: every step's episodes are counted")
    parser.add_argument("--sft-steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5, help="timed runs of the rollout and of each generate")
    args = parser.parse_args()

    import torch
    from transformers import LogitsProcessorList

    from searchlab.agent.protocol import instruction
    from searchlab.agent.rollout import rollout
    from searchlab.agent.text import encode_completion, encode_prompt
    from searchlab.jsonl import read_jsonl
    from searchlab.questions.record import read_questions
    from searchlab.model import load_model
    from searchlab.params import load_params
    from searchlab.retrieval import open_retriever
    from searchlab.rl.curriculum import Curriculum
    from searchlab.rl.env import training_rollout_params
    from searchlab.rl.train import rl_job, train_rl
    from searchlab.train.base import start_model
    from searchlab.train.sft import train_sft

    torch.set_num_threads(args.threads)
    p = load_params(ROOT / args.params)
    data = ROOT / p.runtime.data_dir
    missing = [s for s in ("sft", "base", "qa", "index", "corpus") if not (data / s / "manifest.json").is_file()]
    if missing:
        sys.exit(f"bench/rl.py: no {', '.join(f'data/{s}' for s in missing)}; run `make demo` (or "
                 f"`searchlab run sft`) first")
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, open_retriever(p.retriever, data / "index") as retriever:
        tmp = Path(tmp)
        # no dev scoring (it would count in the steps' time) and so the last checkpoint is the output
        rl = p.rl.model_copy(update={"steps": args.steps, "save_steps": args.steps, "samples": 0,
                                     "curriculum": [], "dev": p.rl.dev.model_copy(update={"questions": 0}),
                                     "keep": "last"})
        model, tokenizer = load_model(str(data / "sft"), device="cpu")
        started = time.perf_counter()
        rl_figures = train_rl(rl_job(p, data, data / "sft", tmp / "rl", tmp / "rl-work", rl=rl), model, tokenizer,
                              retriever)
        wall = time.perf_counter() - started
        rollout_s, reward_s, train_s = (rl_figures["rollout_seconds"], rl_figures["reward_seconds"],
                                        rl_figures["train_seconds"])
        rest = train_s - rollout_s - reward_s
        # every token the loss's forward and backward read: prompts, model turns and information blocks (TRL's
        # own num_tokens leaves the blocks out); every step's episodes are kept at this length of run
        kept = list(read_jsonl(tmp / "rl/trajectories.jsonl"))
        if len({r["step"] for r in kept}) != args.steps:
            sys.exit("bench/rl.py: expected the episodes of every step in trajectories.jsonl; use --steps <= 10")
        trained_tokens = sum(len(encode_prompt(tokenizer, instruction(r["question"])))
                             + len(encode_completion(tokenizer, r["completion"])) for r in kept)
        figures.update(steps=args.steps, step_s=round(train_s / args.steps, 3),
                       rollout_s_per_step=round(rollout_s / args.steps, 3),
                       reward_s_per_step=round(reward_s / args.steps, 4),
                       loss_backward_optimizer_s_per_step=round(rest / args.steps, 3),
                       rl_trainer_tokens_per_s=round(trained_tokens / rest, 1), rl_wall_s=round(wall, 1))
        print(f"per step: {figures['step_s']} s = rollout {figures['rollout_s_per_step']} s + reward "
              f"{figures['reward_s_per_step']} s + log-probs, loss, backward, optimizer "
              f"{figures['loss_backward_optimizer_s_per_step']} s")

        # rollout tokens/s against plain generate, same model, prompts, batch and sampling
        model, tokenizer = load_model(str(data / "sft"), device="cpu")
        questions = Curriculum(read_questions(data / "qa/train.jsonl"), [], rl.seed, 1).select(
            0, rl.questions_per_step)
        batch = [q.question for q in questions for _ in range(rl.num_generations)]
        params = training_rollout_params(p.rollout, rl, 0, len(batch))

        def timed(call):
            """(seconds, ForwardTimes, result) of ``call()``."""
            started = time.perf_counter()
            with ForwardTimes(model) as forwards:
                result = call()
            return time.perf_counter() - started, forwards, result

        episodes = rollout(model, tokenizer, retriever, batch, params)  # the same episodes every time (seeded)
        generated = sum(e.generated_tokens for e in episodes)
        per_row = max(1, round(generated / len(episodes)))
        lengths = [max(1, e.generated_tokens) for e in episodes]
        prompts = [encode_prompt(tokenizer, e.prompt) for e in episodes]
        width = max(map(len, prompts))
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        ids = torch.tensor([[pad] * (width - len(x)) + x for x in prompts])
        mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in prompts])

        def generate(**lengths_kwargs):
            torch.manual_seed(0)
            with torch.inference_mode():
                return model.generate(input_ids=ids, attention_mask=mask, do_sample=True, temperature=rl.temperature,
                                      top_p=1.0, top_k=0, pad_token_id=pad, **lengths_kwargs)

        calls = {
            "rollout": lambda: rollout(model, tokenizer, retriever, batch, params),
            # exactly the episodes' mean number of tokens in every row
            "generate": lambda: generate(max_new_tokens=per_row, min_new_tokens=per_row),
            # every row as long as its episode: generate then also lasts as long as the longest
            "generate_same_lengths": lambda: generate(
                max_new_tokens=max(lengths), eos_token_id=tokenizer.eos_token_id,
                logits_processor=LogitsProcessorList([RowLengths(lengths, width, tokenizer.eos_token_id)])),
        }
        runs: dict[str, list] = {name: [] for name in calls}
        for _ in range(args.repeats):  # alternating; on a shared CPU single runs move a lot, so the fastest counts
            for name, call in calls.items():
                seconds, forwards, result = timed(call)
                if name == "rollout" and sum(e.generated_tokens for e in result) != generated:
                    sys.exit("bench/rl.py: the seeded rollout gave other episodes on a repeat")
                runs[name].append((seconds, forwards))
        fastest = {name: min(timings, key=lambda timing: timing[0]) for name, timings in runs.items()}
        rollout_tps = generated / fastest["rollout"][0]
        plain_tps = per_row * len(batch) / fastest["generate"][0]
        same_tps = sum(lengths) / fastest["generate_same_lengths"][0]
        # a batch's rollout lasts as long as its longest episode, generate as long as the mean one: a bound
        longest = max(e.generated_tokens for e in episodes)
        figures.update(batch=len(batch), repeats=args.repeats, tokens_per_episode=per_row, longest_episode=longest,
                       mean_over_longest=round(per_row / longest, 3), rollout_tokens_per_s=round(rollout_tps, 1),
                       generate_tokens_per_s=round(plain_tps, 1), rollout_vs_generate=round(rollout_tps / plain_tps, 3),
                       generate_same_lengths_tokens_per_s=round(same_tps, 1),
                       rollout_vs_generate_same_lengths=round(rollout_tps / same_tps, 3),
                       seconds={name: [round(seconds, 3) for seconds, _ in timings] for name, timings in runs.items()})
        print(f"rollout {rollout_tps:.0f} model tokens/s against plain generate {plain_tps:.0f} tokens/s at batch "
              f"{len(batch)}, the fastest of {args.repeats} each: ratio {rollout_tps / plain_tps:.2f} (target >= "
              f"0.8); the episodes' mean length over the longest's, {per_row}/{longest} = {per_row / longest:.2f}, "
              "bounds its decode steps")
        print(f"against generate with each row as long as its episode ({same_tps:.0f} tokens/s): ratio "
              f"{rollout_tps / same_tps:.2f}")
        for name, (seconds, forwards) in fastest.items():
            split = forwards.split(seconds)
            figures.update({f"{name}_{key}": value for key, value in split.items()})
            print(f"  {name}: {split['decode_steps']} decode steps {split['decode_s']} s, prefill of "
                  f"{split['prefill_positions']} positions (prompts, information blocks, their padding) "
                  f"{split['prefill_s']} s, the rest (sampling, logits processors, searches, Python) {split['rest_s']} s"
                  f"; every run {', '.join(f'{t:.2f}' for t in figures['seconds'][name])} s")

        # SFT's trainer tokens/s on the same machine, in the same run
        sft = p.sft.model_copy(update={"max_steps": args.sft_steps, "save_steps": args.sft_steps,
                                       "eval_steps": args.sft_steps, "renamed_copies": 0})
        model, tokenizer = load_model(start_model(data / "base"), device="cpu")
        sft_figures = train_sft(sft, model, tokenizer, data / "qa/demos.jsonl", tmp / "sft", tmp / "sft-work")
        figures.update(sft_trainer_tokens_per_s=sft_figures["tokens_per_s"],
                       rl_vs_sft_trainer=round(figures["rl_trainer_tokens_per_s"] / sft_figures["tokens_per_s"], 3))
        print(f"trainer: RL {figures['rl_trainer_tokens_per_s']} tokens/s (log-probs, loss, backward, optimizer) "
              f"against SFT {sft_figures['tokens_per_s']} tokens/s: ratio {figures['rl_vs_sft_trainer']}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
