"""GPU figures for the tiny model (issue 35, item 6): SFT tokens/s with MFU, and rollout vs ``generate`` tokens/s.

On a device machine (python3 there holds torch, transformers, accelerate, peft;
nothing else is needed, nothing is downloaded, no Java, no index, no data/):

    PYTHONUNBUFFERED=1 python3 bench/gpu.py --out $OUT   # writes $OUT/gpu_bench.json, prints a table

(about 100 s on an H200: give the run a timeout_s of about 300, which leaves time to run it again;
figures in docs/results/gpu.md).

CPU smoke check (float32, tiny settings, about 10 s on one core; its figures are no GPU figures):

    .venv/bin/python bench/gpu.py --device cpu --threads 1 --steps 2 --batch-size 2 --seq-len 128 \\
        --rollout-batch-size 4 --max-new-tokens 16 --turns 3 --repeats 1

What it builds (no hub, no files of the repo's data/):

* the project's tiny model: :func:`searchlab.model.bootstrap_tiny` (byte-level
  BPE tokenizer trained with the ``tokenizers`` library, which transformers
  depends on, and a randomly initialised ``Qwen2ForCausalLM``) at the sizes of
  ``params/default.yaml``'s ``model.tiny`` merged over the schema's defaults,
  trained on a few thousand synthetic passages generated here;
* a simulated search: those passages in memory and a keyword-overlap retriever
  (:class:`KeywordRetriever`, the project's ``Retriever`` protocol returning
  :class:`searchlab.retrieval.base.Hit`), which always returns ``k`` hits, so
  every search appends a full information block as BM25 does on the demo.

What it measures (figures in the JSON, names in brackets):

1. SFT: a plain training loop shaped like the project's TRL ``SFTTrainer`` run
   (no TRL needed): float32 weights, bf16 autocast (``bf16=True``), fused AdamW,
   gradient clipping at 1.0, fixed-length batches of random token ids
   (``--seq-len``, default ``sft.max_length`` 1024; every token counted, no
   padding), per ``--batch-size`` (comma list; ``sft.batch_size`` is 8), with
   activation checkpointing on (what the project's SFT does on a GPU) and off.
   ``tokens_per_s`` over ``--steps`` steps after warm-up steps; ``mfu``:
   6 x parameters x tokens/s / peak, and ``mfu_attn`` adds the attention term
   12 x layers x hidden x seq_len per token (PaLM's formula, full not causal).
   Model FLOPs: the recomputation of checkpointing is not counted. Parameters
   are counted once (the tied embedding is the LM head's matrix).
   The peak is looked up from ``torch.cuda.get_device_name()`` (:data:`PEAK_BF16_TFLOPS`:
   dense bf16 of the data sheets, e.g. 989.4 TFLOP/s for H100 SXM and H200) or
   taken from ``--peak-tflops``; ``peak_tflops_source`` says which.
2. Rollouts: the project's multi-turn loop :func:`searchlab.agent.rollout.rollout`
   (KV cache kept across turns) against one plain ``model.generate`` of
   ``max_new_tokens x turns`` tokens, same model (bf16 weights), batch and
   sampling (RL's: ``rl.temperature`` 0.7, top-p 1, batch ``rl.questions_per_step
   x rl.num_generations`` = 32; extractive answers off, RL's ``free``), with
   ``bench/rollout.py``'s forcing (imported from it: ``Force``, ``Forced``): EOS and the tags are
   banned except where forced, so every row writes exactly ``max_new_tokens`` per
   turn; 75% of turns 1..T-1 search (forced ``<search>`` ... ``</search>``), the
   others are invalid actions, and the last turn answers. ``ratio`` =
   rollout tok/s / generate tok/s (what issue 35 tracks; target >= 0.8), also
   without the forcing wrapper's own time (``ratio_without_forcing``) and, for
   reference, the rollout without KV-cache reuse (``no_reuse_*``). Runs alternate
   ``--repeats`` times; the fastest of each counts.

Peak GPU memory (``torch.cuda.max_memory_allocated``) is given per phase; on a
CPU the process's peak resident memory instead.

Output: stdout: a table, then one JSON line with every figure (progress on stderr); ``--out DIR`` also
writes the JSON to ``DIR/gpu_bench.json`` (or to ``--out FILE.json``).

Imports, and what must travel
-----------------------------
``searchlab.agent.rollout``, ``searchlab.model`` and ``searchlab.retrieval.base``
import, beyond the standard library and torch/transformers: ``searchlab.params``
(pydantic, pydantic-core, annotated-types, typing-inspection; PyYAML) and
``searchlab.progress`` (tqdm). PyYAML, tqdm and tokenizers are transformers'
own requirements and typing-extensions is torch's, so they are there wherever
transformers is. Where pydantic is missing this script puts a stand-in
``searchlab.params`` in place before importing the project (only dataclasses
for the two sections used here; see :func:`_params_stand_in`): the code measured
(``rollout``, ``bootstrap_tiny``) is the project's own either way, and the JSON's
``config_source`` says which was used. With pydantic the sizes are read from
``params/default.yaml`` itself. To carry pydantic anyway (optional; 2.8 MiB, the
versions of requirements.lock; pydantic-core is a compiled wheel, so it must
match the device's Python, 3.12 as the device notes (KINDS.md) last saw it, and
x86-64 manylinux; pydantic needs typing-extensions >= 4.16, newer than torch
asks for, so that travels too), here, in the repo's root::

    echo /.whl/ >> .git/info/exclude
    python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \\
        --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl \\
        pydantic==2.14.3 pydantic_core==2.50.4 annotated-types==0.8.0 typing-inspection==0.4.5 \\
        typing-extensions==4.16.0

and on the device (the run's ``carry`` names ``.whl``)::

    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \\
        .whl/*.whl && export PYTHONPATH=/tmp/site && python3 bench/gpu.py --out $OUT

What travels is the working tree (the repo's tracked and untracked files, about
3 MiB; data/ is ignored and not needed), under the 64 MiB limit with or without
those wheels.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import re
import resource
import sys
import tempfile
import time
import types
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

# ---------------------------------------------------------------- configuration
#: params/default.yaml's model.tiny merged over searchlab.params.TinyModelParams' defaults
#: (default.yaml sets max_positions: 3072; the rest are the schema's). Used where pydantic is missing;
#: with pydantic the values are read from the files and a difference is reported.
TINY = dict(vocab_size=4096, hidden_size=128, layers=4, heads=4, kv_heads=2, intermediate_size=512,
            max_positions=3072, seed=0)
#: rollout.* (schema defaults) and the RL overrides of params/default.yaml: rl.temperature 0.7, top-p 1
#: (searchlab.rl.env.training_rollout_params), batch rl.questions_per_step 4 x rl.num_generations 8.
ROLLOUT = dict(max_new_tokens=96, max_turns=6, topk=3, max_information_tokens=384, temperature=0.7, top_p=1.0,
               batch_size=32)
#: sft.batch_size and sft.max_length (schema defaults).
SFT = dict(batch_size=8, max_length=1024)

#: Dense (no sparsity) bf16 tensor-core peaks of the data sheets, TFLOP/s, by a piece of the device name;
#: the first match wins. H100 SXM5 ("NVIDIA H100 80GB HBM3") and H200 SXM: 989.4; the PCIe and NVL cards less.
PEAK_BF16_TFLOPS = (
    ("H200 NVL", 835.5), ("H200", 989.4),
    ("H100 NVL", 835.5), ("H100 PCIe", 756.5), ("H100", 989.4),
    ("A100", 312.0), ("L40S", 362.05), ("A10G", 70.0),
)


def _params_stand_in() -> types.ModuleType:
    """A ``searchlab.params`` for a Python without pydantic (or PyYAML): what importing the measured code needs.

    ``TinyModelParams`` (read by ``bootstrap_tiny``, with its ``shape_problem``) and ``RolloutParams``
    (read by ``rollout``) as dataclasses with the schema's defaults; any other ``...Params`` name (imported by
    modules on the way, for annotations only) is an empty placeholder class.
    """
    module = types.ModuleType("searchlab.params", "stand-in for searchlab.params (bench/gpu.py; pydantic missing)")

    @dataclass
    class TinyModelParams:
        vocab_size: int = 4096
        hidden_size: int = 128
        layers: int = 4
        heads: int = 4
        kv_heads: int = 2
        intermediate_size: int = 512
        max_positions: int = 2048
        seed: int = 0

        def shape_problem(self) -> str | None:
            if self.hidden_size % self.heads or self.heads % self.kv_heads or (self.hidden_size // self.heads) % 2:
                return f"model.tiny: hidden_size {self.hidden_size}, heads {self.heads}, kv_heads {self.kv_heads}"
            return None

    @dataclass
    class RolloutParams:
        temperature: float = 0.0
        top_p: float = 1.0
        max_new_tokens: int = 96
        max_turns: int = 6
        topk: int = 3
        max_information_tokens: int | None = 384
        batch_size: int = 32
        seed: int = 0
        extractive_answers: bool = False
        engine: str = "hf"

    module.TinyModelParams, module.RolloutParams = TinyModelParams, RolloutParams

    def __getattr__(name: str):
        if name.endswith("Params"):
            placeholder = type(name, (), {"__doc__": "placeholder (bench/gpu.py stand-in)"})
            setattr(module, name, placeholder)
            return placeholder
        raise AttributeError(name)

    module.__getattr__ = __getattr__
    return module


def load_config() -> tuple[dict, dict, dict, str, list[str]]:
    """(tiny, rollout, sft, source, differences): read from params/default.yaml where searchlab.params imports."""
    try:
        import searchlab.params as sp
    except ImportError as err:  # pydantic (or yaml) missing on a bare device
        import searchlab

        module = _params_stand_in()
        sys.modules["searchlab.params"] = module
        searchlab.params = module
        return dict(TINY), dict(ROLLOUT), dict(SFT), f"hard-coded copy of params/default.yaml ({err.name} missing)", []
    p = sp.load_params(REPO / "params" / "default.yaml")
    tiny = p.model.tiny.model_dump(include=set(TINY))
    rollout = {k: getattr(p.rollout, k) for k in ("max_new_tokens", "max_turns", "topk", "max_information_tokens")}
    rollout.update(temperature=p.rl.temperature, top_p=1.0, batch_size=p.rl.questions_per_step * p.rl.num_generations)
    sft = dict(batch_size=p.sft.batch_size, max_length=p.sft.max_length)
    differences = [f"{name}.{k}: file {v} != hard-coded {ref[k]}"
                   for name, got, ref in (("tiny", tiny, TINY), ("rollout", rollout, ROLLOUT), ("sft", sft, SFT))
                   for k, v in got.items() if ref[k] != v]
    return tiny, rollout, sft, "params/default.yaml via searchlab.params", differences


# ---------------------------------------------------------------- synthetic corpus and simulated search
_ONSETS = ["b", "br", "c", "d", "dr", "f", "g", "gr", "h", "k", "kr", "l", "m", "n", "p", "r", "s", "st", "t", "th",
           "v", "w", "z"]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ei", "ou", "au"]
_CODAS = ["", "", "n", "r", "l", "m", "s", "nd", "rt", "lm", "sk"]
_JOBS = ["historian", "painter", "engineer", "composer", "botanist", "architect", "chemist", "poet", "sailor"]
_KINDS = ["river", "town", "mountain", "university", "company", "lake", "castle", "bridge"]


def _word(rng: random.Random, syllables: int) -> str:
    return "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables))


def synthetic_passages(n: int, seed: int = 0) -> tuple[dict[str, str], list[str]]:
    """``n`` passages ``{"id": "\\"Title\\"\\ntext"}`` shaped like the demo's (about 20 words) and one question per
    titled entity. Deterministic."""
    rng = random.Random(seed)
    passages, questions = {}, []
    names = []
    while len(passages) < n:
        i = len(names)
        first, last = _word(rng, rng.randint(2, 3)).title(), _word(rng, rng.randint(2, 4)).title()
        place, other = _word(rng, 3).title(), _word(rng, 3).title()
        job, kind = rng.choice(_JOBS), rng.choice(_KINDS)
        title = f"{first} {last}"
        names.append(title)
        sentences = [
            f"{title} (born {rng.randint(1800, 2005)}) is a {job}. Contemporaries described them as "
            f"{_word(rng, 2)} but {_word(rng, 2)}.",
            f"{title} was born and raised in {place}, near the {kind} {other}. They studied at "
            f"{_word(rng, 3).title()} Institute.",
            f"{title} is a member of {_word(rng, 2).title()} Society. Their work as a {job} took them to "
            f"{other} and {_word(rng, 3).title()}.",
            f"As of {rng.randint(1990, 2024)}, {title} lives in {place}. Later generations have cited "
            f"{names[rng.randrange(len(names))]} as an influence.",
        ]
        for j, text in enumerate(sentences):
            if len(passages) < n:
                passages[f"e{i}-{j}"] = f'"{title}"\n{text}'
        questions.append(rng.choice([f"Where was {title} born?", f"Which society is {title} a member of?",
                                     f"In which year was {title} born?", f"What is the profession of {title}?"]))
    return passages, questions


class KeywordRetriever:
    """The project's ``Retriever`` protocol over an in-memory dict: passages ranked by the idf-weighted
    overlap of lower-cased words with the query, ties by id; topped up to ``k`` by passages picked from a
    hash of the query, so every search returns ``k`` hits (an information block as full as BM25's)."""

    _WORDS = re.compile(r"\w+")

    def __init__(self, passages: dict[str, str]):
        self.ids = list(passages)
        self.passages = passages
        self.postings: dict[str, list[int]] = {}
        for row, text in enumerate(passages.values()):
            for word in set(self._WORDS.findall(text.lower())):
                self.postings.setdefault(word, []).append(row)
        self.idf = {w: math.log(len(self.ids) / len(rows)) + 1e-3 for w, rows in self.postings.items()}

    def search(self, queries: list[str], k: int):
        from searchlab.retrieval.base import Hit

        results = []
        for query in queries:
            scores: dict[int, float] = {}
            for word in set(self._WORDS.findall(query.lower())):
                for row in self.postings.get(word, ()):
                    scores[row] = scores.get(row, 0.0) + self.idf[word]
            ranked = sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:k]
            seen = {row for row, _ in ranked}
            fill = sum(map(ord, query)) * 7919
            while len(ranked) < min(k, len(self.ids)):
                row = fill % len(self.ids)
                fill += 1
                if row not in seen:
                    seen.add(row)
                    ranked.append((row, 0.0))
            results.append([Hit(self.ids[row], self.passages[self.ids[row]], score) for row, score in ranked])
        return results

    def close(self) -> None:
        pass


# ---------------------------------------------------------------- device helpers
def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)


def peak_gib(device: torch.device) -> float:
    """Peak GPU memory allocated since the last reset; on a CPU the process's peak resident memory."""
    if device.type == "cuda":
        return round(torch.cuda.max_memory_allocated(device) / 2 ** 30, 3)
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2 ** 20, 3)  # KiB on Linux


def peak_tflops(args, device: torch.device) -> tuple[float | None, str]:
    if args.peak_tflops:
        return args.peak_tflops, "--peak-tflops"
    if device.type != "cuda":
        return None, "none (CPU: no MFU)"
    name = torch.cuda.get_device_name(device)
    for piece, tflops in PEAK_BF16_TFLOPS:
        if piece in name:
            return tflops, f"data sheet, dense bf16, matched {piece!r} in {name!r}"
    return None, f"unknown device {name!r}: pass --peak-tflops"


# ---------------------------------------------------------------- 1. SFT
def bench_sft(folder: str, args, device, dtype, vocab: int, batch: int, checkpointing: bool,
              peak: float | None) -> dict:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).to(device)  # fp32 master weights
    model.train()
    if checkpointing:
        # transformers 5.2x renamed it (the old name warns); the device's 5.17 may have only the old one
        # (transformers' own defaults, as the Trainer gets them: non-reentrant torch.utils.checkpoint)
        enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
        enable()
        model.config.use_cache = False
    cuda = device.type == "cuda"
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=0.0, fused=cuda)
    autocast = dtype != torch.float32 and cuda
    generator = torch.Generator().manual_seed(0)
    first = 10  # above the EOS, pad and protocol-tag ids
    batches = [torch.randint(first, vocab, (batch, args.seq_len), generator=generator).to(device) for _ in range(4)]

    def step(ids):
        with torch.autocast(device.type, dtype=dtype, enabled=autocast):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    for i in range(args.warmup):
        step(batches[i % len(batches)])
    sync(device)
    reset_peak(device)
    began = time.perf_counter()
    for i in range(args.steps):
        loss = step(batches[i % len(batches)])
    loss = float(loss)  # waits for the last step
    sync(device)
    seconds = time.perf_counter() - began
    tokens = batch * args.seq_len * args.steps
    rate = tokens / seconds
    n = sum(p.numel() for p in model.parameters())
    cfg = model.config
    attention = 12 * cfg.num_hidden_layers * cfg.hidden_size * args.seq_len
    figures = {
        "batch_size": batch, "seq_len": args.seq_len, "steps": args.steps, "activation_checkpointing": checkpointing,
        "autocast": str(dtype).replace("torch.", "") if autocast else None,
        "seconds": round(seconds, 4), "step_ms": round(1000 * seconds / args.steps, 3),
        "tokens_per_s": round(rate, 1), "loss": round(loss, 4),
        "model_tflops": round(6 * n * rate / 1e12, 4), "model_tflops_attn": round((6 * n + attention) * rate / 1e12, 4),
        "mfu": round(6 * n * rate / (peak * 1e12), 6) if peak else None,
        "mfu_attn": round((6 * n + attention) * rate / (peak * 1e12), 6) if peak else None,
        "peak_memory_gib": peak_gib(device),
    }
    del model, optimizer, batches
    if cuda:
        torch.cuda.empty_cache()
    return figures


# ---------------------------------------------------------------- 2. rollouts
def bench_rollout(folder: str, args, device, dtype, questions: list[str], retriever, rcfg: dict) -> dict:
    import searchlab.params as sp
    from bench.rollout import Forced, plain_generate
    from searchlab.agent.protocol import SPECIAL_TOKENS, instruction
    from searchlab.agent.rollout import rollout, summarize
    from searchlab.model import load_model
    from searchlab.retrieval.base import TimedRetriever

    model, tok = load_model(folder, dtype=str(dtype).replace("torch.", ""), device=device)
    questions = questions[:args.rollout_batch_size]
    prompts = [instruction(q) for q in questions]  # the tiny tokenizer has no chat template
    tag_ids = [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS if t in tok.get_vocab()]
    banned = sorted({*tok.all_special_ids, *tag_ids})
    m, turns, temperature = args.max_new_tokens, args.turns, args.temperature
    params = sp.RolloutParams(temperature=temperature, top_p=rcfg["top_p"], max_new_tokens=m, max_turns=turns,
                              topk=rcfg["topk"], max_information_tokens=rcfg["max_information_tokens"],
                              batch_size=len(questions), seed=0, extractive_answers=False, engine="hf")
    sampling = (dict(do_sample=True, temperature=temperature, top_p=rcfg["top_p"], top_k=0) if temperature > 0
                else dict(do_sample=False))
    timed = TimedRetriever(retriever)

    def run_rollout(reuse: bool, turns_: int = turns, m_: int = m):
        forced = Forced(model, tok, questions, turns_, m_, args.search_share, banned)
        p = params if (turns_, m_) == (turns, m) else type(params)(**{**vars_of(params), "max_turns": turns_,
                                                                       "max_new_tokens": m_})
        sync(device)
        began = time.perf_counter()
        result = rollout(forced, tok, timed, questions, p, prompts=prompts, reuse_cache=reuse)
        sync(device)
        return time.perf_counter() - began, forced.seconds, result

    # warm-up: first-call costs (kernels, allocator, caches) are not what is compared
    plain_generate(model, tok, prompts, 8, banned, **sampling)
    run_rollout(True, 2, 8)
    timed.reset()
    reset_peak(device)
    runs: dict[str, list] = {"plain": [], "rollout": [], "no_reuse": []}
    for _ in range(args.repeats):  # alternate, so load from elsewhere hits all alike
        runs["plain"].append(plain_generate(model, tok, prompts, m * turns, banned, **sampling))
        runs["rollout"].append(run_rollout(True))
        if not args.skip_no_reuse:
            runs["no_reuse"].append(run_rollout(False))
    plain_tokens, plain_s = min(runs["plain"], key=lambda run: run[1])
    rollout_s, forcing_s, rollouts = min(runs["rollout"], key=lambda run: run[0])
    rollout_tokens = sum(r.generated_tokens for r in rollouts)
    plain_rate, rollout_rate = plain_tokens / plain_s, rollout_tokens / rollout_s
    per_rollout = 2 if runs["no_reuse"] else 1
    figures = {
        "batch_size": len(questions), "max_new_tokens": m, "turns": turns, "temperature": temperature,
        "top_p": rcfg["top_p"], "topk": rcfg["topk"], "max_information_tokens": rcfg["max_information_tokens"],
        "search_share": args.search_share, "repeats": args.repeats, "dtype": str(model.dtype).replace("torch.", ""),
        "generate_tokens": plain_tokens, "generate_s": round(plain_s, 4), "generate_tok_s": round(plain_rate, 1),
        "rollout_tokens": rollout_tokens, "rollout_s": round(rollout_s, 4), "rollout_tok_s": round(rollout_rate, 1),
        "ratio": round(rollout_rate / plain_rate, 3),
        "forcing_s": round(forcing_s, 4),
        "ratio_without_forcing": round(rollout_tokens / (rollout_s - forcing_s) / plain_rate, 3),
        "retriever_calls": timed.calls // (per_rollout * args.repeats),
        "retriever_s": round(timed.seconds / (per_rollout * args.repeats), 4),
        "mean_context_tokens": round(sum(len(r.prompt_ids) + len(r.completion_ids) for r in rollouts)
                                     / len(rollouts)),
        **{k: round(v, 3) for k, v in summarize(rollouts).items()},
    }
    if runs["no_reuse"]:
        no_reuse_s, _, no_reuse = min(runs["no_reuse"], key=lambda run: run[0])
        rate = sum(r.generated_tokens for r in no_reuse) / no_reuse_s
        figures.update(no_reuse_s=round(no_reuse_s, 4), no_reuse_tok_s=round(rate, 1),
                       no_reuse_ratio=round(rate / plain_rate, 3))
    figures["peak_memory_gib"] = peak_gib(device)
    del model
    return figures


def vars_of(params) -> dict:
    """A params object's fields, pydantic model or dataclass."""
    return params.model_dump() if hasattr(params, "model_dump") else dict(vars(params))


# ---------------------------------------------------------------- main
def table(result: dict) -> str:
    lines = [f"device {result['device']} | torch {result['torch']} | transformers {result['transformers']} | "
             f"{result['parameters']:,} parameters, vocab {result['vocab_size']} | peak "
             f"{result['peak_tflops']} TFLOP/s ({result['peak_tflops_source']})",
             f"{'SFT batch':>9} {'seq':>5} {'ckpt':>5} {'step ms':>9} {'tokens/s':>12} {'TFLOP/s':>9} "
             f"{'MFU':>9} {'MFU+attn':>9} {'peak GiB':>9}"]
    for s in result["sft"]:
        mfu = "-" if s["mfu"] is None else f"{100 * s['mfu']:.3f}%"
        mfu_attn = "-" if s["mfu_attn"] is None else f"{100 * s['mfu_attn']:.3f}%"
        lines.append(f"{s['batch_size']:>9} {s['seq_len']:>5} {'on' if s['activation_checkpointing'] else 'off':>5} "
                     f"{s['step_ms']:>9.2f} {s['tokens_per_s']:>12,.0f} {s['model_tflops']:>9.3f} {mfu:>9} "
                     f"{mfu_attn:>9} {s['peak_memory_gib']:>9.3f}")
    r = result["rollout"]
    lines += [f"rollouts: batch {r['batch_size']}, {r['turns']} turns x {r['max_new_tokens']} tokens, "
              f"temperature {r['temperature']}, {r['dtype']}",
              f"  generate  {r['generate_tokens']:>7} tokens {r['generate_s']:>8.3f} s {r['generate_tok_s']:>10,.0f} tok/s",
              f"  rollout   {r['rollout_tokens']:>7} tokens {r['rollout_s']:>8.3f} s {r['rollout_tok_s']:>10,.0f} tok/s"
              f"  (forcing {r['forcing_s']:.3f} s, {r['retriever_calls']} searches {r['retriever_s']:.3f} s)",
              f"  ratio {r['ratio']:.3f} (target >= 0.8); without the forcing wrapper {r['ratio_without_forcing']:.3f}"
              + (f"; without KV-cache reuse {r['no_reuse_ratio']:.3f}" if "no_reuse_ratio" in r else ""),
              f"  peak memory {r['peak_memory_gib']:.3f} GiB; mean context {r['mean_context_tokens']} tokens, "
              f"answered {r['answered']:.2f}"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("Imports, and what must travel")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda (default; an error if there is none) or cpu")
    parser.add_argument("--dtype", default=None, choices=["bfloat16", "float16", "float32"],
                        help="default: bfloat16 on a GPU, float32 on a CPU")
    parser.add_argument("--steps", type=int, default=50, help="timed SFT steps per configuration")
    parser.add_argument("--warmup", type=int, default=5, help="untimed SFT steps first")
    parser.add_argument("--batch-size", default=None,
                        help="SFT batch sizes, comma-separated (default: sft.batch_size 8, and 32)")
    parser.add_argument("--seq-len", type=int, default=None, help="SFT tokens per sequence (default sft.max_length)")
    parser.add_argument("--checkpointing", default="both", choices=["on", "off", "both"],
                        help="SFT activation checkpointing (the project's SFT has it on on a GPU)")
    parser.add_argument("--rollout-batch-size", type=int, default=None,
                        help="episodes per rollout batch (default rl.questions_per_step x rl.num_generations)")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="per turn (default rollout.max_new_tokens)")
    parser.add_argument("--turns", type=int, default=None, help="max_turns (default rollout.max_turns)")
    parser.add_argument("--temperature", type=float, default=None, help="default rl.temperature; 0: greedy")
    parser.add_argument("--search-share", type=float, default=0.75, help="share of turns 1..T-1 forced to search")
    parser.add_argument("--repeats", type=int, default=3, help="alternating rollout/generate runs; fastest counts")
    parser.add_argument("--skip-no-reuse", action="store_true", help="skip the rollout without KV-cache reuse")
    parser.add_argument("--passages", type=int, default=4000, help="synthetic passages (tokenizer text and search)")
    parser.add_argument("--peak-tflops", type=float, default=None, help="the device's peak for MFU, TFLOP/s")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--out", help="a folder (gpu_bench.json is written in it) or a .json file")
    args = parser.parse_args()

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: torch {torch.__version__} sees no CUDA device "
                     "(use --device cpu for a smoke check)")
    device = torch.device(args.device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", 0)
    dtype = getattr(torch, args.dtype or ("bfloat16" if device.type == "cuda" else "float32"))
    if args.threads:
        torch.set_num_threads(args.threads)

    tiny, rcfg, scfg, config_source, differences = load_config()
    for line in differences:
        print(f"note: bench/gpu.py's hard-coded config is stale: {line}", file=sys.stderr)
    batches = [int(b) for b in (args.batch_size or f"{scfg['batch_size']},32").split(",")]
    args.seq_len = args.seq_len or scfg["max_length"]
    args.rollout_batch_size = args.rollout_batch_size or rcfg["batch_size"]
    args.max_new_tokens = args.max_new_tokens or rcfg["max_new_tokens"]
    args.turns = args.turns or rcfg["max_turns"]
    args.temperature = rcfg["temperature"] if args.temperature is None else args.temperature
    if args.turns < 1 or args.max_new_tokens < 8:
        parser.error("need --turns >= 1 and --max-new-tokens >= 8 (room for the forced tags)")

    import transformers

    transformers.utils.logging.disable_progress_bar()  # "Loading weights" bars on every load
    import searchlab.params as sp
    from searchlab.agent.protocol import INVALID_ACTION_MESSAGE, instruction
    from searchlab.model import bootstrap_tiny

    passages, questions = synthetic_passages(args.passages)
    if len(questions) < args.rollout_batch_size:
        parser.error(f"--passages {args.passages} give {len(questions)} questions: fewer than the rollout batch")
    peak, peak_source = peak_tflops(args, device)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-bench-") as tmp:
        folder = Path(tmp) / "tiny"
        texts = [instruction(q) for q in questions[:200]] + [INVALID_ACTION_MESSAGE, *passages.values()]
        facts = bootstrap_tiny(sp.TinyModelParams(**tiny), texts, folder)
        print(f"built the tiny model: {facts['parameters']:,} parameters, vocab {facts['vocab_size']} "
              f"({facts['seconds']:.1f} s)", file=sys.stderr)
        sft = []
        for batch in batches:
            for checkpointing in {"on": [True], "off": [False], "both": [False, True]}[args.checkpointing]:
                sft.append(bench_sft(str(folder), args, device, dtype, facts["vocab_size"], batch, checkpointing,
                                     peak))
                print(f"sft batch {batch}, checkpointing {checkpointing}: {sft[-1]['tokens_per_s']:,.0f} tok/s",
                      file=sys.stderr)
        rollout = bench_rollout(str(folder), args, device, dtype, questions, KeywordRetriever(passages), rcfg)
    cfg = {k: tiny[k] for k in TINY}
    result = {
        "what": "bench/gpu.py: tiny-model SFT tokens/s + MFU, rollout vs generate tokens/s (issue 35, item 6)",
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({platform.machine()})",
        "device_kind": device.type, "threads": torch.get_num_threads() if device.type == "cpu" else None,
        "python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
        "cuda": torch.version.cuda, "dtype": str(dtype).replace("torch.", ""),
        "config_source": config_source, "tiny_config": cfg, "parameters": facts["parameters"],
        "vocab_size": facts["vocab_size"], "peak_tflops": peak, "peak_tflops_source": peak_source,
        "sft_batch_sizes": batches, "rollout_batch_size": args.rollout_batch_size,
        "sft": sft, "rollout": rollout, "seconds": round(time.perf_counter() - started, 1),
    }
    print(table(result))
    print(json.dumps(result))
    if args.out:
        out = Path(args.out)
        if out.suffix != ".json":
            out.mkdir(parents=True, exist_ok=True)
            out = out / "gpu_bench.json"
        out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
