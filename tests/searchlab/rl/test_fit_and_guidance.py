"""RL fits what it is shown, and expert guidance puts a demonstration into the groups the policy fails (a real tiny
model, a real BM25 index, TRL's real step, the stage's real reward)."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path

import pytest

from searchlab.agent.replay import model_turns, replay
from searchlab.questions.record import read_questions
from searchlab.rl.env import SearchEpisodes
from searchlab.rl.rewards import RewardBreakdown
from searchlab.rl.train import build_trainer
from tests.searchlab.rl.rlworld import QUESTIONS, ROLLOUT, rl_job, rl_params as _rl, seeded_policy as _model

# the fixtures world, tokenizer and searching_model: this package's conftest.py


def _demos(tmp_path: Path) -> Path:
    """demos.jsonl of the rl world's questions: search the answer's last word, then answer (solver demonstrations)."""
    path = tmp_path / "demos.jsonl"
    with path.open("w") as f:
        for qid, question, answers, _, _ in QUESTIONS:
            query = answers[0].split()[-1]
            completion = (f"<search> {query} </search>\n\n<information>(written by synthesis)</information>\n\n"
                          f"<answer> {answers[0]} </answer>")
            f.write(json.dumps({"id": qid, "split": "train", "role": "solver", "question": question,
                                "answers": answers, "prompt": question, "completion": completion}) + "\n")
    return path


def test_guidance_puts_the_demonstration_into_every_group_the_policy_fails(world, tokenizer, tmp_path):
    questions, corpus, retriever = world
    rl = _rl(num_generations=3, questions_per_step=4, guidance={"enabled": True},
             reward={"evidence_share": 0.5})
    demos = _demos(tmp_path)
    # the random policy answers nothing right: every group fails, and every one is guided
    trainer, _ = build_trainer(rl_job(rl, questions, corpus, tmp_path, demos=demos),
                               _model(tokenizer), tokenizer, retriever)
    batch = trainer._generate_and_score_completions([{"prompt": str(i)} for i in range(12)])
    last = trainer.episodes.last
    metrics = trainer._metrics["train"]
    assert metrics["guidance/all_wrong"][-1] == 1.0 and metrics["guidance/guided"][-1] == 4
    assert last.guided == [False, False, True] * 4
    demo_of = {d["id"]: model_turns(d["completion"]) for d in map(json.loads, demos.read_text().splitlines())}
    loss_mask = batch["completion_mask"] * batch["tool_mask"]
    for row in range(2, 12, 3):
        question, episode, scored = last.questions[row], last.episodes[row], last.rewards[row]
        assert episode == replay(tokenizer, retriever, question.question, demo_of[question.id], ROLLOUT)
        assert scored.outcome == 1.0 and scored.evidence_share == 1.0 and scored.total == pytest.approx(1.5)
        # the demonstration's own tokens are in the loss, the passages the environment inserted are not
        n = len(episode.completion_ids)
        assert loss_mask[row, :n].tolist() == [1 - m for m in episode.env_mask] and 0 in episode.env_mask[:n]
        assert batch["advantages"][row] > 0 > batch["advantages"][row - 1]
    assert metrics["episode/evidence_share"][-1] > 0


def test_the_curriculum_learns_the_policy_s_own_outcome_not_the_guided_demonstration_s(world, tokenizer, tmp_path):
    questions, corpus, retriever = world
    # the difficulty curriculum keeps every group outcome of its level in a window: each group here failed
    rl = _rl(num_generations=3, questions_per_step=4, guidance={"enabled": True}, curriculum=["difficulty"],
             difficulty={"window": 8})
    trainer, _ = build_trainer(rl_job(rl, questions, corpus, tmp_path, demos=_demos(tmp_path)),
                               _model(tokenizer), tokenizer, retriever)
    trainer._generate_and_score_completions([{"prompt": str(i)} for i in range(12)])
    last = trainer.episodes.last
    assert sum(last.guided) == 4 and all(r.outcome == 1.0 for r, g in zip(last.rewards, last.guided) if g)
    assert trainer.episodes.curriculum.difficulty.recent == [0.0] * 4  # 0 of 2 own episodes right, not 1 of 3


def test_guidance_without_demonstrations_is_refused_naming_the_key(world, tokenizer, tmp_path):
    questions, corpus, retriever = world
    with pytest.raises(ValueError, match="rl.guidance.enabled"):
        build_trainer(rl_job(_rl(guidance={"enabled": True}), questions, corpus, tmp_path,
                             demos=tmp_path / "missing.jsonl"),
                      _model(tokenizer), tokenizer, retriever)


class Negated(SearchEpisodes):
    """The environment with the stage's reward, sign flipped: the control that a fitting test must fail."""

    def score(self, episode, question):
        r = super().score(episode, question)
        return RewardBreakdown(total=-r.total, outcome=r.outcome, format=r.format, evidence=r.evidence)


def _sampled_em(model, tokenizer, retriever, questions_jsonl, rollout) -> float:
    """Mean EM of ``model``'s sampled episodes on the questions, 16 each, from a fixed seed."""
    from searchlab.agent.rollout import rollout as play
    from searchlab.jsonl import read_jsonl
    from searchlab.scoring import exact_match

    asked = read_jsonl(questions_jsonl) * 16
    episodes = play(model, tokenizer, retriever, [q["question"] for q in asked],
                    rollout.model_copy(update={"seed": 4321, "batch_size": 96}))
    return sum(exact_match(e.answer or "", q["answers"]) for e, q in zip(episodes, asked)) / len(asked)


@pytest.mark.slow
def test_rl_on_a_fixed_question_set_fits_it_and_a_flipped_reward_does_not(world, tokenizer, searching_model,
                                                                         tmp_path):
    from searchlab.rl.curriculum import Curriculum
    from searchlab.rl.train import training_questions
    from searchlab.rl.trainer import make_search_trainer

    questions, corpus, retriever = world
    # every step trains on all six questions (a uniform step of the pool's size draws each once)
    rl = _rl(steps=12, questions_per_step=len(QUESTIONS), num_generations=4, learning_rate=5e-4, save_steps=100,
             temperature=0.7)
    rollout = ROLLOUT.model_copy(update={"max_turns": 4, "temperature": rl.temperature})
    before = _sampled_em(searching_model, tokenizer, retriever, questions, rollout)
    after = {}
    for name, environment in (("reward", SearchEpisodes), ("negated", Negated)):
        curriculum = Curriculum(training_questions(questions, rl.buckets), [], rl.seed, rl.steps)
        episodes = environment(tokenizer, retriever, curriculum, rollout, rl)
        trainer = make_search_trainer(rl, copy.deepcopy(searching_model), tokenizer, episodes,
                                      tmp_path / name / "checkpoints")
        trainer.train()
        assert len({q.id for q in episodes.last.questions}) == len(QUESTIONS)  # each step: every question
        after[name] = _sampled_em(trainer.model, tokenizer, retriever, questions, rollout)
    print(f"sampled EM on the fixed questions: {before:.3f} before; after {after}")
    assert after["reward"] > before + 0.1
    assert after["negated"] < before


def test_near_miss_re_rolls_the_best_partial_episode_in_place_of_the_worst(world, tokenizer, searching_model,
                                                                          tmp_path):
    from searchlab.rl.env import Group, training_rollout_params

    questions, corpus, retriever = world
    rl = _rl(num_generations=4, questions_per_step=6, near_miss=True, reward={"evidence_share": 0.5})
    trainer, _ = build_trainer(rl_job(rl, questions, corpus, tmp_path),
                               copy.deepcopy(searching_model), tokenizer, retriever)
    env = trainer.episodes
    # gold answers no episode can give: every group is unsolved, and those whose searches found evidence are misses
    asked = [replace(q, answers=["no such answer"]) for q in read_questions(questions)]
    params = training_rollout_params(ROLLOUT, rl, 0, 24)
    episodes = env._rollout(trainer, retriever, [q.question for q in asked for _ in range(4)], params)
    groups = [Group(q, episodes[4 * g:4 * g + 4], [env.score(e, q) for e in episodes[4 * g:4 * g + 4]])
              for g, q in enumerate(asked)]
    misses = [g for g, group in enumerate(groups) if max(r.evidence_share for r in group.rewards) > 0]
    assert misses, "the searching policy found no evidence at all"
    rerolled = env._near_misses(trainer, retriever, groups, params)
    for g, (before, after) in enumerate(zip(groups, rerolled)):
        changed = [i for i in range(4) if after.episodes[i] is not before.episodes[i]]
        if g not in misses:
            assert not after.rerolled and not changed
            continue
        best = max(range(4), key=lambda i: before.rewards[i].evidence_share)
        if before.episodes[best].turns >= ROLLOUT.max_turns and after.episodes == before.episodes:
            continue  # its share was reached only in its last turn: nothing left to re-roll
        assert after.rerolled and len(changed) == 1 and changed[0] != best
        new, source = after.episodes[changed[0]], before.episodes[best]
        assert new.completion.startswith(source.completion[:source.completion.index("</information>")])
        assert new.retrieved[0] == source.retrieved[0] and new.prompt_ids == source.prompt_ids
        assert after.rewards[changed[0]] == env.score(new, asked[g])
        assert before.rewards[changed[0]].total == min(r.total for i, r in enumerate(before.rewards) if i != best)
    assert any(group.rerolled for group in rerolled)


def test_graded_format_credit_fades_out_over_the_steps_the_stage_trains(world, tokenizer, searching_model, tmp_path):
    questions, corpus, retriever = world
    rl = _rl(num_generations=3, questions_per_step=2, reward={"format_credit": "graded", "search_bonus": 0.5,
                                                              "fade_steps": 2})
    trainer, _ = build_trainer(rl_job(rl, questions, corpus, tmp_path),
                               copy.deepcopy(searching_model), tokenizer, retriever)
    paid = {}
    for step in (0, 1, 2):
        trainer.state.global_step = step
        trainer._generate_and_score_completions([{"prompt": str(i)} for i in range(6)])
        last = trainer.episodes.last
        paid[step] = [r.total - r.outcome for r in last.rewards]  # what the format credit added
        assert all(r.total == pytest.approx(r.outcome + r.format + r.evidence) for r in last.rewards)
    # the searching policy's episodes earn some format credit at the start, half of it at step 1, none at step 2
    assert any(x != 0 for x in paid[0]) and all(x == 0 for x in paid[2])
    assert max(map(abs, paid[1])) <= max(map(abs, paid[0])) / 2 + 1e-9
