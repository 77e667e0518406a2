"""A simulated search engine for RL rollouts: a language model writes the passages instead of an index.

Two papers train search agents this way. SSRL (Fan et al., "SSRL: Self-Search Reinforcement Learning",
arXiv:2508.10874) lets the policy being trained write its own search results (*self-search*): the knowledge
it already holds becomes the search engine. ZeroSearch (Sun et al., "ZeroSearch: Incentivize the Search
Capability of LLMs without Searching", arXiv:2505.04588) uses a separate *simulation LLM* prompted for either
*useful* passages (they answer the query) or *noisy* ones (they share the query's words but do not answer
it), and raises the share of noisy ones during training.

:class:`SimulatedRetriever` does both behind the :class:`~searchlab.retrieval.base.Retriever` protocol, so the
rollout loop cannot tell it from a real index. Its passages are marked by their ids (``sim:useful:<n>``,
``sim:noisy:<n>``), which the rollout keeps in ``Rollout.retrieved``, so a trajectory records which of its
information blocks were simulated (:func:`is_simulated`, :func:`simulated_counts`).

The prompt (:func:`passage_prompt`) asks for no instruction following: it is the beginning of a corpus
passage, ``"Title"`` and a newline, exactly how the ``base`` stage pretrains the tiny model
(:mod:`searchlab.train.pretrain`: each passage's contents, then end-of-sequence), so the model simply continues
the passage it knows under that title. The two modes differ only in the title.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from searchlab.agent.rollout import left_padded, model_eos_ids
from searchlab.agent.text import encode_prompt
from searchlab.retrieval.base import Hit, RetrieverBase, check_request

__all__ = ["SIMULATED_PREFIX", "SimulatedRetriever", "is_simulated", "passage_prompt", "simulated_counts"]

SIMULATED_PREFIX = "sim:"  # hit ids of simulated passages: sim:useful:<n> or sim:noisy:<n>
NOISY_PREFIX = SIMULATED_PREFIX + "noisy:"
USEFUL_PREFIX = SIMULATED_PREFIX + "useful:"

# Words that never name what a query is about: question words, articles, auxiliaries, prepositions.
FILLER = frozenset("""
    who whom whose what which when where why how is are was were be been do does did has have had
    a an the of in on at to by for from with as and or its his her their about into than that this
""".split())
PUNCTUATION = "\"'.,;:!?()[]{}"
MIN_PASSAGE_TOKENS = 4  # a chat model may open with a blank line; an empty passage would tell the agent nothing


def is_simulated(hit_id: str) -> bool:
    """Whether ``hit_id`` names a passage a :class:`SimulatedRetriever` wrote (rather than a corpus passage)."""
    return hit_id.startswith(SIMULATED_PREFIX)


def simulated_counts(retrieved: Iterable[Sequence[str]]) -> dict[str, int]:
    """Counts for trajectory logging over information blocks, each given as its hit ids (``Rollout.retrieved``).

    ``blocks``: all blocks; ``simulated_blocks``: blocks holding a simulated passage; ``passages``: all hit ids;
    ``simulated_passages`` and ``noisy_passages``: the simulated ones and, of those, the noisy ones.
    """
    counts = dict.fromkeys(("blocks", "simulated_blocks", "passages", "simulated_passages", "noisy_passages"), 0)
    for ids in retrieved:
        simulated = [i for i in ids if is_simulated(i)]
        counts["blocks"] += 1
        counts["simulated_blocks"] += bool(simulated)
        counts["passages"] += len(ids)
        counts["simulated_passages"] += len(simulated)
        counts["noisy_passages"] += sum(i.startswith(NOISY_PREFIX) for i in simulated)
    return counts


def passage_prompt(query: str, noisy: bool) -> tuple[str, str]:
    """``(title, prompt)`` for one simulated passage on ``query``; the model continues ``prompt`` with its text.

    The prompt is ``"<title>"`` and a newline: where a corpus passage's text begins. The *name* is the span of
    the query from its first to its last capitalised word that is not a filler word ("Feidanholm Institute of
    Technology" in "Feidanholm Institute of Technology founded"); a query without one names its non-filler
    words. *Useful*: the title is the name, so the model writes the passage it holds on what the query asks
    about. *Noisy*: the title is a namesake made of the query's words, the name without its first word (nor the
    filler words that would then lead) plus the query's other words ("Deillerez born" for "Drel Deillerez
    born in"), so the passage shares the query's
    words but is about something else; a one-word query gets ``"<word> (disambiguation)"``.
    """
    words = [w.strip(PUNCTUATION) for w in query.split()]
    words = [w for w in words if w] or [query.strip() or "?"]
    capitalised = [i for i, w in enumerate(words) if w[:1].isupper() and w.lower() not in FILLER]
    if capitalised:
        first, last = capitalised[0], capitalised[-1] + 1
    else:
        first, last = 0, len(words)
    name = [w for w in words[first:last] if capitalised or w.lower() not in FILLER] or words
    others = [w for w in words[:first] + words[last:] if w.lower() not in FILLER]
    title = " ".join(name)
    if noisy:
        namesake = name[1:] + others
        while namesake and namesake[0].lower() in FILLER:  # "Return to Rihasder" -> "Rihasder", not "to Rihasder"
            namesake.pop(0)
        title = " ".join(namesake) or f"{title} (disambiguation)"
    return title, f'"{title}"\n'


class SimulatedRetriever(RetrieverBase):
    """A :class:`~searchlab.retrieval.base.Retriever` whose ``k`` hits per query a language model writes.

    ``model`` and ``tokenizer``: the simulator (a Hugging Face causal LM and its own tokenizer). It is fixed
    (:meth:`from_folder`) or, for self-search, the policy being trained, swapped in with :meth:`use` before each
    rollout; while it writes it is in eval mode, and its train/eval mode is restored afterwards. Each passage
    is *noisy* with probability :attr:`noise_probability` (settable), else *useful* (see
    :func:`passage_prompt`). One ``search`` call makes one batched, left-padded ``generate`` over all its
    queries' passages: sampling at ``temperature``, at most ``passage_tokens`` new tokens each, stopping at
    end-of-sequence or at the end of the passage's line. Draws come from the instance's ``random.Random(seed)``
    (the modes, and the torch seed of each call, without touching the caller's random state), so a run is
    reproducible. Counters: ``passages`` and ``noisy`` written, ``seconds`` spent generating.
    """

    def __init__(self, model: Any, tokenizer: Any, *, passage_tokens: int = 48, noise_probability: float = 0.0,
                 seed: int = 0, temperature: float = 1.0, owns_model: bool = False):
        if passage_tokens < 1:
            raise ValueError(f"passage_tokens must be >= 1, got {passage_tokens}")
        if not temperature > 0:
            raise ValueError(f"temperature must be > 0 (passages are sampled), got {temperature}")
        self.model, self.tokenizer = model, tokenizer
        self.passage_tokens, self.temperature = passage_tokens, temperature
        self.noise_probability = noise_probability
        self.rng = random.Random(seed)
        self.owns_model = owns_model
        self.passages, self.noisy, self.seconds = 0, 0, 0.0
        self._newline_ids: list[int] | None = None  # computed on first use: one pass over the vocabulary

    @classmethod
    def from_folder(cls, folder: str | Path, device: Any = None, **kwargs) -> SimulatedRetriever:
        """A retriever whose simulator is the model saved in ``folder`` (with its tokenizer); it owns the model."""
        from searchlab.model import load_model

        model, tokenizer = load_model(str(folder), device=device)
        return cls(model, tokenizer, owns_model=True, **kwargs)

    def use(self, model: Any) -> None:
        """Write the next passages with ``model`` (self-search: the current policy); it shares the tokenizer."""
        self.model = model

    @property
    def noise_probability(self) -> float:
        """The probability that a passage is written in the noisy mode, in [0, 1]."""
        return self._noise_probability

    @noise_probability.setter
    def noise_probability(self, value: float) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise ValueError(f"noise_probability must be a number in [0, 1], got {value!r}")
        self._noise_probability = float(value)

    def search(self, queries: list[str], k: int) -> list[list[Hit]]:
        """``k`` simulated passages per query, in order; ids ``sim:<mode>:<n>``, scores ``k, k - 1, ..., 1``."""
        check_request(queries, k)
        if self.model is None:
            raise RuntimeError("the simulated retriever is closed (or has no model): call use(model) first")
        if not queries:
            return []
        modes = [self.rng.random() < self._noise_probability for _ in range(len(queries) * k)]
        titles, prompts = zip(*(passage_prompt(q, noisy) for q, noisy in zip(_repeat(queries, k), modes)))
        started = time.perf_counter()
        texts = self._generate(list(prompts), self.rng.getrandbits(63))
        self.seconds += time.perf_counter() - started
        hits = [self._hit(title, text, noisy, k - j % k) for j, (title, text, noisy)
                in enumerate(zip(titles, texts, modes))]
        return [hits[i:i + k] for i in range(0, len(hits), k)]

    def _hit(self, title: str, text: str, noisy: bool, score: float) -> Hit:
        """The next passage as a :class:`Hit` with contents ``"Title"\\ntext`` like the corpus; counts it."""
        prefix = NOISY_PREFIX if noisy else USEFUL_PREFIX
        hit = Hit(f"{prefix}{self.passages}", f'"{title}"\n{text}', float(score))
        self.passages += 1
        self.noisy += noisy
        return hit

    def _generate(self, prompts: list[str], seed: int) -> list[str]:
        """Each prompt's continuation up to its first line end, in one left-padded sampling ``generate``."""
        import torch

        model, tokenizer = self.model, self.tokenizer
        stops = self._stop_ids()
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stops[0]
        ids, mask = left_padded([encode_prompt(tokenizer, p) for p in prompts], pad, model.device)
        width = ids.shape[1]
        device = torch.device(model.device)
        training = model.training
        model.eval()  # no dropout while writing passages, whatever the trainer left the policy in
        try:
            with torch.random.fork_rng(devices=[device.index or 0] if device.type == "cuda" else []), \
                    torch.inference_mode():
                torch.manual_seed(seed)
                out = model.generate(
                    input_ids=ids, attention_mask=mask, do_sample=True, temperature=self.temperature, top_p=1.0,
                    top_k=0, num_beams=1, repetition_penalty=1.0, use_cache=True,
                    max_new_tokens=self.passage_tokens, min_new_tokens=min(MIN_PASSAGE_TOKENS, self.passage_tokens),
                    eos_token_id=stops, pad_token_id=pad)
        finally:
            model.train(training)
        return [self._passage_text(row, set(stops)) for row in out[:, width:].tolist()]

    def _passage_text(self, row: list[int], stops: set[int]) -> str:
        """The text of one generated row: up to and including its first stop token, cut at the first line end."""
        end = next((i + 1 for i, t in enumerate(row) if t in stops), len(row))
        text = self.tokenizer.decode(row[:end], skip_special_tokens=True)
        # a character whose bytes the token limit cut off decodes to U+FFFD; it would read as garbage
        return text.split("\n", 1)[0].replace("\ufffd", "").strip()

    def _stop_ids(self) -> list[int]:
        """End-of-sequence ids (the tokenizer's and the model's) and every token whose text holds a line end."""
        if self._newline_ids is None:
            pieces = self.tokenizer.batch_decode([[i] for i in range(len(self.tokenizer))])
            self._newline_ids = [i for i, piece in enumerate(pieces) if "\n" in piece]
        return sorted(set(model_eos_ids(self.model, self.tokenizer)) | set(self._newline_ids))

    def close(self) -> None:
        """Drop the simulator; a model loaded by :meth:`from_folder` is freed, the policy is left to its owner."""
        owned = self.model if self.owns_model else None
        self.model = None
        if owned is not None and getattr(owned.device, "type", None) == "cuda":
            import torch

            del owned
            torch.cuda.empty_cache()  # return the simulator's memory to the trainer at once


def _repeat(items: Sequence[str], k: int) -> list[str]:
    """Each item ``k`` times in a row: one entry per passage to write."""
    return [item for item in items for _ in range(k)]
