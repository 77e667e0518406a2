"""The agent's text as token ids: its prompts (in the chat template where the tokenizer has one) and the encoding
of prompts and continuations, the same for rollouts, demonstrations, SFT and evaluation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from searchlab.agent.protocol import instruction


def chat_prompt(tokenizer: Any, message: str) -> str:
    """The prompt text for the user message ``message``: its turn in ``tokenizer``'s chat template with the
    assistant's turn opened, where the tokenizer has a template (an instruct model, as Search-R1 prompts
    Qwen2.5-Instruct); ``message`` itself for a tokenizer without one (a base model, the tiny model)."""
    if not getattr(tokenizer, "chat_template", None):
        return message
    return tokenizer.apply_chat_template([{"role": "user", "content": message}], tokenize=False,
                                         add_generation_prompt=True)



def agent_prompt(tokenizer: Any, question: str) -> str:
    """The agent's prompt for ``question``: :func:`~searchlab.agent.protocol.instruction` via :func:`chat_prompt`."""
    return chat_prompt(tokenizer, instruction(question))



def encode_prompt(tokenizer: Any, text: str) -> list[int]:
    """Token ids of a prompt: the tokenizer's default encoding, special tokens as it adds them (e.g. a BOS).

    Exception: a text that already starts with the BOS token (a rendered chat
    template) gets no second one. SFT must encode ``prompt`` with this and the
    completion with :func:`encode_completion`, as rollouts do.
    """
    bos = getattr(tokenizer, "bos_token", None)
    add = not (bos and text.startswith(bos))
    return list(tokenizer(text, add_special_tokens=add)["input_ids"])



def encode_completion(tokenizer: Any, text: str) -> list[int]:
    """Token ids of text that continues a sequence (what the environment appends): no special tokens added."""
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])



def decode(tokenizer: Any, ids: Sequence[int]) -> str:
    """The text of ``ids``, special tokens kept: the protocol tags may be special tokens, and text must match the
    ids."""
    # special tokens stay: the protocol tags may be special tokens, and text must match the ids
    return tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)
