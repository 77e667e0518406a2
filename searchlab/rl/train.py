"""The rl stage's training run: GRPO from the sft policy on the qa stage's training questions, resumable.

:func:`run_rl` runs :func:`train_rl` under ``accelerate launch`` (one process
per device, as SFT does); :func:`train_rl` builds the curriculum, the episodes
(:mod:`searchlab.rl.env`) and the trainer (:mod:`searchlab.rl.trainer`), resumes from the newest complete
checkpoint (weights, optimizer, scheduler, RNG states and the curriculum's
state), trains ``rl.steps`` steps and writes the policy with its tokenizer,
``train_log.jsonl``, ``curriculum.jsonl``, ``trajectories.jsonl`` and
``curves.png`` to the output folder.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from searchlab.agent.replay import demonstration_turns
from searchlab.jsonl import iter_jsonl, read_jsonl, write_jsonl
from searchlab.params import ModelParams, Params, RetrieverParams, RolloutParams
from searchlab.questions.record import QuestionRecord, read_questions
from searchlab.rl.config import RLParams
from searchlab.rl.curriculum import Curriculum
from searchlab.rl.restructure import clpo_restructurer
from searchlab.train.common import ProgressLog, resume_point, train_and_save
from searchlab.train.launch import Job, launch
from searchlab.train.renaming import corpus_titles


def training_questions(questions_jsonl: Path, buckets: list[str]) -> list[QuestionRecord]:
    """The training questions of ``questions_jsonl`` (:func:`gather_questions`) in ``buckets`` (DeReason's split:
    which buckets RL learns from); a question of unknown difficulty (read from a file: no bucket) is always in."""
    chosen = [q for q in read_questions(questions_jsonl) if q.bucket in (*buckets, None)]
    if not chosen:
        raise ValueError(f"{questions_jsonl}: no training question in rl.buckets {buckets} (rl.questions chooses "
                         f"the sets: qa, selfplay)")
    return chosen


def selfplay_questions(questions_jsonl: Path) -> list[QuestionRecord]:
    """The selfplay stage's verified questions as training questions: the seed answer is the gold, the type is
    ``selfplay``, and the bucket follows the solver's success rate s during self-play (easy: s >= 0.75, medium:
    s >= 0.25, hard below); no evidence passages are known."""
    questions = []
    for r in read_jsonl(questions_jsonl):
        if r["verified"]:
            s = r["solver_success"]
            bucket = "easy" if s >= 0.75 else "medium" if s >= 0.25 else "hard"
            questions.append(QuestionRecord(id=f"selfplay-{r['round']}-{len(questions)}", type="selfplay",
                                            question=r["question"], answers=[r["answer"]], evidence=None,
                                            features={"bucket": bucket, "solver_success": s}))
    return questions


def gather_questions(sources: dict[str, Path], out: Path) -> dict[str, int]:
    """Write the training questions of ``sources`` (``qa``: the qa stage's ``train.jsonl``; ``selfplay``: the
    selfplay stage's ``questions.jsonl``) to ``out``, in that order; how many each gave."""
    counts, questions = {}, []
    for name, path in sources.items():
        found = selfplay_questions(path) if name == "selfplay" else read_questions(path)
        counts[f"questions.{name}"] = len(found)
        questions += found
    write_jsonl(out, [q.to_json() for q in questions])
    return counts


class RLJob(Job):
    """An rl training job (:func:`run_rl`; its worker is :mod:`searchlab.rl.worker`): :func:`train_rl` of the policy
    at ``start`` on the questions of ``questions``."""

    model: ModelParams
    rollout: RolloutParams
    rl: RLParams
    retriever: RetrieverParams  # each process opens its own retriever over ``index``
    start: Path  # the policy's model folder
    questions: Path  # the training questions (gather_questions)
    corpus: Path  # corpus.jsonl: noise distractors, renamed titles; its folder holds clpo's KB
    index: Path
    out_dir: Path
    work_dir: Path  # the job file, checkpoints and trajectories: a rerun resumes from here
    dev: Path | None = None  # the questions rl.dev scores
    demos: Path | None = None  # the qa stage's demos.jsonl: what rl.guidance puts into failed groups


def rl_job(params: Params, inputs: Path | Mapping[str, Path], start: Path, out_dir: Path, work_dir: Path,
           questions: Path | None = None, rl: RLParams | None = None) -> RLJob:
    """The rl stage's job from the policy at ``start`` over its upstream stages' folders ``inputs`` (by stage name,
    or the data folder that holds them: its corpus, index and qa stages' outputs): the qa stage's training questions
    unless ``questions`` names others (:func:`gather_questions`), ``params.rl`` unless ``rl`` replaces it."""
    folders = {name: inputs / name if isinstance(inputs, Path) else inputs[name] for name in ("corpus", "index", "qa")}
    return RLJob(model=params.model, rollout=params.rollout, rl=rl or params.rl, retriever=params.retriever,
                 start=start, questions=questions or folders["qa"] / "train.jsonl",
                 corpus=folders["corpus"] / "corpus.jsonl", index=folders["index"], out_dir=out_dir,
                 work_dir=work_dir, dev=folders["qa"] / "dev.jsonl", demos=folders["qa"] / "demos.jsonl")


def run_rl(job: RLJob, accelerate_config: str | None = None) -> dict:
    """:func:`train_rl` of ``job`` in ``job.rl.num_processes`` processes; returns its figures."""
    return launch("searchlab.rl.worker", job, job.work_dir, job.rl.num_processes, accelerate_config)


RL_PROGRESS = {"reward": "reward", "EM": "episode/outcome", "searches": "episode/searches"}


def build_trainer(job: RLJob, model, tokenizer, retriever, callbacks: list | None = None):
    """``(trainer, checkpoint to resume from or None)``: the GRPO trainer of :func:`train_rl` for ``job``, its
    curriculum restored from that checkpoint, scoring ``rl.dev.questions`` of ``job.dev`` at every checkpoint,
    guided (``rl.guidance``) by the demonstrations of ``job.demos``."""
    from searchlab.rl.env import SearchEpisodes, WorldAids, load_curriculum_state
    from searchlab.rl.trainer import make_search_trainer

    rl, checkpoint_dir = job.rl, job.work_dir / "checkpoints"
    # clpo rewrites questions over the corpus's KB: refused before any work when the corpus has none
    restructurer = clpo_restructurer(rl.curriculum, rl.clpo, job.corpus.parent)
    curriculum = Curriculum.from_params(training_questions(job.questions, rl.buckets), rl, restructurer=restructurer)
    resume = resume_point(checkpoint_dir)
    load_curriculum_state(curriculum, resume)
    if rl.search.backend == "simulated":
        retriever = simulated_search(rl, model, tokenizer)
    distractors = []
    if "noise" in rl.curriculum and rl.search.backend == "real":
        distractors = [(r["id"], r["contents"]) for _, r in iter_jsonl(job.corpus)]
    aids = WorldAids(distractors, corpus_titles(job.corpus) if rl.renamed else None, guidance_demos(job))
    episodes = SearchEpisodes(tokenizer, retriever, curriculum, job.rollout, rl, aids, job.work_dir / "trajectories")
    trainer = make_search_trainer(rl, model, tokenizer, episodes, checkpoint_dir, callbacks)
    if rl.dev.questions:
        from searchlab.rl.dev import DevScoring

        trainer.add_callback(DevScoring.of(trainer, retriever, rl, job.rollout, job.dev))
    return trainer, resume


def guidance_demos(job: RLJob) -> dict[str, list[str]]:
    """The demonstrations ``rl.guidance`` puts into failed groups (:func:`demonstration_turns` of ``job.demos``),
    none when guidance is off; a ValueError naming the key when it is on with no demonstrations file."""
    if not job.rl.guidance.enabled:
        return {}
    if job.demos is None or not job.demos.is_file():
        raise ValueError(f"rl.guidance.enabled: no demonstrations to guide with ({job.demos}); the qa stage writes "
                         f"them")
    return demonstration_turns(job.demos)


def simulated_search(rl: RLParams, policy, tokenizer):
    """The search engine of ``rl.search.backend: simulated``: the model folder ``rl.search.simulator`` (an absolute
    path here; ZeroSearch's simulation LLM), or, when it is null, the policy itself (SSRL's self-search)."""
    from searchlab.rl.simulated import SimulatedRetriever

    settings = {"passage_tokens": rl.search.passage_tokens, "seed": rl.seed}
    if rl.search.simulator is None:
        return SimulatedRetriever(policy, tokenizer, **settings)
    return SimulatedRetriever.from_folder(rl.search.simulator, **settings)


def train_rl(job: RLJob, model, tokenizer, retriever, callbacks: list | None = None) -> dict | None:
    """Train ``model`` with GRPO on the questions of ``job.questions`` in ``rl.buckets``; the figures.

    Checkpoints go to ``job.work_dir/checkpoints`` (a rerun resumes from the
    newest complete one), kept trajectories to ``job.work_dir/trajectories``
    (:func:`build_trainer` says what else the job's files are for). Only the
    main process writes ``job.out_dir`` and returns figures; others return None.
    """
    progress = ProgressLog("rl: step", RL_PROGRESS, job.rl.steps)
    trainer, resume = build_trainer(job, model, tokenizer, retriever, [progress.callback, *(callbacks or [])])
    out_dir, work_dir = job.out_dir, job.work_dir
    episodes = trainer.episodes
    # counted before saving: saving merges LoRA adapters into the weights, which leaves none trainable
    trainable = sum(t.numel() for t in trainer.model.parameters() if t.requires_grad)
    trained = train_and_save(trainer, tokenizer, resume, out_dir)
    if trained is None:  # not the main process
        return None
    history = trainer.state.log_history
    write_jsonl(out_dir / "curriculum.jsonl",
                [{"step": row["step"], **{k: v for k, v in row.items() if k.startswith("curriculum/")}}
                 for row in history if any(k.startswith("curriculum/") for k in row)])
    write_jsonl(out_dir / "restructured.jsonl", episodes.curriculum.restructured)  # clpo's rewrites; else empty
    kept = sorted((work_dir / "trajectories").glob("step-*.jsonl"))
    write_jsonl(out_dir / "trajectories.jsonl", [r for path in kept for r in read_jsonl(path)])
    chart_curves(history, out_dir / "curves.png")
    rows = [row for row in history if "reward" in row]
    figures = {**trained[0],
               "rollout_seconds": round(episodes.timings["rollout"], 2),
               "reward_seconds": round(episodes.timings["reward"], 2),
               "near_miss_seconds_per_step": round(episodes.timings["near_miss"] / max(episodes.rollouts, 1), 2),
               "rollout_seconds_per_step": round(episodes.timings["rollout"] / max(episodes.rollouts, 1), 2),
               "questions": len(episodes.curriculum.questions),
               "parameters": sum(t.numel() for t in model.parameters()), "trainable_parameters": trainable}
    figures.update(dev_figures(history, trainer.state))
    if rows:
        tail = rows[-max(1, len(rows) // 10):]  # the last tenth of the run: where the policy ended up
        figures["final_reward"] = round(sum(r["reward"] for r in tail) / len(tail), 4)
        figures["final_outcome"] = round(sum(r.get("episode/outcome", 0.0) for r in tail) / len(tail), 4)
    return figures


def dev_figures(history: list[dict], state) -> dict:
    """Greedy dev EM at the start, at the last scored step and of the kept policy, and the kept step (``keep:
    best``: the best checkpoint's; else the last step's)."""
    scored = [row for row in history if "dev/em" in row]
    if not scored:
        return {}
    best = state.best_model_checkpoint
    kept = int(Path(best).name.split("-")[-1]) if best else state.global_step
    at = {row["step"]: row["dev/em"] for row in scored}
    return {"dev_em_start": at.get(0), "dev_em_last": scored[-1]["dev/em"], "kept_step": kept,
            "dev_em_kept": at.get(kept)}


def chart_curves(history: list[dict], path: Path) -> None:
    """A PNG of reward and EM by step, the mean log-likelihood of correct and incorrect responses when logged,
    and the curriculum (level, noise, bucket shares) by step."""
    import matplotlib

    matplotlib.use("Agg")  # no display: write the file only
    import matplotlib.pyplot as plt

    rows = [row for row in history if "reward" in row]
    if not rows:
        return
    steps = [row["step"] for row in rows]
    # from every logged row: a batch's second optimizer step (rl.num_iterations 2) logs no reward, but LLDS acts there
    likelihood = [key for key in ("likelihood/correct", "likelihood/incorrect") if any(key in row for row in history)]
    figure, axes = plt.subplots(2 + bool(likelihood), 1, figsize=(8, 6 + 2.5 * bool(likelihood)), sharex=True)
    top, bottom = axes[0], axes[-1]
    if likelihood:  # LLDS's curves: their joint decline is the lazy likelihood displacement
        for key in likelihood:
            points = [(row["step"], row[key]) for row in history if key in row]
            axes[1].plot(*zip(*points), label=key.replace("/", ": "))
        axes[1].set_ylabel("log-likelihood / token")
        axes[1].legend(loc="best")
    for key, label in (("reward", "reward (mean)"), ("episode/outcome", "outcome (EM or F1)"),
                       ("episode/format_ok", "format ok")):
        if key in rows[0]:
            top.plot(steps, [row.get(key) for row in rows], label=label)
    top.set_ylabel("per episode")
    top.legend(loc="best")
    for key in sorted({k for row in rows for k in row if k.startswith("curriculum/")}):
        if key.startswith(("curriculum/sec/", "curriculum/clpo/")):
            continue  # the bandit's values and clpo's counts live in curriculum.jsonl: other scales, many lines
        bottom.plot(steps, [row.get(key) for row in rows], label=key.removeprefix("curriculum/"))
    bottom.set_xlabel("step")
    bottom.set_ylabel("curriculum")
    if bottom.lines:
        bottom.legend(loc="best", fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=80)
    plt.close(figure)
