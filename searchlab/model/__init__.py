"""The agent's language model: build the tiny one, load any one.

Tiny vs real: one loading path. ``model.name_or_path`` is either ``tiny`` or a
Hugging Face checkpoint (a local folder such as a downloaded Qwen2.5, or a hub
id where the hub is reachable). For ``tiny`` the pipeline first runs
:func:`bootstrap_tiny`, which trains a byte-level BPE tokenizer on the corpus
and demonstrations and saves a freshly initialised small Qwen2 model next to it
as an ordinary Hugging Face folder. From then on both kinds are opened by the
same :func:`load_model` (``AutoTokenizer`` + ``AutoModelForCausalLM``), so
rollouts, SFT, RL and evaluation never branch on which model they run.

The difference that remains is reported, not hidden:
:func:`check_protocol_tokens` lists the protocol tags (``<search>`` ...) that a
tokenizer splits into several pieces: none for the tiny tokenizer, usually all
eight for a real checkpoint, which is fine.
"""

from searchlab.model.bootstrap import EOS_TOKEN, PAD_TOKEN, bootstrap_tiny
from searchlab.model.loading import (
    ModelNotFoundError,
    check_protocol_tokens,
    load_agent,
    load_model,
    load_tokenizer,
    load_vllm,
    pick_dtype,
)

__all__ = [
    "EOS_TOKEN",
    "PAD_TOKEN",
    "ModelNotFoundError",
    "bootstrap_tiny",
    "check_protocol_tokens",
    "load_agent",
    "load_model",
    "load_tokenizer",
    "load_vllm",
    "pick_dtype",
]
