"""Advantage estimators for the rl stage that TRL's ``GRPOTrainer`` does not have.

TRL computes the plain GRPO group advantage inline; its loss also accepts 2-D (per-token) advantages. This
module provides, as pure functions on torch tensors (lists are accepted and turned into tensors):

* **Stratified GRPO** (Zhu et al., "Stratified GRPO: Handling Structural Heterogeneity in Reinforcement
  Learning of LLM Search Agents", arXiv:2510.06214): :func:`stratified_grpo_advantages` normalises each
  reward against the trajectories with the same number of searches (Stratified Advantage Normalization,
  SAN) and blends that with the usual GRPO group advantage (:func:`grpo_advantages`).
* **IGPO** (Wang et al., "Information Gain-based Policy Optimization: A Simple and Effective Approach for
  Multi-Turn LLM Agents", arXiv:2510.14967): a turn-level reward, the information gain of each
  ``<information>`` block about the gold answer. :func:`answer_logprobs` scores the gold answer after a batch
  of prefixes with a HF causal LM, :func:`information_gains` turns one episode into its gains,
  :func:`turn_index` maps tokens to turns and :func:`igpo_token_advantages` spreads the gains over the tokens
  of the turns that issued the searches.

Layout conventions are TRL's: a batch holds ``num_generations`` consecutive completions per prompt (one
*group* per prompt), completions are right-padded, and the completion mask is 1 on the model's own tokens and
0 on environment tokens (the ``<information>`` blocks, masked from the loss) and on padding.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

__all__ = [
    "answer_logprobs",
    "grpo_advantages",
    "igpo_token_advantages",
    "information_gains",
    "stratified_grpo_advantages",
    "turn_index",
]

EPS = 1e-4  # TRL's GRPOTrainer adds this to the group std


def _vector(x, dtype=torch.float32) -> torch.Tensor:
    t = torch.as_tensor(x, dtype=dtype) if not isinstance(x, torch.Tensor) else x.to(dtype)
    if t.dim() != 1:
        raise ValueError(f"expected a 1-D tensor, got shape {tuple(t.shape)}")
    return t


def _groups(n: int, num_generations: int) -> None:
    if num_generations < 1 or n % num_generations:
        raise ValueError(f"{n} rewards are not whole groups of num_generations={num_generations}")


def grpo_advantages(rewards, num_generations: int, eps: float = EPS) -> torch.Tensor:
    """The GRPO group advantage, as TRL's ``GRPOTrainer`` computes it (``scale_rewards="group"``).

    For trajectory *i* in group *g* (the ``num_generations`` consecutive rollouts of one prompt)::

        A_i = (r_i - mean_g) / (std_g + eps)

    with ``std_g`` the unbiased (Bessel-corrected) standard deviation of the group's rewards, like
    ``torch.std``. ``num_generations`` must be at least 2 for the std to exist. A group whose rewards are all
    equal gets 0 (as in TRL, where the numerator is 0; here also when ``eps=0``).
    """
    r = _vector(rewards)
    _groups(len(r), num_generations)
    g = r.view(-1, num_generations)
    return _normalise(g, dim=1, eps=eps).view(-1)


def _normalise(x: torch.Tensor, dim: int, eps: float) -> torch.Tensor:
    """``(x - mean) / (std + eps)`` along ``dim`` (unbiased std); 0 where all values are equal, even if eps=0."""
    dev = x - x.mean(dim=dim, keepdim=True)
    std = x.std(dim=dim, keepdim=True)
    return torch.where(std > 0, dev / (std + eps), torch.zeros_like(dev))


def stratified_grpo_advantages(rewards, search_counts, num_generations: int, alpha: float = 0.5,
                               eps: float = EPS, strata: str = "batch") -> torch.Tensor:
    """Stratified GRPO advantages: SAN blended with the GRPO group advantage (arXiv:2510.06214).

    Trajectories are partitioned into strata by their number of searches (``search_counts``). For
    trajectory *i* in group *g* and stratum *s*::

        A_strat_i = (r_i - mean_s) / (std_s + eps)    mean, unbiased std over the members of stratum s
        A_glob_i  = (r_i - mean_g) / (std_g + eps)    the usual GRPO group advantage (grpo_advantages)
        A_i       = alpha * A_strat_i + (1 - alpha) * A_glob_i

    ``strata="batch"`` (default) stratifies across the whole batch: stratum *s* is every trajectory of the
    batch with *s* searches, whatever its prompt, as the paper partitions the sampled trajectories by search
    count. ``strata="group"`` stratifies within each prompt's group instead (stratum = same prompt and same
    search count).

    A stratum with a single member has no spread to normalise against (its unbiased std is undefined): its
    stratified part is 0, so that trajectory gets ``(1 - alpha) * A_glob``. A stratum whose rewards are all
    equal also gets a stratified part of 0 (numerator 0), as in GRPO. ``alpha=0`` is plain GRPO,
    ``alpha=1`` pure SAN.
    """
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must lie in [0, 1], got {alpha}")
    if strata not in ("batch", "group"):
        raise ValueError(f"strata must be 'batch' or 'group', got {strata!r}")
    r = _vector(rewards)
    counts = _vector(search_counts, torch.long)
    if len(counts) != len(r):
        raise ValueError(f"{len(r)} rewards but {len(counts)} search counts")
    glob = grpo_advantages(r, num_generations, eps)

    keys = counts.clone()
    if strata == "group":  # one key per (group, count)
        group = torch.arange(len(r)) // num_generations
        keys = group * (int(counts.max()) + 1 if len(counts) else 1) + counts
    strat = torch.zeros_like(r)
    for key in torch.unique(keys):
        members = keys == key
        if int(members.sum()) < 2:
            continue  # singleton stratum: stratified part 0
        rs = r[members]
        strat[members] = _normalise(rs, dim=0, eps=eps)
    return alpha * strat + (1.0 - alpha) * glob


def turn_index(mask) -> torch.Tensor:
    """Token -> turn map of completions from their mask (1 = model token, 0 = environment token or padding).

    A model token's turn is the number of environment spans (maximal runs of 0s) before it: turn 0 is the
    model's text up to the first ``<information>`` block, turn *k* the text between blocks *k-1* and *k*.
    Environment tokens and padding get -1. Works on one row (1-D) or a batch (2-D, one row per completion);
    completions are expected to start with a model turn.
    """
    m = torch.as_tensor(mask).bool()
    squeeze = m.dim() == 1
    m = m.view(1, -1) if squeeze else m
    prev = torch.cat([torch.ones_like(m[:, :1]), m[:, :-1]], dim=1)
    span_starts = (~m) & prev  # a 0 after a 1 (or at position 0)
    turns = torch.cumsum(span_starts.long(), dim=1)
    turns = torch.where(m, turns, torch.full_like(turns, -1))
    return turns.view(-1) if squeeze else turns


def igpo_token_advantages(gains, turns, mask, gain_weight: float = 1.0, discount: float = 0.0) -> torch.Tensor:
    """Per-token IGPO advantage additions, 0 on environment tokens: add them to the (2-D) advantages.

    ``gains`` holds each completion's information gains, ``gains[b][k]`` = IG_k of the k-th ``<information>``
    block (a padded ``(B, K)`` tensor or a list of lists of different lengths), ``turns`` the token -> turn map
    (``(B, T)``, e.g. from :func:`turn_index`; turn *k* is the model text that issued search *k*) and ``mask``
    the completion mask (``(B, T)``, 1 = model token). Token *t* of turn *k* gets::

        add_t = gain_weight * sum_{j >= k} discount^(j - k) * IG_j      (0 ** 0 = 1)

    i.e. with ``discount=0`` (default) each searching turn gets exactly the gain of the block its search
    brought; with ``discount > 0`` it also gets the discounted gains of later blocks. Turns without a block
    (the final answer turn, turn K) and tokens whose mask is 0 get 0. 1-D ``turns``/``mask`` with a flat list
    of gains are accepted for a single completion and give a 1-D result.
    """
    m = torch.as_tensor(mask)
    t = torch.as_tensor(turns, dtype=torch.long)
    squeeze = m.dim() == 1
    if squeeze:
        m, t = m.view(1, -1), t.view(1, -1)
        gains = [gains]
    if t.shape != m.shape:
        raise ValueError(f"turns {tuple(t.shape)} and mask {tuple(m.shape)} differ in shape")
    if isinstance(gains, torch.Tensor):
        g = gains.to(torch.float32).view(len(m), -1)
    else:
        width = max((len(row) for row in gains), default=0)
        g = torch.zeros(len(gains), width)
        for b, row in enumerate(gains):
            g[b, :len(row)] = torch.as_tensor(list(row), dtype=torch.float32)
    if len(g) != len(m):
        raise ValueError(f"{len(g)} rows of gains but {len(m)} completions")
    K = g.shape[1]
    # discounted future sums: ret_k = IG_k + discount * ret_{k+1}
    ret = torch.zeros(len(g), K + 1)  # column K: the answer turn, no gain
    for k in range(K - 1, -1, -1):
        ret[:, k] = g[:, k] + discount * ret[:, k + 1]
    ret = gain_weight * ret
    idx = t.clamp(min=0, max=K)  # out-of-range turns (> K) read the zero column below
    out = torch.gather(ret, 1, idx)
    valid = m.bool() & (t >= 0) & (t < K)
    out = torch.where(valid, out, torch.zeros_like(out))
    return out.view(-1) if squeeze else out


def _ids(x, tokenizer) -> list[int]:
    if isinstance(x, str):
        return tokenizer(x, add_special_tokens=False)["input_ids"]
    return [int(i) for i in x]


@torch.no_grad()
def answer_logprobs(model, tokenizer, prefixes: Sequence, answers) -> torch.Tensor:
    """Length-normalised log-probability of the gold answer after each prefix, in one batched forward.

    For prefix ``p`` (token ids) and answer ``a = a_1..a_n`` (token ids)::

        score(p, a) = (1/n) * sum_j log P_model(a_j | p, a_1..a_{j-1})

    ``prefixes`` are strings or token-id sequences; ``answers`` one answer for all (string or ids) or one per
    prefix. Strings are tokenised without special tokens, prefix and answer *separately* and then
    concatenated (so the answer's tokens are the same after every prefix). The batch is right-padded with an
    attention mask (right padding keeps every real token's positions, and no real token attends to padding).
    Returns a float32 tensor of shape ``(len(prefixes),)`` on the CPU.
    """
    if isinstance(answers, str) or (len(answers) and isinstance(answers[0], int)):
        answers = [answers] * len(prefixes)
    if len(answers) != len(prefixes):
        raise ValueError(f"{len(prefixes)} prefixes but {len(answers)} answers")
    if not prefixes:
        return torch.zeros(0)
    rows, spans = [], []
    for p, a in zip(prefixes, answers):
        pi, ai = _ids(p, tokenizer), _ids(a, tokenizer)
        if not pi or not ai:
            raise ValueError("prefix and answer must each have at least one token")
        rows.append(pi + ai)
        spans.append((len(pi), len(ai)))
    width = max(len(r) for r in rows)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    device = next(model.parameters()).device
    input_ids = torch.full((len(rows), width), pad, dtype=torch.long)
    attention = torch.zeros((len(rows), width), dtype=torch.long)
    for b, r in enumerate(rows):
        input_ids[b, :len(r)] = torch.tensor(r)
        attention[b, :len(r)] = 1
    logits = model(input_ids=input_ids.to(device), attention_mask=attention.to(device)).logits.float()
    logp = torch.log_softmax(logits[:, :-1], dim=-1)  # position t predicts token t+1
    token_logp = torch.gather(logp, 2, input_ids[:, 1:].to(device).unsqueeze(-1)).squeeze(-1).cpu()
    out = torch.empty(len(rows))
    for b, (np_, na) in enumerate(spans):
        out[b] = token_logp[b, np_ - 1:np_ - 1 + na].mean()
    return out


def information_gains(model, tokenizer, prompt_ids, completion_ids, mask, answer) -> torch.Tensor:
    """IGPO information gains of one episode, one per ``<information>`` block (environment span of ``mask``).

    With ``score`` the length-normalised gold-answer log-probability of :func:`answer_logprobs`::

        IG_k = score(prompt + completion through block k) - score(prompt + completion before block k)

    ``completion_ids`` and ``mask`` are aligned (1 = model token, 0 = environment token); trailing padding
    (0s after the last model token) is not a block. All 2K prefixes are scored in one forward. Returns a
    float32 tensor of shape ``(K,)``.
    """
    ids = [int(i) for i in prompt_ids]
    comp = [int(i) for i in completion_ids]
    m = [int(v) for v in torch.as_tensor(mask).view(-1).tolist()]
    if len(comp) != len(m):
        raise ValueError(f"{len(comp)} completion ids but a mask of {len(m)}")
    last_model = max((i for i, v in enumerate(m) if v), default=-1)
    blocks, t = [], 0
    while t <= last_model:
        if m[t] == 0:
            start = t
            while t < len(m) and m[t] == 0:
                t += 1
            blocks.append((start, t))
        else:
            t += 1
    if not blocks:
        return torch.zeros(0)
    prefixes = []
    for start, end in blocks:
        prefixes += [ids + comp[:start], ids + comp[:end]]
    scores = answer_logprobs(model, tokenizer, prefixes, answer).view(-1, 2)
    return scores[:, 1] - scores[:, 0]
