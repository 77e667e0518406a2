"""The multi-process path of a GPU cluster, on 2 CPU processes: ``rl`` and ``selfplay`` under ``accelerate launch``.

Each run goes through the stage's own entry point (:func:`searchlab.rl.train.run_rl`,
:func:`searchlab.selfplay.train.run_selfplay`), so the workers are real
``accelerate launch`` processes (torchrun, joined with gloo on the CPU) that
load the policy from a folder, open their own BM25 retriever over a real index,
roll out, gather and train; nothing of what is tested is replaced.

What "matches the one-process run's counts" means. ``rl.questions_per_step`` and
``selfplay.proposals_per_round`` are per process (params.py says so), so a run
of P processes rolls out P times the episodes of a one-process run in the same
number of optimizer steps; every count below is that of the one-process run
with the per-step batch multiplied by P, and nothing else differs:

* rl: both runs take ``rl.steps`` optimizer steps, end at epoch 1.0 (one pass
  over the slots, however many processes draw from them), checkpoint at the same
  steps and train on the same number of questions; each kept step of
  ``trajectories.jsonl`` holds P × questions_per_step × num_generations
  episodes (every process's, not the main process's alone), in whole groups
  of num_generations episodes of one question; the processes roll out with
  their own seeds and questions, so their halves of a step differ.
* selfplay: both runs play ``selfplay.rounds`` rounds of one optimizer step;
  each round of ``questions.jsonl`` holds P × proposals_per_round ×
  num_generations proposals; the processes of a round propose for different
  seed answers while the seeds last; no question is verified twice in the
  run, even when two processes propose it in the same round (the seeds below
  are fewer than a round of two processes asks for, so they do); the figures
  count exactly the proposals and verified questions of ``questions.jsonl``.

The self-play policy is a real tiny Qwen2 network whose generation is steered
to a script (its logits are forced, as in ``tests/searchlab/selfplay``), so
that proposals pass verification; it reaches the workers as the model
folder's own code (``trust_remote_code``). The rl policy is the tiny network
as it is.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pytest

from searchlab.jsonl import read_jsonl
from searchlab.params import ModelParams, RetrieverParams, RolloutParams
from searchlab.rl.config import RLParams
from searchlab.rl.train import RLJob, run_rl
from searchlab.scoring import normalize_answer
from searchlab.selfplay.config import SelfPlayParams
from searchlab.selfplay.train import SelfPlayJob, run_selfplay
from searchlab.synth.config import QAParams
from tests.searchlab.rl.rlworld import QUESTIONS, SEED
from tests.toyworld import DOCS, make_model, make_tokenizer, write_corpus

pytestmark = pytest.mark.slow  # four accelerate launches of real training: a minute or more on two cores

PROCESSES = 2
RETRIEVER = RetrieverParams(threads=1, topk=2)
QA = QAParams(heldout_share=0.0)

# the seed answers of self-play (the titles of its corpus) and what the scripted proposer asks for each
SEED_QUESTIONS = {"Tokyo": "What is the capital of Japan?", "Oslo": "What is the capital of Norway?",
                  "Warsaw": "What is the capital of Poland?"}

# The model folder's own code: the tiny network, whose generate() writes script()'s turns. The solver answers a
# proposed question from passages (the proposer's, replayed, or its own search) and not without them, so every
# proposal passes verification unless it repeats a kept question.
SCRIPTED_POLICY = '''
"""A real tiny Qwen2 network whose generate() writes a script's turns (tests/searchlab/rl/test_multiprocess.py)."""

import torch
import transformers
from transformers import AutoTokenizer, Qwen2ForCausalLM

from searchlab.agent.text import encode_completion

PROPOSALS = {proposals!r}
ANSWERS = {{question: answer for answer, question in PROPOSALS.items()}}


def script(text):
    if "\\nAnswer: " in text:  # the proposer's prompt
        answer, done = text.split("\\nAnswer: ", 1)[1].split("\\n", 1)
        if "<information>" not in done:
            return f"<think>About {{answer}}.</think>\\n<search> {{answer}} </search>"
        return f"<think>Enough.</think>\\n<question> {{PROPOSALS.get(answer, 'What is this?')}} </question>"
    question, done = text.split("Question: ", 1)[1].split("\\n", 1)
    known = ANSWERS.get(question, "unknown") if "<information>" in done else "unknown"
    if text.endswith("<answer>"):  # a forced one-turn answer: the verifier's checks
        return f" {{known}} </answer>"
    if "<information>" not in done:
        return f"<search> {{question}} </search>"
    return f"<answer> {{known}} </answer>"


class ForceTokens(transformers.LogitsProcessor):
    def __init__(self, rows, start, eos):
        self.rows, self.start, self.eos = rows, start, eos

    def __call__(self, input_ids, scores):
        s = input_ids.shape[1] - self.start
        forced = torch.full_like(scores, float("-inf"))
        for r, ids in enumerate(self.rows):
            forced[r, ids[s] if s < len(ids) else self.eos] = 0.0
        return forced


class ScriptedPolicy(Qwen2ForCausalLM):
    def generate(self, input_ids=None, attention_mask=None, **kwargs):
        if not hasattr(self, "script_tokenizer"):
            self.script_tokenizer = AutoTokenizer.from_pretrained(self.name_or_path)
        tok = self.script_tokenizer
        rows = [encode_completion(tok, script(tok.decode([i for i, m in zip(ids, mask) if m],
                                                         skip_special_tokens=False)))
                for ids, mask in zip(input_ids.tolist(), attention_mask.tolist())]
        kwargs["logits_processor"] = transformers.LogitsProcessorList(
            [ForceTokens(rows, input_ids.shape[1], tok.eos_token_id)])
        return super().generate(input_ids=input_ids, attention_mask=attention_mask, **kwargs)
'''.format(proposals=SEED_QUESTIONS)


@pytest.fixture(scope="module")
def world(tmp_path_factory, toy_index):
    """Model folders (the tiny policy; the scripted one), rl's questions and corpus, self-play's corpus and qa
    folders, and a real BM25 index of DOCS (the session's, tests/searchlab/conftest.py's toy_index, linked)."""
    root = tmp_path_factory.mktemp("multiprocess")
    tokenizer = make_tokenizer(tags_special=True)
    policy = root / "policy"
    make_model(tokenizer, SEED).save_pretrained(policy)
    tokenizer.save_pretrained(policy)
    scripted = root / "scripted"
    make_model(tokenizer).save_pretrained(scripted)
    tokenizer.save_pretrained(scripted)
    (scripted / "scripted_policy.py").write_text(SCRIPTED_POLICY)
    config = json.loads((scripted / "config.json").read_text())
    config["auto_map"] = {"AutoModelForCausalLM": "scripted_policy.ScriptedPolicy"}
    (scripted / "config.json").write_text(json.dumps(config))

    (root / "train.jsonl").write_text("".join(
        json.dumps({"id": i, "question": q, "answers": a, "evidence": e, "type": "single", "features": {"bucket": b}})
        + "\n" for i, q, a, e, b in QUESTIONS))
    write_corpus(root / "corpus.jsonl", DOCS)
    (root / "index").symlink_to(toy_index, target_is_directory=True)
    seeds = root / "selfplay-corpus"  # the seed answers are its titles
    seeds.mkdir()
    write_corpus(seeds / "corpus.jsonl", DOCS, ("tokyo", "oslo", "warsaw"))
    qa = root / "qa"
    qa.mkdir()
    (qa / "train.jsonl").write_text(json.dumps({"id": "q1", "question": "Who discovered penicillin?",
                                                "answers": ["Alexander Fleming"]}) + "\n")
    return root


@pytest.fixture(autouse=True)
def cpu_only(monkeypatch, tmp_path):
    """Workers see no GPU (gloo on the CPU, as on a machine without one), one torch thread each, and load the
    scripted policy's code from a module cache of the test's own."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("HF_MODULES_CACHE", str(tmp_path / "hf-modules"))


ROLLOUT = RolloutParams(max_new_tokens=12, max_turns=3, topk=2, max_information_tokens=64, batch_size=8)


def _rl(processes: int) -> RLParams:
    return RLParams(steps=2, questions_per_step=2, num_generations=2, learning_rate=5e-3, save_steps=1,
                    logging_steps=1, samples=0, seed=SEED, threads=1, num_processes=processes)


def _train_rl(world: Path, out: Path, processes: int) -> tuple[dict, float]:
    started = time.perf_counter()
    figures = run_rl(RLJob(model=ModelParams(), rollout=ROLLOUT, rl=_rl(processes), retriever=RETRIEVER,
                           start=world / "policy", questions=world / "train.jsonl", corpus=world / "corpus.jsonl",
                           index=world / "index", out_dir=out / "out", work_dir=out / "work"))
    return figures, time.perf_counter() - started


def _rl_counts(figures: dict, out: Path) -> dict:
    """What the two runs must agree on, whatever the number of processes."""
    log = list(read_jsonl(out / "out/train_log.jsonl"))
    steps = [row for row in log if "reward" in row]
    return {"steps": figures["steps"], "questions": figures["questions"],
            "logged_steps": [row["step"] for row in steps], "epoch": log[-1]["epoch"],
            "checkpoints": sorted(p.name for p in (out / "work/checkpoints").glob("checkpoint-*")),
            "curriculum_rows": len(list(read_jsonl(out / "out/curriculum.jsonl")))}


@pytest.mark.slow
def test_rl_in_two_processes_gathers_every_process_s_episodes_and_matches_one_process_counts(world, tmp_path):
    one, one_seconds = _train_rl(world, tmp_path / "one", 1)
    two, two_seconds = _train_rl(world, tmp_path / "two", PROCESSES)
    rl = _rl(PROCESSES)
    assert _rl_counts(two, tmp_path / "two") == _rl_counts(one, tmp_path / "one") == {
        "steps": rl.steps, "questions": len(QUESTIONS), "logged_steps": [1, 2], "epoch": 1.0,
        "checkpoints": ["checkpoint-1", "checkpoint-2"], "curriculum_rows": rl.steps}

    per_process = rl.questions_per_step * rl.num_generations
    for processes, out in ((1, tmp_path / "one"), (PROCESSES, tmp_path / "two")):
        episodes = list(read_jsonl(out / "out/trajectories.jsonl"))
        by_step = Counter(e["step"] for e in episodes)
        # every step is kept at this size (keep_every = max(1, steps // 10)), with every process's episodes
        assert by_step == {step: processes * per_process for step in range(rl.steps)}, out
        for step in range(rl.steps):
            rows = [e for e in episodes if e["step"] == step]
            groups = [rows[g:g + rl.num_generations] for g in range(0, len(rows), rl.num_generations)]
            assert all(len({e["question"] for e in group}) == 1 for group in groups)  # whole groups of one question

    # the processes roll out with seeds of their own: their parts of a step are not the same episodes
    episodes = list(read_jsonl(tmp_path / "two/out/trajectories.jsonl"))
    for step in range(rl.steps):
        rows = [(e["id"], e["completion"]) for e in episodes if e["step"] == step]
        assert rows[:per_process] != rows[per_process:]
    print(f"rl: 1 process {one_seconds:.1f} s, {PROCESSES} processes {two_seconds:.1f} s")


def _selfplay(processes: int) -> SelfPlayParams:
    return SelfPlayParams(rounds=2, proposals_per_round=2, solver_questions=1, num_generations=2,
                          learning_rate=5e-3, samples=0, threads=1, num_processes=processes)


SELFPLAY_ROLLOUT = RolloutParams(max_new_tokens=40, max_turns=3, topk=2, max_information_tokens=64, batch_size=8)


def _play(world: Path, out: Path, processes: int) -> tuple[dict, float]:
    started = time.perf_counter()
    figures = run_selfplay(SelfPlayJob(model=ModelParams(trust_remote_code=True), rollout=SELFPLAY_ROLLOUT,
                                       selfplay=_selfplay(processes), qa=QA, retriever=RETRIEVER,
                                       start=world / "scripted", corpus=world / "selfplay-corpus", qa_dir=world / "qa",
                                       index=world / "index", out_dir=out / "out", work_dir=out / "work"))
    return figures, time.perf_counter() - started


@pytest.mark.slow
def test_selfplay_in_two_processes_keeps_each_question_once_and_matches_one_process_counts(world, tmp_path):
    one, one_seconds = _play(world, tmp_path / "one", 1)
    two, two_seconds = _play(world, tmp_path / "two", PROCESSES)
    params = _selfplay(PROCESSES)
    per_process = params.proposals_per_round * params.num_generations
    for processes, figures, out in ((1, one, tmp_path / "one"), (PROCESSES, two, tmp_path / "two")):
        records = list(read_jsonl(out / "out/questions.jsonl"))
        assert figures["steps"] == figures["rounds"] == params.rounds
        assert Counter(r["round"] for r in records) == {k: processes * per_process for k in range(params.rounds)}
        assert len(list(read_jsonl(out / "out/rounds.jsonl"))) == params.rounds
        verified = [r for r in records if r["verified"]]
        assert figures["proposals"] == len(records) and figures["verified"] == len(verified) > 0
        # each question kept once in the whole run; every other proposal of it is a duplicate
        kept = Counter(normalize_answer(r["question"]) for r in verified)
        assert all(n == 1 for n in kept.values()), kept
        for r in records:
            assert r["verified"] or r["reason"] == "duplicate", r  # the script's proposals all pass otherwise
            assert r["question"] == SEED_QUESTIONS[r["answer"]]
        for k in range(params.rounds):
            answers = [r["answer"] for r in records if r["round"] == k]
            shares = [answers[p * per_process:(p + 1) * per_process:params.num_generations]
                      for p in range(processes)]
            # each process proposes for distinct seeds, and the processes for different ones while seeds last
            assert all(len(set(share)) == len(share) for share in shares)
            assert len(set(sum(shares, []))) == min(len(SEED_QUESTIONS), processes * params.proposals_per_round)
    # two processes asked for four seeds of three in round 0: two of them proposed for the same answer, and the
    # later one's question was turned into a duplicate; round 0 kept every seed's question once
    records = list(read_jsonl(tmp_path / "two/out/questions.jsonl"))
    assert sorted(r["answer"] for r in records if r["verified"] and r["round"] == 0) == sorted(SEED_QUESTIONS)
    assert not [r for r in records if r["verified"] and r["round"] == 1]
    print(f"selfplay: 1 process {one_seconds:.1f} s, {PROCESSES} processes {two_seconds:.1f} s")
