"""Model sources named in the params (``rl.init``, ``selfplay.init``, ``eval.models``), resolved in one place.

A source is a model stage (``base``, ``sft``, ``rl``, ``selfplay``: that stage's output), a local Hugging Face
folder (relative to the project root, or absolute), or a ``models:/NAME@ALIAS`` registry reference.
"""

from __future__ import annotations

from pathlib import Path

from searchlab.params import Params
from searchlab.train.base import start_model
from tasks.tracking import TrackingError, model_folder

# the stages whose output is an agent model; base is the model before any training
MODEL_STAGES = ("base", "sft", "rl", "selfplay")


def stage_of(source: str) -> str | None:
    """The model stage ``source`` names, or None for a folder or a registry reference."""
    return source if source in MODEL_STAGES else None


def resolve(source: str, key: str, params: Params, root: Path, stage_dirs: dict[str, Path] | None = None) -> Path:
    """The model folder of ``source``; ValueError naming ``key`` (e.g. ``rl.init``) when there is none.

    A model stage resolves to its folder in ``stage_dirs`` (default: ``data/<stage>``), base to the checkpoint its
    folder names when it only points at one (:func:`searchlab.train.base.start_model`).
    """
    stage = stage_of(source)
    if stage is not None:
        folder = (stage_dirs or {}).get(stage, root / params.runtime.data_dir / stage)
        return Path(start_model(folder)) if stage == "base" else folder
    try:
        folder = root / model_folder(source, params.tracking, root)
    except ValueError as err:  # a malformed models:/ reference
        raise ValueError(f"{key}: {err}") from None
    except TrackingError as err:  # the registry does not know it (the cause tells callers which)
        raise ValueError(f"{key}: {err}") from err
    if not (folder / "config.json").is_file():
        raise ValueError(f"{key}: {source}: no Hugging Face model folder at {folder} (expected "
                         f"{', '.join(MODEL_STAGES)}, a local folder with config.json, or models:/NAME@ALIAS)")
    return folder


def external_models(sources: dict[str, str], params: Params, root: Path) -> dict[str, Path]:
    """``{source: folder}`` of the sources (``{key: source}``) that are no model stage: inputs from outside the
    pipeline, whose content enters a fingerprint; ValueError naming the key of one that is missing."""
    return {source: resolve(source, key, params, root) for key, source in sources.items() if stage_of(source) is None}
