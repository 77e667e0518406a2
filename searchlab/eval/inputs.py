"""What evaluation runs on, chosen and checked before any episode: the benchmarks' questions, whether each
fits the models' positions, and the ids the index holds (which a benchmark's evidence must name); and the torch
threads it runs with."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from searchlab.eval.config import BUILT_IN_SUITES, EvalParams
from searchlab.params import Params
from searchlab.questions.formats import BenchmarkError, Question, load_benchmark

log = logging.getLogger("searchlab.evaluate")


def checked_benchmark_files(params: EvalParams, root: Path) -> dict[str, Path]:
    """``{path as given: file}`` of the external benchmarks ``eval.benchmarks`` names (relative to ``root``, or
    absolute), each read in full in its ``format``; a missing, unreadable or malformed one is a ValueError naming
    the params key, the file and the line."""
    files = {}
    for name, spec in params.benchmarks.items():
        path = root / spec.path  # relative to the project root, or absolute (then it is spec.path)
        if not path.is_file():
            raise ValueError(f"eval.benchmarks.{name}.path: no such file: {path}")
        try:
            load_benchmark(path, name, spec.format)
        except BenchmarkError as err:
            raise ValueError(f"eval.benchmarks.{name}: {err}") from None
        except OSError as err:  # unreadable (permissions): a ValueError too, so the CLI reports it as an input problem
            raise ValueError(f"eval.benchmarks.{name}.path: cannot read {path}: {err.strerror}") from None
        files[spec.path] = path
    return files


def load_benchmarks(params: EvalParams, suites_dir: Path | None, root: Path) -> dict[str, list[Question]]:
    """``{name: questions}``: the chosen built-in suites (a seeded sample of ``eval.sample`` each) of
    ``suites_dir`` (None: the benchmarks stage was not needed), then the external files; a suite the benchmarks
    stage left empty is skipped when ``suites`` is ``all``."""
    # all: the suites the benchmarks stage wrote (world-* or records-*, by the corpus)
    if suites_dir is None:
        chosen = []
    elif params.suites == "all":
        chosen = [s for s in BUILT_IN_SUITES if (suites_dir / f"{s}.jsonl").is_file()]
    else:
        chosen = params.suites
    benchmarks = {}
    for suite in chosen:
        path = suites_dir / f"{suite}.jsonl"
        if params.suites == "all" and path.stat().st_size == 0:
            log.info("evaluate: skipping %s: the benchmarks stage wrote no questions of that type", suite)
            continue
        benchmarks[suite] = load_benchmark(path, suite, "flashrag", params.sample, params.seed)
    for name, spec in params.benchmarks.items():
        benchmarks[name] = load_benchmark(root / spec.path, name, spec.format, spec.sample, spec.seed)
    if not benchmarks:
        raise ValueError("eval: no benchmark to evaluate on (eval.suites is empty and eval.benchmarks names none)")
    return benchmarks


def indexed_ids(index: Path) -> set[str]:
    """The ids of the documents in a built index (its document store)."""
    from searchlab.retrieval.docstore import DocStore

    store = DocStore(index / "docstore")
    try:
        return store.ids()
    finally:
        store.close()


def check_lengths(benchmarks: dict[str, list[Question]], folders: dict[str, Path], params: Params) -> None:
    """Refuse, before any episode, the benchmark questions whose prompt leaves no room for an episode within a
    model's positions: a ValueError naming the file and line of each (see :mod:`searchlab.agent.budget`)."""
    from transformers import AutoConfig, AutoTokenizer

    from searchlab.agent.budget import length_problem

    for name, folder in folders.items():
        positions = getattr(AutoConfig.from_pretrained(str(folder)), "max_position_embeddings", None)
        tokenizer = AutoTokenizer.from_pretrained(str(folder))
        for questions in benchmarks.values():
            problem = length_problem(questions, tokenizer, params.rollout, positions, name)
            if problem:
                raise ValueError(problem)


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
