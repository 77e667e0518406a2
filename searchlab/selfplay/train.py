"""The selfplay stage's training run: self-play rounds from the sft policy under ``accelerate launch``, resumable.

:func:`run_selfplay` runs :func:`train_selfplay` in ``selfplay.num_processes``
processes (as the rl stage does); :func:`train_selfplay` builds the rl stage's
GRPO trainer with :class:`~searchlab.selfplay.rounds.SelfPlayRounds` as its
environment, resumes from the newest complete round checkpoint, plays
``selfplay.rounds`` rounds and writes the policy with its tokenizer,
``questions.jsonl`` (every round's proposals with their verdicts; the
verified ones are the self-play questions), ``rounds.jsonl`` (one line of
figures per round), ``train_log.jsonl`` and ``datasheet.md``.
"""

from __future__ import annotations

import logging
from pathlib import Path

from searchlab.jsonl import read_jsonl, write_jsonl
from searchlab.params import ModelParams, RetrieverParams, RolloutParams
from searchlab.questions.record import read_questions
from searchlab.rl.train import dev_figures
from searchlab.scoring import normalize_answer
from searchlab.selfplay.config import SelfPlayParams
from searchlab.selfplay.rounds import SelfPlayRounds, SelfPlayWorld, round_file, round_summary
from searchlab.selfplay.seeds import seed_answers
from searchlab.synth.config import QAParams
from searchlab.train.common import ProgressLog, resume_point, train_and_save
from searchlab.train.launch import Job, launch

log = logging.getLogger("searchlab.selfplay")

PROGRESS = {"reward": "reward", "verified": "selfplay/verified_share", "solver": "selfplay/solver_success"}


class SelfPlayJob(Job):
    """A selfplay training job (:func:`run_selfplay`; its worker is :mod:`searchlab.selfplay.worker`):
    :func:`train_selfplay` of the policy at ``start``."""

    model: ModelParams
    rollout: RolloutParams
    selfplay: SelfPlayParams
    qa: QAParams  # which answers are held out (never seeds)
    retriever: RetrieverParams  # each process opens its own retriever over ``index``
    start: Path  # the policy's model folder
    corpus: Path  # the corpus folder: the seed answers, and kb.jsonl for the KB check
    qa_dir: Path  # the qa stage's folder: the questions novelty is measured against, dev.jsonl
    index: Path
    out_dir: Path
    work_dir: Path  # the job file, round checkpoints and rounds: a rerun resumes from here
    # what searchlab.model.load_model loads as the frozen proposer (a folder, a GGUF file or a packaged
    # checkpoint's name); None when the policy proposes
    proposer: str | None = None


def run_selfplay(job: SelfPlayJob, accelerate_config: str | None = None) -> dict:
    """:func:`train_selfplay` of ``job`` in ``job.selfplay.num_processes`` processes; its figures."""
    if job.selfplay.kb_filter and not (job.corpus / "kb.jsonl").is_file():
        raise ValueError(f"selfplay.kb_filter is on, but the corpus has no knowledge base ({job.corpus}/kb.jsonl); "
                         f"turn it off for a corpus without one")
    return launch("searchlab.selfplay.worker", job, job.work_dir, job.selfplay.num_processes, accelerate_config)


def known_questions(qa_dir: Path) -> set[str]:
    """The qa stage's questions (train, dev and held-out), normalised: what self-play's novelty is measured against."""
    return {normalize_answer(q.question) for name in ("train.jsonl", "dev.jsonl", "heldout.jsonl")
            if (qa_dir / name).is_file() for q in read_questions(qa_dir / name)}


def train_selfplay(job: SelfPlayJob, model, tokenizer, retriever, kb=None, proposer: tuple | None = None,
                   callbacks: list | None = None) -> dict | None:
    """Play ``selfplay.rounds`` rounds of ``job`` from ``model``; the main process writes ``job.out_dir`` and returns
    the figures.

    ``kb``: the corpus's :class:`searchlab.corpus.kb.KB` (None: no knowledge base), for the KB check.
    ``proposer``: ``(model, tokenizer)`` of a frozen proposer; None: the policy proposes.
    """
    selfplay, known = job.selfplay, known_questions(job.qa_dir)
    trainer, rounds = build_selfplay_trainer(job, model, tokenizer, retriever, known, kb, proposer, callbacks)
    resume = resume_point(job.work_dir / "checkpoints")
    if resume:
        played = int(Path(resume).name.split("-")[-1])
        if played < selfplay.rounds:
            log.info("selfplay: resuming at round %d of %d (%s)", played + 1, selfplay.rounds, resume)
        else:
            log.info("selfplay: all %d rounds were played; writing the policy from %s", selfplay.rounds, resume)
    trained = train_and_save(trainer, tokenizer, resume, job.out_dir)
    if trained is None:  # not the main process
        return None
    out_dir, history = job.out_dir, trainer.state.log_history
    records = [r for index in range(selfplay.rounds) for r in read_jsonl(round_file(job.work_dir / "rounds", index))]
    write_jsonl(out_dir / "questions.jsonl", records)
    summaries = [round_summary(index, [r for r in records if r["round"] == index], [], [], known, kb is not None)
                 for index in range(selfplay.rounds)]
    # the rewards are the trainer's (its log, by step): a resumed run did not see the earlier rounds' episodes
    by_step = {row["step"]: row for row in history if "selfplay/proposer_reward" in row}
    for summary in summaries:
        row = by_step.get(summary["round"] + 1, {})
        summary.update(proposer_reward=row.get("selfplay/proposer_reward"), solver_reward=row.get(
            "selfplay/solver_reward"))
    write_jsonl(out_dir / "rounds.jsonl", summaries)
    write_datasheet(out_dir / "datasheet.md", summaries, records, kb is not None)
    verified = [r for r in records if r["verified"]]
    figures = {**trained[0], **dev_figures(history, trainer.state),
               "rollout_seconds": round(rounds.rollout_seconds, 2), "rounds": selfplay.rounds,
               "proposals": len(records), "verified": len(verified),
               "verified_share": round(len(verified) / len(records), 4) if records else 0.0,
               "solver_success": round(sum(r["solver_success"] for r in verified) / len(verified), 4) if verified
               else 0.0}
    if kb is not None and verified:
        figures["kb_correct_share"] = round(sum(bool(r["kb_correct"]) for r in verified) / len(verified), 4)
    return figures


def build_selfplay_trainer(job: SelfPlayJob, model, tokenizer, retriever, known: set[str], kb, proposer,
                           callbacks: list | None):
    """``(trainer, rounds)``: the rl stage's GRPO trainer with :class:`SelfPlayRounds` of ``job`` as its
    environment, scoring ``selfplay.dev.questions`` of the qa stage's dev set at every checkpoint."""
    from searchlab.rl.trainer import make_search_trainer
    from searchlab.selfplay.verify import KBCheck

    selfplay = job.selfplay
    world = SelfPlayWorld(seed_answers(job.corpus, job.qa, selfplay.seeds), known,
                          KBCheck(kb) if kb is not None else None)
    rounds = SelfPlayRounds(tokenizer, retriever, world, job.rollout, selfplay, job.work_dir / "rounds", proposer)
    progress = ProgressLog("selfplay: round", PROGRESS, selfplay.rounds)
    trainer = make_search_trainer(selfplay, model, tokenizer, rounds, job.work_dir / "checkpoints",
                                  [progress.callback, *(callbacks or [])], save_total_limit=selfplay.keep_checkpoints)
    if selfplay.dev.questions:
        from searchlab.rl.dev import DevScoring

        trainer.add_callback(DevScoring.of(trainer, retriever, selfplay, job.rollout, job.qa_dir / "dev.jsonl"))
    return trainer, rounds


def write_datasheet(path: Path, summaries: list[dict], records: list[dict], has_kb: bool, examples: int = 10) -> None:
    """``datasheet.md``: the figures of every round, rejections by reason, and verified questions to read."""
    verified = [r for r in records if r["verified"]]
    lines = ["# Self-play questions", "",
             f"{len(records)} proposals over {len(summaries)} rounds; {len(verified)} verified "
             "(answered by the solver from the proposer's passages, not without them, not naming the answer, "
             "not a repeat).", "",
             "| round | proposals | verified | " + ("KB-correct | " if has_kb else "") + "solver success | hops | "
             "novelty |", "|---|---:|---:|" + ("---:|" if has_kb else "") + "---:|---:|---:|"]
    for s in summaries:
        kb = f"{s.get('kb_correct_share', 0):.2f} | " if has_kb else ""
        lines.append(f"| {s['round']} | {s['proposals']} | {s['verified_share']:.2f} | {kb}{s['solver_success']:.2f} "
                     f"| {s['hops']:.2f} | {s['novelty']:.2f} |")
    reasons: dict[str, int] = {}
    for r in records:
        if r["reason"]:
            reasons[r["reason"]] = reasons.get(r["reason"], 0) + 1
    lines += ["", "## Rejected proposals by reason", ""]
    lines += [f"- {reason}: {count}" for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1])] or ["- none"]
    lines += ["", "## Verified questions", ""]
    for r in verified[:examples]:
        kb = f"; KB: {'right and unique' if r['kb_correct'] else 'not confirmed'}" if has_kb else ""
        lines.append(f"- round {r['round']}: {r['question']} → **{r['answer']}** (solver success "
                     f"{r['solver_success']:.2f}{kb}; searches: {'; '.join(s['query'] for s in r['searches'])})")
    if not verified:
        lines.append("- none yet")
    path.write_text("\n".join(lines) + "\n")
