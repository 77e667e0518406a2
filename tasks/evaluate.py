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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from searchlab.eval.benchmarks import BenchmarkError, Question, load_benchmark
from searchlab.eval.flat import flat_metrics, headline_metrics
from searchlab.model import load_agent
from searchlab.params import BUILT_IN_SUITES, EvalParams, Params
from searchlab.retrieval import open_retriever
from searchlab.train.base import start_model
from tasks.stage import Stage, StageContext
from tasks.tracking import TrackingError, model_folder

log = logging.getLogger("searchlab.evaluate")

# the model stages this stage reads: a model source that names one of them means that stage's output folder;
# base is the model before any training (the zero-shot baseline)
MODEL_UPSTREAM = ("base", "sft", "rl", "selfplay")


def _path(root: Path, given: str) -> Path:
    """A path from the params: relative to the project root, or absolute (then ``root / given`` is ``given``)."""
    return root / given


def model_folders(params: Params, root: Path, stage_dirs: dict[str, Path]) -> dict[str, Path]:
    """``{name: folder}`` of the models ``eval.models`` names: a model stage's output (``stage_dirs``), a folder or
    a registry reference; ValueError naming the key for one that is missing."""
    folders = {}
    for index, (name, source) in enumerate(params.eval.model_sources().items()):
        if source in stage_dirs:
            folders[name] = stage_dirs[source]
            continue
        try:
            folder = _path(root, model_folder(source, params.tracking, root))
        except TrackingError as err:
            raise ValueError(f"eval.models.{index}: {err}") from None
        if not (folder / "config.json").is_file():
            raise ValueError(f"eval.models.{index}: {source}: no Hugging Face model folder at {folder} (expected "
                             f"{', '.join(MODEL_UPSTREAM)}, a local folder with config.json, or models:/NAME@ALIAS)")
        folders[name] = folder
    return folders


def external_inputs(params: Params, root: Path) -> dict[str, Path]:
    """What the stage reads from outside the pipeline: external benchmark files and model folders other than the
    model stages' outputs (whose content its upstream fingerprints cover), by the name the params give them.

    Each benchmark file is read in full in its ``format``: a malformed one is a ValueError naming the params key,
    the file and the line now, before any stage runs, not when evaluation starts after training.
    """
    inputs = {}
    for name, spec in params.eval.benchmarks.items():
        path = _path(root, spec.path)
        if not path.is_file():
            raise ValueError(f"eval.benchmarks.{name}.path: no such file: {path}")
        try:
            load_benchmark(path, name, spec.format)
        except BenchmarkError as err:
            raise ValueError(f"eval.benchmarks.{name}: {err}") from None
        except OSError as err:  # unreadable (permissions): a ValueError too, so the CLI reports it as an input problem
            raise ValueError(f"eval.benchmarks.{name}.path: cannot read {path}: {err.strerror}") from None
        inputs[spec.path] = path
    sources = params.eval.model_sources()
    folders = model_folders(params, root, {stage: root / params.runtime.data_dir / stage for stage in MODEL_UPSTREAM})
    inputs.update({sources[name]: folder for name, folder in folders.items() if sources[name] not in MODEL_UPSTREAM})
    return inputs


def load_benchmarks(params: EvalParams, suites_dir: Path, root: Path) -> dict[str, list[Question]]:
    """``{name: questions}``: the chosen built-in suites (a seeded sample of ``eval.sample`` each), then the
    external files; a suite the benchmarks stage left empty is skipped when ``suites`` is ``all``."""
    # all: the suites the benchmarks stage wrote (world-* or records-*, by the corpus)
    chosen = ([s for s in BUILT_IN_SUITES if (suites_dir / f"{s}.jsonl").is_file()] if params.suites == "all"
              else params.suites)
    benchmarks = {}
    for suite in chosen:
        path = suites_dir / f"{suite}.jsonl"
        if params.suites == "all" and path.stat().st_size == 0:
            log.info("evaluate: skipping %s: the benchmarks stage wrote no questions of that type", suite)
            continue
        benchmarks[suite] = load_benchmark(path, suite, "flashrag", params.sample, params.seed)
    for name, spec in params.benchmarks.items():
        benchmarks[name] = load_benchmark(_path(root, spec.path), name, spec.format, spec.sample, spec.seed)
    if not benchmarks:
        raise ValueError("eval: no benchmark to evaluate on (eval.suites is empty and eval.benchmarks names none)")
    return benchmarks


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` torch threads (None: leave torch's setting), then restore the old count:
    the pipeline process runs other stages after this one."""
    import torch

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _build(ctx: StageContext) -> dict:
    # imported here: it loads matplotlib, which `searchlab status` (importing every stage) has no use for
    from searchlab.eval.run import run_evaluation

    p = ctx.params
    benchmarks = load_benchmarks(p.eval, ctx.inputs["benchmarks"], ctx.root)
    stage_dirs = {stage: ctx.inputs[stage] for stage in MODEL_UPSTREAM}
    stage_dirs["base"] = Path(start_model(ctx.inputs["base"]))  # the base folder, or the checkpoint it names
    folders = model_folders(p, ctx.root, stage_dirs)
    loaders = {name: (lambda folder=folder: load_agent(str(folder), p.model, p.rollout))
               for name, folder in folders.items()}
    shards = len(benchmarks) * len(folders) * len(p.eval.systems)
    log.info("evaluate: %d benchmark(s) (%d questions) x %d model(s) x %d system(s): %d shards",
             len(benchmarks), sum(map(len, benchmarks.values())), len(folders), len(p.eval.systems), shards)
    with torch_threads(p.eval.threads), open_retriever(p.retriever, ctx.inputs["index"]) as retriever:
        results = run_evaluation(loaders, p.eval.systems, benchmarks, retriever, p.rollout, ctx.out_dir,
                                 ctx.work_dir / "shards", p.eval.resamples, p.eval.seed, progress=log.info)
    for key, rates in results["throughput"].items():
        log.info("evaluate: %s answers %.2f questions/s", key, rates["questions_per_s"])
    return {"benchmarks": len(benchmarks), "questions": sum(map(len, benchmarks.values())), "shards": shards}


STAGE = Stage(
    name="evaluate",
    description="Evaluate every model x system (direct, rag, agent) on the world suites and external benchmarks",
    upstream=("index", "benchmarks", *MODEL_UPSTREAM),
    reads=("eval", "rollout", "retriever", "model"),
    build=_build,
    reports=("report.md", "em.png", "searches.png", "metrics.json"),
    external=external_inputs,
    metrics="metrics.json",
    metric_names=flat_metrics,
    headline=headline_metrics,
)
