"""Open a causal language model and its tokenizer: one code path for the tiny model and real checkpoints.

``path`` is a local Hugging Face model folder (the bootstrapped ``tiny`` one or a
downloaded checkpoint such as Qwen2.5), a GGUF file or packaged checkpoint
(:mod:`searchlab.model.gguf`), or, where the hub is reachable, a hub id.
Everything goes through ``AutoTokenizer`` / ``AutoModelForCausalLM``; nothing
here special-cases the tiny model.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

# No model hub is reachable from the machines this runs on: fail fast on a missing
# model instead of retrying downloads for ~20 s. Set before huggingface_hub is
# first imported (the imports below are lazy); export HF_HUB_OFFLINE=0 to download.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from searchlab.agent.protocol import SPECIAL_TOKENS  # noqa: E402
from searchlab.model.gguf import gguf_file, load_gguf  # noqa: E402

if TYPE_CHECKING:
    from searchlab.params import ModelParams, RolloutParams

_DTYPES = ("float32", "bfloat16", "float16")
# What a hub id looks like ("gpt2", "Qwen/Qwen2.5-3B"); anything else is meant as a path.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


class ModelNotFoundError(FileNotFoundError):
    """``path`` is not a local model folder and could not be fetched from the hub."""


def _hub_offline() -> bool:
    # Read the variable on every call: huggingface_hub reads it once at import,
    # so a change made later (a test, a CLI flag) would otherwise be ignored.
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def _resolve_device(device: Any = None):
    """``device`` as a ``torch.device``; None: the first GPU when one is visible, else the CPU."""
    import torch

    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def pick_dtype(name: str, device: Any = None):
    """The ``torch.dtype`` for ``model.dtype`` ``name`` on ``device``.

    ``"auto"`` is bfloat16 on a CUDA device that supports it (half the memory,
    the dtype real checkpoints are trained in) and float32 elsewhere: CPUs are
    slow or inexact in half precision. Other names are taken literally.
    """
    import torch

    if name == "auto":
        device = _resolve_device(device)
        if device.type == "cuda" and torch.cuda.is_available() and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    if name not in _DTYPES:
        raise ValueError(f"unknown dtype {name!r}: expected 'auto' or one of {', '.join(_DTYPES)}")
    return getattr(torch, name)


def _source(path: str) -> tuple[str, dict[str, Any]]:
    """Where ``from_pretrained`` should look for ``path``, and the keyword arguments that say so.

    A local folder is used as is. A string shaped like a hub id is passed on
    (it may sit in the hub cache); anything else that does not exist is an error
    right away, so a mistyped path never turns into a hub request.
    """
    path = str(path)
    if Path(path).expanduser().is_dir():
        return str(Path(path).expanduser()), {}
    if path == "tiny":
        raise ModelNotFoundError(
            "model 'tiny' is built by the pipeline, not loaded by name: bootstrap it "
            "(searchlab.model.bootstrap_tiny) and pass the folder it wrote")
    if path.startswith(("/", ".", "~")) or not _HUB_ID.match(path):
        raise ModelNotFoundError(f"model path {path!r} not found locally: no such folder "
                                 f"({Path(path).expanduser().resolve()}); it is not a hub id either")
    return path, {"local_files_only": _hub_offline()}


def _not_found(path: str, what: str, error: Exception) -> ModelNotFoundError:
    offline = "HF_HUB_OFFLINE=1 is set" if _hub_offline() else "HF_HUB_OFFLINE is not set"
    return ModelNotFoundError(
        f"{what} {path!r} not found locally (no such folder, and not in the Hugging Face cache), and the "
        f"hub is unreachable or disabled ({offline}): copy the checkpoint to a local folder and pass that "
        f"folder. Cause: {str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__}")


def load_tokenizer(path: str, trust_remote_code: bool = False):
    """The tokenizer of the model at ``path`` (a local folder, or a hub id where the hub is reachable).

    A tokenizer without a pad token gets its EOS token as pad, so batches can be
    padded. Padding side is left as the checkpoint has it: generation wants left
    padding, training usually right, so callers set it where they batch.
    """
    from transformers import AutoTokenizer

    gguf = gguf_file(str(path))
    source, extra = (str(gguf.parent), {"gguf_file": gguf.name}) if gguf else _source(path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code, **extra)
    except (OSError, ValueError) as err:
        if extra and not gguf:  # a hub id: say why it could not be fetched
            raise _not_found(path, "tokenizer", err) from err
        raise OSError(f"could not load a tokenizer from the folder {source!r}: {err}") from err
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_model(path: str, trust_remote_code: bool = False, dtype: str = "auto", device: Any = None):
    """Load ``(model, tokenizer)`` from ``path``: a causal LM in eval mode on ``device``.

    ``device`` None means the first GPU when one is visible, else the CPU;
    ``dtype`` is resolved by :func:`pick_dtype`. The tiny bootstrapped model and
    a real checkpoint take exactly this path. Raises :class:`ModelNotFoundError`
    naming ``path`` when it is neither a local folder nor loadable from the hub.
    """
    from transformers import AutoModelForCausalLM

    device = _resolve_device(device)
    gguf = gguf_file(str(path))
    if gguf is not None:  # de-quantised on every load: the base stage converts it once for training
        model, tokenizer = load_gguf(gguf, pick_dtype(dtype, device))
        if tokenizer.pad_token is None and tokenizer.eos_token is not None:
            tokenizer.pad_token = tokenizer.eos_token
    else:
        tokenizer = load_tokenizer(path, trust_remote_code=trust_remote_code)
        source, extra = _source(path)
        try:
            model = AutoModelForCausalLM.from_pretrained(
                source, trust_remote_code=trust_remote_code, dtype=pick_dtype(dtype, device), **extra)
        except (OSError, ValueError) as err:
            if extra:
                raise _not_found(path, "model", err) from err
            raise OSError(f"could not load a causal language model from the folder {source!r}: {err}") from err
    model.to(device)
    model.eval()
    # generate() warns, and pads with the wrong id, when the checkpoint names no pad token.
    if model.generation_config.pad_token_id is None and tokenizer.pad_token_id is not None:
        model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def check_protocol_tokens(tokenizer) -> list[str]:
    """The protocol tags that ``tokenizer`` does not treat as one token, in protocol order.

    A tag counts as one token when it encodes to a single id on its own and that
    id also appears when the tag is glued to other text (``x</search>``). The
    tiny tokenizer passes for all eight; a real checkpoint's tokenizer usually
    splits them into several pieces, which works (Search-R1 trains Qwen2.5 so)
    and is only worth reporting.
    """
    failing = []
    for tag in SPECIAL_TOKENS:
        ids = tokenizer.encode(tag, add_special_tokens=False)
        if len(ids) != 1 or ids[0] not in tokenizer.encode(f"x{tag}x", add_special_tokens=False):
            failing.append(tag)
    return failing


def load_agent(path: str, model: ModelParams, rollout: RolloutParams):
    """``(engine, tokenizer)`` for rollouts of the model at ``path``, as ``rollout.engine`` says.

    ``hf``: :func:`load_model` (CPU or GPU). ``vllm``: a vLLM engine
    (:func:`load_vllm`), which :func:`searchlab.agent.rollout.rollout` drives
    with the same protocol and token bookkeeping.
    """
    if rollout.engine == "vllm":
        return load_vllm(path, model.trust_remote_code, model.dtype, rollout.vllm_gpu_memory_utilization)
    return load_model(path, model.trust_remote_code, model.dtype)


def load_vllm(path: str, trust_remote_code: bool = False, dtype: str = "auto", gpu_memory_utilization: float = 0.85):
    """``(vllm.LLM, tokenizer)`` for ``path``, with prefix caching (each turn re-submits the episode's context).

    Raises :class:`RuntimeError` saying how to install vLLM when it is missing.
    """
    try:
        from vllm import LLM
    except ImportError as err:
        raise RuntimeError(f"rollout.engine is 'vllm' but vLLM cannot be imported ({err}); install it on a GPU "
                           "machine (pip install vllm) or set rollout.engine: hf") from err
    tokenizer = load_tokenizer(path, trust_remote_code=trust_remote_code)
    source, _ = _source(path)
    engine = LLM(model=source, tokenizer=source, trust_remote_code=trust_remote_code,
                 dtype="auto" if dtype == "auto" else dtype, enable_prefix_caching=True,
                 gpu_memory_utilization=gpu_memory_utilization)
    return engine, tokenizer
