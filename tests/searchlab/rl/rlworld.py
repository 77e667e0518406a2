"""The rl tests' questions, rollout params, trainer params, jobs and seeded policy (plain helpers; the fixtures
world and tokenizer are in this package's conftest.py)."""

from __future__ import annotations

from pathlib import Path

from searchlab.params import ModelParams, RetrieverParams, RolloutParams
from searchlab.rl.config import RLParams
from searchlab.rl.train import RLJob
from tests.toyworld import make_model

# (id, question, answers, evidence passages of tests/toyworld.py's DOCS, difficulty bucket)
QUESTIONS = [
    ("q1", "Who discovered penicillin?", ["Alexander Fleming"], ["fleming"], "easy"),
    ("q2", "What is the capital of Japan?", ["Tokyo"], ["tokyo"], "easy"),
    ("q3", "What is the capital of Norway?", ["Oslo"], ["oslo"], "medium"),
    ("q4", "Where was Marie Curie born?", ["Warsaw"], ["warsaw"], "medium"),
    ("q5", "What is the highest mountain?", ["Mount Everest"], ["everest"], "hard"),
    ("q6", "What game has a checkered board?", ["Chess"], ["chess"], "hard"),
]
ROLLOUT = RolloutParams(max_new_tokens=12, max_turns=3, topk=2, max_information_tokens=64, batch_size=8)


def rl_params(**kw) -> RLParams:
    return RLParams(**{"steps": 4, "questions_per_step": 2, "num_generations": 3, "learning_rate": 5e-3,
                       "save_steps": 2, "logging_steps": 1, "samples": 0, **kw})


# A random tiny policy rarely ends an episode well, and a group whose episodes all earn the same reward teaches
# nothing: this seed's episodes differ in reward within some groups, so the runs below do learn.
SEED = 7


def seeded_policy(tokenizer):
    return make_model(tokenizer, SEED).train()


def searching_policy(tokenizer, retriever, questions_jsonl, steps: int = 150):
    """The tiny model taught, by a few supervised steps, to end each turn with a search or an answer about evenly,
    after the prompt and after an information block alike: a starting policy whose search count varies."""
    import torch

    from searchlab.agent.protocol import information_block
    from searchlab.agent.text import agent_prompt
    from searchlab.jsonl import read_jsonl

    texts = []
    for q in read_jsonl(questions_jsonl):
        query = q["answers"][0].split()[-1]  # short: a turn is ROLLOUT.max_new_tokens long
        prompt, search = agent_prompt(tokenizer, q["question"]), f"<search> {query} </search>"
        block = information_block(retriever.search([query], 2)[0], 48, lambda t: len(tokenizer(t)["input_ids"]))
        answer = f"<answer> {q['answers'][0]} </answer>"
        texts += [prompt + search, prompt + answer, prompt + search + block + search, prompt + search + block + answer]
    batch = tokenizer(texts, return_tensors="pt", padding=True)
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    model = seeded_policy(tokenizer)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for _ in range(steps):
        loss = model(**batch, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return model


def rl_job(rl: RLParams, questions: Path, corpus: Path, work_dir: Path, out_dir: Path | None = None,
           rollout: RolloutParams = ROLLOUT, **files: Path) -> RLJob:
    """The :class:`RLJob` of the tests' files. ``start`` and ``index`` are the worker's to load (it opens the model
    and the retriever): the tests pass live ones to ``train_rl`` and ``build_trainer`` in-process."""
    return RLJob(model=ModelParams(), rollout=rollout, rl=rl, retriever=RetrieverParams(), start=work_dir,
                 questions=questions, corpus=corpus, index=work_dir, out_dir=out_dir or work_dir / "out",
                 work_dir=work_dir, **files)
