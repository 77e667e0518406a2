"""The rl stage: the agent trained with GRPO over its own search episodes, as ``data/rl/``.

It starts from the policy ``rl.init`` names (the sft stage's by default; ``base``: the pretrained model with the
agent's instruction, Search-R1's setting) and trains on the question sets ``rl.questions`` names: the qa stage's
training questions, the selfplay stage's verified questions, or both (gathered into the stage's work folder).

Training runs under ``accelerate launch`` (:func:`searchlab.rl.train.run_rl`);
then the trained agent answers held-out questions, like the sft stage's, for
its protocol rates and sample trajectories.
"""

from __future__ import annotations

from pathlib import Path

from searchlab.corpus.kb import missing_kb
from searchlab.params import Params
from searchlab.rl.train import gather_questions, rl_job, run_rl
from searchlab.train.launch import check_device
from searchlab.train.samples import sample_trained_agent
from tasks.sources import external_models, resolve, stage_of
from tasks.stage import Stage, StageContext, registered_as


def _build(ctx: StageContext) -> dict:
    p = ctx.params
    check_device(p.rl.use_vllm, "rl.use_vllm")
    config = ctx.accelerate_config()
    files = {"qa": "train.jsonl", "selfplay": "questions.jsonl"}
    questions = ctx.work_dir / "questions.jsonl"
    counts = gather_questions({name: ctx.inputs[name] / files[name] for name in p.rl.questions}, questions)
    rl, simulator = p.rl, simulator_folder(p, ctx.root)
    if simulator is not None:  # the job runs elsewhere: give it the absolute folder
        rl = rl.model_copy(update={"search": rl.search.model_copy(update={"simulator": str(simulator)})})
    start = resolve(p.rl.init, "rl.init", p, ctx.root, ctx.inputs)
    figures = run_rl(rl_job(p, ctx.inputs, start, ctx.out_dir, ctx.work_dir, questions, rl), config)
    samples = sample_trained_agent("rl", p, ctx.out_dir, ctx.inputs["qa"], ctx.inputs["index"], p.rl.samples,
                                   p.rl.seed)
    return {**counts, **figures, **samples}


def simulator_folder(params: Params, root: Path) -> Path | None:
    """The model folder that writes simulated passages (``rl.search.simulator``), or None (real search, or the
    policy itself); a ValueError naming the key when it holds no model."""
    search = params.rl.search
    if search.backend != "simulated" or search.simulator is None:
        return None
    folder = (root / search.simulator).resolve()
    if not (folder / "config.json").is_file():
        raise ValueError(f"rl.search.simulator: no model folder (with config.json) at {folder}")
    return folder


def external_inputs(params: Params, root: Path) -> dict[str, Path]:
    """What the stage reads from outside the pipeline: the starting policy when ``rl.init`` names a folder or a
    registry reference, and the simulator's model folder, if one is named."""
    folder = simulator_folder(params, root)
    return {**external_models({"rl.init": params.rl.init}, params, root),
            **({} if folder is None else {"rl.search.simulator": folder})}


def upstream(params: Params) -> tuple[str, ...]:
    """The corpus, index and qa stages, the stage ``rl.init`` names (if a stage), and selfplay when its questions
    are a training set (``rl.questions``)."""
    start = stage_of(params.rl.init)
    return ("corpus", "index", "qa", *((start,) if start else ()),
            *(("selfplay",) if "selfplay" in params.rl.questions and start != "selfplay" else ()))


def rules(params: Params):
    """CLPO needs a knowledge base; the difficulty curricula and the citation rubric need synthesized questions."""
    rl, no_kb = params.rl, missing_kb(params.corpus.source)
    if "clpo" in rl.curriculum and no_kb:
        yield "rl.curriculum", f"clpo restructures questions over the knowledge base, and {no_kb}"
    if params.qa.source == "files" and "qa" in rl.questions:
        by_bucket = [kind for kind in rl.curriculum if kind in ("difficulty", "sec")]
        if by_bucket:
            yield "rl.curriculum", (f"{' and '.join(by_bucket)} draw by difficulty bucket, which only synthesized "
                                    "questions have (qa.source is files); use [] or noise")
        if rl.reward.rubric_weight > 0:
            yield "rl.reward.rubric_weight", ("the citation rubric checks each hop of a synthesized question's "
                                              "evidence chain, which questions read from files do not have")


STAGE = Stage(
    name="rl",
    description="Train the agent with GRPO (TRL) over its own multi-turn search episodes, from rl.init's policy",
    upstream=upstream,
    reads=("model", "rl", "rollout", "retriever"),
    build=_build,
    reports=("samples.md", "samples.jsonl", "curves.png", "curriculum.jsonl", "restructured.jsonl"),
    curves="train_log.jsonl",
    registers=registered_as("rl"),
    external=external_inputs,
    rules=rules,
)
