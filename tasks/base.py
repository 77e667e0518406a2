"""The base stage: the model training starts from (the tiny model's tokenizer and pretraining, or a GGUF checkpoint
converted into a Hugging Face folder), as ``data/base/``."""

from pathlib import Path

from searchlab.model.gguf import gguf_file
from searchlab.params import Params
from searchlab.train.base import build_base
from tasks.stage import Stage, StageContext


def _build(ctx: StageContext) -> dict:
    corpus, qa = ctx.inputs.get("corpus"), ctx.inputs.get("qa")
    return build_base(ctx.params.model, corpus and corpus / "corpus.jsonl", qa and qa / "demos.jsonl",
                      ctx.out_dir, ctx.work_dir, ctx.root)


def external_inputs(params: Params, root: Path) -> dict[str, Path]:
    """The GGUF file the stage converts, if ``model.name_or_path`` names one: its content enters the fingerprint,
    and a missing one is a ValueError naming the key before any stage runs."""
    try:
        path = gguf_file(params.model.name_or_path, root)
    except FileNotFoundError as err:
        raise ValueError(f"model.name_or_path: {err}") from None
    return {params.model.name_or_path: path} if path is not None else {}


STAGE = Stage(
    name="base",
    description="The model training starts from: the tiny model's tokenizer and pretraining, a converted GGUF "
                "checkpoint, or a checkpoint's name",
    # the tiny model's tokenizer and pretraining read the corpus and the demonstrations; a checkpoint needs neither
    upstream=lambda params: ("corpus", "qa") if params.model.name_or_path == "tiny" else (),
    reads=("model",),
    build=_build,
    external=external_inputs,
)
