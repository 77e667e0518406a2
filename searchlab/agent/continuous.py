"""Continuous batching for Hugging Face models: every episode takes its turns on its own clock.

With ``generate``, a chunk's episodes take each turn together: the turn lasts as
long as its longest row, and the rows that stopped wait, padded, for the others.
Summed over turns, a chunk decodes for the sum of its turns' longest rows, far
more than its longest episode (127 decode steps for a longest episode of 102
tokens and a mean of 77, in ``bench/rl.py``). Here the loop is ours: at every
step each episode that is writing a turn decodes its next token, and an episode
whose turn ended gets its information block read (prefilled) in a forward of
the rows that have one, as soon as a quarter of the batch has one or after at
most :data:`MAX_WAIT` steps, while the others go on writing. The row of an
episode that ended takes the next waiting episode at once, so a batch of
``batch_size`` rows stays full until the last episodes, and many questions
decode for about their summed lengths over the batch, not for the sum of each
chunk's longest episode. At the end the batch shrinks as episodes end.

:class:`RaggedCache` is what makes that possible: each row of the KV cache has
its own length, a forward writes each row's new keys and values at that row's
own columns, and the model gets an explicit attention mask (a 4D mask, which
transformers' masking passes through as it is) and explicit position ids.
Information blocks of several rows are read in one forward of those rows alone,
so a row that decodes never waits for, nor pays for, another's block.

Models: a torch module whose every layer is full attention (no sliding window,
no recurrent state) under the ``sdpa`` or ``eager`` attention, and whose
attention layers call ``past_key_values.update(keys, values, layer_idx)`` as
transformers' own do; :func:`supports` tells. Others, and models that bring a
``generate`` of their own (the tests' scripted models), take their turns together
with ``generate`` (:class:`searchlab.agent.rollout._Batch`); both give the same
greedy episodes.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from searchlab.agent.extractive import answer_sources

if TYPE_CHECKING:
    from searchlab.agent.episode import Rollout
    from searchlab.agent.turns import TurnRules
    from searchlab.retrieval.base import Retriever

SPARE = 0.25  # the share of room added when the buffers grow, as in kv_cache
MIN_COLUMNS = 256
# Rows read their blocks together once a quarter of the batch has one, or one has waited 4 steps: a forward of its
# own per block cost more than the waiting (measured on the demo's greedy agent: 225 block forwards against 85)
START_SHARE = 0.25
MAX_WAIT = 4


def supports(model: Any) -> bool:
    """Whether :func:`play` can run ``model``: a torch module with transformers' own ``generate`` (a model or
    wrapper that brings its own decoding keeps it), a ``forward`` that takes ``logits_to_keep``, and full attention
    in every layer, under ``sdpa`` or ``eager``."""
    from transformers import GenerationMixin

    if not isinstance(model, torch.nn.Module) or getattr(type(model), "generate", None) is not GenerationMixin.generate:
        return False
    config = getattr(model, "config", None)
    if config is None or getattr(config, "_attn_implementation", None) not in ("sdpa", "eager"):
        return False
    if getattr(config, "is_encoder_decoder", False) or getattr(config, "sliding_window", None) is not None:
        return False
    if "logits_to_keep" not in inspect.signature(type(model).forward).parameters:  # read() asks for the last only
        return False
    layer_types = getattr(config, "layer_types", None) or ["full_attention"]
    return all(kind == "full_attention" for kind in layer_types)


class RaggedCache:
    """A KV cache whose rows have lengths of their own: row ``r`` holds its tokens in columns ``[0, lengths[r])``.

    Before each forward, :meth:`plan` says which rows take part (all, or a
    subset read alone) and how many new tokens each brings; the attention layers'
    ``update`` then writes each row's keys and values at its own next columns and
    returns the columns up to the longest such row. Inputs are left-padded; a
    padding position writes into a scratch column past every row's end, which no
    mask lets anyone read. Shorter rows' columns past their ends are masked out
    (:meth:`attention_mask`). A row's length can also be set back
    (:attr:`lengths`), which forgets the tokens after it.
    """

    def __init__(self, rows: int) -> None:
        self.lengths = torch.zeros(rows, dtype=torch.long)
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        self.rows: torch.Tensor | None = None  # the rows of this forward (None: all, in order)
        self.columns = torch.zeros((rows, 1), dtype=torch.long)
        self.width = 0
        self._written: tuple = ()

    def plan(self, rows: torch.Tensor | None, new: torch.Tensor, steps: int) -> None:
        """Set up a forward of ``steps`` positions for ``rows`` (None: every row), ``new[i]`` of them real: the
        last ``new[i]`` positions of the ``i``-th row, which continue it from its length."""
        starts = self.lengths if rows is None else self.lengths[rows]
        self.rows, self.width = rows, int((starts + new).max())
        offsets = torch.arange(steps) - (steps - new)[:, None]  # a real position's index among its row's new ones
        scratch = self.width  # one past the longest row: never inside the columns returned
        self.columns = torch.where(offsets >= 0, starts[:, None] + offsets, scratch)
        # where update writes each position: [rows, steps] pairs of (row, column), the same for every layer
        written = torch.arange(len(self.lengths)) if rows is None else rows
        self._written = (written[:, None], slice(None), self.columns)

    def attention_mask(self, dtype: torch.dtype) -> torch.Tensor:
        """The 4D additive mask of the planned forward: a real position reads its row's columns up to itself;
        a padding position reads column 0 only (its output is never used)."""
        visible = (self.columns + 1).masked_fill(self.columns == self.width, 1)  # [rows, steps]
        allowed = torch.arange(self.width)[None, None, :] < visible[:, :, None]
        return torch.where(allowed, 0.0, torch.finfo(dtype).min).to(dtype)[:, None]

    def update(self, keys: torch.Tensor, values: torch.Tensor, layer_idx: int, *args: Any, **kwargs: Any):
        """Write a layer's new keys and values at the planned columns; return its columns up to the width."""
        if layer_idx == len(self.keys):
            shape = (len(self.lengths), keys.shape[1], 0, keys.shape[3])
            self.keys.append(torch.zeros(shape, dtype=keys.dtype, device=keys.device))
            self.values.append(torch.zeros(shape, dtype=values.dtype, device=values.device))
        self._room(layer_idx, self.width + 1)  # + the scratch column
        # each row's own columns: the indexed shape is [rows, steps, heads, dim]
        self.keys[layer_idx][self._written] = keys.transpose(1, 2)
        self.values[layer_idx][self._written] = values.transpose(1, 2)
        cached_keys = self.keys[layer_idx][:, :, :self.width]
        cached_values = self.values[layer_idx][:, :, :self.width]
        if self.rows is not None:
            cached_keys, cached_values = cached_keys[self.rows], cached_values[self.rows]
        return cached_keys, cached_values

    def _room(self, layer_idx: int, columns: int) -> None:
        keys = self.keys[layer_idx]
        if columns <= keys.shape[2]:
            return
        size = max(MIN_COLUMNS, columns + int(columns * SPARE))
        for buffers in (self.keys, self.values):
            old = buffers[layer_idx]
            # zeros, not empty: a masked column still meets the softmax's zero weight, and 0 x NaN is NaN
            grown = torch.zeros((old.shape[0], old.shape[1], size, old.shape[3]), dtype=old.dtype, device=old.device)
            grown[:, :, :old.shape[2]] = old
            buffers[layer_idx] = grown

    def keep(self, rows: torch.Tensor) -> None:
        """Keep only ``rows``, in that order (the others' episodes are over)."""
        self.lengths = self.lengths[rows]
        self.keys = [k[rows] for k in self.keys]
        self.values = [v[rows] for v in self.values]


def read(model: Any, cache: RaggedCache, rows: list[int] | None, tokens: list[list[int]], pad_id: int) -> torch.Tensor:
    """Feed ``tokens[i]`` to row ``rows[i]`` (``rows`` None: to every row, ``tokens[i]`` possibly empty) in one
    forward; returns the logits after each row's last token (float32, ``[len(tokens), vocab]``) and advances the
    rows' lengths."""
    steps = max(1, max(map(len, tokens)))
    new = torch.tensor([len(t) for t in tokens])
    ids = torch.tensor([[pad_id] * (steps - len(t)) + list(t) for t in tokens])
    index = None if rows is None else torch.tensor(rows)
    cache.plan(index, new, steps)
    positions = cache.columns.clamp(max=cache.width - 1)  # a padding position's is never used
    mask = cache.attention_mask(model.dtype)
    out = model(input_ids=ids.to(model.device), attention_mask=mask.to(model.device),
                position_ids=positions.to(model.device), past_key_values=cache, use_cache=True, logits_to_keep=1)
    if index is None:
        cache.lengths += new
    else:
        cache.lengths[index] += new
    return out.logits[:, -1].float()


class _Table:
    """The rows of one :func:`play`: which episode each holds, and where every episode stands in its turn."""

    def __init__(self, rollouts: list[Rollout], slots: int, rules: TurnRules) -> None:
        self.rollouts, self.rules = rollouts, rules
        # per episode: tokens the cache has not read yet (the prompt, and a prefilled tag)
        self.pending = [r.prompt_ids + r.completion_ids for r in rollouts]
        self.turn: list[list[int]] = [[] for _ in rollouts]  # per episode: this turn's generated ids
        self.turn_start = [len(p) for p in self.pending]  # per episode: the cache length where its turn begins
        self.ended_at = [0] * len(rollouts)  # per episode: the step its last turn ended
        self.began = [0.0] * len(rollouts)  # per episode: when it took its row
        self.waiting = iter(range(len(rollouts)))
        self.steps = 0
        # the episode in each row of the cache (None: over, and no episode was waiting for the row)
        self.episodes: list[int | None] = [self._begin(next(self.waiting)) for _ in range(min(slots, len(rollouts)))]
        self.cache = RaggedCache(len(self.episodes))

    def _begin(self, e: int) -> int:
        self.began[e], self.ended_at[e] = time.perf_counter(), self.steps
        if self.rules.extractive is not None:
            r = self.rollouts[e]
            self.rules.extractive.begin_row_turn(e, answer_sources(r.question, r.prompt), self.rules.force_answer)
        return e

    @property
    def playing(self) -> bool:
        return any(e is not None for e in self.episodes)

    def decode(self, model: Any, sample: Callable[[torch.Tensor], torch.Tensor],
               turn_ends: Callable[[list[int]], bool]) -> list[int]:
        """One token for every row; the rows whose turn it ended."""
        episodes, pending, extractive = self.episodes, self.pending, self.rules.extractive
        # a row reads its new context (the prompt, or the last token and an information block) alone with the
        # other rows that have one; every row that only has its last token decodes in the batch's forward
        ready = [row for row, e in enumerate(episodes) if e is not None and len(pending[e]) > 1]
        decoding = [row for row, e in enumerate(episodes) if e is not None and len(pending[e]) == 1]
        starting = ready if (len(ready) >= START_SHARE * (len(ready) + len(decoding)) or not decoding
                             or any(self.steps - self.ended_at[episodes[row]] >= MAX_WAIT for row in ready)) else []
        self.steps += 1
        logits = []
        if starting:
            logits.append(read(model, self.cache, starting, [pending[episodes[row]] for row in starting],
                               self.rules.pad_id))
        if decoding:
            reading = set(decoding)
            everyone = read(model, self.cache, None, [pending[e] if row in reading else []
                                                      for row, e in enumerate(episodes)], self.rules.pad_id)
            logits.append(everyone[torch.tensor(decoding)])
        rows = starting + decoding
        scores = torch.cat(logits)
        if extractive is not None:
            scores = extractive.constrain([episodes[row] for row in rows], [self.turn[episodes[row]] for row in rows],
                                          scores)
        ended = []
        for row, token in zip(rows, sample(scores).tolist()):
            e = episodes[row]
            self.turn[e].append(token)
            pending[e] = [token]
            if len(self.turn[e]) >= self.rules.params.max_new_tokens or turn_ends(self.turn[e]):
                ended.append(row)
        return ended

    def end_turns(self, ended: list[int], retriever: Retriever) -> None:
        """Close the turns of the ``ended`` rows: the environment's step for each, then the episode's next turn or
        the next waiting episode in its row."""
        from searchlab.retrieval.base import RecordingRetriever

        rules, max_turns = self.rules, self.rules.params.max_turns
        actions, kept, last = [], {}, {}
        for row in ended:
            e = self.episodes[row]
            r = self.rollouts[e]
            last[row] = r.turns == max_turns - 1
            ids, action = rules.finish(r, self.turn[e], rules.force_answer and r.turns == 0)
            kept[row] = ids
            actions.append(action)
            # the turn keeps a prefix of what it generated: the cache forgets the rest (it holds all but the
            # last kept token, which is read with whatever the environment appends)
            self.cache.lengths[row] = self.turn_start[e] + len(ids) - 1
            self.turn[e] = []
        recorder = RecordingRetriever(retriever)
        searching = [i for i, row in enumerate(ended) if not last[row]]
        appended = [None] * len(ended)
        # the last turn's searches are not run: the episode is cut off and nothing would read them
        for i, text in zip(searching, rules.search(recorder, [actions[i] for i in searching])):
            appended[i] = text
        for row, action, text in zip(ended, actions, appended):
            e = self.episodes[row]
            more = rules.after_step(self.rollouts[e], action, text, recorder, last[row], self.began[e])
            if more is None:
                # the next waiting episode takes the row: its prompt is read from column 0, over the old tokens
                self.episodes[row] = next(self.waiting, None)
                if self.episodes[row] is not None:
                    self._begin(self.episodes[row])
                    self.cache.lengths[row] = 0
                continue
            self.pending[e] = [kept[row][-1], *more]
            self.ended_at[e] = self.steps
            self.turn_start[e] = int(self.cache.lengths[row]) + len(self.pending[e])
            if rules.extractive is not None:
                r = self.rollouts[e]
                rules.extractive.begin_row_turn(e, answer_sources(r.question, r.prompt + r.completion), False)
        self._drop_finished_rows()

    def _drop_finished_rows(self) -> None:
        alive = [row for row, e in enumerate(self.episodes) if e is not None]
        if alive and len(alive) <= 0.75 * len(self.episodes):  # a smaller batch decodes faster
            self.cache.keep(torch.tensor(alive))
            self.episodes = [self.episodes[row] for row in alive]


def play(model: Any, retriever: Retriever, rollouts: list[Rollout], slots: int, rules: TurnRules,
         sample: Callable[[torch.Tensor], torch.Tensor], turn_ends: Callable[[list[int]], bool]) -> None:
    """Play the episodes of ``rollouts`` to their ends by ``rules``, ``slots`` at a time, each taking its turns as
    soon as its last one ended; the row of an episode that ended takes the next waiting episode at once.

    ``sample(scores)`` draws one token per row of processed scores;
    ``turn_ends(turn_ids)`` says whether a turn's tokens so far end it (a stop
    tag or EOS; the length limit is checked here). See
    :func:`searchlab.agent.rollout.rollout` for the episodes' rules.
    """
    table = _Table(rollouts, slots, rules)
    with torch.inference_mode():
        while table.playing:
            ended = table.decode(model, sample, turn_ends)
            if ended:
                table.end_turns(ended, retriever)
