"""Sampling benchmark (run by hand): ``torch.multinomial`` against an inverse-CDF draw, cost and distribution.

    python bench/sampling.py
    python bench/sampling.py --draws 1000000

For a batch of ``--rows`` over a ``--vocab`` of a peaked distribution (a few
likely tokens and a long tail, at temperature 0.7, like a trained model's next
token), prints each draw's milliseconds per call, then the frequencies each
gives the three likeliest tokens and the tail (tokens of probability below
1e-3) over ``--draws`` samples, beside the exact probabilities and the tail's
standard error. Both draws are exact in theory; the rollouts use the inverse
CDF (``searchlab.agent.rollout.draw``; docs/results/rl.md, "The sampler, again").

Output: stdout only: the exact figures, then one line per sampler; writes no file.
"""

from __future__ import annotations

import argparse
import time

import torch

from searchlab.agent.rollout import draw


def multinomial(probs: torch.Tensor) -> torch.Tensor:
    return torch.multinomial(probs, num_samples=1)[:, 0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--draws", type=int, default=320_000)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    logits = torch.randn(args.vocab) * 2.5
    logits[:3] += torch.tensor([12.0, 10.0, 9.0])
    p = torch.softmax(logits / 0.7, dim=-1)
    probs = p.expand(args.rows, -1).contiguous()
    tail = p < 1e-3
    print(f"exact: top 3 {[round(x, 4) for x in p[:3].tolist()]}, tail mass {p[tail].sum():.5f} "
          f"(standard error over {args.draws} draws: {(p[tail].sum() * (1 - p[tail].sum()) / args.draws) ** 0.5:.5f})")
    for name, sample in (("torch.multinomial", multinomial), ("inverse CDF", draw)):
        sample(probs)
        started, calls = time.perf_counter(), 0
        counts = torch.zeros(args.vocab)
        while calls * args.rows < args.draws:
            counts += torch.bincount(sample(probs), minlength=args.vocab)
            calls += 1
        ms = (time.perf_counter() - started) / calls * 1000
        freq = counts / counts.sum()
        print(f"{name}: {ms:.3f} ms per call (bincount included), top 3 {[round(x, 4) for x in freq[:3].tolist()]}, "
              f"tail {freq[tail].sum():.5f}")


if __name__ == "__main__":
    main()
