"""Build the retrieval index of a corpus: BM25 always, dense when ``index.dense.enabled``.

The work runs in a child Python process, so the caller (a Prefect worker) never
starts a Java VM or loads a torch model, gets all their memory back afterwards,
and can stop the build cleanly: cancelling or interrupting :func:`build_index`
kills the child.

>>> build_index(IndexParams(), Path("data/corpus/corpus.jsonl"), Path("data/.tmp-index"))  # doctest: +SKIP
{'documents': 4213, 'dense_documents': 0, 'bm25': {...}, ...}
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import searchlab
from searchlab.params import IndexParams


class IndexBuildError(RuntimeError):
    """The build failed; the message says why (a bad corpus line, a Java error, a missing encoder...)."""


def build_index(params: IndexParams, corpus_jsonl: Path, out_dir: Path) -> dict:
    """Build ``out_dir/docstore/``, ``out_dir/bm25/`` and, if enabled, ``out_dir/dense/`` from ``corpus_jsonl``.

    ``out_dir`` is an existing scratch folder (the caller renames it into place).
    Returns the summary: ``documents`` (indexed passages), ``dense_documents``,
    ``skipped_empty``, Anserini's counters and the term statistics under
    ``bm25``, the encoder meta under ``dense`` (all also written to
    ``out_dir/index_info.json``), and per-part ``bytes`` and ``timings``.
    Raises :class:`IndexBuildError`.
    """
    corpus_jsonl, out_dir = Path(corpus_jsonl), Path(out_dir)
    if not corpus_jsonl.is_file():
        raise IndexBuildError(f"corpus file {corpus_jsonl} does not exist")
    if not out_dir.is_dir():
        raise IndexBuildError(f"output folder {out_dir} does not exist")
    spec = {"params": params.model_dump(mode="json"), "corpus": str(corpus_jsonl.resolve()), "out_dir": str(out_dir.resolve())}
    command = [sys.executable, "-m", "searchlab.retrieval.build_worker", json.dumps(spec)]
    # the child imports the same searchlab as this process, installed or not
    source_root = str(Path(searchlab.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [source_root, os.environ.get("PYTHONPATH")])))
    # stderr is inherited: progress bars and Java's messages reach the user's terminal or log directly.
    child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    try:
        out, _ = child.communicate()
    except BaseException:  # KeyboardInterrupt, a Prefect cancellation: do not leave a JVM running
        child.kill()
        child.wait()
        raise
    lines = [line for line in out.splitlines() if line.strip()]
    result = _parse(lines[-1]) if lines else None
    if child.returncode != 0 or result is None or "error" in result:
        reason = result["error"] if result and "error" in result else f"exit status {child.returncode}"
        raise IndexBuildError(f"building the index of {corpus_jsonl} failed: {reason}")
    return result


def _parse(line: str) -> dict | None:
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
