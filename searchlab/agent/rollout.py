"""Multi-turn rollouts of the search agent: the model and the search environment taking turns, batched.

For every question the model generates a *turn* (until it writes ``</search>``
or ``</answer>``, ends the sequence, or reaches ``max_new_tokens``), the turn is
read with :func:`~searchlab.agent.protocol.parse_action`, and one
:func:`~searchlab.agent.protocol.step` for the whole batch says what the
environment appends (an information block, the invalid-action feedback, or
nothing: the episode is over). Episodes that answered leave the batch. A
Hugging Face model plays with continuous batching (:mod:`.continuous`): each
episode starts its next turn as soon as its last one ended, reading only its
new tokens. A model it cannot run takes the turns of all episodes together,
continuing from the KV cache of the previous turn (see :class:`_Batch`).
``model`` may also be a vLLM engine (:func:`searchlab.model.load_vllm`, for GPU
machines): the same loop then runs on :class:`_VLLMBatch`.

Token bookkeeping, which RL and SFT rely on:

* ``prompt_ids = encode_prompt(tokenizer, prompt)``: the tokenizer's default
  special tokens (e.g. a BOS), see :func:`encode_prompt`;
* ``completion_ids`` is, in order, the ids the model generated in each turn and
  the ids of each text the environment appended
  (:func:`encode_completion`: no special tokens added), and ``env_mask`` marks
  the latter with 1. Generated ids are never re-tokenized: the ids the model
  saw while generating are exactly ``prompt_ids + completion_ids``;
* ``completion`` is the decoded model turns and the appended texts, so
  ``tokenizer.decode(completion_ids) == completion`` (``skip_special_tokens=False``;
  exact for byte-level BPE tokenizers such as Qwen's and GPT-2's), and the
  env-masked tokens decode to exactly the spans
  :func:`~searchlab.agent.protocol.environment_spans` finds in ``completion``
  (unless the model wrote an ``<information>`` block itself);
* ``logprobs`` (vLLM engines only) holds one log-probability per *model* token
  (``env_mask`` 0), in order: what the engine reported for the token it
  sampled. GRPO's importance-sampling correction compares them with the
  trainer's own (:func:`searchlab.rl.env.completion_logprobs` spreads them
  over ``completion_ids``).

Where a turn ends: each row stops on its own (a stopping criterion checks every
row after every token, :func:`searchlab.agent.turns.turn_ends` with continuous batching; turn by turn,
``generate`` pads finished rows while the others go on)
at the first token that completes ``</search>`` or ``</answer>`` or is an
end-of-sequence token, and that token is the turn's last. A tag split over
several tokens is matched as a string (``StopStringCriteria``); a token may
also hold characters after the tag (``"</search>."`` as ``…, ">."``): a token is
never split, so those characters stay in the ids and in ``completion``. The
turn is cut after the *first* stop string in its text, at the shortest token
prefix reaching it (normally the stop token itself; this catches a tag the
criterion could not see, e.g. spelled in byte pieces where the tag is a special
token). That is ``Action.end`` for an ordinary turn; ``Action.end`` itself is
not used because it marks the *last* action, not where generation had to stop.
An end-of-sequence token the model emitted stays in the ids (its
log-probability is part of the policy) and in ``completion`` as its text
(``"<|endoftext|>"``); the action is parsed from the turn without it.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from searchlab.agent.episode import Rollout
from searchlab.agent.extractive import ExtractiveAnswers, answer_sources
from searchlab.agent.protocol import ANSWER_OPEN, PREFILLS
from searchlab.agent.text import agent_prompt, encode_completion, encode_prompt
from searchlab.agent.turns import STOP_STRINGS, TurnRules, has_room, stop_token_ids, turn_ends

if TYPE_CHECKING:  # importing searchlab.agent stays cheap: no pydantic params, and torch only when rolling out
    from searchlab.params import RolloutParams
    from searchlab.retrieval.base import Retriever

def left_padded(rows: Sequence[Sequence[int]], pad_id: int, device: Any) -> tuple[Any, Any]:
    """``(ids, attention_mask)`` tensors of ``rows`` padded on the left to the longest: the layout ``generate``
    continues every row from the same column."""
    import torch

    width = max(map(len, rows))
    ids = torch.tensor([[pad_id] * (width - len(row)) + list(row) for row in rows], device=device)
    mask = torch.tensor([[0] * (width - len(row)) + [1] * len(row) for row in rows], device=device)
    return ids, mask


def model_eos_ids(model: Any, tokenizer: Any) -> list[int]:
    """Every end-of-sequence id: the model's generation config's (one or several) and the tokenizer's."""
    ids = set()
    for value in (getattr(getattr(model, "generation_config", None), "eos_token_id", None), tokenizer.eos_token_id):
        if isinstance(value, int):
            ids.add(value)
        elif value is not None:
            ids.update(value)
    return sorted(ids)


# StopStringCriteria precomputes tables over the whole vocabulary (seconds for 150k tokens) and
# its own cache misses when get_vocab()'s order changes, so keep one per tokenizer.
_STOP_STRING_CRITERIA: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _turn_end_criterion(tokenizer: Any, eos_ids: list[int]):
    import torch
    from transformers import StoppingCriteria, StopStringCriteria

    stop_ids, strings = stop_token_ids(tokenizer), None
    if stop_ids is None:  # tags span tokens: match strings across tokens
        stop_ids = []
        try:
            strings = _STOP_STRING_CRITERIA.get(tokenizer)
        except TypeError:  # a tokenizer that cannot be weakly referenced or hashed: no cache
            strings = None
        if strings is None:
            strings = StopStringCriteria(tokenizer, list(STOP_STRINGS))
            try:
                _STOP_STRING_CRITERIA[tokenizer] = strings
            except TypeError:
                pass

    class TurnEnd(StoppingCriteria):
        """Done per row once its last token ends a stop string or is EOS; remembers where each row stopped."""

        def __init__(self) -> None:
            self.ids = torch.tensor(sorted({*stop_ids, *eos_ids}), dtype=torch.long)
            self.stopped_at: torch.Tensor | None = None  # per row; 0 while running

        def __call__(self, input_ids, scores, **kwargs):
            self.ids = self.ids.to(input_ids.device)  # moved once
            done = torch.isin(input_ids[:, -1], self.ids)
            if strings is not None:
                done = done | strings(input_ids, scores)
            if self.stopped_at is None:
                self.stopped_at = torch.zeros(input_ids.shape[0], dtype=torch.long, device=input_ids.device)
            # torch.where, not indexing: no host-device sync per token
            self.stopped_at = torch.where(done & (self.stopped_at == 0), input_ids.shape[1], self.stopped_at)
            return done

    return TurnEnd()


class _Batch:
    """A chunk's episodes as ``generate`` sees them, carried from turn to turn with the KV cache.

    Row ``r`` of ``ids`` holds, left to right, the episode's tokens and *holes*:
    left padding, the padding of rows that stopped before the others, and
    generated tokens the episode does not keep. ``mask`` is 0 on holes, so the
    model attends to exactly ``prompt_ids + completion_ids``, at the positions
    those would have without holes (generate derives position ids from the
    mask's cumulative sum). Keeping the cache means each turn reads only its new
    tokens instead of re-reading (prefilling) every context again, which on CPUs
    and small models costs about as much as generating. The cache's layers grow
    in place (:mod:`searchlab.agent.kv_cache`). Without a cache each turn
    starts from the compacted tokens, like a fresh ``generate`` call.
    """

    logprobs = None  # no sampling log-probabilities reported (see _VLLMBatch.logprobs)

    def __init__(self, model, criterion, generate_kwargs: dict, contexts: list[list[int]], pad_id: int,
                 reuse_cache: bool, limit: int | None = None) -> None:
        import torch

        self.model, self.criterion, self.generate_kwargs = model, criterion, generate_kwargs
        self.pad_id, self.device, self.reuse_cache, self.limit = pad_id, model.device, reuse_cache, limit
        self.ids = torch.empty((len(contexts), 0), dtype=torch.long, device=self.device)
        self.mask = torch.empty_like(self.ids)
        self.cache = None
        self.turn_start = 0  # column of the last turn's first generated token
        self.extend(list(range(len(contexts))), contexts)

    def extend(self, rows: list[int], new: list[list[int]]) -> None:
        """Keep only ``rows`` (indices into the batch) and append ``new[i]`` to the ``i``-th of them."""
        import torch

        index = torch.tensor(rows, dtype=torch.long, device=self.device)
        ids, mask = self.ids[index], self.mask[index]
        if self.limit is not None and (ids.shape[1] + max(map(len, new), default=0)
                                       + self.generate_kwargs["max_new_tokens"] >= self.limit):
            # the holes would make the batch wider than the model's positions (which the rows themselves fit,
            # see has_room): start again from the compacted tokens, as generate sees a batch that wide as too long
            self.cache = None
        cached = 0
        if self.cache is not None:
            cached = self.cache.get_seq_length()
            self.cache.batch_select_indices(index)
        # per row: the kept tokens the cache does not hold yet (generate's last one; all without a cache), then new
        tails = [ids[i, cached:][mask[i, cached:] == 1].tolist() + list(extra) for i, extra in enumerate(new)]
        # right-aligned, so every row's next token lands in the same column; the padding before is holes
        segment, segment_mask = left_padded(tails, self.pad_id, self.device)
        self.ids = torch.cat([ids[:, :cached], segment], dim=1)
        self.mask = torch.cat([mask[:, :cached], segment_mask], dim=1)

    def generate(self) -> list[list[int]]:
        """One turn for every row: its new ids, up to and including the token that stopped it."""
        import torch
        from transformers import StoppingCriteriaList

        from searchlab.agent.kv_cache import growing_cache

        model, criterion = self.model, self.criterion
        self.turn_start = width = self.ids.shape[1]
        criterion.stopped_at = None
        if self.cache is None and self.reuse_cache:
            self.cache = growing_cache(model)  # None: generate makes its own
        with torch.inference_mode():
            out = model.generate(input_ids=self.ids, attention_mask=self.mask, past_key_values=self.cache,
                                 use_cache=True, return_dict_in_generate=True,
                                 stopping_criteria=StoppingCriteriaList([criterion]), **self.generate_kwargs)
        self.ids = out.sequences
        self.mask = torch.cat([self.mask, torch.zeros_like(self.ids[:, width:])], dim=1)  # see keep()
        cache = getattr(out, "past_key_values", None)
        self.cache = cache if self.reuse_cache and _reusable(cache, self.ids.shape[1]) else None
        new = self.ids[:, width:].tolist()
        if criterion.stopped_at is None:  # nothing generated
            return [[] for _ in new]
        stops = (criterion.stopped_at - width).tolist()
        return [row[:stop] if stop > 0 else row for row, stop in zip(new, stops)]

    def keep(self, counts: list[int]) -> None:
        """Unmask the first ``counts[r]`` tokens row ``r`` generated last turn: those its episode keeps."""
        import torch

        column = torch.arange(self.ids.shape[1], device=self.device)[None, :] - self.turn_start
        kept = (column >= 0) & (column < torch.tensor(counts, device=self.device)[:, None])
        self.mask = torch.where(kept, 1, self.mask)


def context_limit(model: Any) -> int | None:
    """The longest sequence ``model`` reads: its position table (a vLLM engine: its ``max_model_len``); None when
    the model states none."""
    if is_vllm(model):
        engine = getattr(model, "llm_engine", None)
        return getattr(getattr(engine, "model_config", None), "max_model_len", None)
    return getattr(getattr(model, "config", None), "max_position_embeddings", None)


def is_vllm(model: Any) -> bool:
    """Whether ``model`` is a vLLM engine (``vllm.LLM``) rather than a Hugging Face model."""
    return type(model).__module__.split(".")[0] == "vllm"


class _VLLMBatch:
    """:class:`_Batch`'s interface for a vLLM engine: each turn submits every row's whole context as token ids.

    vLLM's prefix cache (see :func:`searchlab.model.load_vllm`) keeps the
    re-read contexts cheap. Stops are vLLM's: the tags as stop strings (kept in
    the output) and the EOS ids; :func:`searchlab.agent.turns.cut_turn` then cuts exactly as for
    Hugging Face. Sampling is seeded per episode and turn, so an episode's
    tokens do not depend on which others share its batch. After each turn
    ``logprobs[r]`` is the log-probability of each token row ``r`` sampled
    (None where the engine gave none).
    """

    def __init__(self, engine, contexts: list[list[int]], params: RolloutParams, eos_ids: list[int],
                 first_seed: int) -> None:
        self.engine, self.params, self.eos_ids = engine, params, eos_ids
        self.contexts = [list(c) for c in contexts]
        self.episodes = list(range(first_seed, first_seed + len(contexts)))  # each row's seed base
        self.turn, self.last = 0, []
        self.logprobs: list[list[float] | None] = []

    def _sampling(self, episode: int):
        from vllm import SamplingParams

        p = self.params
        return SamplingParams(
            temperature=p.temperature, top_p=p.top_p if p.temperature > 0 else 1.0, max_tokens=p.max_new_tokens,
            stop=list(STOP_STRINGS), include_stop_str_in_output=True, stop_token_ids=self.eos_ids,
            skip_special_tokens=False, spaces_between_special_tokens=False,
            # the sampled token's log-probability and no alternatives: what TRL's importance-sampling correction needs
            logprobs=0,
            seed=episode * 1009 + self.turn if p.temperature > 0 else None)

    def generate(self) -> list[list[int]]:
        requests = [{"prompt_token_ids": c} for c in self.contexts]
        outputs = self.engine.generate(requests, [self._sampling(e) for e in self.episodes], use_tqdm=False)
        self.turn += 1
        self.last = [list(o.outputs[0].token_ids) for o in outputs]
        self.logprobs = [sampled_logprobs(o.outputs[0]) for o in outputs]
        return self.last

    def keep(self, counts: list[int]) -> None:
        for context, ids, n in zip(self.contexts, self.last, counts):
            context.extend(ids[:n])

    def extend(self, rows: list[int], new: list[list[int]]) -> None:
        self.contexts = [self.contexts[r] + list(extra) for r, extra in zip(rows, new)]
        self.episodes = [self.episodes[r] for r in rows]


def sampled_logprobs(output: Any) -> list[float] | None:
    """The log-probability of each token of a vLLM ``CompletionOutput``, looked up by the token sampled there
    (with ``logprobs=N`` each position holds the top N and the sampled one); None without logprobs."""
    positions = getattr(output, "logprobs", None)
    if positions is None:
        return None
    ids = list(output.token_ids)
    if len(positions) != len(ids):
        raise RuntimeError(f"vLLM reported {len(positions)} logprobs for {len(ids)} tokens")
    return [float(position[token].logprob) for token, position in zip(ids, positions)]


def _reusable(cache: Any, width: int) -> bool:
    """Whether a turn can continue from ``cache``: one key and value per column (all but generate's last token).

    Not a sliding window or a recurrent state: holes would shrink the window or
    flow into the state.
    """
    if not (hasattr(cache, "get_seq_length") and hasattr(cache, "batch_select_indices")):
        return False
    if any(getattr(cache, "is_sliding", None) or []) or any(getattr(cache, "is_linear", None) or []):
        return False
    return cache.get_seq_length() == width - 1


def rollout(
    model: Any,
    tokenizer: Any,
    retriever: Retriever,
    questions: list[str],
    params: RolloutParams,
    prompts: list[str] | None = None,
    *,
    force_answer: bool = False,
    reuse_cache: bool = True,
) -> list[Rollout]:
    """Run the agent on ``questions``; one :class:`Rollout` per question, in order.

    ``prompts[i]`` is the prompt text; by default :func:`agent_prompt` (the
    instruction, in the chat template where the tokenizer has one). At most
    ``params.batch_size`` episodes decode together: in chunks of that size, or,
    with continuous batching, as rows that the next question takes over when
    their episode ends. Each turn is up to ``params.max_new_tokens`` tokens, and
    the searches of the turns that end together go to ``retriever`` in one call,
    ``params.topk`` passages each, an information block at most
    ``params.max_information_tokens`` tokens of this tokenizer. Temperature 0
    decodes greedily; otherwise sampling with
    ``temperature``/``top_p`` (no top-k, no repetition penalty, whatever the
    model's generation config says), seeded with ``params.seed`` without
    touching the caller's random state. Inputs go to ``model.device``. A vLLM
    engine as ``model`` generates instead (see :class:`_VLLMBatch`; sampling
    seeded per episode from ``params.seed``).

    ``force_answer`` takes the search action away: every prompt ends with
    ``<answer>`` (appended here, so ``Rollout.prompt`` shows it), the model's
    first turn continues that answer, and the turn is read as the answer
    whatever it holds (``parse_action(..., answer_opened=True)``; a
    ``<search>`` written inside it is answer text, never run). Every episode
    thus ends in one turn with an answer. The turn still stops at the first
    ``</answer>``, ``</search>`` or EOS, and with ``params.extractive_answers``
    the answer is confined to the sources from its first token. The one-turn
    baselines (:mod:`searchlab.eval.systems`) use it.

    ``reuse_cache`` (the default) continues each turn from the KV cache (see
    :func:`_play_hf`); ``False`` re-reads every context each turn.

    ``params.prefill`` (not with ``force_answer``) starts each completion with an
    opening tag (:data:`~searchlab.agent.protocol.PREFILLS`) that the first turn
    continues: environment ids (``env_mask`` 1), read with the turn as its start.
    """
    if prompts is not None and len(prompts) != len(questions):
        raise ValueError(f"got {len(prompts)} prompts for {len(questions)} questions")
    eos_ids = model_eos_ids(model, tokenizer)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else (eos_ids or [0])[0]
    extractive = _extractive_answers(model, tokenizer, params, pad_id)
    rules = TurnRules(tokenizer, params, eos_ids, pad_id, context_limit(model), extractive, force_answer)
    results = _episodes(model, tokenizer, questions, prompts, params, force_answer)
    # a prompt with no room for one turn is cut off before it starts: never feed the model past its positions
    playing = [r for r in results if has_room(len(r.prompt_ids) + len(r.completion_ids), params, rules.limit)]

    if is_vllm(model):
        _play_vllm(model, retriever, playing, rules)
    else:
        _play_hf(model, retriever, playing, rules, reuse_cache)
    return results


def _play_vllm(engine: Any, retriever: Retriever, playing: list[Rollout], rules: TurnRules) -> None:
    """Play ``playing`` on a vLLM engine, ``batch_size`` episodes a chunk, sampling seeded per episode."""
    params = rules.params
    for start in range(0, len(playing), params.batch_size):
        chunk = playing[start:start + params.batch_size]
        contexts = [r.prompt_ids + r.completion_ids for r in chunk]
        _run_chunk(_VLLMBatch(engine, contexts, params, rules.eos_ids, first_seed=params.seed + start), retriever,
                   chunk, rules)


def _play_hf(model: Any, retriever: Retriever, playing: list[Rollout], rules: TurnRules, reuse_cache: bool) -> None:
    """Play ``playing`` on a Hugging Face model under ``params.seed``, leaving the caller's random state alone.

    With ``reuse_cache`` each turn continues from the KV cache and reads only the new tokens, with continuous
    batching where the model allows it (:func:`searchlab.agent.continuous.supports`, else :class:`_Batch`);
    without it the turns are taken together and every context is re-read each turn. All give the same greedy
    episodes up to floating-point rounding; sampled ones differ in the order random numbers are drawn.
    ``params.decode_dtype`` ``bfloat16`` decodes a float32 model on a CPU with a bfloat16 copy of its weights
    (:mod:`searchlab.agent.precision`).
    """
    import torch

    from searchlab.agent.continuous import play as play_continuously
    from searchlab.agent.continuous import supports as supports_continuous
    from searchlab.agent.precision import decoding_model

    params, tokenizer = rules.params, rules.tokenizer
    model = decoding_model(model, params.decode_dtype)
    device = torch.device(model.device)
    cuda = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda):
        torch.manual_seed(params.seed)
        if reuse_cache and supports_continuous(model):
            play_continuously(model, retriever, playing, params.batch_size, rules, _sampler(params),
                              turn_ends(tokenizer, rules.eos_ids))
            return
        criterion, generate_kwargs = _turn_end_criterion(tokenizer, rules.eos_ids), _generate_kwargs(rules)
        for start in range(0, len(playing), params.batch_size):
            chunk = playing[start:start + params.batch_size]
            contexts = [r.prompt_ids + r.completion_ids for r in chunk]
            _run_chunk(_Batch(model, criterion, generate_kwargs, contexts, rules.pad_id, reuse_cache, rules.limit),
                       retriever, chunk, rules)


def _extractive_answers(model: Any, tokenizer: Any, params: RolloutParams, pad_id: int) -> ExtractiveAnswers | None:
    """The extractive answer constraint ``rollout.extractive_answers`` asks for (None: free answers); refused for a
    vLLM engine, which has no per-step hook for it."""
    if not params.extractive_answers:
        return None
    if is_vllm(model):
        raise ValueError("rollout.extractive_answers needs rollout.engine hf: vLLM has no per-step hook for it")
    return ExtractiveAnswers(tokenizer, pad_id)


def _generate_kwargs(rules: TurnRules) -> dict[str, Any]:
    """``generate``'s settings for one turn of the chunked engine (:class:`_Batch`): the turn's length, greedy or
    the rollout's sampling, no repetition penalty, and the extractive constraint as a logits processor."""
    params, sampling = rules.params, rules.params.temperature > 0
    kwargs: dict[str, Any] = dict(max_new_tokens=params.max_new_tokens, do_sample=sampling, num_beams=1,
                                  repetition_penalty=1.0, pad_token_id=rules.pad_id,
                                  eos_token_id=rules.eos_ids or None)
    if sampling:
        kwargs.update(temperature=params.temperature, top_p=params.top_p, top_k=0)
    if rules.extractive is not None:
        from transformers import LogitsProcessorList

        kwargs["logits_processor"] = LogitsProcessorList([rules.extractive])
    return kwargs


def _episodes(model: Any, tokenizer: Any, questions: list[str], prompts: list[str] | None, params: RolloutParams,
              force_answer: bool) -> list[Rollout]:
    """One fresh :class:`Rollout` per question: its prompt (``prompts[i]``, else :func:`agent_prompt`; ending with
    ``<answer>`` under ``force_answer``) and ids, opened with ``rollout.prefill``'s tag unless ``force_answer``."""
    tag = "" if force_answer else PREFILLS[params.prefill]
    episodes = []
    for i, question in enumerate(questions):
        prompt = prompts[i] if prompts is not None else agent_prompt(tokenizer, question)
        if force_answer:
            prompt += ANSWER_OPEN
        episode = Rollout(question, prompt, prompt_ids=encode_prompt(tokenizer, prompt),
                          logprobs=[] if is_vllm(model) else None)
        if tag:
            _prefill(tokenizer, episode, tag)
        episodes.append(episode)
    return episodes


def _sampler(params: RolloutParams):
    """The next token of each row from its processed scores: greedy at temperature 0, else the temperature and
    top-p warpers (transformers' own, as ``generate`` applies them) and one draw from each row's distribution."""
    import torch

    if params.temperature <= 0:
        return lambda scores: scores.argmax(dim=-1)
    from transformers import TemperatureLogitsWarper, TopPLogitsWarper

    warpers = [TemperatureLogitsWarper(params.temperature)] if params.temperature != 1.0 else []
    if params.top_p < 1.0:
        warpers.append(TopPLogitsWarper(params.top_p))

    def sample(scores):
        for warper in warpers:
            scores = warper(None, scores)
        return draw(torch.softmax(scores, dim=-1))

    return sample


def draw(probs):
    """One token per row of ``probs``, drawn from the row's distribution by inverting its cumulative sum at one
    uniform number. ``torch.multinomial`` (what ``generate`` calls) draws one exponential number per vocabulary entry,
    and on a CPU that took as long as the decode forward's work per row (docs/results/rl.md, "The sampler, again")."""
    import torch

    cdf = probs.cumsum(dim=-1)
    # (0, total]: a token of probability 0 has a cumulative sum equal to its predecessor's and is never found
    u = (1 - torch.rand((probs.shape[0], 1), dtype=cdf.dtype, device=cdf.device)) * cdf[:, -1:]
    return torch.searchsorted(cdf, u)[:, 0].clamp_(max=probs.shape[1] - 1)


def _prefill(tokenizer: Any, r: Rollout, tag: str) -> None:
    """Open ``r``'s first turn with ``tag`` as environment text: in the completion (so the protocol reads it as the
    model's) and in the ids the model continues, masked from every loss."""
    ids = encode_completion(tokenizer, tag)
    r.completion, r.completion_ids, r.env_mask = tag, list(ids), [1] * len(ids)


def _run_chunk(batch, retriever, chunk: list[Rollout], rules: TurnRules) -> None:
    """Play one chunk's episodes turn by turn on ``batch`` (a :class:`_Batch` or :class:`_VLLMBatch`), every
    episode's turn at once, by ``rules``."""
    from searchlab.retrieval.base import RecordingRetriever

    began = time.perf_counter()
    active = list(chunk)
    for turn in range(rules.params.max_turns):
        answer_opened = rules.force_answer and turn == 0
        if rules.extractive is not None:
            rules.extractive.begin_turn([answer_sources(r.question, r.prompt + r.completion) for r in active],
                                        answer_opened)
        generated = batch.generate()
        actions, kept = [], []
        for i, (r, ids) in enumerate(zip(active, generated)):
            reported = batch.logprobs[i] if batch.logprobs is not None else None
            ids, action = rules.finish(r, ids, answer_opened, reported)
            actions.append(action)
            kept.append(len(ids))
        batch.keep(kept)
        last = turn == rules.params.max_turns - 1
        # the last turn's searches are not run: the episode is cut off and nothing would read them
        recorder = RecordingRetriever(retriever)
        appended = [None] * len(active) if last else rules.search(recorder, actions)
        rows, new = [], []
        for i, (r, action, text) in enumerate(zip(active, actions, appended)):
            ids = rules.after_step(r, action, text, recorder, last, began)
            if ids is not None:
                rows.append(i)
                new.append(ids)
        if not rows:
            break
        active = [active[i] for i in rows]
        batch.extend(rows, new)


def summarize(rollouts: Sequence[Rollout]) -> dict[str, float]:
    """Means over ``rollouts``: answered share, searches, turns, generated tokens, and invalid actions per turn."""
    n = len(rollouts)
    turns = sum(r.turns for r in rollouts)

    def mean(values) -> float:
        return sum(values) / n if n else 0.0

    return {
        "rollouts": n,
        "answered": mean(r.answer is not None for r in rollouts),
        "mean_searches": mean(len(r.searches) for r in rollouts),
        "mean_turns": mean(r.turns for r in rollouts),
        "mean_generated_tokens": mean(r.generated_tokens for r in rollouts),
        "invalid_action_rate": sum(r.invalid_actions for r in rollouts) / turns if turns else 0.0,
    }
