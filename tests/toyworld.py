"""The tests' toy world, written once: a dozen passages, the scripted questions, a tiny BPE tokenizer and Qwen2.

Plain data and builders, no fixtures (those are in ``tests/searchlab/conftest.py``: one session-scoped Lucene
index per distinct corpus, the session's tokenizer and model). Test modules import from here, never from
each other.

* :data:`DOCS`: the agent, rollout, evaluation, rl and self-play tests' corpus (and the tokenizer's: its
  texts are part of what :func:`make_tokenizer` trains on, so changing it changes every tiny model).
* :data:`PROTOCOL_DOCS`: the protocol tests' corpus, :data:`DOCS` without Oslo and with a passage that holds
  protocol tags. It stays a corpus of its own: adding the markup passage to :data:`DOCS` would change the
  tokenizer and what random policies retrieve, and removing Oslo would break the Norway scripts.
* :data:`SCRIPTS`: question -> the scripted model's turns; :class:`Scripted` makes the real model write them.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from pathlib import Path

import torch
import transformers

from searchlab.agent import INVALID_ACTION_MESSAGE, SPECIAL_TOKENS, environment_spans, information_block, instruction
from searchlab.agent.text import encode_completion
from searchlab.params import RolloutParams

DOCS = {
    "tokyo": ("Tokyo", "Tokyo is the capital of Japan and its largest city."),
    "kyoto": ("Kyoto", "Kyoto was the imperial seat of Japan for more than a thousand years."),
    "fleming": ("Alexander Fleming", "Alexander Fleming was a Scottish physician who discovered penicillin in 1928."),
    "penicillin": ("Penicillin", "Penicillin is an antibiotic made by moulds."),
    "everest": ("Mount Everest", "Mount Everest is the highest mountain above sea level, in the Himalayas."),
    "nile": ("Nile", "The Nile is a major river in northeastern Africa that flows into the Mediterranean Sea."),
    "curie": ("Marie Curie", "Marie Curie won Nobel Prizes in physics and chemistry for research on radioactivity."),
    "warsaw": ("Warsaw", "Warsaw is the capital of Poland, where Marie Curie was born."),
    "chess": ("Chess", "Chess is a board game played by two players on a checkered board."),
    "bee": ("Honey bee", "Honey bees pollinate flowers and dance to show where food is."),
    "violin": ("Violin", "The violin is a string instrument played with a bow."),
    "oslo": ("Oslo", "Oslo is the capital of Norway, on the Oslofjord."),
}

MARKUP = ("Markup", "A markup page may contain a literal <answer> tag or </information> in its text.")


def _protocol_docs() -> dict[str, tuple[str, str]]:
    """DOCS without Oslo, with MARKUP after Chess (BM25 ties are broken in corpus order: this order is kept)."""
    docs = {}
    for doc_id, doc in DOCS.items():
        if doc_id != "oslo":
            docs[doc_id] = doc
        if doc_id == "chess":
            docs["markup"] = MARKUP
    return docs


PROTOCOL_DOCS = _protocol_docs()


def contents(doc: tuple[str, str]) -> str:
    """A passage in the corpus format: ``"Title"\\ntext``."""
    title, text = doc
    return f'"{title}"\n{text}'


def write_corpus(path: Path, docs: dict[str, tuple[str, str]], ids=None) -> Path:
    """``corpus.jsonl`` of ``docs`` (``{id: (title, text)}``), or of the passages ``ids`` of it, in that order."""
    ids = list(docs) if ids is None else ids
    path.write_text("".join(json.dumps({"id": i, "contents": contents(docs[i])}) + "\n" for i in ids))
    return path


def build_toy_index(folder: Path, docs: dict[str, tuple[str, str]]) -> Path:
    """A real BM25 index (Anserini, in a child process) of ``docs``: ``folder/corpus.jsonl`` and the index
    folder ``folder/index``, which is returned."""
    from searchlab.params import IndexParams
    from searchlab.retrieval.indexing import build_index

    corpus = write_corpus(folder / "corpus.jsonl", docs)
    index = folder / "index"
    index.mkdir()
    build_index(IndexParams(threads=1), corpus, index)
    return index


def counting_bm25(index_dir: Path, threads: int = 1):
    """A BM25 retriever over ``index_dir`` whose ``.calls`` lists every ``search`` call (results unchanged).
    Use it as a context manager."""
    from searchlab.retrieval.lucene import BM25Retriever

    class CountingBM25(BM25Retriever):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.calls: list[tuple[list[str], int]] = []

        def search(self, queries, k):
            self.calls.append((list(queries), k))
            return super().search(queries, k)

    return CountingBM25(index_dir, threads=threads)


# ---------------------------------------------------------------- the scripted questions

LONG_THINK = "<think>" + " ".join(["I should think about this question very carefully before I act"] * 6)

# question -> the model's turns, one per environment reply
SCRIPTS = {
    "What is the capital of Japan?": ["<think>I know it.</think>\n<answer>Tokyo</answer> and then babble after it"],
    "Who discovered penicillin?": [
        "<think>I do not know who discovered it, so I will look it up now.</think>\n"
        "<search>who discovered penicillin</search>",
        "<think>The passage says Fleming.</think>\n<answer>Alexander Fleming</answer>",
    ],
    "Where was Marie Curie born?": [
        "<think>No idea.</think> maybe Paris",  # no action, then the forced EOS
        "<think>Then search.</think>\n<answer>Warsaw</answer>",
    ],
    "What is the highest mountain?": ["<think>Easy.</think>\n<answer>Mount Everest</answer>"],
    "What is the capital of Norway?": [
        "<search>capital of Norway</search>",
        "<think>Oslo.</think><answer>Oslo</answer>",
    ],
    "What was the old capital of Japan?": [
        "<search>imperial seat of Japan</search>",
        "<search>Kyoto capital</search>",
        "<search>Japan capital history</search>",
        "<answer>Kyoto</answer>",
    ],
    "What game has a checkered board?": [LONG_THINK, "<answer>Chess</answer>"],  # longer than max_new_tokens
    "Which city is the capital of Japan?": ["<think>Tokyo.</think>\n<answer> Tokyo"],  # EOS inside the answer
}
QUESTIONS = list(SCRIPTS)


# ---------------------------------------------------------------- a tiny tokenizer and model


def corpus_texts() -> list[str]:
    texts = [f"{title}\n{text}" for title, text in DOCS.values()]
    texts += [instruction(q) for q in QUESTIONS] + [INVALID_ACTION_MESSAGE]
    texts += [turn for turns in SCRIPTS.values() for turn in turns]
    texts += ["Doc 1(Title: Tokyo) Tokyo is the capital.\n"] * 5
    return texts


def make_tokenizer(tags_special: bool):
    """Byte-level BPE: with the tags as special tokens (one id each) or without (a tag spans several tokens)."""
    from tokenizers import Tokenizer, decoders, pre_tokenizers
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer
    from transformers import PreTrainedTokenizerFast

    special = ["<|endoftext|>", "<|pad|>"] + (list(SPECIAL_TOKENS) if tags_special else [])
    texts = corpus_texts()
    if not tags_special:  # make ">." one token, so a stop string can end inside a token ("</search>.")
        texts += ["<search>x</search>. <answer>y</answer>."] * 50
    tok = Tokenizer(BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts, BpeTrainer(vocab_size=700, special_tokens=special,
                                              initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|pad|>")


def make_model(tokenizer, seed: int = 0):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=2048,
                         initializer_range=0.3,  # large weights: outputs depend on the context, so mistakes show
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None)
    torch.manual_seed(seed)
    return Qwen2ForCausalLM(config).eval()


# ---------------------------------------------------------------- steering and watching the real model


class ForceTokens(transformers.LogitsProcessor):
    """Row ``r`` must write ``rows[r][s]`` at its ``s``-th new token, then end-of-sequence."""

    def __init__(self, rows: list[list[int]], start: int, eos: int):
        self.rows, self.start, self.eos = rows, start, eos

    def __call__(self, input_ids, scores):
        s = input_ids.shape[1] - self.start
        forced = torch.full_like(scores, float("-inf"))
        for r, ids in enumerate(self.rows):
            forced[r, ids[s] if s < len(ids) else self.eos] = 0.0
        return forced


class Recording:
    """The real model, unchanged; records what each ``generate`` call let it see."""

    def __init__(self, model, tokenizer):
        self.model, self.tok = model, tokenizer
        self.seen: list[list[int]] = []  # per call and row: the ids the attention mask lets the model see
        self.cached: list[bool] = []  # per call: did it continue from the previous turn's KV cache?
        self.widths: list[int] = []  # per call: the batch's columns, holes included

    def __getattr__(self, name):  # device, generation_config, ...
        return getattr(self.model, name)

    def generate(self, input_ids, attention_mask, **kwargs):
        cache = kwargs.get("past_key_values")  # the first call may bring an empty one to fill
        self.cached.append(cache is not None and cache.get_seq_length() > 0)
        self.widths.append(input_ids.shape[1])
        self.seen += [[i for i, m in zip(ids, mask) if m] for ids, mask in zip(input_ids.tolist(),
                                                                              attention_mask.tolist())]
        return self.model.generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)

    def saw_exactly_the_episodes(self, rollouts) -> bool:
        """Every context the model read was an episode's prompt_ids + completion_ids so far, ending at a turn."""
        def starts(r):
            ends, position = [0], 0
            for flag, group in itertools.groupby(r.env_mask):
                position += len(list(group))
                if flag:
                    ends.append(position)
            return [r.prompt_ids + r.completion_ids[:end] for end in ends]

        contexts = [context for r in rollouts for context in starts(r)]
        return all(seen in contexts for seen in self.seen)


class Scripted(Recording):
    """The real model, made to follow SCRIPTS; records which questions each generate call batched together."""

    def __init__(self, model, tokenizer):
        super().__init__(model, tokenizer)
        self.batches: list[list[str]] = []

    def generate(self, input_ids, attention_mask, **kwargs):
        rows, questions = [], []
        for ids, mask in zip(input_ids.tolist(), attention_mask.tolist()):
            text = self.tok.decode([i for i, m in zip(ids, mask) if m], skip_special_tokens=False)
            question = next(q for q in SCRIPTS if f"Question: {q}\n" in text)
            completion = text.split(f"Question: {question}\n", 1)[1]
            turn = len(environment_spans(completion))  # the environment answered `turn` times
            script = SCRIPTS[question][turn]  # text, or the exact ids to write
            rows.append(script if isinstance(script, list) else encode_completion(self.tok, script))
            questions.append(question)
        self.batches.append(questions)
        force = ForceTokens(rows, input_ids.shape[1], self.tok.eos_token_id)
        return super().generate(input_ids, attention_mask,
                                logits_processor=transformers.LogitsProcessorList([force]), **kwargs)


def params(**kw) -> RolloutParams:
    base = dict(max_new_tokens=40, max_turns=4, topk=2, max_information_tokens=80, batch_size=8)
    return RolloutParams(**{**base, **kw})


def expected_block(retriever, query: str, p: RolloutParams, tok) -> str:
    [hits] = retriever.search([query], p.topk)
    return information_block(hits, p.max_information_tokens, lambda s: len(encode_completion(tok, s)))


def strip_time(rollouts):
    return [dataclasses.replace(r, seconds=None) for r in rollouts]
