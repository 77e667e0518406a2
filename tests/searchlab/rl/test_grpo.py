"""The rl trainer on a real tiny model and a real BM25 index: masks token by token, learning, exact resume."""

from __future__ import annotations

import copy
import json
import random

import pytest
import torch
from transformers import TrainerCallback

from searchlab.questions.record import QuestionRecord
from searchlab.rl.env import CURRICULUM_FILE, trl_batch
from searchlab.rl.train import build_trainer, train_rl
from tests.searchlab.rl.rlworld import rl_job, rl_params as _rl, seeded_policy as _model
from tests.toyworld import make_model

# world (questions, corpus, BM25 over tests/toyworld.py's DOCS) and tokenizer: this package's conftest.py
pytestmark = pytest.mark.usefixtures("one_thread")  # tests/searchlab/conftest.py's


def test_trl_batch_inverts_the_environment_mask_and_closes_finished_episodes_with_eos():
    from searchlab.agent.episode import Rollout

    done = Rollout("q", "p", prompt_ids=[1], completion_ids=[5, 6, 7, 8], env_mask=[0, 1, 1, 0], finished=True)
    cut = Rollout("q", "p", prompt_ids=[1], completion_ids=[5, 6], env_mask=[0, 1], finished=False)
    batch = trl_batch([done, cut], eos_id=0)
    assert batch["completion_ids"] == [[5, 6, 7, 8, 0], [5, 6]]
    assert batch["env_mask"] == [[1, 0, 0, 1, 0], [1, 0]]
    assert batch["logprobs"] is None and batch["prompt_ids"] == [[1], [1]]


def test_the_loss_covers_exactly_the_model_s_own_tokens(world, tokenizer, tmp_path):
    questions, corpus, retriever = world
    trainer, _ = build_trainer(rl_job(_rl(), questions, corpus, tmp_path), _model(tokenizer), tokenizer, retriever)
    batch = trainer._generate_and_score_completions([{"prompt": str(i)} for i in range(6)])
    episodes = trainer.episodes.last.episodes
    assert len(episodes) == 6 and any(any(e.env_mask) for e in episodes)  # the environment wrote into some
    loss_mask = (batch["completion_mask"] * batch["tool_mask"]).tolist()
    for episode, row, ids in zip(episodes, loss_mask, batch["completion_ids"].tolist()):
        n = len(episode.completion_ids)
        assert ids[:n] == episode.completion_ids
        assert row[:n] == [1 - m for m in episode.env_mask]  # every model token in, every environment token out
        assert not any(row[n:])  # the appended EOS and the padding are out too
    assert batch["advantages"].shape == (6,)


def test_rewards_read_the_parsed_answer_and_groups_share_a_question(world, tokenizer, tmp_path):
    questions, corpus, retriever = world
    trainer, _ = build_trainer(rl_job(_rl(), questions, corpus, tmp_path), _model(tokenizer), tokenizer, retriever)
    trainer._generate_and_score_completions([{"prompt": str(i)} for i in range(6)])
    last = trainer.episodes.last
    assert [q.id for q in last.questions[:3]] == [last.questions[0].id] * 3
    for episode, question, r in zip(last.episodes, last.questions, last.rewards):
        golds = question.answers
        # the information blocks hold the gold passage text, but only the parsed answer is scored
        expected = 1.0 if episode.answer is not None and episode.answer.strip() == golds[0] else 0.0
        assert r.outcome == expected


class _Interrupt(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == 3:
            raise KeyboardInterrupt("interrupted at step 3")


@pytest.mark.parametrize("curriculum", [["difficulty", "noise"]])
def test_a_resumed_run_ends_with_the_weights_and_curriculum_of_an_uninterrupted_one(world, tokenizer, searching_model,
                                                                                    tmp_path, curriculum):
    questions, corpus, retriever = world
    rl = _rl(curriculum=curriculum, difficulty={"advance_at": 0.01, "window": 2}, noise={"start": 0.2, "end": 0.8})
    straight = train_rl(rl_job(rl, questions, corpus, tmp_path / "a-work", tmp_path / "a"),
                        copy.deepcopy(searching_model), tokenizer, retriever)
    assert straight["steps"] == 4
    with pytest.raises(KeyboardInterrupt):
        train_rl(rl_job(rl, questions, corpus, tmp_path / "b-work", tmp_path / "b"),
                 copy.deepcopy(searching_model), tokenizer, retriever, callbacks=[_Interrupt()])
    assert (tmp_path / "b-work/checkpoints/checkpoint-2" / CURRICULUM_FILE).is_file()
    resumed = train_rl(rl_job(rl, questions, corpus, tmp_path / "b-work", tmp_path / "b"),
                       copy.deepcopy(searching_model), tokenizer, retriever)
    assert resumed["resumed_from_step"] == 2 and resumed["steps"] == 4

    from searchlab.model import load_model

    a, _ = load_model(str(tmp_path / "a"))
    b, _ = load_model(str(tmp_path / "b"))
    start = searching_model.state_dict()  # training moved the weights: the comparison below is not of two copies
    assert any(not torch.equal(x, y) for x, y in zip(a.state_dict().values(), start.values()))
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.allclose(x, y, atol=1e-6), name
    curves_a = (tmp_path / "a/curriculum.jsonl").read_text()
    assert curves_a == (tmp_path / "b/curriculum.jsonl").read_text()
    assert "curriculum/noise_p" in curves_a and (tmp_path / "a/curves.png").stat().st_size > 1000


def test_stratified_estimator_replaces_the_group_advantage(world, tokenizer, tmp_path):
    from searchlab.rl.advantages import stratified_grpo_advantages

    questions, corpus, retriever = world
    rl = _rl(estimator="stratified", stratified_alpha=0.7)
    trainer, _ = build_trainer(rl_job(rl, questions, corpus, tmp_path), _model(tokenizer), tokenizer, retriever)
    batch = trainer._generate_and_score_completions([{"prompt": str(i)} for i in range(6)])
    last = trainer.episodes.last
    expected = stratified_grpo_advantages([r.total for r in last.rewards], [len(e.searches) for e in last.episodes],
                                          3, alpha=0.7)
    assert torch.allclose(batch["advantages"], expected)


def test_igpo_adds_information_gain_to_model_tokens_only(world, tokenizer, tmp_path):
    questions, corpus, retriever = world
    trainer, _ = build_trainer(rl_job(_rl(estimator="igpo"), questions, corpus, tmp_path),
                               _model(tokenizer), tokenizer, retriever)
    batch = trainer._generate_and_score_completions([{"prompt": str(i)} for i in range(6)])
    advantages, mask = batch["advantages"], batch["completion_mask"] * batch["tool_mask"]
    assert advantages.dim() == 2 and advantages.shape == mask.shape
    # IGPO adds to the tokens of turns that an information block followed; the group advantage is the rest
    added = advantages - advantages[:, :1]
    assert torch.all(added[mask == 0].abs() <= advantages[:, :1].expand_as(added)[mask == 0].abs() + 1e-6)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_vllm_rollouts_without_cuda_are_refused_naming_the_key():
    from searchlab.train.launch import check_device

    check_device(_rl().use_vllm, "rl.use_vllm")  # the default asks for no GPU
    with pytest.raises(ValueError, match="^selfplay.use_vllm: vLLM needs a CUDA GPU"):
        check_device(True, "selfplay.use_vllm")


def test_grad_accum_must_divide_a_step_s_episodes():
    with pytest.raises(ValueError, match="rl.grad_accum 5 does not divide the 6 episodes"):
        _rl(grad_accum=5)


def test_grad_accum_splits_each_step_s_rollout_batch_into_micro_batches(world, tokenizer, tmp_path):
    questions, corpus, retriever = world
    figures = train_rl(rl_job(_rl(steps=2, grad_accum=3, save_steps=5), questions, corpus, tmp_path / "work",
                              tmp_path / "out"),
                       _model(tokenizer), tokenizer, retriever)
    assert figures["steps"] == 2
    kept = sorted(path.name for path in (tmp_path / "work/trajectories").glob("*.jsonl"))
    assert kept == ["step-000000.jsonl", "step-000001.jsonl"]  # one rollout batch per optimizer step
    assert all(len((tmp_path / "work/trajectories" / name).read_text().splitlines()) == 6 for name in kept)


def test_a_lora_policy_trains_only_its_adapters_resumes_from_them_and_is_saved_merged(world, tokenizer, tmp_path):
    """rl.lora: TRL wraps the policy in peft adapters; checkpoints hold the adapters (the unit of resume), and the
    saved policy is a plain model with the adapters merged in, equal to the uninterrupted run's. (That merging
    changes exactly the adapted weights is shown with SmolLM2 and SFT in tests/searchlab/model/test_smollm2.py:
    this random tiny policy never earns a reward, so its GRPO advantages are zero.)"""
    from searchlab.model import load_model

    questions, corpus, retriever = world
    rl = _rl(lora={"enabled": True, "r": 4, "alpha": 8, "target_modules": ["q_proj", "v_proj"]})
    straight = train_rl(rl_job(rl, questions, corpus, tmp_path / "a-work", tmp_path / "a"),
                        _model(tokenizer), tokenizer, retriever)
    assert 0 < straight["trainable_parameters"] < straight["parameters"] / 10
    with pytest.raises(KeyboardInterrupt):
        train_rl(rl_job(rl, questions, corpus, tmp_path / "b-work", tmp_path / "b"),
                 _model(tokenizer), tokenizer, retriever, callbacks=[_Interrupt()])
    assert (tmp_path / "b-work/checkpoints/checkpoint-2/adapter_model.safetensors").is_file()
    resumed = train_rl(rl_job(rl, questions, corpus, tmp_path / "b-work", tmp_path / "b"),
                       _model(tokenizer), tokenizer, retriever)
    assert resumed["resumed_from_step"] == 2

    assert not list((tmp_path / "a").glob("adapter_*"))
    a, _ = load_model(str(tmp_path / "a"))
    b, _ = load_model(str(tmp_path / "b"))
    start = make_model(tokenizer).state_dict()
    assert type(a) is type(make_model(tokenizer)) and a.state_dict().keys() == start.keys()  # no lora_A/lora_B left
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.allclose(x, y, atol=1e-6), name


def test_llds_penalises_only_the_fallen_model_tokens_of_trajectories_whose_likelihood_fell():
    from searchlab.rl.trainer import llds_penalty

    old = torch.full((2, 4), -1.0)
    mask = torch.tensor([[1, 1, 0, 1], [1, 1, 1, 1]])  # row 0's token 2 is an environment token
    new = torch.tensor([[-1.5, -0.9, -3.0, -1.0],      # model tokens: -0.5, +0.1, 0 -> fell overall
                        [-1.2, -0.1, -1.0, -1.0]],     # -0.2, +0.9 -> rose overall: untouched
                       requires_grad=True)
    penalty, touched = llds_penalty(new, old, mask)
    assert touched["llds/trajectories"] == 0.5
    assert touched["llds/tokens"] == pytest.approx(1 / 7)  # one model token of seven, in a gated trajectory
    assert penalty.item() == pytest.approx(0.5 / 3 / 2)    # its drop over row 0's three model tokens, batch mean
    penalty.backward()
    assert new.grad[0].nonzero().flatten().tolist() == [0]  # the environment token's big fall is left alone
    assert not new.grad[1].any()
    spared, touched = llds_penalty(new.detach(), old, mask, preserve=torch.tensor([False, True]))
    assert spared.item() == 0 and touched["llds/trajectories"] == 0  # a negative-advantage trajectory may fall


def test_llds_needs_a_batch_used_more_than_once():
    with pytest.raises(ValueError, match="rl.llds.coef.*rl.num_iterations >= 2"):
        _rl(llds={"coef": 0.1})


def test_llds_acts_on_the_second_pass_over_a_batch_and_the_likelihood_curves_are_logged(world, tokenizer,
                                                                                       searching_model, tmp_path):
    questions, corpus, retriever = world
    rl = _rl(steps=4, num_iterations=2, llds={"coef": 1.0}, learning_rate=2e-2)
    trainer, _ = build_trainer(rl_job(rl, questions, corpus, tmp_path),
                               copy.deepcopy(searching_model), tokenizer, retriever)
    trainer.train()
    rows = [row for row in trainer.state.log_history if "llds/trajectories" in row]
    assert [row["step"] for row in rows] == [1, 2, 3, 4]
    # the first pass over a batch meets the weights it was rolled out with; the second, updated ones
    assert rows[0]["llds/trajectories"] == 0 and rows[0]["llds/penalty"] == 0
    assert any(row["llds/trajectories"] > 0 for row in rows[1::2])
    assert all("likelihood/correct" in row or "likelihood/incorrect" in row for row in rows)
    assert all(row.get("likelihood/incorrect", -1.0) < 0 for row in rows)


def test_simulated_search_is_the_policy_itself_with_the_noise_curriculum_s_share(world, tokenizer, tmp_path):
    """The wiring: the simulated engine replaces the index, holds the policy being trained and takes the noise
    curriculum's probability each step. (What it writes, through the real rollout loop, is tested in
    test_simulated.py: this random policy does not search.)"""
    from searchlab.rl.simulated import SimulatedRetriever

    questions, corpus, retriever = world
    rl = _rl(search={"backend": "simulated", "passage_tokens": 8}, curriculum=["noise"],
             noise={"start": 0.3, "end": 0.3})
    trainer, _ = build_trainer(rl_job(rl, questions, corpus, tmp_path), _model(tokenizer), tokenizer, retriever)
    simulated = trainer.episodes.retriever
    assert isinstance(simulated, SimulatedRetriever)
    trainer._generate_and_score_completions([{"prompt": str(i)} for i in range(6)])
    assert simulated.noise_probability == pytest.approx(0.3)
    assert simulated.model is trainer.accelerator.unwrap_model(trainer.model)  # self-search: the policy writes
    assert "search/simulated_passages" in trainer._metrics["train"]


def test_self_search_cannot_run_on_vllm():
    with pytest.raises(ValueError, match="rl.search.simulator"):
        _rl(search={"backend": "simulated"}, use_vllm=True)


def test_renamed_episodes_search_the_real_index_and_are_scored_against_renamed_answers(world, tokenizer, tmp_path):
    from searchlab.rl.renamed import RenamedRetriever, renamed_question
    from searchlab.train.renaming import corpus_titles

    questions, corpus, retriever = world
    names = corpus_titles(corpus).permutation(random.Random(3))
    shown = RenamedRetriever(retriever, names)
    # a query in the renamed world finds what the real names find, shown under the renamed ones
    query = f"{names.forward['Marie Curie']} born"
    real = retriever.search(["Marie Curie born"], 2)[0]
    seen = shown.search([query], 2)[0]
    assert [h.id for h in seen] == [h.id for h in real]
    assert [h.contents for h in seen] == [names.rename(h.contents) for h in real]
    assert "Marie Curie" not in seen[0].contents or names.forward["Marie Curie"] == "Marie Curie"
    q = renamed_question(QuestionRecord(id="q4", question="Where was Marie Curie born?", answers=["Warsaw"]), names)
    assert q.answers == [names.forward["Warsaw"]] and names.forward["Marie Curie"] in q.question

    trainer, _ = build_trainer(rl_job(_rl(renamed=True), questions, corpus, tmp_path),
                               _model(tokenizer), tokenizer, retriever)
    trainer._generate_and_score_completions([{"prompt": str(i)} for i in range(6)])
    last = trainer.episodes.last
    originals = {json.loads(line)["id"]: json.loads(line) for line in questions.read_text().splitlines()}
    assert any(q.answers != originals[q.id]["answers"] for q in last.questions)
    for episode, question, r in zip(last.episodes, last.questions, last.rewards):
        assert episode.question == question.question  # the agent was asked the renamed question
        expected = 1.0 if episode.answer is not None and episode.answer.strip() == question.answers[0] else 0.0
        assert r.outcome == expected
