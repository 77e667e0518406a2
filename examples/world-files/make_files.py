"""Export the demo's synthetic world as a user's own data: a passage file and labeled questions, no KB.

    searchlab run benchmarks                     # the demo's world: corpus, index, qa, benchmarks (data/)
    python examples/world-files/make_files.py    # -> inputs/world-files/
    searchlab run --params params/world-files.yaml

The own-data example (``examples/own-data``, 195 questions) is small enough for the test suite but cannot resolve
an EM difference; this testbed is the demo world seen the way a passage file and question files are: thousands
of passages, over a thousand training questions and five held-out suites of 150, with the world's KB, evidence
chains and difficulty buckets left behind. Written to ``--out`` (default ``inputs/world-files/``, which git
ignores; everything in it is derived from the synthetic world, nothing third-party):

- ``passages.jsonl``: ``data/corpus/corpus.jsonl`` as Search-R1's corpus format, ``{"id", "contents":
  "\\"Title\\"\\ntext"}`` (it already is; ``kb.jsonl`` is not exported);
- ``train.parquet``: qa's train and dev questions as verl rows (Search-R1's: its prompt template,
  ``reward_model.ground_truth.target``, ``data_source``, ``extra_info``), the answer list only;
- ``train-nq.jsonl``: the same questions in NQ-open JSONL (``{"question", "answer": [...]}``, R1-Searcher's eval
  shape), the second format, for a profile that reads both;
- ``train-hotpot.json``: the same questions as HotpotQA records (``_id``, ``question``, ``answer``: the first gold
  answer, as HotpotQA has one, ``type``, ``supporting_facts``: ``[title, 0]`` of each evidence passage in the
  order the question's chain reads them, without the paragraphs): the third format, the one that names supporting
  passages, from which the qa stage's demonstrations search those titles after the question;
- ``test-<type>.jsonl``: the built benchmark suites (``data/benchmarks/world-*.jsonl``) in FlashRAG JSONL, ids,
  questions and gold answers only: the questions whose answers synthesis held out, so no training answer is
  evaluated.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples/own-data"))

from make_files import SEARCH_R1_PROMPT  # noqa: E402  (the own-data example's verl prompt template)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT / "data", help="the built demo (corpus, qa, benchmarks)")
    parser.add_argument("--out", type=Path, default=ROOT / "inputs/world-files")
    args = parser.parse_args()
    needed = [args.data / "corpus/corpus.jsonl", args.data / "qa/train.jsonl", args.data / "qa/dev.jsonl",
              *sorted((args.data / "benchmarks").glob("world-*.jsonl"))]
    missing = [str(p) for p in needed if not p.is_file()]
    if missing or len(needed) < 4:
        sys.exit(f"make_files.py: the built demo is missing {', '.join(missing) or 'data/benchmarks/world-*.jsonl'}; "
                 f"run `searchlab run benchmarks` first")
    args.out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(args.data / "corpus/corpus.jsonl", args.out / "passages.jsonl")
    questions = read_jsonl(args.data / "qa/train.jsonl") + read_jsonl(args.data / "qa/dev.jsonl")
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"id": q["id"], "data_source": "world", "prompt": [{"role": "user", "content": SEARCH_R1_PROMPT.format(
        question=q["question"])}], "ability": "fact-reasoning", "reward_model": {"style": "rule", "ground_truth": {
            "target": q["answers"]}}, "extra_info": {"split": "train", "index": i}} for i, q in enumerate(questions)]
    pq.write_table(pa.Table.from_pylist(rows), args.out / "train.parquet")
    with open(args.out / "train-nq.jsonl", "w", encoding="utf-8") as f:
        for q in questions:
            f.write(json.dumps({"question": q["question"], "answer": q["answers"]}, ensure_ascii=False) + "\n")
    titles = {r["id"]: r["contents"].split("\n", 1)[0].strip('"') for r in read_jsonl(args.out / "passages.jsonl")}
    hotpot = [{"_id": q["id"], "question": q["question"], "answer": q["answers"][0], "type": q["type"],
               "supporting_facts": [[titles[p], 0] for p in q["evidence"] or []]} for q in questions]
    (args.out / "train-hotpot.json").write_text(json.dumps(hotpot, ensure_ascii=False), encoding="utf-8")
    suites = sorted((args.data / "benchmarks").glob("world-*.jsonl"))
    for suite in suites:  # id, question and answers only: the world's evidence and buckets stay behind
        with open(args.out / f"test-{suite.stem.removeprefix('world-')}.jsonl", "w", encoding="utf-8") as f:
            for q in read_jsonl(suite):
                f.write(json.dumps({"id": q["id"], "question": q["question"], "golden_answers": q["golden_answers"]},
                                   ensure_ascii=False) + "\n")
    passages = sum(1 for _ in open(args.out / "passages.jsonl", encoding="utf-8"))
    print(f"{args.out}: {passages} passages, {len(questions)} training questions (train.parquet, train-nq.jsonl, "
          f"train-hotpot.json), "
          f"{len(suites)} test files of {', '.join(str(len(read_jsonl(s))) for s in suites)} questions")


if __name__ == "__main__":
    main()
