"""Two runs' evaluations, question by question: did a change move any suite's exact match?

    python bench/paired_em.py BEFORE/data/evaluate AFTER/data/evaluate
    python bench/paired_em.py BEFORE/data/evaluate AFTER/data/evaluate --resamples 10000

For every suite and model/system that both ``evaluate`` folders scored
(``predictions/<suite>/<model>-<system>.jsonl``), on the questions both hold
(matched by id): EM before and after, the difference after − before with its
95% interval and two-sided p-value from the paired bootstrap
(:func:`searchlab.eval.stats.paired_bootstrap`: both runs resampled on the same
questions), and how many predictions are the same text. Prints one line per
pair, then how many pairs moved at p < 0.05 and the Bonferroni threshold over
the pairs whose predictions differ at all (identical ones test nothing).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from searchlab.eval.stats import paired_bootstrap  # noqa: E402


def _predictions(path: Path) -> dict[str, dict]:
    with path.open() as lines:
        return {row["id"]: row for row in map(json.loads, lines)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path, help="an evaluate stage's folder (data/evaluate)")
    parser.add_argument("after", type=Path, help="the other run's evaluate folder")
    parser.add_argument("--resamples", type=int, default=2000)
    args = parser.parse_args()
    for folder in (args.before, args.after):
        if not (folder / "predictions").is_dir():
            sys.exit(f"{folder}: no predictions/ folder; give an evaluate stage's folder, e.g. data/evaluate")

    compared = differing = moved = 0
    for before in sorted((args.before / "predictions").glob("*/*.jsonl")):
        after = args.after / "predictions" / before.parent.name / before.name
        if not after.is_file():
            continue
        a, b = _predictions(before), _predictions(after)
        ids = sorted(a.keys() & b.keys())
        if not ids:
            continue
        test = paired_bootstrap([b[i]["em"] for i in ids], [a[i]["em"] for i in ids], resamples=args.resamples)
        same = sum(a[i]["prediction"] == b[i]["prediction"] for i in ids)
        compared += 1
        differing += same < len(ids)
        moved += test.p_value < 0.05
        print(f"{before.parent.name:16s} {before.stem:16s} n={len(ids):4d}  EM {sum(a[i]['em'] for i in ids) / len(ids):.3f}"
              f" -> {sum(b[i]['em'] for i in ids) / len(ids):.3f}  diff {test.difference:+.3f}"
              f" [{test.low:+.3f}, {test.high:+.3f}]  p={test.p_value:.3f}  same predictions {same}/{len(ids)}")
    if not compared:
        sys.exit("the two folders share no suite and model/system with a common question")
    print(f"{moved} of {compared} pairs moved at p < 0.05; {differing} pairs predict differently, so Bonferroni's "
          f"threshold is {0.05 / max(differing, 1):.4f}")


if __name__ == "__main__":
    main()
