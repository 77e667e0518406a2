"""QA synthesis end to end: shards of target entities → verified, filtered questions → training data and held-out sets.

:func:`synthesize` reads the corpus (``kb.jsonl``, ``corpus.jsonl``) and the
index, and fills ``out_dir`` with:

- ``train.jsonl`` / ``dev.jsonl``: kept questions with their constraints, evidence chain, difficulty
  features and bucket (the curriculum's input);
- ``demos.jsonl``: one demonstration per train/dev question, ``{id, split, type, question, answers, role,
  prompt, completion}`` in the agent protocol (``role`` ``solver``), and with ``qa.demos.proposer`` one more per
  chain question for the self-play proposer (``role`` ``proposer``: the prompt gives the answer, the completion
  ends with the question);
- ``heldout.jsonl``: kept questions whose answers are reserved for the benchmark suites;
- ``stats.json`` and ``datasheet.md``: counts by type and bucket, rejections by reason, examples.

Work goes shard by shard (``qa.shard_size`` targets each). A finished shard is
written atomically to ``work_dir``, so a rerun after a crash skips it; every
shard draws from its own seeded random stream, so the result does not depend
on where a run was interrupted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
from collections import Counter
from pathlib import Path

from searchlab.agent.protocol import instruction, proposer_instruction
from searchlab.corpus.kb import KB, passage_states
from searchlab.files import write_atomically
from searchlab.jsonl import write_jsonl
from searchlab.params import RetrieverParams
from searchlab.progress import track
from searchlab.questions.record import BUCKETS, QUESTION_TYPES, QuestionRecord
from searchlab.retrieval import open_retriever
from searchlab.retrieval.base import TimedRetriever
from searchlab.scoring import normalize_answer
from searchlab.synth.config import QAParams
from searchlab.synth.demos import DemoWriter
from searchlab.synth.generate import Builder, Question
from searchlab.synth.report import write_datasheet
from searchlab.synth.solvers import Roster

log = logging.getLogger("searchlab")


def synthesize(params: QAParams, retriever: RetrieverParams, corpus_dir: Path, index_dir: Path,
               out_dir: Path, work_dir: Path) -> dict:
    """Run synthesis into the empty folder ``out_dir`` (shards resume from ``work_dir``); return the counts."""
    started = time.perf_counter()
    kb = KB.load(corpus_dir)
    targets = list(kb.entities)
    shards = [targets[i:i + params.shard_size] for i in range(0, len(targets), params.shard_size)]
    work_dir.mkdir(parents=True, exist_ok=True)
    done = sum((work_dir / _shard_name(i)).exists() for i in range(len(shards)))
    if done:
        log.info("qa: resuming, %d of %d shards already done", done, len(shards))
    with open_retriever(retriever, index_dir) as opened:
        search = TimedRetriever(opened)
        roster = Roster(params.solvers, kb)
        nli = _nli(params)
        try:
            for i, shard in track(list(enumerate(shards)), desc="qa: shards", unit="shard"):
                path = work_dir / _shard_name(i)
                if not path.exists():
                    _write_shard(path, _run_shard(params, kb, search, roster, nli, i, shard))
        finally:
            roster.close()
            if nli is not None:
                nli.close()
    counts = _merge(params, kb, [work_dir / _shard_name(i) for i in range(len(shards))], out_dir)
    counts["seconds"] = round(time.perf_counter() - started, 2)
    counts["search_seconds"], counts["searches"] = round(search.seconds, 2), search.queries
    counts["questions_per_s"] = round(counts["kept"] / max(counts["seconds"], 1e-9), 2)
    return counts


# ---------------------------------------------------------------------- one shard
def _run_shard(params: QAParams, kb: KB, search, roster: Roster, nli, index: int, targets: list[str]) -> dict:
    """One shard of synthesis: candidates for ``targets``, the checks, the demonstrations; its questions and counts."""
    rng = random.Random(f"{params.seed}/shard/{index}")  # the builder's, then the demonstrations' stream
    rejected: Counter[str] = Counter()
    candidates = _candidates(params, kb, rng, index, targets, rejected)
    attempts = len(targets) * (params.attempts_per_target + params.heldout_attempts_per_target)
    kept = _checked(params, kb, search, roster, nli, candidates, rejected)
    # demonstrations for the questions that train (held-out ones are only ever evaluated)
    training = [q for q in kept if not is_heldout(params, q.answers[0])]
    demos, proposals = _demonstrations(params, kb, search, rng, index, training, rejected)
    records = [{**q.to_json(), "demo": demos.get(q.id), "proposal_demo": proposals.get(q.id)} for q in kept
               if q.id not in demos or demos[q.id] is not None]
    return {"shard": index, "attempts": attempts, "candidates": len(candidates), "questions": records,
            "rejected": dict(rejected)}


def _candidates(params: QAParams, kb: KB, rng: random.Random, index: int, targets: list[str],
                rejected: Counter[str]) -> list[Question]:
    """The questions built for ``targets`` (``attempts_per_target`` each from ``rng``, then the held-out suites'
    extra attempts from a stream of their own), distinct by text; the builders' refusals go to ``rejected``."""
    kinds = [k for k in QUESTION_TYPES if params.types.get(k, 0) > 0]
    weights = [params.types[k] for k in kinds]
    candidates: list[Question] = []
    seen: set[str] = set()

    def attempt(builder: Builder, target: str, qid: str, heldout_only: bool = False) -> None:
        kind = builder.rng.choices(kinds, weights)[0]
        q = builder.build(kind, target, f"{kind}-{target}-{qid}")
        if q is None or (heldout_only and not is_heldout(params, q.answers[0])):
            return
        key = normalize_answer(q.question)
        if key in seen:
            rejected["duplicate"] += 1
            return
        seen.add(key)
        candidates.append(q)

    builder = Builder(kb, rng, params.min_cue_matches, params.max_cues, params.yes_no)
    for target in targets:
        for n in range(params.attempts_per_target):
            attempt(builder, target, str(n))
    # Extra attempts for the benchmark suites only, from a stream of their own: the training questions stay
    # exactly what they are without them.
    extra = Builder(kb, random.Random(f"{params.seed}/shard/{index}/heldout"), params.min_cue_matches,
                    params.max_cues, params.yes_no)
    for target in targets:
        for n in range(params.heldout_attempts_per_target):
            attempt(extra, target, f"h{n}", heldout_only=True)
    rejected.update(builder.reasons)
    rejected.update(extra.reasons)
    return candidates


def _checked(params: QAParams, kb: KB, search, roster: Roster, nli, candidates: list[Question],
             rejected: Counter[str]) -> list[Question]:
    """The candidates that pass the checks, with their difficulty features: (a) every constraint matched to a
    passage that states it, (b) the solvers' consensus; each refusal counted in ``rejected`` by reason."""
    matched = [q for q in candidates if evidence_matched(kb, q, nli)]
    rejected["evidence_unmatched"] += len(candidates) - len(matched)

    # difficulty: where BM25 ranks the answer passage for the whole question
    depth = max([params.rank_depth] + [s.topk for s in params.solvers])
    ranked = search.search([q.question for q in matched], depth) if matched else []
    ranked_ids = [[h.id for h in hits] for hits in ranked]
    for q, ids in zip(matched, ranked_ids):
        q.features["answer_rank"] = _answer_rank(q, ids, params.rank_depth)

    kept: list[Question] = []
    for q, rates in zip(matched, roster.pass_rates(matched, ranked_ids)):
        q.features["pass_rates"] = rates
        reason = _filter_reason(params, q, rates)
        if reason:
            rejected[reason] += 1
        else:
            q.features.update(hops=q.hops, cues=len(q.constraints))
            q.features["bucket"] = difficulty_bucket(q)
            kept.append(q)
    return kept


def _demonstrations(params: QAParams, kb: KB, search, rng: random.Random, index: int, training: list[Question],
                    rejected: Counter[str]) -> tuple[dict, dict]:
    """``(solver demonstrations, proposer demonstrations)`` by question id (None: none could be written)."""
    writer = DemoWriter(kb, search, params.demos.topk, params.demos.max_rephrasings, rng, cite=params.demos.cite)
    demos = dict(zip((q.id for q in training), writer.write(training)))
    rejected.update(writer.reasons)
    proposals = {}
    if params.demos.proposer:  # a stream of its own: the solver's demonstrations stay what they are without it
        proposer = DemoWriter(kb, search, params.demos.topk, params.demos.max_rephrasings,
                              random.Random(f"{params.seed}/shard/{index}/proposer"))
        with_demo = [q for q in training if demos[q.id] is not None]
        proposals = dict(zip((q.id for q in with_demo), proposer.write_proposals(with_demo)))
    return demos, proposals


def evidence_matched(kb: KB, q: Question, nli) -> bool:
    """Whether every constraint of ``q`` (and every cue's described entity) is stated by its passage: structurally,
    and by the NLI model too when ``nli`` is given (the qa stage's evidence check, also CLPO's for its rewrites)."""
    checks = [(c.subject, c.passage, c.value_text, c.predicate) for c in q.constraints]
    checks += [(c.via["subject"], c.via["passage"], c.via["value_text"], c.via["predicate"])
               for c in q.constraints if c.via]
    if not all(passage_states(kb.passages.get(p), kb[s].name, text) for s, p, text, _ in checks):
        return False
    if nli is None:
        return True
    from searchlab.synth.models import hypothesis
    booleans = {(c.subject, c.predicate) for c in q.constraints if isinstance(c.value, bool)}
    booleans |= {(c.via["subject"], c.via["predicate"]) for c in q.constraints
                 if c.via and isinstance(c.via["value"], bool)}
    return all(nli.entails([kb.passages[p] for _, p, _, _ in checks],
                           [f"{kb[s].name} {text}." if (s, pred) in booleans else hypothesis(kb[s].name, pred, text)
                            for s, _, text, pred in checks]))  # a boolean's text is a clause: "is not landlocked"


def _answer_rank(q: Question, ranked: list[str], depth: int) -> int | None:
    """1-based rank of the answer passage (a comparison needs both of its passages: the worse rank counts)."""
    if q.type == "compare":
        wanted = [[c.passage] for c in q.constraints]
    elif q.type == "oblique":
        wanted = [[c.passage for c in q.constraints if c.subject == q.answer_entity]]
    else:
        wanted = [[q.constraints[-1].passage]]
    position = {pid: i + 1 for i, pid in enumerate(ranked[:depth])}
    ranks = [min((position[p] for p in group if p in position), default=None) for group in wanted]
    return None if None in ranks else max(ranks)


def _filter_reason(params: QAParams, q: Question, rates: dict[str, float]) -> str | None:
    f = params.filter
    if rates.get("role:gold", 1.0) < f.min_gold_pass:
        return "gold_evidence_unanswerable"
    if (rates.get("role:closed_book", 0.0) > f.max_closed_book_pass and q.type != "compare"
            and not q.slot.get("yes_no")):
        return "closed_book_answerable"  # a two-way choice is right half the time by chance: not a leak
    if rates.get("role:one_shot", 0.0) > f.max_one_shot_pass.get(q.type, 1.0):
        return "one_shot_answerable"
    return None


def difficulty_bucket(q: Question) -> str:
    """easy / medium / hard from hops, cues and how far BM25 ranks the answer passage for the whole question."""
    rank = q.features.get("answer_rank")
    retrieval = 0 if rank is not None and rank <= 3 else 1 if rank is not None and rank <= 20 else 2
    score = q.hops + retrieval + (len(q.constraints) >= 3 and q.type == "oblique")
    return BUCKETS[0] if score <= 2 else BUCKETS[1] if score <= 4 else BUCKETS[2]


def is_heldout(params: QAParams, answer: str) -> bool:
    """Whether a question of (canonical) ``answer`` is reserved for benchmarks: a hash of the normalised answer, so
    every question with that answer falls on the same side and train/benchmark answers never overlap."""
    return _unit_hash(f"{params.seed}/answer/{normalize_answer(answer)}") < params.heldout_share


def _unit_hash(text: str) -> float:
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64


# ---------------------------------------------------------------------- merge
def _merge(params: QAParams, kb: KB, shard_files: list[Path], out_dir: Path) -> dict:
    rejected: Counter[str] = Counter()
    attempts = candidates = 0
    train, dev, heldout, demos = [], [], [], []
    proposer_demos = 0
    seen: set[str] = set()
    for path in shard_files:
        shard = json.loads(path.read_text())
        attempts += shard["attempts"]
        candidates += shard["candidates"]
        rejected.update(shard["rejected"])
        for line in shard["questions"]:
            demo, proposal = line.pop("demo"), line.pop("proposal_demo", None)
            record = QuestionRecord.from_json(line)
            key = normalize_answer(record.question)
            if key in seen:
                rejected["duplicate"] += 1
                continue
            seen.add(key)
            if is_heldout(params, record.answers[0]):
                heldout.append(record)
                continue
            split = "dev" if _unit_hash(f"{params.seed}/dev/{record.id}") < params.dev_share else "train"
            (dev if split == "dev" else train).append(record)
            demos.append({"id": record.id, "split": split, "type": record.type, "question": record.question,
                          "answers": record.answers, "role": "solver", "prompt": instruction(record.question),
                          "completion": demo})
            if proposal is not None:
                proposer_demos += 1
                demos.append({"id": record.id, "split": split, "type": record.type, "question": record.question,
                              "answers": record.answers, "role": "proposer",
                              "prompt": proposer_instruction(record.answers[0]), "completion": proposal})
    for name, records in (("train", train), ("dev", dev), ("heldout", heldout)):
        write_jsonl(out_dir / f"{name}.jsonl", [r.to_json() for r in records])
    write_jsonl(out_dir / "demos.jsonl", demos)
    trained = {normalize_answer(r.answers[0]) for r in train + dev}
    overlap = sum(normalize_answer(r.answers[0]) in trained for r in heldout)
    stats = {
        "attempts": attempts, "candidates": candidates, "kept": len(train) + len(dev) + len(heldout),
        "train": len(train), "dev": len(dev), "heldout": len(heldout), "demos": len(demos),
        "proposer_demos": proposer_demos,
        "heldout_answer_overlap": overlap,
        "by_type": _by(train + dev + heldout, "type"),
        "heldout_by_type": _by(heldout, "type"),
        "by_type_bucket": {t: _by([r for r in train + dev + heldout if r.type == t], "bucket")
                           for t in QUESTION_TYPES},
        "rejected": dict(sorted(rejected.items())),
        "answer_in_top3": _top3_rates(train + dev + heldout),
    }
    (out_dir / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    write_datasheet(out_dir / "datasheet.md", stats, train + dev + heldout, kb, params.examples)
    flat = {k: v for k, v in stats.items() if isinstance(v, int)}
    flat.update({f"type.{t}": n for t, n in stats["by_type"].items()})
    flat.update({f"bucket.{t}.{b}": n for t, row in stats["by_type_bucket"].items() for b, n in row.items()})
    flat.update({f"rejected.{r}": n for r, n in stats["rejected"].items()})
    flat.update({f"answer_in_top3.{t}": v for t, v in stats["answer_in_top3"].items()})
    return flat


def _by(records: list[QuestionRecord], key: str) -> dict[str, int]:
    counts = Counter(r.bucket if key == "bucket" else getattr(r, key) for r in records)
    return dict(sorted(counts.items()))


def _top3_rates(records: list[QuestionRecord]) -> dict[str, float]:
    """Per type: the share of questions whose answer passage BM25 ranks in the top 3 for the whole question."""
    out = {}
    for t in QUESTION_TYPES:
        ranks = [r.features["answer_rank"] for r in records if r.type == t]
        if ranks:
            out[t] = round(sum(r is not None and r <= 3 for r in ranks) / len(ranks), 4)
    return out


# ---------------------------------------------------------------------- helpers
def _shard_name(index: int) -> str:
    return f"shard-{index:05d}.json"


def _write_shard(path: Path, data: dict) -> None:
    write_atomically(path, lambda out: out.write(json.dumps(data, ensure_ascii=False).encode()))


def _nli(params: QAParams):
    if not params.nli_model:
        return None
    from searchlab.synth.models import NLIChecker  # torch/transformers only when a profile asks for them
    return NLIChecker(params.nli_model)

