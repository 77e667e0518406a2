"""Rollout throughput benchmark (run by hand): multi-turn ``rollout()`` vs one plain ``model.generate``.

    python bench/rollout.py --threads 1          # random Qwen2-shaped model (hidden 64, 2 layers), CPU
    python bench/rollout.py --batch 8 --max-new-tokens 32 --turns 3
    python bench/rollout.py --model /path/to/Qwen2.5-0.5B-Instruct --device cuda --dtype bfloat16 --batch 32

For one model, one batch of prompts and one token budget (``--max-new-tokens``
M per turn, ``--turns`` T), greedy decoding, it measures:

(a) plain: a single ``model.generate`` on the batch with ``max_new_tokens = M*T``;
    model tokens per second;
(b) rollout: ``searchlab.agent.rollout.rollout`` with ``max_new_tokens = M``,
    ``max_turns = T`` over the real retriever at ``--index``; model tokens per
    second (``Rollout.generated_tokens``: the inserted environment text is not
    counted, reading it is paid for);

and prints ``ratio = (b) / (a)`` (target >= 0.8), then one JSON line with all
figures. The runs alternate ``--repeats`` times and the fastest of each is
reported (on a shared CPU, other load moves single runs a lot; there, use
``--threads 1``: torch's threads waiting on each other make it far worse).

What is forced, since a random model writes no tags (both runs use the same
logits processor, so its cost is in both):

* EOS, pad and the protocol tags are banned everywhere except where forced
  below, so every row generates exactly M tokens per turn and M*T in (a): both
  runs generate the same number of model tokens;
* turns 1..T-1: a ``--search-share`` of the (row, turn) pairs (spread evenly,
  deterministically) start with ``<search>`` and end with ``</search>`` at their
  M-th token, so the model's random words in between are a real BM25 query and
  an information block (up to ``--info-tokens`` tokens) is retrieved and
  read by the model; the other rows write M free tokens, an invalid action, and get
  the feedback text;
* turn T: every row starts with ``<answer>`` and ends with ``</answer>`` at its
  M-th token, so every episode finishes at the last turn.

The forcing wrapper reads each row's context once per turn (to know its turn);
that time is reported as ``forcing_s`` and is part of (b). (b) is also run with
``reuse_cache=False`` (``no_reuse_*``): every turn re-reads (prefills) the whole
context instead of continuing from the KV cache; ``same_episodes`` says whether
both gave the same tokens (greedy; float rounding could flip a near tie).
With ``--model`` the tags may span several tokens: they are forced as such,
only single-token specials can be banned, and a real model may close a tag
early on its own (it then generates fewer tokens; the rates stay comparable).

Output: stdout only (three lines of rates, the ratio, then the JSON line); without ``--model`` the random model
is built in a temporary folder, deleted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402
from transformers import LogitsProcessor, LogitsProcessorList  # noqa: E402

from searchlab.agent.protocol import (  # noqa: E402
    ANSWER_CLOSE,
    ANSWER_OPEN,
    INFORMATION_SUFFIX,
    INVALID_ACTION_MESSAGE,
    SEARCH_CLOSE,
    SEARCH_OPEN,
    SPECIAL_TOKENS,
    instruction,
)
from searchlab.agent.rollout import rollout, summarize  # noqa: E402
from searchlab.agent.text import encode_completion, encode_prompt  # noqa: E402
from searchlab.params import RetrieverParams, RolloutParams  # noqa: E402
from searchlab.retrieval.base import TimedRetriever  # noqa: E402


# ---------------------------------------------------------------- model, tokenizer, questions
def build_tiny(corpus: Path, args, folder: Path) -> str:
    """The project's own from-scratch model (``bootstrap_tiny``) at the bench's sizes, trained on the corpus."""
    from searchlab.model import bootstrap_tiny
    from searchlab.params import TinyModelParams

    texts = [instruction("What is it?"), INVALID_ACTION_MESSAGE]
    if corpus.is_file():
        with open(corpus, encoding="utf-8") as f:
            texts += [json.loads(line)["contents"] for line, _ in zip(f, range(20000))]
    else:
        texts += [f"Doc {i} is about item {i} and its history." for i in range(2000)]
    heads = args.heads or max(1, args.hidden // 32)
    spec = TinyModelParams(vocab_size=args.vocab, hidden_size=args.hidden, layers=args.layers, heads=heads,
                           kv_heads=args.kv_heads or max(1, heads // 2),
                           intermediate_size=args.intermediate or 4 * args.hidden, max_positions=8192)
    bootstrap_tiny(spec, texts, folder)
    return str(folder)


def load_questions(n: int) -> list[str]:
    questions = []
    for path in sorted((REPO / "data" / "benchmarks").glob("*.jsonl")):
        with open(path, encoding="utf-8") as f:
            questions += [json.loads(line)["question"] for line in f]
    questions = questions or [f"What is the history of item {i}?" for i in range(n)]
    return [questions[i * len(questions) // n] for i in range(n)]  # spread over the suites


# ---------------------------------------------------------------- forcing
class Force(LogitsProcessor):
    """Bans ``banned`` ids; at new-token step ``s`` row ``r`` must write ``table[s, r]`` where that is >= 0.

    Sync-free (no boolean indexing), so it costs the same few kernels every step on a GPU.
    """

    def __init__(self, banned: list[int], table: torch.Tensor | None, start: int):
        self.banned, self.table, self.start = banned, table, start

    def __call__(self, input_ids, scores):
        if not isinstance(self.banned, torch.Tensor):
            self.banned = torch.tensor(self.banned, dtype=torch.long, device=scores.device)
        scores = scores.index_fill(1, self.banned, float("-inf"))
        s = input_ids.shape[1] - self.start
        if self.table is None or s >= self.table.shape[0]:
            return scores
        self.table = self.table.to(scores.device)  # once
        target = self.table[s]
        only = torch.full_like(scores, float("-inf")).scatter(1, target.clamp(min=0)[:, None], 0.0)
        return torch.where((target >= 0)[:, None], only, scores)


class Forced:
    """The model, made to follow the schedule in the module docstring; delegates everything else."""

    def __init__(self, model, tok, questions: list[str], turns: int, max_new_tokens: int, share: float,
                 banned: list[int]):
        self.model, self.tok, self.questions = model, tok, questions
        self.turns, self.m, self.share, self.banned = turns, max_new_tokens, share, banned
        self.tags = {t: encode_completion(tok, t) for t in (SEARCH_OPEN, SEARCH_CLOSE, ANSWER_OPEN, ANSWER_CLOSE)}
        self.seconds = 0.0

    def __getattr__(self, name):
        return getattr(self.model, name)

    def searches(self, q: int, turn: int) -> bool:
        # evenly spread over the rows of each turn: floor((k+1)*share) steps up on a share of the k
        k = turn * len(self.questions) + q
        return int((k + 1) * self.share) > int(k * self.share)

    def generate(self, input_ids, attention_mask, **kwargs):
        began = time.perf_counter()
        table = torch.full((self.m, input_ids.shape[0]), -1, dtype=torch.long)
        for r, (ids, mask) in enumerate(zip(input_ids.tolist(), attention_mask.tolist())):
            text = self.tok.decode([i for i, a in zip(ids, mask) if a], skip_special_tokens=False)
            q = next(i for i, quest in enumerate(self.questions) if f"Question: {quest.strip()}\n" in text)
            turn = text.count(INFORMATION_SUFFIX) + text.count(INVALID_ACTION_MESSAGE)
            if turn == self.turns - 1:
                opening, closing = self.tags[ANSWER_OPEN], self.tags[ANSWER_CLOSE]
            elif self.searches(q, turn):
                opening, closing = self.tags[SEARCH_OPEN], self.tags[SEARCH_CLOSE]
            else:
                continue
            table[:len(opening), r] = torch.tensor(opening)
            table[self.m - len(closing):, r] = torch.tensor(closing)
        force = Force(self.banned, table, input_ids.shape[1])
        self.seconds += time.perf_counter() - began
        return self.model.generate(input_ids=input_ids, attention_mask=attention_mask,
                                   logits_processor=LogitsProcessorList([force]), **kwargs)


# ---------------------------------------------------------------- the two measurements
def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def plain_generate(model, tok, prompts: list[str], new_tokens: int, banned: list[int],
                   **sampling) -> tuple[int, float]:
    """(new tokens, seconds) of one plain ``generate`` call over ``prompts``; greedy unless ``sampling`` says
    otherwise (``do_sample``, ``temperature``, ``top_p``)."""
    contexts = [encode_prompt(tok, p) for p in prompts]
    width = max(map(len, contexts))
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    ids = torch.tensor([[pad] * (width - len(c)) + c for c in contexts], device=model.device)
    mask = torch.tensor([[0] * (width - len(c)) + [1] * len(c) for c in contexts], device=model.device)
    sync(model.device)
    began = time.perf_counter()
    with torch.inference_mode():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens, num_beams=1,
                             repetition_penalty=1.0, pad_token_id=pad, eos_token_id=tok.eos_token_id,
                             logits_processor=LogitsProcessorList([Force(banned, None, width)]),
                             **(sampling or {"do_sample": False}))
    sync(model.device)
    seconds = time.perf_counter() - began
    new = out[:, width:]
    return int((new != pad).sum()), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a Hugging Face model folder (default: a random Qwen2-shaped model)")
    parser.add_argument("--index", default=str(REPO / "data" / "index"))
    parser.add_argument("--corpus", default=str(REPO / "data" / "corpus" / "corpus.jsonl"),
                        help="text the default tokenizer is trained on")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=96, help="per turn (M)")
    parser.add_argument("--turns", type=int, default=4, help="max_turns (T); plain generate gets M*T tokens")
    parser.add_argument("--info-tokens", type=int, default=384, help="max_information_tokens")
    parser.add_argument("--topk", type=int, default=3)
    parser.add_argument("--search-share", type=float, default=0.75, help="share of turns 1..T-1 forced to search")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=0, help="default hidden/32")
    parser.add_argument("--kv-heads", type=int, default=0, help="default heads/2")
    parser.add_argument("--intermediate", type=int, default=0, help="default 4*hidden")
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=5, help="alternating runs of each; the fastest is reported")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: torch's choice)")
    args = parser.parse_args()
    if args.turns < 1 or args.max_new_tokens < 8:
        parser.error("need --turns >= 1 and --max-new-tokens >= 8 (room for the forced tags)")

    from searchlab.retrieval import open_retriever

    if args.threads:
        torch.set_num_threads(args.threads)
    from searchlab.model import load_model

    with tempfile.TemporaryDirectory(prefix="rollout-bench-") as tmp:
        path = args.model or build_tiny(Path(args.corpus), args, Path(tmp) / "tiny")
        model, tok = load_model(path, dtype=args.dtype, device=args.device)
    questions = load_questions(args.batch)
    if getattr(tok, "chat_template", None):
        prompts = [tok.apply_chat_template([{"role": "user", "content": instruction(q)}], tokenize=False,
                                           add_generation_prompt=True) for q in questions]
    else:
        prompts = [instruction(q) for q in questions]
    tag_ids = [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS if t in tok.get_vocab()]
    banned = sorted({*tok.all_special_ids, *tag_ids})
    params = RolloutParams(temperature=0.0, max_new_tokens=args.max_new_tokens, max_turns=args.turns,
                           topk=args.topk, max_information_tokens=args.info_tokens, batch_size=args.batch)

    with open_retriever(RetrieverParams(method="bm25"), Path(args.index)) as inner:
        retriever = TimedRetriever(inner)
        # warm-up: first-call costs (JVM, kernels, caches) are not what we compare
        retriever.search(["warm up query"], args.topk)
        plain_generate(model, tok, prompts, 4, banned)
        warm = Forced(model, tok, questions, 2, 8, 1.0, banned)
        rollout(warm, tok, retriever, questions, params.model_copy(update={"max_new_tokens": 8, "max_turns": 2}),
                prompts=prompts)
        retriever.reset()

        runs: dict[str, list] = {"plain": [], "rollout": [], "no_reuse": []}
        for _ in range(args.repeats):  # alternate, so load from elsewhere hits all alike
            runs["plain"].append(plain_generate(model, tok, prompts, args.max_new_tokens * args.turns, banned))
            for name, reuse in (("rollout", True), ("no_reuse", False)):
                forced = Forced(model, tok, questions, args.turns, args.max_new_tokens, args.search_share, banned)
                sync(model.device)
                began = time.perf_counter()
                result = rollout(forced, tok, retriever, questions, params, prompts=prompts, reuse_cache=reuse)
                sync(model.device)
                runs[name].append((time.perf_counter() - began, forced.seconds, result))
                if reuse:
                    rollouts = result
        # the fastest of each: other load only ever slows a run down
        plain_tokens, plain_s = min(runs["plain"], key=lambda run: run[1])
        rollout_s, forcing_s, _ = min(runs["rollout"], key=lambda run: run[0])
        no_reuse_s, _, no_reuse = min(runs["no_reuse"], key=lambda run: run[0])
        retriever_s = retriever.seconds / args.repeats / 2

    rollout_tokens = sum(r.generated_tokens for r in rollouts)
    no_reuse_tokens = sum(r.generated_tokens for r in no_reuse)
    plain_rate, rollout_rate = plain_tokens / plain_s, rollout_tokens / rollout_s
    no_reuse_rate = no_reuse_tokens / no_reuse_s
    stats = summarize(rollouts)
    figures = {
        "model": args.model or f"random-qwen2-h{args.hidden}-l{args.layers}", "device": str(model.device),
        "dtype": args.dtype, "batch": args.batch, "max_new_tokens": args.max_new_tokens, "turns": args.turns,
        "info_tokens": args.info_tokens, "search_share": args.search_share,
        "repeats": args.repeats, "threads": torch.get_num_threads(),
        "plain_tokens": plain_tokens, "plain_s": round(plain_s, 3), "plain_tok_s": round(plain_rate, 1),
        "rollout_tokens": rollout_tokens, "rollout_s": round(rollout_s, 3), "rollout_tok_s": round(rollout_rate, 1),
        "ratio": round(rollout_rate / plain_rate, 3),
        "no_reuse_s": round(no_reuse_s, 3), "no_reuse_tok_s": round(no_reuse_rate, 1),
        "no_reuse_ratio": round(no_reuse_rate / plain_rate, 3),
        "same_episodes": [r.completion_ids for r in rollouts] == [r.completion_ids for r in no_reuse],
        "retriever_calls": retriever.calls // (2 * args.repeats), "queries": retriever.queries // (2 * args.repeats),
        "retriever_s": round(retriever_s, 3), "forcing_s": round(forcing_s, 3),
        "mean_context_tokens": round(sum(len(r.prompt_ids) + len(r.completion_ids) for r in rollouts) / len(rollouts)),
        **{k: round(v, 3) for k, v in stats.items()},
    }
    print(f"plain generate:      {plain_tokens} tokens in {plain_s:.2f} s = {plain_rate:.0f} tok/s")
    print(f"rollout:             {rollout_tokens} tokens in {rollout_s:.2f} s = {rollout_rate:.0f} tok/s "
          f"({figures['retriever_calls']} retriever calls, {retriever_s:.2f} s)")
    print(f"rollout, no reuse:   {no_reuse_tokens} tokens in {no_reuse_s:.2f} s = {no_reuse_rate:.0f} tok/s "
          "(each turn re-reads the whole context)")
    print(f"ratio {figures['ratio']:.2f} (target >= 0.8); without KV-cache reuse {figures['no_reuse_ratio']:.2f}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
