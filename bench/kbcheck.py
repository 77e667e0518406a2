"""How often the self-play KB check confirms questions that are right and unique by construction: the qa stage's
single, bridge and compose questions, built by its generator over the first targets of the built corpus.

    python bench/kbcheck.py [--targets 600]      # after `searchlab run corpus` (reads data/corpus)

Prints, per type, the questions built and the share :class:`searchlab.selfplay.verify.KBCheck` confirms (its
recall; every one of them is right and unique).

Output: stdout only, one line per question type; writes no file.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from searchlab.selfplay.verify import KBCheck
    from searchlab.synth.generate import Builder
    from searchlab.corpus.kb import KB

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", type=int, default=600)
    parser.add_argument("--corpus", default=str(ROOT / "data/corpus"))
    args = parser.parse_args()
    kb = KB.load(Path(args.corpus))
    check = KBCheck(kb)
    for kind in ("single", "bridge", "compose"):
        builder = Builder(kb, random.Random(1))
        questions = [q for q in (builder.build(kind, target, kind) for target in list(kb.entities)[:args.targets]) if q]
        confirmed = sum(check.right_and_unique(q.question, q.answers[0]) for q in questions)
        print(f"{kind}: {len(questions)} questions, KB check confirms {confirmed / len(questions):.1%}")


if __name__ == "__main__":
    main()
