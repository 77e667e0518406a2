"""The ``eval`` section: evaluation's settings, beside its code.

The systems the schema checks (:data:`EvalSystem`) are stated here once and read by the code that plays them
(:mod:`searchlab.eval.systems`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from searchlab.config import NAME_PATTERN, Section, registry_reference
from searchlab.questions.config import QuestionFileParams
from searchlab.questions.record import QUESTION_TYPES


# The systems searchlab.eval.systems plays (SYSTEMS there is this list)
EvalSystem = Literal["direct", "rag", "agent", "sampled"]
WORLD_SUITES: tuple[str, ...] = tuple(f"world-{t}" for t in QUESTION_TYPES)  # of the synthetic world
RECORDS_SUITES: tuple[str, ...] = tuple(f"records-{t}" for t in QUESTION_TYPES)  # of a corpus of your own records
BUILT_IN_SUITES = WORLD_SUITES + RECORDS_SUITES


class EvalModelParams(Section):
    """A model to evaluate, under a name of your choosing (the name appears in metric names and files) or with
    systems of its own."""

    name: str | None = Field(None, pattern=NAME_PATTERN, description="the name the model is reported under, in metric "
                                                              "names and prediction files (letters, digits, `_`, "
                                                              "`.`, `-`); null: the name a bare source gets")
    source: str = Field(description="sft, a local Hugging Face folder, or models:/NAME@ALIAS")
    systems: list[EvalSystem] | None = Field(None, description="the systems this model is evaluated with, in place "
                                                               "of `eval.systems` (`[agent]`: a trained agent "
                                                               "without the one-turn baselines); null: "
                                                               "`eval.systems`")


def _model_name(source: str) -> str:
    """The name a model given only by its source is reported under: ``sft``, the folder's name, or NAME.ALIAS."""
    reference = registry_reference(source)
    if reference:
        name = ".".join(reference)
    else:
        name = Path(source.rstrip("/")).name or source
    return re.sub(r"[^A-Za-z0-9_.-]", "-", name).lstrip("-_.") or "model"


class SamplingParams(Section):
    """The ``sampled`` system: the agent's episodes sampled as in training, several per question."""

    temperature: float = Field(0.7, gt=0, description="sampling temperature (top-p 1; the demo's `rl.temperature`)")
    samples: int = Field(4, ge=1, description="episodes per question; its EM and F1 are their means")
    seed: int = Field(0, description="seed of the sampled episodes")


class EvalParams(Section):
    """The evaluate stage: which benchmarks, models and systems, and the bootstrap behind the intervals.

    Decoding is the ``rollout`` section's, the same for every system. A bad value is named before anything runs: an
    unknown system, suite or format, a malformed ``models:/`` reference, two models of one name, or an external file
    or model folder that does not exist (exit code 2).
    """

    suites: Literal["all"] | list[str] = Field("all", description="built-in suites from `data/benchmarks/`: `all` "
                                                                  "(every `world-*` or `records-*` suite the "
                                                                  "benchmarks stage wrote questions for), `[]` for "
                                                                  "none, or a list such as `[world-single, "
                                                                  "world-bridge]`")
    sample: int | None = Field(None, ge=1, description="questions per built-in suite, a seeded sample; null: all of "
                                                       "them (at most `benchmarks.size`)")
    benchmarks: dict[str, QuestionFileParams] = Field(
        default_factory=dict, description="external benchmark files by name (letters, digits, `_`, `.`, `-`): `NAME: "
                                          "{path, format, sample, seed}`")
    models: list[str | EvalModelParams] = Field(
        default_factory=lambda: ["sft", "rl", "selfplay"], description="a model stage's name (`base`: the model "
                                                                       "before any training, the zero-shot baseline; "
                                                                       "`sft`, `rl`, `selfplay`: its output folder), "
                                                                       "a local Hugging Face folder (relative to the "
                                                                       "project root), `models:/NAME@ALIAS` (the "
                                                                       "folder that registry alias points at), or "
                                                                       "`{name: N, source: S, systems: [...]}` to "
                                                                       "choose the name it is reported under (by "
                                                                       "default the stage's name, the folder's name, "
                                                                       "or `NAME.ALIAS`) or its own systems. "
                                                                       "Every model is compared with each earlier one "
                                                                       "on the same questions and system (paired "
                                                                       "test, e.g. `rl/agent vs sft/agent`)")
    systems: list[EvalSystem] = Field(
        default_factory=lambda: ["direct", "rag", "agent"], description="`direct`: closed book, one turn (the model "
                                                                        "may think, never search); `rag`: the "
                                                                        "question searched once and its "
                                                                        "`rollout.topk` passages shown, then one such "
                                                                        "turn; `agent`: the multi-turn search agent, "
                                                                        "greedy as `rollout` decodes; `sampled`: the "
                                                                        "agent sampled as `eval.sampling` says, EM "
                                                                        "and F1 the mean over a question's episodes "
                                                                        "(small shifts of the distribution that "
                                                                        "greedy decoding hides)")
    sampling: SamplingParams = Field(SamplingParams(), description="the `sampled` system: temperature, episodes per "
                                                                   "question, seed")
    resamples: int = Field(2000, ge=1, description="bootstrap resamples of the 95% intervals and paired tests")
    seed: int = Field(0, description="seed of the built-in suites' sample and of the bootstrap")
    threads: int | None = Field(None, ge=1, description="torch threads of the rollouts on a CPU; null: torch's "
                                                        "default (one per core). 1 keeps a small model fast on a CPU "
                                                        "shared with another torch process, where threads wait on "
                                                        "each other (measured: 181 s with 2 threads against 5 s with "
                                                        "1 for the smoke evaluation)")

    @model_validator(mode="after")
    def _check(self) -> "EvalParams":
        if self.suites != "all":
            unknown = [s for s in self.suites if s not in BUILT_IN_SUITES]
            if unknown:
                raise ValueError(f"eval.suites: unknown suite(s) {', '.join(unknown)}; "
                                 f"expected 'all' or some of {', '.join(BUILT_IN_SUITES)}")
        for name in self.benchmarks:
            if not re.match(NAME_PATTERN, name):
                raise ValueError(f"eval.benchmarks.{name}: a benchmark name may hold only letters, digits, '_', "
                                 "'.' and '-', starting with a letter or digit")
            if name in BUILT_IN_SUITES:
                raise ValueError(f"eval.benchmarks.{name}: the name of a built-in suite; choose another")
        _check_systems("eval.systems", self.systems)
        if not self.models:
            raise ValueError("eval.models: name at least one model, e.g. [sft]")
        for index, entry in enumerate(self.models):
            try:  # a malformed models:/ reference is an error now, not after training
                registry_reference(entry.source if isinstance(entry, EvalModelParams) else entry)
            except ValueError as err:
                raise ValueError(f"eval.models.{index}: {err}") from None
            if isinstance(entry, EvalModelParams) and entry.systems is not None:
                _check_systems(f"eval.models.{index}.systems", entry.systems)
        self.model_sources()  # two models of one name
        return self

    def model_sources(self) -> dict[str, str]:
        """``{name: source}`` of the models to evaluate, in order; a name given twice is an error."""
        named: dict[str, str] = {}
        for entry in self.models:
            source = entry.source if isinstance(entry, EvalModelParams) else entry
            name = entry.name if isinstance(entry, EvalModelParams) and entry.name else _model_name(source)
            if name in named:
                raise ValueError(f"eval.models: two models are named {name!r} ({named[name]} and {source}); "
                                 "name them with {name: ..., source: ...}")
            named[name] = source
        return named

    def model_systems(self) -> dict[str, list[str]]:
        """``{name: systems}`` of the models to evaluate, in order: a model's own ``systems`` or ``eval.systems``."""
        own = [entry.systems if isinstance(entry, EvalModelParams) else None for entry in self.models]
        return {name: list(systems or self.systems) for name, systems in zip(self.model_sources(), own)}


def _check_systems(key: str, systems: list[str]) -> None:
    """ValueError naming ``key`` for an empty list of systems or one that names a system twice."""
    if not systems:
        raise ValueError(f"{key}: name at least one of direct, rag, agent")
    if len(set(systems)) != len(systems):
        raise ValueError(f"{key}: each system once, got {systems}")
