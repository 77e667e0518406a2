"""The rl stage: the agent trained with GRPO over its own search episodes from the sft policy, as ``data/rl/``.

It trains on the question sets ``rl.questions`` names: the qa stage's training questions, the selfplay stage's
verified questions, or both (gathered into the stage's work folder).

Training runs under ``accelerate launch`` (:func:`searchlab.rl.train.run_rl`);
then the trained agent answers held-out questions, like the sft stage's, for
its protocol rates and sample trajectories.
"""

from __future__ import annotations

from pathlib import Path

from searchlab.params import Params
from searchlab.rl.train import check_device, gather_questions, run_rl
from tasks.sft import sample_trajectories
from tasks.stage import Stage, StageContext


def _build(ctx: StageContext) -> dict:
    p = ctx.params
    check_device(p.rl)
    config = str(ctx.root / p.rl.accelerate_config) if p.rl.accelerate_config else None
    files = {"qa": ctx.inputs["qa"] / "train.jsonl", "selfplay": ctx.inputs["selfplay"] / "questions.jsonl"}
    questions = ctx.work_dir / "questions.jsonl"
    counts = gather_questions({name: files[name] for name in p.rl.questions}, questions)
    rl, simulator = p.rl, simulator_folder(p, ctx.root)
    if simulator is not None:  # the job runs elsewhere: give it the absolute folder
        rl = rl.model_copy(update={"search": rl.search.model_copy(update={"simulator": str(simulator)})})
    figures = run_rl(p.model, p.rollout, rl, ctx.inputs["sft"], questions, ctx.inputs["corpus"] / "corpus.jsonl",
                     ctx.inputs["index"], p.section("retriever"), ctx.out_dir, ctx.work_dir, config)
    return {**counts, **figures, **sample_trajectories(ctx, p.rl.samples, p.rl.seed, "RL")}


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
    """What the stage reads from outside the pipeline: the simulator's model folder, if one is named."""
    folder = simulator_folder(params, root)
    return {} if folder is None else {"rl.search.simulator": folder}


def _registry(params: Params) -> tuple[str, str]:
    return params.rl.registry_name, params.rl.registry_alias


STAGE = Stage(
    name="rl",
    description="Train the agent with GRPO (TRL) over its own multi-turn search episodes, from the sft policy",
    # selfplay: its questions are a training set (rl.questions); the rl policy still starts from sft
    upstream=("corpus", "index", "qa", "sft", "selfplay"),
    reads=("model", "rl", "rollout", "retriever"),
    build=_build,
    reports=("samples.md", "samples.jsonl", "curves.png", "curriculum.jsonl", "restructured.jsonl"),
    curves="train_log.jsonl",
    registers=_registry,
    external=external_inputs,
)
