"""The rl tests' questions, rollout params, trainer params and seeded policy (plain helpers; the fixtures world and
tokenizer are in this package's conftest.py)."""

from __future__ import annotations

from searchlab.params import RLParams, RolloutParams
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
