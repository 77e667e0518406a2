"""SFT on a real tiny model built from scratch: loss masking, training, and resume after an interruption."""

from __future__ import annotations

import json
import logging
import random
import shutil
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
import torch
from transformers import TrainerCallback

from searchlab.agent.protocol import (
    DemoStep,
    environment_spans,
    instruction,
    render_demonstration,
)
from searchlab.model import bootstrap_tiny, load_model
from searchlab.params import ModelParams, TinyModelParams, TinyPretrainParams
from searchlab.progress import quiet_libraries
from searchlab.retrieval.base import Hit
from searchlab.train.base import build_base, start_model
from searchlab.train.common import resume_point
from searchlab.train.config import SFTParams
from searchlab.train.launch import LaunchError
from searchlab.train.pretrain import copy_accuracy, pretraining_examples
from searchlab.train.sft import IGNORE, SFTJob, encode_demo, run_sft, train_sft
from tests.conftest import processes_running

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
    def __init__(self, step: int = 6):
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise KeyboardInterrupt(f"interrupted at step {self.step}")


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


def test_cpu_bf16_trains_under_bfloat16_autocast_and_keeps_float32_weights(demos, base_model, tmp_path):
    model, tokenizer = load_model(str(base_model))
    seen = set()
    hook = model.lm_head.register_forward_hook(lambda module, args, out: seen.add(out.dtype) if module.training
                                               else None)
    figures = train_sft(_params(max_steps=4, cpu_bf16=True, eval_steps=100), model, tokenizer, demos[0],
                        tmp_path / "out", tmp_path / "ckpt")
    hook.remove()
    assert seen == {torch.bfloat16} and figures["steps"] == 4  # the training forwards ran in bfloat16
    trained, _ = load_model(str(tmp_path / "out"))
    assert {p.dtype for p in trained.parameters()} == {torch.float32}
    fresh, _ = load_model(str(base_model))
    assert any(not torch.equal(a, b) for a, b in zip(trained.parameters(), fresh.parameters()))


def test_resume_skips_and_deletes_checkpoints_a_crash_left_half_written(demos, base_model, tmp_path, caplog):
    ckpt = tmp_path / "ckpt"
    model, tokenizer = load_model(str(base_model))
    with pytest.raises(KeyboardInterrupt):
        train_sft(_params(), model, tokenizer, demos[0], tmp_path / "out", ckpt, callbacks=[_Interrupt(9)])
    assert sorted(p.name for p in ckpt.glob("checkpoint-*")) == ["checkpoint-4", "checkpoint-8"]
    # the Trainer writes trainer_state.json last: a kill or a full disk during the save of step 8 leaves the rest
    (ckpt / "checkpoint-8/trainer_state.json").unlink()

    model, tokenizer = load_model(str(base_model))
    with caplog.at_level(logging.WARNING, logger="searchlab.train.common"):
        resumed = train_sft(_params(), model, tokenizer, demos[0], tmp_path / "out", ckpt)
    assert resumed["resumed_from_step"] == 4 and resumed["steps"] == 12
    assert f"deleting incomplete checkpoint {ckpt / 'checkpoint-8'}" in caplog.text

    # other half-written saves: trainer_state.json cut short, weights missing; a complete checkpoint-12 stays newest
    shutil.copytree(ckpt / "checkpoint-12", ckpt / "checkpoint-16")
    state = (ckpt / "checkpoint-16/trainer_state.json").read_text()
    (ckpt / "checkpoint-16/trainer_state.json").write_text(state[: len(state) // 2])
    shutil.copytree(ckpt / "checkpoint-12", ckpt / "checkpoint-20")
    (ckpt / "checkpoint-20/model.safetensors").unlink()
    assert resume_point(ckpt) == str(ckpt / "checkpoint-12")
    assert sorted(p.name for p in ckpt.glob("checkpoint-*")) == ["checkpoint-12", "checkpoint-8"]
    assert resume_point(tmp_path / "fresh") is None


@pytest.mark.slow
def test_a_failing_worker_s_exception_is_in_the_launch_error(demos, base_model, tmp_path):
    # every demonstration in the dev split: the worker's demo_datasets raises
    dev_only = tmp_path / "dev-only.jsonl"
    dev_only.write_text("".join(json.dumps({**row, "split": "dev"}) + "\n" for row in demos[1]))
    with pytest.raises(LaunchError) as failure:
        run_sft(SFTJob(model=ModelParams(), sft=_params(), start=str(base_model), demos=dev_only,
                       out_dir=tmp_path / "out", work_dir=tmp_path / "work"))
    message = str(failure.value)
    assert f"ValueError: {dev_only}: no training demonstrations" in message and "exit status 1" in message
    assert 'in demo_datasets\n    raise ValueError(f"{demos_jsonl}: no training demonstrations"' in message


def test_a_worker_that_fills_the_disk_is_reported_as_a_full_disk_naming_the_folder(tmp_path):
    from searchlab.files import no_space_message
    from searchlab.train.launch import launch
    from tests.searchlab.train.full_disk_job import FullDiskJob

    with pytest.raises(LaunchError) as failure:
        launch("tests.searchlab.train.full_disk_job", FullDiskJob(work_dir=tmp_path), tmp_path / "job")
    message = no_space_message(failure.value, tmp_path / "data")
    assert message is not None and message.startswith(f"{tmp_path / 'job'}: No space left on device; free space")


@pytest.mark.slow
def test_accelerate_job_dies_with_a_killed_stage_and_the_rerun_resumes_to_the_same_model(demos, base_model, tmp_path):
    params = _params(max_steps=150, save_steps=5, eval_steps=1000, logging_steps=10)
    straight = run_sft(SFTJob(model=ModelParams(), sft=params, start=str(base_model), demos=demos[0],
                              out_dir=tmp_path / "a", work_dir=tmp_path / "a-work"))
    assert straight["steps"] == 150 and straight["resumed_from_step"] == 0

    # the stage process, killed with SIGKILL (no cleanup) once training has checkpointed
    work = tmp_path / "b-work"
    scratch = SFTJob(model=ModelParams(), sft=params, start=str(base_model), demos=demos[0],
                     out_dir=tmp_path / "b-scratch", work_dir=work)
    stage = subprocess.Popen([sys.executable, "-c", (
        "from searchlab.train.sft import SFTJob, run_sft; "
        f"run_sft(SFTJob.model_validate_json({scratch.model_dump_json()!r}))")])
    deadline = time.monotonic() + 240
    # checkpoint 15 is in the second epoch (9 steps each): the resumed run must see that epoch in the same order
    while not (work / "checkpoints/checkpoint-15/trainer_state.json").is_file():
        assert stage.poll() is None and time.monotonic() < deadline, "the job never checkpointed"
        time.sleep(0.05)
    stage.kill()
    stage.wait()
    assert not (work / "result.json").exists()  # killed mid-training, not after

    # the workers notice their launcher is gone and exit instead of training on beside the rerun
    deadline = time.monotonic() + 15
    while processes_running(str(work / "job.json")) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert processes_running(str(work / "job.json")) == [] and not (work / "result.json").exists()

    resumed = run_sft(scratch.model_copy(update={"out_dir": tmp_path / "b"}))
    assert 15 <= resumed["resumed_from_step"] < 150 and resumed["steps"] == 150
    a, _ = load_model(str(tmp_path / "a"))
    b, _ = load_model(str(tmp_path / "b"))
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.allclose(x, y, atol=1e-5), name


def _passage_loss(model, tokenizer, texts: list[str]) -> float:
    with torch.no_grad():
        return sum(model(**(batch := tokenizer(t, return_tensors="pt")), labels=batch["input_ids"]).loss.item()
                   for t in texts) / len(texts)


@pytest.mark.slow
def test_the_base_model_is_the_tiny_model_pretrained_on_the_corpus(demos, tmp_path, capfd, caplog):
    passages = [f'"{p}"\n{p} was born in {c}. {p} lives in {c}.' for p, c in zip(
        [f"Person{i} Holm" for i in range(40)], CITIES * 7)]
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "contents": t}) + "\n" for i, t in enumerate(passages)))
    model = ModelParams(tiny=TinyModelParams(vocab_size=400, hidden_size=32, layers=2, heads=2, kv_heads=1,
                                             intermediate_size=64, max_positions=512,
                                             pretrain={"epochs": 3, "copy_drills": 40, "batch_size": 8,
                                                       "learning_rate": 3e-3}))
    work, out = tmp_path / "work", tmp_path / "base"
    out.mkdir()
    quiet_libraries()  # as every stage run does first
    figures = build_base(model, corpus, demos[0], out, work)
    assert figures["pretrain_steps"] == 30 and figures["pretrain_examples"] == 80
    assert start_model(out) == str(out)

    before, tokenizer = load_model(str(work / "initial"))  # the fresh model the tokenizer was trained with
    after, _ = load_model(str(out))
    assert _passage_loss(after, tokenizer, passages[:8]) < _passage_loss(before, tokenizer, passages[:8]) - 1.0
    # SFT starts from it
    with caplog.at_level(logging.INFO, logger="searchlab"):
        sft = run_sft(SFTJob(model=model, sft=_params(max_steps=4, logging_steps=1), start=start_model(out),
                             demos=demos[0], out_dir=tmp_path / "sft", work_dir=tmp_path / "sft-work"))
    assert sft["steps"] == 4 and not any(name.startswith("pretrain") for name in sft)

    # the console: one progress line per phase from the workers, not the Trainer's dicts and bars
    printed = "".join(capfd.readouterr())
    for noise in ("{'loss'", "'train_runtime'", "Writing model shards", "Truncating train dataset", "it/s]"):
        assert noise not in printed, noise
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("sft: step 4/4  loss ") for line in lines), lines


def test_a_base_model_that_is_a_checkpoint_is_named_not_copied(tmp_path):
    assert build_base(ModelParams(name_or_path="/models/qwen"), tmp_path / "c.jsonl", tmp_path / "d.jsonl", tmp_path,
                      tmp_path / "work") == {}
    assert start_model(tmp_path) == "/models/qwen" and not (tmp_path / "work").exists()


def test_copy_drills_repeat_title_words_set_in_passage_text_with_the_loss_on_the_repeat_only(base_model, tmp_path):
    tokenizer = load_model(str(base_model))[1]
    titles = [f"{city} River" for city in CITIES] + CITIES
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "contents": f'"{t}"\n{t} is a place by the sea.'}) + "\n"
                              for i, t in enumerate(titles)))
    examples = pretraining_examples(tokenizer, [json.loads(line)["contents"] for line in corpus.read_text().splitlines()],
                                    TinyPretrainParams(copy_drills=40, max_length=64), seed=0)
    passages = [e for e in examples if IGNORE not in e["labels"]]
    drills = [e for e in examples if IGNORE in e["labels"]]
    assert len(passages) == len(titles) and len(drills) == 40
    assert all(p["labels"] == p["input_ids"] and p["input_ids"][-1] == tokenizer.eos_token_id for p in passages)
    lengths, starts, gaps = set(), set(), set()
    for d in drills:
        context = d["input_ids"][:d["labels"].count(IGNORE)]
        repeat = [t for t in d["labels"] if t != IGNORE]
        assert repeat[-1] == tokenizer.eos_token_id
        words, repeat = tokenizer.decode(repeat[:-1]).split(), repeat[:-1]
        assert len(set(words)) == len(words) and set(words) <= set(CITIES) | {"River"}
        # the context holds the same tokens once, at a varying place and distance from the repeat
        first = [i for i in range(len(context)) if context[i:i + len(repeat)] == repeat]
        assert len(first) == 1
        lengths.add(len(words))
        starts.add(first[0])
        gaps.add(len(context) - first[0] - len(repeat))
    assert min(lengths) >= 3 and max(lengths) <= 7 and len(lengths) > 1  # at most the 7 distinct words there are
    assert len(starts) > 5 and len(gaps) > 5 and min(gaps) >= 1  # a separator at least, then text of any length


class _InductionOracle(torch.nn.Module):
    """A model that copies perfectly: it finds the longest earlier match of the text so far and predicts what followed."""

    device = torch.device("cpu")

    def __init__(self, vocab_size: int):
        super().__init__()
        self.vocab_size = vocab_size

    def forward(self, input_ids):
        ids = input_ids[0].tolist()
        logits = torch.zeros(1, len(ids), self.vocab_size)
        for i in range(len(ids)):
            longest, follower = 0, None
            for j in range(i):
                match = 0
                while match <= j and ids[j - match] == ids[i - match]:
                    match += 1
                if match and match >= longest:
                    longest, follower = match, ids[j + 1]
            if follower is not None:
                logits[0, i, follower] = 1.0
        return SimpleNamespace(logits=logits)


def test_copy_accuracy_scores_a_perfect_copier_1_and_an_untrained_model_near_0(base_model):
    model, tokenizer = load_model(str(base_model))
    passages = [f'"{city} River"\n{city} River runs by {city}.' for city in CITIES]
    assert copy_accuracy(_InductionOracle(len(tokenizer)), tokenizer, passages, seed=0, lists=5, size=6) == 1.0
    assert copy_accuracy(model, tokenizer, passages, seed=0, lists=5, size=6) < 0.3


def test_a_worker_s_searchlab_log_records_are_relayed_to_the_launching_process(tmp_path, caplog):
    import logging
    import threading

    from searchlab.train.launch import _relay_logs, run_job

    job = tmp_path / "job.json"
    job.write_text(json.dumps({"progress": str(tmp_path / "progress.log")}))
    package = logging.getLogger("searchlab")
    handlers, level = list(package.handlers), package.level

    def main(_job):
        logging.getLogger("searchlab.rl").info("rl: step 3/10 (ETA 0:07)")
        logging.getLogger("searchlab.rl").warning("two\nlines")

    try:
        run_job(main, str(job))
    finally:
        for handler in set(package.handlers) - set(handlers):
            package.removeHandler(handler)
            handler.close()
        package.setLevel(level)
    done = threading.Event()
    done.set()
    caplog.clear()  # only what the relay logs
    with caplog.at_level(logging.INFO, logger="searchlab"):
        _relay_logs(tmp_path / "progress.log", done)
    assert [(r.name, r.levelname, r.getMessage()) for r in caplog.records] == [
        ("searchlab.rl", "INFO", "rl: step 3/10 (ETA 0:07)"), ("searchlab.rl", "WARNING", "two ⏎ lines")]


def test_the_progress_line_shows_a_figure_not_logged_yet_as_a_dash(caplog):
    import logging

    from searchlab.train.common import ProgressLog
    from searchlab.train.sft import SFT_PROGRESS

    progress = ProgressLog("sft: step", SFT_PROGRESS, total=400)
    progress.latest.update({"loss": 1.23456})
    with caplog.at_level(logging.INFO, logger="searchlab.train"):
        progress.step(5)
        progress.latest.update({"loss": 0.5, "eval_loss": 0.75})
        progress.step(400)
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "sft: step 5/400  loss 1.235  eval loss -"
    assert lines[1].startswith("sft: step 400/400  loss 0.500  eval loss 0.750  (")
