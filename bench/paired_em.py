"""Two runs' evaluations, question by question: did a change move any suite's exact match?

    python bench/paired_em.py BEFORE/data/evaluate AFTER/data/evaluate
    python bench/paired_em.py BEFORE/data/evaluate AFTER/data/evaluate --resamples 10000

For every suite and model/system that both ``evaluate`` folders scored
(``predictions/<suite>/<model>-<system>.jsonl``), on the questions both hold
(matched by id): EM before and after, the difference after − before with its
95% interval and two-sided p-value from the paired bootstrap
(:func:`searchlab.eval.metrics.compare`: both runs resampled on the same
questions), and how many predictions are the same text. Prints one line per
pair, then how many pairs moved at p < 0.05 and the Bonferroni threshold over
the pairs whose predictions differ at all (identical ones test nothing).

Output: stdout only; writes no file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from searchlab.eval.metrics import compare  # noqa: E402
from searchlab.jsonl import read_jsonl  # noqa: E402


def _predictions(path: Path) -> dict[str, dict]:
    return {row["id"]: row for row in read_jsonl(path)}


def _em(rows: list[dict]) -> float:
    return sum(row["em"] for row in rows) / len(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
        old, new = [a[i] for i in ids], [b[i] for i in ids]
        test = compare(new, old, resamples=args.resamples)
        same = sum(x["prediction"] == y["prediction"] for x, y in zip(old, new))
        compared += 1
        differing += same < len(ids)
        moved += test["p_value"] < 0.05
        print(f"{before.parent.name:16s} {before.stem:16s} n={len(ids):4d}  EM {_em(old):.3f} -> {_em(new):.3f}"
              f"  diff {test['difference']:+.3f} [{test['low']:+.3f}, {test['high']:+.3f}]"
              f"  p={test['p_value']:.3f}  same predictions {same}/{len(ids)}")
    if not compared:
        sys.exit("the two folders share no suite and model/system with a common question")
    print(f"{moved} of {compared} pairs moved at p < 0.05; {differing} pairs predict differently, so Bonferroni's "
          f"threshold is {0.05 / max(differing, 1):.4f}")


if __name__ == "__main__":
    main()
