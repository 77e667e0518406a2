"""SFT on a real tiny model built from scratch: loss masking, training, and resume after an interruption."""

from __future__ import annotations

import json
import random

import pytest
import torch
from transformers import TrainerCallback

from searchlab.agent.protocol import DemoStep, environment_spans, instruction, render_demonstration
from searchlab.model import bootstrap_tiny, load_model
from searchlab.params import SFTParams, TinyModelParams
from searchlab.retrieval.base import Hit
from searchlab.train.sft import IGNORE, encode_demo, train_sft

CITIES = ["Kelmora", "Vosshorby", "Althouhelm", "Rimkoulford", "Halkrelt", "Basrourn"]


def _demo(i: int, rng: random.Random) -> dict:
    person, city = f"Person{i} Holm", rng.choice(CITIES)
    hits = [Hit(f"e{i}-1", f'"{person}"\n{person} was born in {city}.', 9.0),
            Hit(f"e{i + 1}-0", f'"Other{i}"\nOther{i} lives in {rng.choice(CITIES)}.', 3.0)]
    question = f"Where was {person} born?"
    completion = render_demonstration([DemoStep(f"I need the birthplace of {person}.", f"{person} born", hits)],
                                      f"{person} was born in {city}.", city)
    return {"id": f"q{i}", "split": "dev" if i % 10 == 0 else "train", "question": question, "answers": [city],
            "prompt": instruction(question), "completion": completion}


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    rng = random.Random(0)
    rows = [_demo(i, rng) for i in range(40)]
    path = tmp_path_factory.mktemp("demos") / "demos.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path, rows


@pytest.fixture(scope="module")
def base_model(demos, tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny")
    texts = [r["prompt"] + r["completion"] for r in demos[1]]
    bootstrap_tiny(TinyModelParams(vocab_size=400, hidden_size=32, layers=2, heads=2, kv_heads=1,
                                   intermediate_size=64, max_positions=512), texts, out)
    return out


def test_loss_covers_exactly_the_agents_own_tokens(demos, base_model):
    _, tokenizer = load_model(str(base_model))
    d = demos[1][0]
    example = encode_demo(tokenizer, d["prompt"], d["completion"], max_length=10_000)
    own = [t for t, label in zip(example["input_ids"], example["labels"]) if label != IGNORE]
    assert own == [label for label in example["labels"] if label != IGNORE]
    spans = environment_spans(d["completion"])
    model_text, position = "", 0
    for start, end in spans:
        model_text += d["completion"][position:start]
        position = end
    model_text += d["completion"][position:]
    assert tokenizer.decode(own[:-1]) == model_text and own[-1] == tokenizer.eos_token_id
    assert "<information>" not in tokenizer.decode(own) and "Question:" not in tokenizer.decode(own)
    assert len(encode_demo(tokenizer, d["prompt"], d["completion"], max_length=20)["input_ids"]) == 20


def _params(**kw) -> SFTParams:
    return SFTParams(**{"max_steps": 12, "batch_size": 4, "learning_rate": 3e-3, "save_steps": 4,
                        "logging_steps": 1, "eval_steps": 6, "warmup_ratio": 0.0, **kw})


class _Interrupt(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 6:
            raise KeyboardInterrupt("interrupted at step 6")


def test_training_learns_and_a_resumed_run_ends_with_the_same_model(demos, base_model, tmp_path):
    model, tokenizer = load_model(str(base_model))
    straight = train_sft(_params(), model, tokenizer, demos[0], tmp_path / "a", tmp_path / "a-ckpt")
    log = [json.loads(line) for line in (tmp_path / "a/train_log.jsonl").read_text().splitlines()]
    losses = [row["loss"] for row in log if "loss" in row]
    assert straight["steps"] == 12 and losses[-1] < losses[0] and straight["eval_loss"] > 0
    assert straight["dev_examples"] == 4 and straight["tokens_per_s"] > 0

    model, tokenizer = load_model(str(base_model))
    with pytest.raises(KeyboardInterrupt):
        train_sft(_params(), model, tokenizer, demos[0], tmp_path / "b", tmp_path / "b-ckpt", callbacks=[_Interrupt()])
    model, tokenizer = load_model(str(base_model))  # a fresh process would start from the base weights again
    resumed = train_sft(_params(), model, tokenizer, demos[0], tmp_path / "b", tmp_path / "b-ckpt")
    assert resumed["resumed_from_step"] == 4 and resumed["steps"] == 12

    a, _ = load_model(str(tmp_path / "a"))
    b, _ = load_model(str(tmp_path / "b"))
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.allclose(x, y, atol=1e-5), name
