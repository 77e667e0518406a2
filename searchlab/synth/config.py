"""The ``qa`` and ``benchmarks`` sections: the qa stage's settings (synthesis from a KB, or labeled question files)
and the held-out suites', beside the code they configure (:mod:`searchlab.synth`,
:mod:`searchlab.labeled.questions`)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, model_validator

from searchlab.config import NAME_PATTERN, Section
from searchlab.questions.config import QuestionFileParams
from searchlab.questions.record import QuestionType


class SolverParams(Section):
    """One solver of the consensus filter: what it sees (``role``) and what answers (``backend``)."""

    name: str = Field(description="the solver's name, unique among `qa.solvers`")
    role: Literal["closed_book", "one_shot", "gold"] = Field(
        description="closed_book: the question alone; one_shot: top-k BM25 passages for the whole question; "
                    "gold: the question's gold evidence passages")
    backend: Literal["rules", "hf", "openai"] = Field(
        "rules", description="rules: the built-in lexical reader; hf: a Hugging Face causal LM; "
                             "openai: an OpenAI-compatible chat endpoint")
    model: str | None = Field(None, description="Hugging Face path or id (hf) or model name (openai)")
    url: str | None = Field(None, description="base URL of the OpenAI-compatible endpoint, e.g. http://127.0.0.1:8001/v1")
    api_key_env: str | None = Field(None, description="environment variable holding the endpoint's API key")
    samples: int = Field(1, ge=1, description="answers drawn per question; the pass rate is their mean cover-EM")
    temperature: float = Field(0.0, ge=0, description="sampling temperature of an `hf` or `openai` solver; 0: greedy")
    max_new_tokens: int = Field(32, ge=1, description="most tokens of an `hf` or `openai` solver's answer")
    topk: int = Field(3, ge=1, description="passages a one_shot solver reads")
    trust_remote_code: bool = Field(False, description="allow an `hf` solver's checkpoint to run its own Python code")

    @model_validator(mode="after")
    def _model_needs_name(self) -> "SolverParams":
        if self.backend != "rules" and not self.model:
            raise ValueError(f"solver {self.name!r}: backend {self.backend!r} needs `model`")
        if self.backend == "openai" and not self.url:
            raise ValueError(f"solver {self.name!r}: backend 'openai' needs `url`")
        return self


def _default_solvers() -> list[SolverParams]:
    return [SolverParams(name="closed-book", role="closed_book"),
            SolverParams(name="bm25-one-shot", role="one_shot"),
            SolverParams(name="gold-reader", role="gold")]


class FilterParams(Section):
    """Consensus thresholds: a question is kept when every bound holds (rates are means over a role's solvers)."""

    min_gold_pass: float = Field(1.0, ge=0, le=1, description="kept only if the gold-evidence solvers answer it (mean "
                                                              "cover-EM) at least this often")
    max_closed_book_pass: float = Field(0.0, ge=0, le=1, description="dropped if the closed-book solvers answer it "
                                                                     "more often (not applied to two-way comparisons, "
                                                                     "which chance answers half the time)")
    max_one_shot_pass: dict[QuestionType, float] = Field(
        default_factory=lambda: {"single": 1.0, "bridge": 0.0, "compare": 1.0, "compose": 0.0, "oblique": 0.0},
        description="per type: dropped if one BM25 search answers it more often (single-hop questions are one search "
                    "by design)")


class DemoParams(Section):
    """Demonstrations: trajectories through the real retriever that SFT learns from."""

    topk: int = Field(3, ge=1, description="passages per `<information>` block (as the agent will see them)")
    max_rephrasings: int = Field(2, ge=0, description="other phrasings tried when a search misses the needed passage")
    max_searches: int = Field(3, ge=1, description="with `qa.source: files`: searches a demonstration made from a "
                                                   "labeled question may take, the question's own first, then the "
                                                   "supporting titles a file names (HotpotQA's supporting facts) "
                                                   "that no earlier search showed; keep it below `rollout.max_turns`, "
                                                   "or the agent is cut off before the answer")
    proposer: bool = Field(True, description="also write the self-play proposer's demonstrations for single, bridge "
                                             "and compose questions (`role: proposer` in `demos.jsonl`; SFT trains "
                                             "both roles): the answer in the prompt, searches back along the evidence "
                                             "chain, the question in `<question>` tags")
    cite: bool = Field(False, description="solver demonstrations cite the passage stating each hop's fact (`<cite> "
                                          "Doc N </cite>` in the turn after the search that found it), so SFT teaches "
                                          "the citations `rl.reward.rubric_weight` (C-GRPO) rewards; `false` leaves "
                                          "the demonstrations byte for byte as before")


class QAParams(Section):
    """The training questions: synthesized from the corpus's KB (BMGQ-style: evidence clusters, reverse-constructed
    questions, filters, demonstrations), or read from labeled files in the field's formats."""

    source: Literal["synthesis", "files"] = Field(
        "synthesis", description="`synthesis`: questions, demonstrations and held-out suites synthesized from the "
                                 "corpus's KB (the keys below); `files`: the labeled questions of `qa.files` (no KB), "
                                 "with demonstrations made by searching them (`demos.topk`)")
    files: dict[str, QuestionFileParams] = Field(
        default_factory=dict, description="with `source: files`, training question files by name: `{path, format, "
                                          "sample, seed}`, read as `eval.benchmarks` files are; written to "
                                          "`train.jsonl`/`dev.jsonl` with `type` the file's name and no difficulty "
                                          "bucket")
    on_overlap: Literal["drop", "fail"] = Field("drop", description="a training question an evaluated benchmark "
                                                                    "(`eval.benchmarks`, read whole) also holds, by "
                                                                    "normalised text or id: `drop` (counted in the "
                                                                    "manifest and `overlap.json`) or `fail` (the "
                                                                    "stage fails naming it)")
    seed: int = Field(0, description="every shard draws from its own stream seeded by this and its number; with "
                                     "`files`, the seed of the dev split")
    shard_size: int = Field(200, ge=1, description="target entities per shard, the unit of resume after a crash")
    attempts_per_target: int = Field(2, ge=1, description="questions tried per target entity")
    heldout_attempts_per_target: int = Field(0, ge=0, description="more questions tried per target entity, from a "
                                                                  "random stream of their own, kept only when their "
                                                                  "answer is held out: larger benchmark suites (150 "
                                                                  "to 200 questions each in the demo) with exactly "
                                                                  "the same training questions")
    types: dict[QuestionType, float] = Field(
        default_factory=lambda: {"single": 0.2, "bridge": 0.25, "compare": 0.15, "compose": 0.2, "oblique": 0.2},
        description="share of each question type among attempts")
    min_cue_matches: int = Field(2, ge=2, description="an oblique cue alone must match at least this many entities of "
                                                      "the answer's type")
    max_cues: int = Field(4, ge=2, description="most cues an oblique question combines")
    yes_no: bool = Field(False, description="let boolean facts answer questions ('Is Aruba landlocked?' → `no`); off, "
                                            "they are only cues, since a guesser gets half of yes/no questions right")
    heldout_share: float = Field(0.15, ge=0, lt=1, description="share of answers (by normalised answer) reserved for "
                                                               "benchmarks")
    dev_share: float = Field(0.05, ge=0, lt=1, description="share of training questions kept as dev")
    rank_depth: int = Field(100, ge=1, description="BM25 depth at which the answer passage's rank is looked up")
    nli_model: str | None = Field(None, description="Hugging Face NLI model checking that each evidence passage "
                                                    "entails its fact; `null`: a structured check (the passage is the "
                                                    "subject's and contains the value)")
    solvers: list[SolverParams] = Field(
        default_factory=_default_solvers, description="the consensus filter's roster, each `{name, role, backend, "
                                                      "...}` (the keys below); by default closed-book, bm25-one-shot "
                                                      "(top 3) and gold-reader, all `rules`")
    filter: FilterParams = Field(FilterParams(), description="consensus thresholds: a question is kept only when "
                                                             "every bound holds")
    demos: DemoParams = Field(DemoParams(), description="the demonstrations SFT learns from: trajectories through the "
                                                        "real retriever")
    examples: int = Field(10, ge=0, description="example questions with evidence chains in `datasheet.md`")

    @model_validator(mode="after")
    def _check(self) -> "QAParams":
        if self.source == "files" and not self.files:
            raise ValueError("qa.files: qa.source is 'files', so name at least one training question file, e.g. "
                             "{nq: {path: data-in/nq-train.parquet}}")
        if self.source == "synthesis" and self.files:
            raise ValueError("qa.files: given, but qa.source is 'synthesis'; set qa.source: files to train on them")
        for name in self.files:
            if not re.match(NAME_PATTERN, name):
                raise ValueError(f"qa.files.{name}: a file's name may hold only letters, digits, '_', '.' and '-', "
                                 "starting with a letter or digit")
        negative = [f"{kind} ({share})" for kind, share in self.types.items() if share < 0]
        if negative:
            raise ValueError(f"qa.types: a share is 0 or more, got {', '.join(negative)}")
        if sum(self.types.values()) <= 0:
            raise ValueError("qa.types: at least one share must be positive")
        roles = {s.role for s in self.solvers}
        if "gold" not in roles:
            raise ValueError("qa.solvers: at least one solver with role 'gold' is required")
        names = [s.name for s in self.solvers]
        if len(set(names)) != len(names):
            raise ValueError(f"qa.solvers: solver names must be unique, got {names}")
        return self


class BenchmarksParams(Section):
    """The held-out world suites written to ``data/benchmarks/`` (one FlashRAG JSONL per question type)."""

    size: int = Field(200, ge=1, description="most questions per suite (`world-*`, or `records-*` for a records "
                                             "corpus; a seeded sample of the held-out questions)")
    seed: int = Field(0, description="the sample's seed")
