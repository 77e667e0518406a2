"""What every params section module shares: the :class:`Section` base, the execution-key mark, LoRA's section
(sft's and the GRPO stages'), the difficulty buckets, and the checks of model sources and registry aliases.

The sections live beside the code they configure (``searchlab/rl/config.py``, ``searchlab/selfplay/config.py``,
the rest still in :mod:`searchlab.params`); :mod:`searchlab.params` composes them into ``Params`` and loads
the files.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Section(BaseModel):
    """Base for every params section: unknown keys are errors, values are checked strictly."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    def unread(self) -> frozenset[str]:
        """The fields this section's own values leave unread (``model.tiny`` for a pretrained model): a stage's
        fingerprint and its DVC params leave them out, so editing them reruns nothing. None unless a section
        says so."""
        return frozenset()


EXECUTION = {"execution": True}


def execution_keys(section: type[BaseModel]) -> set[str]:
    """The fields of a section marked :data:`EXECUTION`."""
    return {name for name, spec in section.model_fields.items()
            if isinstance(spec.json_schema_extra, dict) and spec.json_schema_extra.get("execution")}


# A user-chosen name (a benchmark, a question file, a model in eval.models): it becomes part of metric and file names
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"


class LoraParams(Section):
    """LoRA adapters (peft, TRL's ``peft_config``) instead of full fine-tuning; the saved model has them merged in."""

    enabled: bool = Field(False, description="train LoRA adapters instead of every weight; the saved model has them "
                                             "merged in, so downstream stages load an ordinary checkpoint")
    r: int = Field(16, ge=1, description="adapter rank")
    alpha: int = Field(32, ge=1, description="scaling numerator: updates are scaled by alpha / r")
    dropout: float = Field(0.05, ge=0, lt=1, description="dropout on the adapters' input")
    target_modules: str | list[str] = Field("all-linear", description="module names to adapt, or `all-linear` (every "
                                                                      "linear layer but the output head)")


def check_registry_alias(alias: str, section: str) -> None:
    """Raise ValueError naming ``<section>.registry_alias`` for an alias MLflow reserves."""
    if alias.lower() == "latest":
        raise ValueError(f"{section}.registry_alias: 'latest' is reserved by MLflow; choose another alias")


REGISTRY_PREFIX = "models:/"


def registry_reference(source: str) -> tuple[str, str] | None:
    """``(name, alias)`` of a ``models:/NAME@ALIAS`` MLflow registry reference, None for anything else.

    Raises ValueError for a ``models:/`` reference without a name or an alias.

    >>> registry_reference("models:/searchlab-agent@sft")
    ('searchlab-agent', 'sft')
    """
    if not source.startswith(REGISTRY_PREFIX):
        return None
    name, _, alias = source[len(REGISTRY_PREFIX):].partition("@")
    if not name or not alias:
        raise ValueError(f"{source}: expected models:/NAME@ALIAS, e.g. models:/searchlab-agent@sft")
    return name, alias


def check_init(init: str, section: str, stages: tuple[str, ...], key: str = "init") -> None:
    """Raise ValueError naming ``<section>.<key>`` for a policy source that cannot be one: a pipeline stage other
    than ``stages``, or a malformed ``models:/`` reference (a folder is checked when the stage's inputs are)."""
    pipeline_stages = ("corpus", "index", "qa", "benchmarks", "base", "sft", "selfplay", "rl", "evaluate")
    if init in pipeline_stages and init not in stages:
        raise ValueError(f"{section}.{key}: {init!r} is not a model this stage can start from; expected "
                         f"{', '.join(stages)}, a local Hugging Face folder or models:/NAME@ALIAS")
    registry_reference(init)
