"""The evaluate stage: every model × system on every benchmark, as ``data/evaluate/``.

The work is :func:`searchlab.eval.run.run_evaluation`; this module chooses its
inputs from the ``eval`` params: the built-in ``world-*`` suites of the
benchmarks stage and external benchmark files (paths relative to the project
root), the models (``base``, ``sft``, ``rl``, ``selfplay``: those stages' outputs, ``base``
being the untrained starting model; a folder; or a
``models:/NAME@ALIAS`` registry reference), and the systems. Shards go to the
stage's resume folder, so a crashed run continues with the shards it has not
finished. ``metrics.json`` is the stage's DVC metrics file, and its numbers go
to MLflow under :func:`searchlab.eval.flat.flat_metrics`'s names.
"""

from __future__ import annotations

import logging
from pathlib import Path

from searchlab.eval.flat import flat_metrics, headline_metrics
from searchlab.eval.inputs import check_lengths, checked_benchmark_files, indexed_ids, load_benchmarks, torch_threads
from searchlab.model import load_agent
from searchlab.params import Params
from searchlab.retrieval import open_retriever
from tasks.sources import external_models, resolve, stage_of
from tasks.stage import Stage, StageContext

log = logging.getLogger("searchlab.evaluate")


def model_folders(params: Params, root: Path, stage_dirs: dict[str, Path] | None = None) -> dict[str, Path]:
    """``{name: folder}`` of the models ``eval.models`` names (:func:`tasks.sources.resolve`); ValueError naming the
    key for one that is missing."""
    return {name: resolve(source, f"eval.models.{index}", params, root, stage_dirs)
            for index, (name, source) in enumerate(params.eval.model_sources().items())}


def upstream(params: Params) -> tuple[str, ...]:
    """The index, the benchmarks stage when built-in suites are evaluated, and exactly the model stages
    ``eval.models`` names."""
    models = tuple(dict.fromkeys(s for s in map(stage_of, params.eval.model_sources().values()) if s))
    return ("index", *(("benchmarks",) if uses_built_in_suites(params) else ()), *models)


def uses_built_in_suites(params: Params) -> bool:
    """Whether evaluation reads the benchmarks stage's suites: named ones, or ``all`` of them when the questions
    are synthesized (questions read from files leave no held-out suites)."""
    if params.eval.suites == "all":
        return params.qa.source == "synthesis"
    return bool(params.eval.suites)


def external_inputs(params: Params, root: Path) -> dict[str, Path]:
    """What the stage reads from outside the pipeline: external benchmark files and model folders other than the
    model stages' outputs (whose content its upstream fingerprints cover), by the name the params give them.

    Each benchmark file is read in full now (:func:`searchlab.eval.inputs.checked_benchmark_files`), before any
    stage runs, not when evaluation starts after training.
    """
    inputs = checked_benchmark_files(params.eval, root)
    sources = params.eval.model_sources()
    inputs.update(external_models({f"eval.models.{i}": source for i, source in enumerate(sources.values())},
                                  params, root))
    return inputs


def _build(ctx: StageContext) -> dict:
    # imported here: it loads matplotlib, which `searchlab status` (importing every stage) has no use for
    from searchlab.eval.run import check_evidence, run_evaluation

    p = ctx.params
    benchmarks = load_benchmarks(p.eval, ctx.inputs.get("benchmarks"), ctx.root)
    folders = model_folders(p, ctx.root, ctx.inputs)
    loaders = {name: (lambda folder=folder: load_agent(str(folder), p.model, p.rollout))
               for name, folder in folders.items()}
    check_lengths(benchmarks, folders, p)
    check_evidence(benchmarks, lambda: indexed_ids(ctx.inputs["index"]), ctx.inputs["index"])
    systems = p.eval.model_systems()
    pairs = sum(map(len, systems.values()))
    shards = len(benchmarks) * pairs
    log.info("evaluate: %d benchmark(s) (%d questions) x %d model-system pair(s) (%d models): %d shards",
             len(benchmarks), sum(map(len, benchmarks.values())), pairs, len(folders), shards)
    with torch_threads(p.eval.threads), open_retriever(p.retriever, ctx.inputs["index"]) as retriever:
        results = run_evaluation(loaders, systems, benchmarks, retriever, p.rollout, ctx.out_dir,
                                 ctx.work_dir / "shards", p.eval)
    speeds = {}
    for key, rates in results["throughput"].items():
        log.info("evaluate: %s answers %.2f questions/s", key, rates["questions_per_s"])
        speeds[f"throughput.{key.replace('/', '-')}.questions_per_s"] = rates["questions_per_s"]
    # the speeds are measurements: the stage contract puts them in the build record, not the manifest
    return {"benchmarks": len(benchmarks), "questions": sum(map(len, benchmarks.values())), "shards": shards,
            **speeds}


def rules(params: Params):
    """Questions read from files leave no built-in suites; something must be evaluated."""
    if params.qa.source == "files" and params.eval.suites not in ("all", []):
        yield "eval.suites", ("built-in suites are held out by QA synthesis, and qa.source is files; evaluate on "
                              "eval.benchmarks files (eval.suites: [])")
    if not uses_built_in_suites(params) and not params.eval.benchmarks:
        yield "eval.benchmarks", "no benchmark to evaluate on: name a file here (no built-in suite applies)"


STAGE = Stage(
    name="evaluate",
    description="Evaluate every model x system (direct, rag, agent) on the world suites and external benchmarks",
    upstream=upstream,
    reads=("eval", "rollout", "retriever", "model"),
    build=_build,
    reports=("report.md", "em.png", "searches.png", "metrics.json"),
    external=external_inputs,
    metrics="metrics.json",
    metric_names=flat_metrics,
    headline=headline_metrics,
    rules=rules,
)
