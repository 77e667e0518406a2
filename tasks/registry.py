"""The pipeline's stages in pipeline order: the one list that flows, the CLI and dvc.yaml derive from."""

from __future__ import annotations

from tasks import base, benchmarks, corpus, evaluate, index, qa, rl, selfplay, sft
from searchlab.params import Params
from tasks.stage import Stage

STAGES: tuple[Stage, ...] = (corpus.STAGE, index.STAGE, qa.STAGE, benchmarks.STAGE, base.STAGE, sft.STAGE,
                             selfplay.STAGE, rl.STAGE, evaluate.STAGE)
BY_NAME: dict[str, Stage] = {s.name: s for s in STAGES}


FINAL = STAGES[-1].name  # what a run without named stages brings up to date: evaluation, and what it needs


def plan(targets: list[str] | tuple[str, ...], params: Params) -> list[Stage]:
    """The stages needed for ``targets`` (the final stage, evaluate, if empty) under ``params``, upstream first:
    each stage's upstream is computed from the params (:meth:`Stage.needs`), so a stage nothing needs is left
    out."""
    unknown = [t for t in targets if t not in BY_NAME]
    if unknown:
        raise ValueError(f"unknown stage(s) {', '.join(unknown)}; stages are: {', '.join(BY_NAME)}")
    needed: set[str] = set()
    todo = list(targets) or [FINAL]
    while todo:
        name = todo.pop()
        if name not in needed:
            needed.add(name)
            todo.extend(BY_NAME[name].needs(params))
    return [s for s in STAGES if s.name in needed]


def check_force(force: list[str] | tuple[str, ...], todo: list[Stage]) -> None:
    """Raise ValueError naming the ``--force`` stage that is unknown or not among ``todo`` (the run's stages):
    forcing a stage the run never reaches would silently do nothing."""
    unknown = [name for name in force if name not in BY_NAME]
    if unknown:
        raise ValueError(f"--force {', '.join(unknown)}: no such stage; stages are: {', '.join(BY_NAME)}")
    planned = [s.name for s in todo]
    outside = [name for name in force if name not in planned]
    if outside:
        raise ValueError(f"--force {', '.join(outside)}: not among the stages of this run ({', '.join(planned)}); "
                         f"name it as a stage to run too, e.g. `searchlab run {outside[0]} --force {outside[0]}`")
