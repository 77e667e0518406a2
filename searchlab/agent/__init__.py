"""The search agent: the text protocol the model speaks with its search environment.

:mod:`searchlab.agent.protocol` is the single definition of that protocol (tags,
prompt, parsing, the environment step, demonstrations, loss masks); QA
synthesis, SFT, RL, evaluation and the CLI all import it from here.
Importing this package is cheap: no Java, no torch.
"""

from searchlab.agent.protocol import (
    ANSWER_CLOSE,
    ANSWER_OPEN,
    INFORMATION_CLOSE,
    INFORMATION_OPEN,
    INFORMATION_PREFIX,
    INFORMATION_SUFFIX,
    INVALID_ACTION_FEEDBACK,
    INVALID_ACTION_MESSAGE,
    SEARCH_CLOSE,
    SEARCH_OPEN,
    SPECIAL_TOKENS,
    THINK_CLOSE,
    THINK_OPEN,
    Action,
    DemoStep,
    Segment,
    Trajectory,
    environment_spans,
    format_passages,
    information_block,
    instruction,
    parse_action,
    parse_trajectory,
    render_demonstration,
    step,
)
from searchlab.agent.rollout import Rollout, encode_completion, encode_prompt, summarize

__all__ = [
    "ANSWER_CLOSE",
    "ANSWER_OPEN",
    "INFORMATION_CLOSE",
    "INFORMATION_OPEN",
    "INFORMATION_PREFIX",
    "INFORMATION_SUFFIX",
    "INVALID_ACTION_FEEDBACK",
    "INVALID_ACTION_MESSAGE",
    "SEARCH_CLOSE",
    "SEARCH_OPEN",
    "SPECIAL_TOKENS",
    "THINK_CLOSE",
    "THINK_OPEN",
    "Action",
    "DemoStep",
    "Segment",
    "Trajectory",
    "environment_spans",
    "format_passages",
    "information_block",
    "instruction",
    "parse_action",
    "parse_trajectory",
    "render_demonstration",
    "step",
    "Rollout",
    "encode_completion",
    "encode_prompt",
    "summarize",
]
