"""The preflight of ``searchlab plan`` and ``searchlab run``: the stages a params file asks for, and every problem
with its inputs, found before anything is trained.

:func:`preflight` computes the stage graph (:func:`tasks.registry.plan`), then checks, without training anything,
that each input the planned stages read exists and parses (the corpus file, question and benchmark files with
their formats and counts, model folders and GGUF files, accelerate configs), and that the params are coherent
together: the rules each planned stage declares (``Stage.rules``: a KB-only option without a KB, an option
needing synthesized questions on files) and vLLM without CUDA.
It collects every problem instead of stopping at the first, each with its params key and where that key is
written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from searchlab.corpus.importers import jsonl_records, passage, passage_columns
from searchlab.jsonl import RecordError
from searchlab.params import Params, key_origins
from searchlab.questions.formats import BenchmarkError, detect_format, load_benchmark
from searchlab.train.launch import vllm_problem
from tasks.registry import BY_NAME, plan
from tasks.stage import Stage

CORPUS_SAMPLE = 1000  # records of a passage file checked before the run (the corpus stage reads them all)


@dataclass
class Problem:
    """One thing that would make the run fail: the params key at fault, what is wrong, and where it is written."""

    key: str
    message: str
    where: str = ""  # "params/x.yaml line 12" (the file as given), "--set", or "" when the key is a default
    # a need of the machine that runs the stages (a CUDA GPU), not of the params: `searchlab plan` on a laptop for
    # a GPU machine reports it as a note, `searchlab run` as a problem
    machine: bool = False

    def __str__(self) -> str:
        return f"{self.where + ': ' if self.where else ''}{self.key}: {self.message}"


@dataclass
class Preflight:
    """What :func:`preflight` found: the stages in order, the inputs it checked (``{key: what it found}``) and the
    problems."""

    stages: list[Stage]
    inputs: dict[str, str] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)


def preflight(params: Params, params_file: Path, root: Path, targets: list[str] | tuple[str, ...] = (),
              overrides: list[str] | tuple[str, ...] = ()) -> Preflight:
    """Plan the stages for ``targets`` (evaluate and what it needs, if empty) and check their inputs; see the
    module doc. ``overrides`` are the ``--set`` values, so a problem they made is blamed on them."""
    origins = key_origins(root / params_file)
    try:
        stages = plan(targets, params)
    except ValueError as err:
        return Preflight([], problems=[Problem("stages", str(err))])
    found = Preflight(stages)
    names = {stage.name for stage in stages}
    checks = [_stage_rules, _corpus, _question_files, _models, _retriever, _tracking, _context, _accelerate_configs,
              _externals]
    for check in checks:
        for key, message in check(params, root, names, found.inputs):
            found.problems.append(Problem(key, message, _where(key, root, origins, overrides)))
    for key, message in _machine(params, names):
        found.problems.append(Problem(key, message, _where(key, root, origins, overrides), machine=True))
    found.problems.sort(key=lambda p: int(p.where.rpartition(" line ")[2] or 0) if " line " in p.where else 0)
    return found


def _where(key: str, root: Path, origins: dict[str, tuple[Path, int]], overrides) -> str:
    """Where ``key`` (or the nearest section above it) is set: a ``--set`` of it or of a key above it (which replaced
    its value whole), or the params file (the one a profile ``extends:``, for a key it inherits) and line."""
    parts = key.split(".")
    for override in overrides:
        written = override.partition("=")[0].strip().split(".")
        if parts[:len(written)] == written:
            return "--set"
    for n in range(len(parts), 0, -1):
        origin = origins.get(".".join(parts[:n]))
        if origin:
            file, line = origin
            return f"{file.relative_to(root) if file.is_relative_to(root) else file} line {line}"
    return ""


# ---------------------------------------------------------------- checks: each yields (key, message)
def _stage_rules(params: Params, root: Path, names: set[str], inputs: dict[str, str]):
    """Params that cannot work together, as each stage that will run declares them (``Stage.rules``)."""
    for name in sorted(names, key=list(BY_NAME).index):
        if BY_NAME[name].rules is not None:
            yield from BY_NAME[name].rules(params)


def _machine(params: Params, names: set[str]):
    """What the stages need of this machine: a CUDA GPU for vLLM."""
    vllm = {"rl.use_vllm": "rl" in names and params.rl.use_vllm,
            "selfplay.use_vllm": "selfplay" in names and params.selfplay.use_vllm,
            "rollout.engine": params.rollout.engine == "vllm" and bool(names & {"sft", "rl", "selfplay", "evaluate"})}
    for key, wanted in vllm.items():
        problem = vllm_problem(wanted)
        if problem:
            yield key, problem


def _corpus(params: Params, root: Path, names: set[str], inputs: dict[str, str]):
    """The passage file of an imported corpus: it exists, is a file or a folder as its source reads, and its first
    records are passages with ids of their own (a Parquet file: its columns)."""
    corpus = params.corpus
    if "corpus" not in names or corpus.source == "synthetic":
        return
    path = root / corpus.path
    if not path.exists():
        yield "corpus.path", f"no such file or folder: {path}"
        return
    if corpus.source in ("jsonl", "parquet") and path.is_dir() and not any(path.glob(f"*.{corpus.source}*")):
        yield "corpus.path", f"{path} is a folder without .{corpus.source} files: corpus.source {corpus.source} " \
                             f"reads a file, or a folder of them"
        return
    if corpus.source == "jsonl" and path.is_file():
        problem, checked = _jsonl_passages(path, corpus.on_error)
        if problem:
            yield "corpus.path", problem
            return
        inputs["corpus.path"] = f"{corpus.path}: {corpus.source}, first {checked} records are passages"
    elif corpus.source == "parquet" and path.is_file():
        problem = _parquet_columns(path)
        if problem:
            yield "corpus.path", problem
            return
        inputs["corpus.path"] = f"{corpus.path}: parquet with the columns a passage needs"
    else:
        inputs["corpus.path"] = f"{corpus.path}: {corpus.source} (read by the corpus stage)"


def _jsonl_passages(path: Path, on_error: str) -> tuple[str | None, int]:
    """``(problem or None, records checked)`` of the first CORPUS_SAMPLE records of a passage file: each a
    passage (unless ``on_error`` skips bad ones), no id twice, and at least one."""
    checked, first_line = 0, {}
    for line, record in jsonl_records(path):
        if checked == CORPUS_SAMPLE:
            break
        try:
            if isinstance(record, RecordError):
                raise record
            doc_id, _ = passage(record, "id", path, line)
        except RecordError as err:
            if on_error == "fail":
                return str(err), checked
            continue
        if doc_id in first_line:  # the corpus stage rejects it as it does a bad record: on_error says how
            if on_error == "fail":
                return f"{path}: line {line}: id {doc_id!r} again (first on line {first_line[doc_id]}): a " \
                       "passage id is its own", checked
            continue
        first_line[doc_id] = line
        checked += 1
    if not checked:
        return f"{path}: holds no passage (an empty file, or no record that is one)", 0
    return None, checked


def _parquet_columns(path: Path) -> str | None:
    """Why a Parquet passage file cannot be imported (not Parquet, or without the columns), read from its schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        columns = pq.read_schema(path).names
    except (pa.ArrowException, OSError) as err:
        return f"{path}: not a readable Parquet file ({err}); corpus.source says parquet"
    try:
        passage_columns(path, columns)
    except ValueError as err:
        return str(err)
    return None


def _question_files(params: Params, root: Path, names: set[str], inputs: dict[str, str]):
    """Training question files (``qa.files``) and benchmark files (``eval.benchmarks``): each parses whole."""
    files = {}
    if "qa" in names and params.qa.source == "files":
        files.update({f"qa.files.{n}": s for n, s in params.qa.files.items()})
    if "evaluate" in names or ("qa" in names and params.qa.source == "files"):
        files.update({f"eval.benchmarks.{n}": s for n, s in params.eval.benchmarks.items()})
    for key, spec in files.items():
        path = root / spec.path
        if not path.is_file():
            yield f"{key}.path", f"no such file: {path}"
            continue
        try:
            questions = load_benchmark(path, key.rsplit(".", 1)[-1], spec.format)
            format = spec.format if spec.format != "auto" else detect_format(path)
        except BenchmarkError as err:
            yield key, str(err)
            continue
        except OSError as err:
            yield f"{key}.path", f"cannot read {path}: {err.strerror}"
            continue
        sample = f", a sample of {spec.sample}" if spec.sample and spec.sample < len(questions) else ""
        inputs[key] = f"{spec.path}: {format}, {len(questions)} questions{sample}"


def _models(params: Params, root: Path, names: set[str], inputs: dict[str, str]):
    """The starting model (``model.name_or_path``) when the base stage runs: a GGUF file, a local folder, the tiny
    model, or a hub id (fetched at run time, so only named here)."""
    from searchlab.model.gguf import gguf_file

    if "base" not in names:
        return
    name = params.model.name_or_path
    try:
        gguf = gguf_file(name, root)
    except FileNotFoundError as err:
        yield "model.name_or_path", str(err)
        return
    if gguf is not None:
        with open(gguf, "rb") as f:
            magic = f.read(4)
        if magic != b"GGUF":
            yield "model.name_or_path", f"{gguf}: not a GGUF file (it starts with {magic!r}, not b'GGUF')"
            return
        inputs["model.name_or_path"] = f"{name}: GGUF checkpoint {gguf}"
    elif name == "tiny":
        inputs["model.name_or_path"] = "tiny: built from the corpus (and demonstrations) by the base stage"
    elif (root / name).exists() or name.startswith((".", "/")):
        if not (root / name / "config.json").is_file():
            yield "model.name_or_path", f"{root / name}: no Hugging Face model folder (no config.json)"
        else:
            inputs["model.name_or_path"] = f"{name}: Hugging Face folder"
    else:
        inputs["model.name_or_path"] = f"{name}: a hub id, fetched when the base stage runs (needs the hub)"


SEARCHING = {"qa", "sft", "rl", "selfplay", "evaluate"}  # the stages that search (the index stage builds the index)
REACH_SECONDS = 3.0  # how long the plan waits for a server it names


def _retriever(params: Params, root: Path, names: set[str], inputs: dict[str, str]):
    """What the searching stages search: a dense method needs the dense index the index stage builds; a server
    (``retriever.url``) must answer its health check now."""
    retriever = params.retriever
    if not names & SEARCHING:
        return
    if retriever.url is None:
        if retriever.method != "bm25" and not params.index.dense.enabled:
            yield "retriever.method", (f"{retriever.method} search needs the dense index, which the index stage "
                                       "builds only with index.dense.enabled: true; set it, or retriever.method: bm25")
        return
    from searchlab.retrieval.client import HttpRetriever
    from searchlab.retrieval.base import RetrieverError

    try:
        HttpRetriever(retriever.url, timeout=REACH_SECONDS).health()
    except RetrieverError as err:
        yield "retriever.url", f"{err}; start it with `searchlab serve-retriever`, or set retriever.url: null"
        return
    inputs["retriever.url"] = f"{retriever.url}: answers its health check"


MLFLOW_SCHEMES = {"file", "sqlite", "http", "https", "postgresql", "mysql", "mssql", "databricks", "databricks-uc"}


def _tracking(params: Params, root: Path, names: set[str], inputs: dict[str, str]):
    """Where the runs are tracked (``tracking.mlflow_uri``): a store MLflow can open; a server answers now."""
    from urllib.parse import urlparse

    uri = params.tracking.mlflow_uri
    if uri is None:
        return
    scheme = urlparse(uri).scheme.split("+")[0]
    if scheme and scheme not in MLFLOW_SCHEMES and len(scheme) > 1:  # one letter: a Windows drive
        yield "tracking.mlflow_uri", (f"{uri}: MLflow opens no {scheme!r} store; use sqlite:///FILE, a folder, or "
                                      "http://HOST:PORT of an MLflow server (null: this project's mlflow.db)")
    elif scheme == "sqlite" and not (root / uri.removeprefix("sqlite:///")).parent.is_dir():  # 4 slashes: absolute
        yield "tracking.mlflow_uri", f"{uri}: the folder of the database file does not exist"
    elif scheme in ("http", "https"):
        import httpx

        try:
            httpx.get(uri.rstrip("/") + "/health", timeout=REACH_SECONDS).raise_for_status()
        except httpx.HTTPError as err:
            yield "tracking.mlflow_uri", f"{uri}: no MLflow server answers ({type(err).__name__}: {err})"


def _context(params: Params, root: Path, names: set[str], inputs: dict[str, str]):
    """The rollout's budgets against the starting model's positions, for the stages that roll episodes out; and,
    where that model's tokenizer exists already (a model folder or GGUF file; the tiny model's is built by the base
    stage, and evaluate checks its questions when it starts), every question of the question and benchmark files."""
    from searchlab.agent.budget import budget_problem, length_problem

    if not names & {"rl", "selfplay", "evaluate"}:
        return
    try:
        positions, key, load_tokenizer = _starting_model(params, root)
    except (FileNotFoundError, ValueError, OSError):  # a missing or unreadable model: _models says so
        return
    if positions is None:
        return
    problem = budget_problem(params.rollout, positions, key)
    if problem:
        yield "rollout", problem
        return
    files = {f"eval.benchmarks.{n}": s for n, s in params.eval.benchmarks.items()} if "evaluate" in names else {}
    if params.qa.source == "files":
        files.update({f"qa.files.{n}": s for n, s in params.qa.files.items()})
    if load_tokenizer is None or not files:
        return
    tokenizer = load_tokenizer()
    for key, spec in files.items():
        try:
            questions = load_benchmark(root / spec.path, key.rsplit(".", 1)[-1], spec.format)
        except (BenchmarkError, OSError):  # _question_files reports it
            continue
        problem = length_problem(questions, tokenizer, params.rollout, positions, params.model.name_or_path)
        if problem:
            yield key, problem


def _starting_model(params: Params, root: Path) -> tuple[int | None, str, Callable[[], Any] | None]:
    """``(positions, the params key that sets them, a function loading the tokenizer or None)`` of the model the
    base stage starts from: the tiny model's ``model.tiny.max_positions`` (its tokenizer does not exist yet), a
    GGUF file's or a model folder's own; positions None for a hub id."""
    from searchlab.model.gguf import gguf_file, gguf_positions

    name = params.model.name_or_path
    if name == "tiny":
        return params.model.tiny.max_positions, "model.tiny.max_positions", None
    gguf = gguf_file(name, root)
    if gguf is not None:
        from transformers import AutoTokenizer

        return (gguf_positions(gguf), f"{name}'s own", lambda: AutoTokenizer.from_pretrained(
            str(gguf.parent), gguf_file=gguf.name))
    config = root / name / "config.json"
    if config.is_file():
        from transformers import AutoTokenizer

        positions = json.loads(config.read_text()).get("max_position_embeddings")
        return positions, f"{name}'s own", lambda: AutoTokenizer.from_pretrained(str(root / name))
    return None, "", None


def _accelerate_configs(params: Params, root: Path, names: set[str], inputs: dict[str, str]):
    """Each planned training stage's accelerate config: it exists and is a YAML mapping."""
    for stage in ("sft", "rl", "selfplay"):
        config = getattr(params, stage).accelerate_config
        if stage not in names or not config:
            continue
        key, path = f"{stage}.accelerate_config", root / config
        try:
            data = yaml.safe_load(path.read_text())
        except OSError as err:
            yield key, f"cannot read {path}: {err.strerror}"
            continue
        except yaml.YAMLError as err:
            yield key, f"{path}: not valid YAML: {err}"
            continue
        if not isinstance(data, dict):
            yield key, f"{path}: expected a YAML mapping of accelerate settings"
            continue
        inputs[key] = f"{config}: {data.get('distributed_type', 'NO')}, {data.get('num_processes', 1)} process(es)"


def _externals(params: Params, root: Path, names: set[str], inputs: dict[str, str]):
    """The other inputs the stages declare (model folders, registry references, a GGUF file, a simulator), one
    stage at a time, so every stage's problem is reported; evaluate's models one at a time; the question and
    benchmark files :func:`_question_files` read are not reported twice."""
    from tasks.sources import resolve, stage_of

    for name in sorted(names, key=list(BY_NAME).index):
        stage = BY_NAME[name]
        if name == "evaluate":
            for index, source in enumerate(params.eval.model_sources().values()):
                if stage_of(source) is None:
                    try:
                        inputs[f"eval.models.{index}"] = f"{source}: {resolve(source, '', params, root)}"
                    except ValueError as err:
                        yield f"eval.models.{index}", str(err).removeprefix(": ")
            continue
        if stage.external is None or name in ("qa", "base"):  # checked by _question_files and _models
            continue
        try:
            for label, path in stage.external(params, root).items():
                inputs.setdefault(label, str(path))
        except ValueError as err:
            key, _, message = str(err).partition(": ")
            yield key, message
