"""Training questions read from labeled files: the qa stage's source besides synthesis (``qa.source: files``).

The field trains search agents on existing labeled sets (NQ + HotpotQA train in Search-R1's verl rows, FlashRAG
JSONL, ...). :func:`import_questions` reads each ``qa.files`` entry with the readers evaluation uses
(:func:`searchlab.questions.formats.load_benchmark`: one parser per format in the project), drops the questions an
evaluated benchmark also holds (the same normalised text, or the same id), splits a dev share off by a seeded hash
of the question, and writes the records (:class:`~searchlab.questions.record.QuestionRecord`) the sft, rl and
selfplay stages read:

- ``train.jsonl`` / ``dev.jsonl``: ``{id, type, question, answers, evidence: null, features: {bucket: null},
  source, metadata}``; ``type`` and ``source`` are the file's name in ``qa.files``, the bucket is unknown (no
  difficulty was measured), and so is the evidence;
- ``heldout.jsonl``: empty (the benchmarks are the held-out sets);
- ``demos.jsonl`` (given the index): the demonstrations SFT learns from, one per train or dev question whose search
  finds a gold answer (:mod:`searchlab.labeled.demos`), in synthesis's shape;
- ``overlap.json`` and ``datasheet.md``: the overlap of every (training file, benchmark) pair, what was dropped.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import replace
from pathlib import Path

from searchlab.jsonl import write_jsonl
from searchlab.labeled.demos import labeled_demonstrations
from searchlab.questions.config import QuestionFileParams
from searchlab.questions.formats import BenchmarkError, load_benchmark
from searchlab.questions.record import QuestionRecord
from searchlab.retrieval.base import Retriever
from searchlab.scoring import normalize_answer
from searchlab.synth.config import QAParams

# Ids a file does not give are made from its name: training files get a name of their own, so a made-up id such
# as "nq-3" can never equal a benchmark's made-up one and pass for the same question.
TRAIN_SUFFIX = ".train"


class OverlapError(ValueError):
    """Training questions that an evaluated benchmark holds, with ``qa.on_overlap: fail``."""


def read_files(files: dict[str, QuestionFileParams], root: Path, key: str,
               suffix: str = "") -> dict[str, list[QuestionRecord]]:
    """``{name: questions}`` of each file (a seeded sample where one is asked for), ids the file does not give made
    from ``name + suffix``; a ValueError naming ``<key>.<name>`` and the file, line and key at fault for one that
    does not load."""
    loaded = {}
    for name, spec in files.items():
        path = root / spec.path
        if not path.is_file():
            raise ValueError(f"{key}.{name}.path: no such file: {path}")
        try:
            loaded[name] = load_benchmark(path, name + suffix, spec.format, spec.sample, spec.seed)
        except BenchmarkError as err:
            raise ValueError(f"{key}.{name}: {err}") from None
    return loaded


def overlap(train: list[QuestionRecord], benchmark: list[QuestionRecord]) -> list[tuple[QuestionRecord, str]]:
    """The training questions ``benchmark`` holds too, each with how it matched: ``"text"`` (the same question
    after SQuAD normalisation) or ``"id"`` (the same id)."""
    texts = {normalize_answer(q.question) for q in benchmark}
    ids = {q.id for q in benchmark}
    found = []
    for q in train:
        if normalize_answer(q.question) in texts:
            found.append((q, "text"))
        elif q.id in ids:
            found.append((q, "id"))
    return found


def is_dev(question: str, seed: int, share: float) -> bool:
    """Whether a question goes to dev: a seeded hash of its normalised text, so the split does not depend on the
    file's order, its sample, or which other files are read."""
    digest = hashlib.sha256(f"{seed}/{normalize_answer(question)}".encode()).hexdigest()
    return int(digest[:12], 16) / 16 ** 12 < share


def import_questions(qa: QAParams, benchmarks: dict[str, QuestionFileParams], root: Path, out_dir: Path,
                     retriever: Retriever | None = None) -> dict:
    """Fill ``out_dir`` with the training questions of ``qa.files`` (see the module doc), minus those in
    ``benchmarks`` (``eval.benchmarks``: read whole, whatever sample evaluation takes); return the counts. With
    ``retriever`` (the index the agent searches), also ``demos.jsonl``: the demonstrations of the train and dev
    questions whose search finds a gold answer (:mod:`searchlab.labeled.demos`).

    With ``qa.on_overlap: fail``, any overlap is an :class:`OverlapError` naming the pair and a question.
    """
    train_files = read_files(qa.files, root, "qa.files", TRAIN_SUFFIX)
    eval_files = read_files({name: spec.model_copy(update={"sample": None}) for name, spec in benchmarks.items()},
                            root, "eval.benchmarks")
    pairs, dropped_ids = [], set()
    for train_name, questions in train_files.items():
        for bench_name, bench in eval_files.items():
            found = overlap(questions, bench)
            how = Counter(match for _, match in found)
            pairs.append({"train": train_name, "benchmark": bench_name, "train_questions": len(questions),
                          "benchmark_questions": len(bench), "overlap": len(found), "by_text": how["text"],
                          "by_id": how["id"], "examples": [q.question for q, _ in found[:3]]})
            if found and qa.on_overlap == "fail":
                first = found[0][0]
                raise OverlapError(f"qa.on_overlap is 'fail': {len(found)} training question(s) of qa.files."
                                   f"{train_name} are in eval.benchmarks.{bench_name} (e.g. {first.id}: "
                                   f"{first.question!r}); set qa.on_overlap: drop to train without them")
            dropped_ids.update((train_name, q.id) for q, _ in found)
    splits: dict[str, list[QuestionRecord]] = {"train": [], "dev": []}
    seen: set[str] = set()
    duplicates = 0
    for name, questions in train_files.items():
        for q in questions:
            key = normalize_answer(q.question)
            if (name, q.id) in dropped_ids:
                continue
            if key in seen:  # the same question in two files (or twice in one): trained on once
                duplicates += 1
                continue
            seen.add(key)
            split = "dev" if is_dev(q.question, qa.seed, qa.dev_share) else "train"
            splits[split].append(_record(name, q))
    if not splits["train"]:
        raise ValueError(f"qa.files: no training question left of {sum(map(len, train_files.values()))} read "
                         f"({len(dropped_ids)} also in evaluated benchmarks, {duplicates} duplicates, the rest dev)")
    write_jsonl(out_dir / "train.jsonl", [q.to_json() for q in splits["train"]])
    write_jsonl(out_dir / "dev.jsonl", [q.to_json() for q in splits["dev"]])
    write_jsonl(out_dir / "heldout.jsonl", [])
    demo_counts = {}
    if retriever is not None:
        stored = [(split, record) for split in ("train", "dev") for record in splits[split]]
        demos, demo_counts = labeled_demonstrations(stored, retriever, qa.demos.topk, qa.demos.max_searches)
        write_jsonl(out_dir / "demos.jsonl", demos)
    report = {"files": {name: len(qs) for name, qs in train_files.items()}, "pairs": pairs,
              "dropped": len(dropped_ids), "duplicates": duplicates, "on_overlap": qa.on_overlap}
    (out_dir / "overlap.json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    (out_dir / "datasheet.md").write_text(datasheet(report, len(splits["train"]), len(splits["dev"]), demo_counts))
    counts = {"read": sum(report["files"].values()), "train": len(splits["train"]), "dev": len(splits["dev"]),
              "overlap_dropped": len(dropped_ids), "duplicates": duplicates,
              **{k: v for k, v in demo_counts.items() if k != "questions"}}
    counts.update({f"overlap.{p['train']}.{p['benchmark']}": p["overlap"] for p in pairs})
    return counts


def _record(name: str, q: QuestionRecord) -> QuestionRecord:
    """The stored record of a question read from file ``name`` (its type and source): evidence and bucket unknown."""
    return replace(q, type=name, evidence=None, features={"bucket": None}, source=name)


def datasheet(report: dict, train: int, dev: int, demos: dict | None = None) -> str:
    """``datasheet.md``: where the questions came from, the overlap with every evaluated benchmark and how many
    questions gave a demonstration."""
    lines = ["# Training questions from files", "",
             f"{sum(report['files'].values())} questions read: " +
             ", ".join(f"{name} {n}" for name, n in report["files"].items()) + ".",
             f"Kept {train} for training and {dev} for dev; dropped {report['dropped']} that an evaluated benchmark "
             f"holds (qa.on_overlap: {report['on_overlap']}) and {report['duplicates']} duplicates.", ""]
    if demos:
        missed = ", ".join(f"{k.removeprefix('no_demo.').replace('_', ' ')} {v}" for k, v in demos.items()
                           if k.startswith("no_demo."))
        lines += [f"Demonstrations: {demos['demos']} of the {demos['questions']} train and dev questions "
                  f"({demos['demo_share']:.0%}; {demos['demos_with_follow_up']} after searching a supporting title "
                  f"too): searched as written, kept when a retrieved passage holds a gold answer (none for: "
                  f"{missed or 'none'}).", ""]
    if report["pairs"]:
        lines += ["## Overlap with the evaluated benchmarks", "",
                  "Same question after SQuAD normalisation (text), or the same id (id).", "",
                  "| training file | benchmark | training questions | benchmark questions | overlap | by text | by id "
                  "| examples |", "|---|---|---:|---:|---:|---:|---:|---|"]
        lines += [f"| {p['train']} | {p['benchmark']} | {p['train_questions']} | {p['benchmark_questions']} | "
                  f"{p['overlap']} | {p['by_text']} | {p['by_id']} | {'; '.join(p['examples'])} |"
                  for p in report["pairs"]]
    else:
        lines += ["No external benchmark is evaluated (eval.benchmarks is empty): nothing to check for overlap."]
    return "\n".join(lines) + "\n"
