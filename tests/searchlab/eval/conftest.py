"""The agent tests' tiny model, tokenizer and BM25 index, shared with the evaluation tests."""

from tests.searchlab.agent.test_rollout import bm25, model, one_thread, tok  # noqa: F401  (fixtures, used by name)
