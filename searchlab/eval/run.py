"""Every selected model × system on every benchmark, resumable per shard, into metrics, predictions and a report.

A *shard* is one (benchmark, model, system): its questions are rolled out in
batches (:func:`searchlab.eval.systems.run_system`) and its per-question records
(:func:`searchlab.eval.metrics.question_record`) are written to one file in the
shard folder, atomically. A rerun after a crash loads the finished shards and
computes only the rest; a model is loaded only when one of its shards is missing.

Outputs in ``out_dir``: ``metrics.json`` (see :func:`run_evaluation`),
``predictions/<benchmark>/<model>-<system>.jsonl`` (every record with its full
trajectory), ``report.md`` (which also says how each system was run),
``em.png`` and ``searches.png``.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from searchlab.eval.metrics import compare, mean_record, question_record, summarize
from searchlab.questions.formats import Question
from searchlab.eval.report import (
    plot_em,
    plot_search_counts,
    write_report,
)
from searchlab.eval.config import EvalParams, SamplingParams
from searchlab.eval.systems import describe, run_system, sampled_params
from searchlab.files import write_atomically
from searchlab.jsonl import write_jsonl
from searchlab.params import RolloutParams

# the paired tests every model gets, when both systems ran: does searching beat one-shot retrieval, and the book?
COMPARISONS = (("agent", "rag"), ("agent", "direct"))

log = logging.getLogger("searchlab.evaluate")


def comparisons(models: Sequence[str], systems: Sequence[str]) -> list[tuple[str, str]]:
    """The paired tests, as ``(a, b)`` system keys: within each model :data:`COMPARISONS`, then every model
    against each earlier one with the same system (``rl/agent`` vs ``sft/agent``: did the later training help?).

    >>> comparisons(["sft", "rl"], ["agent"])
    [('rl/agent', 'sft/agent')]
    >>> comparisons(["base", "sft", "rl"], ["agent"])
    [('sft/agent', 'base/agent'), ('rl/agent', 'base/agent'), ('rl/agent', 'sft/agent')]
    """
    pairs = [(f"{name}/{a}", f"{name}/{b}") for name in models for a, b in COMPARISONS
             if a in systems and b in systems]
    pairs += [(f"{later}/{system}", f"{earlier}/{system}") for j, later in enumerate(models)
              for earlier in models[:j] for system in systems]
    return pairs


def _shard(path: Path, compute: Callable[[], dict]) -> dict:
    """The shard's ``{"records", "seconds"}``: read back if a previous run finished it, else computed and saved."""
    if path.is_file():
        return json.loads(path.read_text())
    shard = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, lambda out: out.write(json.dumps(shard).encode()))
    return shard


MAX_MISSING_EVIDENCE = 0.1  # share of a benchmark's evidence passages the index may lack before it is refused


def check_evidence(benchmarks: Mapping[str, list[Question]], indexed_ids: Callable[[], set[str]],
                   index: Path) -> None:
    """ValueError when a benchmark's questions list evidence passages (``metadata.evidence``) of which more than
    :data:`MAX_MISSING_EVIDENCE` are not in the index: its found-evidence rate would be a silent zero.
    ``indexed_ids`` is read only when some benchmark lists evidence."""
    listed = {name: {doc for q in questions for doc in q.metadata.get("evidence") or ()}
              for name, questions in benchmarks.items()}
    if not any(listed.values()):
        return
    known = indexed_ids()
    for name, evidence in listed.items():
        missing = len(evidence - known)
        if evidence and missing / len(evidence) > MAX_MISSING_EVIDENCE:
            source = benchmarks[name][0].where.rpartition(": ")[0] or name
            raise ValueError(
                f"{missing} of the {len(evidence)} evidence passages that benchmark {name} ({source}) lists are not "
                f"in the index {index}: it indexes another corpus, so every found-evidence rate would be 0. Index "
                "the corpus those questions were written against (corpus.source and corpus.path), or drop "
                "metadata.evidence from the file")


def run_evaluation(models: Mapping[str, Callable[[], tuple[Any, Any]]],
                   systems: Sequence[str] | Mapping[str, Sequence[str]],
                   benchmarks: Mapping[str, list[Question]], retriever, params: RolloutParams, out_dir: Path,
                   shard_dir: Path, settings: EvalParams = EvalParams()) -> dict[str, Any]:
    """Evaluate, write the outputs, and return the results (written as ``metrics.json`` but for the throughput).

    ``models`` maps a model's name (``"sft"``) to a function that loads it as
    ``(model, tokenizer)``; ``systems`` are every model's, or map each model's name to its own;
    ``benchmarks`` maps a benchmark's name to its
    questions. Results: ``{"benchmarks": {name: {"questions", "systems":
    {"<model>/<system>": summary}, "comparisons": {"<model>/agent vs
    <model>/rag": paired test on EM}}}, "throughput": {"<model>/<system>":
    {"questions_per_s"}}}``.

    A finished shard in ``shard_dir`` is trusted as it is, so the folder must
    belong to exactly these models, questions and params (a stage's resume
    folder, named by its fingerprint, is). Of ``settings`` (the ``eval``
    section) it reads the bootstrap's ``resamples`` and ``seed``, and ``sampling``:
    the ``sampled`` system's temperature, episodes per question and seed. Each
    shard's start is logged (``searchlab.evaluate``).
    """
    sampling, resamples, seed = settings.sampling, settings.resamples, settings.seed
    systems_of = dict(systems) if isinstance(systems, Mapping) else {name: list(systems) for name in models}
    every_system = list(dict.fromkeys(system for name in models for system in systems_of[name]))
    agent = functools.cache(lambda name: models[name]())  # each model loaded once, when first needed

    results: dict[str, Any] = {"benchmarks": {}, "throughput": {}}
    search_counts: dict[str, dict[str, list[int]]] = {}
    timing: dict[str, list[float]] = {}  # system key -> [questions, seconds]
    for benchmark, questions in benchmarks.items():
        records_by_key: dict[str, list[dict]] = {}
        for name in models:
            for system in systems_of[name]:
                key = f"{name}/{system}"
                log.info("evaluate: %s %s (%d questions)", benchmark, key, len(questions))

                def compute(name=name, system=system, questions=questions) -> dict:
                    model, tokenizer = agent(name)  # loading is not part of the timed rollouts
                    started = time.perf_counter()
                    records = _answer(system, model, tokenizer, retriever, questions, params, sampling)
                    return {"records": records, "seconds": time.perf_counter() - started}

                shard = _shard(shard_dir / benchmark / f"{name}-{system}.json", compute)
                records_by_key[key] = shard["records"]
                total = timing.setdefault(key, [0, 0.0])
                total[0] += len(questions)
                total[1] += shard["seconds"]
                predictions = out_dir / "predictions" / benchmark
                predictions.mkdir(parents=True, exist_ok=True)
                write_jsonl(predictions / f"{name}-{system}.jsonl", shard["records"])
        results["benchmarks"][benchmark] = {
            "questions": len(questions),
            "systems": {key: summarize(records, resamples, seed) for key, records in records_by_key.items()},
            "comparisons": _comparisons(records_by_key, list(models), every_system, resamples, seed),
        }
        search_counts[benchmark] = {key: [r["searches"] for r in records] for key, records in records_by_key.items()}
    results["throughput"] = {key: {"questions_per_s": round(n / seconds, 3) if seconds else 0.0}
                             for key, (n, seconds) in timing.items()}
    _write_results(results, search_counts, every_system, params, sampling, out_dir)
    return results


def _comparisons(records_by_key: dict[str, list[dict]], models: list[str], systems: list[str], resamples: int,
                 seed: int) -> dict[str, dict]:
    """The paired EM tests of one benchmark, ``"<model>/agent vs <model>/rag"`` and the others
    :func:`comparisons` pairs, for the pairs both of whose systems ran."""
    return {f"{a} vs {b}": compare(records_by_key[a], records_by_key[b], "em", resamples, seed)
            for a, b in comparisons(models, systems) if a in records_by_key and b in records_by_key}


def _answer(system: str, model, tokenizer, retriever, questions: list[Question], params: RolloutParams,
            sampling: SamplingParams) -> list[dict]:
    """Each question's prediction record by ``system``; the ``sampled`` system's is the mean over its episodes."""
    if system != "sampled":
        episodes = run_system(system, model, tokenizer, retriever, [q.question for q in questions], params)
        return [question_record(q, e) for q, e in zip(questions, episodes)]
    k = sampling.samples
    asked = [q for q in questions for _ in range(k)]
    episodes = run_system(system, model, tokenizer, retriever, [q.question for q in asked],
                          sampled_params(params, sampling.temperature, sampling.seed))
    return [mean_record([question_record(q, e) for e in episodes[i * k:(i + 1) * k]]) for i, q in enumerate(questions)]


def _write_results(results: dict, search_counts: dict, systems: list[str], params: RolloutParams,
                   sampling: SamplingParams, out_dir: Path) -> None:
    """``metrics.json``, ``report.md`` and the charts of ``results``."""
    # the files hold what the evaluation found, the same on every run of it; the speeds go to the caller alone
    found = {k: v for k, v in results.items() if k != "throughput"}
    write_atomically(out_dir / "metrics.json", lambda out: out.write(json.dumps(found, indent=1).encode()))
    how = {system: describe(system, params) for system in systems}
    if "sampled" in how:
        how["sampled"] = describe("sampled", sampled_params(params, sampling.temperature, sampling.seed),
                                  sampling.samples)
    write_report(out_dir / "report.md", found, systems=how)
    plot_em(results, out_dir / "em.png")
    plot_search_counts(search_counts, out_dir / "searches.png")
