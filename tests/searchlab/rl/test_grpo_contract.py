"""TRL 1.16's ``rollout_func`` contract under ``rl.use_vllm``, on a CPU.

With vLLM, TRL's ``vllm_importance_sampling_correction`` (on by default)
subtracts the ``logprobs`` that ``rollout_func`` returns from its own
log-probabilities, token by token, so they must be there and line up with
``completion_ids``. vLLM needs CUDA, so :class:`SamplingVLLM` stands in for
``vllm.LLM``: it only generates the inputs (the tiny real model samples, and
reports each sampled token's log-probability the way vLLM's
``CompletionOutput.logprobs`` does, when asked to). The rollout loop,
:func:`~searchlab.rl.env.trl_batch` and TRL's importance-sampling block are
the real ones; a log-probability off by one token, or missing, fails them.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import torch

from searchlab.agent.episode import Rollout
from searchlab.agent.rollout import is_vllm, rollout
from searchlab.params import load_params
from searchlab.rl.env import check_trl_batch, completion_logprobs, training_rollout_params, trl_batch
from searchlab.rl.train import build_trainer
from searchlab.rl.trainer import grpo_config
from tests.searchlab.rl.rlworld import QUESTIONS, ROLLOUT, rl_job, rl_params as _rl, seeded_policy as _model

# the fixtures world and tokenizer: this package's conftest.py
pytestmark = pytest.mark.usefixtures("one_thread")  # tests/searchlab/conftest.py's

GPU_PARAMS = Path(__file__).resolve().parents[3] / "params/gpu-qwen2.5-3b.yaml"


class SamplingVLLM:
    """The slice of ``vllm.LLM`` the rollout loop uses, run by a Hugging Face model: it samples each request at its
    temperature and seed, stops after a stop string or stop token (kept), and with ``logprobs=N`` reports per
    position a dict of token id -> ``.logprob`` (vLLM's: the sampled token, after temperature scaling, the
    ``processed_logprobs`` mode TRL's colocated engine runs in); with ``logprobs=None``, no logprobs."""

    __module__ = "vllm"  # what is_vllm() looks at

    def __init__(self, model, tokenizer):
        self.model, self.tok = model, tokenizer

    def generate(self, requests, sampling_params, use_tqdm=True):
        outputs = []
        for request, sampling in zip(requests, sampling_params):
            assert sampling.top_p == 1.0 and sampling.temperature > 0  # so the logprobs are log_softmax(logits / T)
            ids = torch.tensor([request["prompt_token_ids"]])
            with torch.random.fork_rng(), torch.inference_mode():
                torch.manual_seed(sampling.seed)
                out = self.model.generate(
                    input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=sampling.max_tokens,
                    do_sample=True, temperature=sampling.temperature, top_p=1.0, top_k=0, tokenizer=self.tok,
                    stop_strings=sampling.stop, eos_token_id=sampling.stop_token_ids,
                    pad_token_id=self.tok.pad_token_id, return_dict_in_generate=True, output_logits=True)
            new = out.sequences[0, ids.shape[1]:].tolist()
            positions = None
            if getattr(sampling, "logprobs", None) is not None:
                positions = []
                for token, logits in zip(new, out.logits):
                    logps = torch.log_softmax(logits[0].float() / sampling.temperature, dim=-1)
                    top = logps.topk(sampling.logprobs).indices.tolist() if sampling.logprobs else []
                    positions.append({t: types.SimpleNamespace(logprob=logps[t].item()) for t in {token, *top}})
            outputs.append(types.SimpleNamespace(outputs=[types.SimpleNamespace(token_ids=new, logprobs=positions)]))
        return outputs


def fake_vllm_module(monkeypatch) -> None:
    """``vllm.SamplingParams`` for the rollout loop, read back by the stand-in as attributes. (After TRL is
    imported: TRL probes for vllm when its trainer module loads.)"""
    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(SamplingParams=types.SimpleNamespace))


def test_the_gpu_config_keeps_trl_s_vllm_importance_sampling_correction():
    """params/gpu-qwen2.5-3b.yaml's rl section as GRPOConfig: colocated vLLM with the correction on, so the rollouts
    must report their sampling log-probabilities. (GRPOConfig(use_vllm=True) imports no vLLM: built here as is.)"""
    rl = load_params(GPU_PARAMS).rl
    args = grpo_config(rl, Path("unused-checkpoints"))
    assert rl.use_vllm and args.use_vllm and args.vllm_mode == "colocate"
    assert args.vllm_importance_sampling_correction and args.vllm_importance_sampling_mode == "sequence_mask"
    assert args.temperature == rl.temperature and args.top_p == 1.0  # what the rollouts sample with
    assert args.num_generations == rl.num_generations and args.steps_per_generation == rl.grad_accum
    assert args.per_device_train_batch_size == rl.questions_per_step * rl.num_generations // rl.grad_accum


def test_self_play_s_section_is_the_engine_s_input_as_is_one_plain_grpo_step_per_round():
    """The engine reads self-play's own section (no rl section made from it): a step per round over both roles'
    groups, every round saved and logged, plain GRPO's loss whatever rl's loss options say."""
    params = load_params(Path("params/default.yaml"), overrides=["rl.num_iterations=2", "rl.llds.coef=0.5",
                                                                 "rl.epsilon_high=0.3", "selfplay.rounds=5"])
    selfplay = params.selfplay
    args = grpo_config(selfplay, Path("unused-checkpoints"))
    assert args.max_steps == 5 and args.save_steps == 1 and args.logging_steps == 1
    assert args.per_device_train_batch_size == (selfplay.solver_questions + selfplay.proposals_per_round) \
        * selfplay.num_generations // selfplay.grad_accum
    assert args.num_iterations == 1 and args.epsilon_high is None and args.epsilon == selfplay.epsilon
    assert args.learning_rate == selfplay.learning_rate and args.temperature == selfplay.temperature
    rl_args = grpo_config(params.rl, Path("unused-checkpoints"))
    assert rl_args.num_iterations == 2 and rl_args.epsilon_high == 0.3 and rl_args.max_steps == params.rl.steps


def test_completion_logprobs_put_the_sampled_ones_on_model_tokens_and_zero_on_environment_tokens():
    done = Rollout("q", "p", prompt_ids=[1], completion_ids=[5, 6, 7, 8], env_mask=[0, 1, 1, 0], finished=True,
                   logprobs=[-0.5, -1.5])
    cut = Rollout("q", "p", prompt_ids=[1], completion_ids=[5, 6], env_mask=[0, 1], logprobs=[-2.0])
    assert completion_logprobs(done) == [-0.5, 0.0, 0.0, -1.5]
    batch = trl_batch([done, cut], eos_id=0)
    assert batch["logprobs"] == [[-0.5, 0.0, 0.0, -1.5, 0.0], [-2.0, 0.0]]  # the appended EOS is not sampled: 0.0
    assert [len(r) for r in batch["logprobs"]] == [len(r) for r in batch["completion_ids"]]
    check_trl_batch(batch, needs_logprobs=True)
    with pytest.raises(ValueError, match="2 sampling log-probabilities for 1 model tokens"):
        completion_logprobs(Rollout("q", "p", completion_ids=[5, 6], env_mask=[0, 1], logprobs=[-1.0, -1.0]))
    hf = Rollout("q", "p", prompt_ids=[1], completion_ids=[5], env_mask=[0])  # Hugging Face generation: none
    assert trl_batch([done, hf], eos_id=0)["logprobs"] is None
    with pytest.raises(ValueError, match="importance-sampling correction"):
        check_trl_batch(trl_batch([hf], eos_id=0), needs_logprobs=True)


def test_a_vllm_engine_s_sampled_logprobs_line_up_with_the_completion_tokens(world, tokenizer, monkeypatch):
    """Through the real rollout loop: every model token's value is its log-probability under the policy given the
    episode so far (one forward pass over prompt + completion), every environment token's 0.0."""
    _, _, retriever = world
    fake_vllm_module(monkeypatch)
    model, rl = _model(tokenizer).eval(), _rl()
    engine = SamplingVLLM(model, tokenizer)
    assert is_vllm(engine)
    params = training_rollout_params(ROLLOUT, rl, step=0, batch_size=6).model_copy(update={"engine": "vllm"})
    episodes = rollout(engine, tokenizer, retriever, [q for _, q, *_ in QUESTIONS], params)
    assert any(any(e.env_mask) for e in episodes)  # the environment wrote into some (invalid-action feedback)
    assert all(len(e.logprobs) == e.generated_tokens for e in episodes)
    batch = trl_batch(episodes, tokenizer.eos_token_id)
    assert {"prompt_ids", "completion_ids", "logprobs", "env_mask"} <= batch.keys()
    for prompt, ids, model_token, logprobs in zip(batch["prompt_ids"], batch["completion_ids"], batch["env_mask"],
                                                  batch["logprobs"]):
        assert len(logprobs) == len(ids) == len(model_token)
        with torch.no_grad():
            logits = model(torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1]
        expected = torch.log_softmax(logits / rl.temperature, -1).gather(-1, torch.tensor(ids)[:, None])[:, 0]
        for got, want, own in zip(logprobs, expected.tolist(), model_token):
            assert got == pytest.approx(want, abs=1e-4) if own else got == 0.0


def test_trl_s_importance_sampling_reads_the_rollouts_logprobs_under_the_gpu_config(world, tokenizer, tmp_path,
                                                                                     monkeypatch):
    """The trainer, switched to vLLM with the GPU config's correction settings, runs TRL's importance-sampling
    block on what rollout_func returned: ratios of 1 (the stand-in samples with the trainer's own weights), the
    sampling log-probabilities TRL holds match its own on model tokens and are 0.0 elsewhere. The Hugging Face
    path returns None, which TRL accepts there."""
    questions, corpus, retriever = world
    # first: building TrainingArguments resets accelerate's state, which the trainer's Accelerator holds
    gpu = grpo_config(load_params(GPU_PARAMS).rl, tmp_path / "gpu")
    trainer, _ = build_trainer(rl_job(_rl(), questions, corpus, tmp_path), _model(tokenizer), tokenizer, retriever)
    prompts = [{"prompt": str(i)} for i in range(6)]
    assert trainer.rollout_func([p["prompt"] for p in prompts], trainer)["logprobs"] is None

    fake_vllm_module(monkeypatch)
    for name in ("use_vllm", "vllm_importance_sampling_correction", "vllm_importance_sampling_mode",
                 "vllm_importance_sampling_clip_min", "vllm_importance_sampling_clip_max", "temperature"):
        setattr(trainer, name, getattr(gpu, name))
    assert trainer.use_vllm and trainer.vllm_importance_sampling_correction
    engine = SamplingVLLM(trainer.accelerator.unwrap_model(trainer.model), tokenizer)
    trainer.vllm_generation = types.SimpleNamespace(llm=engine, sync_weights=lambda: None)
    trainer._last_loaded_step = -1

    output = trainer._generate_and_score_completions(prompts)
    episodes = trainer.episodes.last.episodes
    assert any(any(e.env_mask) for e in episodes)
    model_tokens = (output["completion_mask"] * output["tool_mask"]).bool()
    sampled, own = output["sampling_per_token_logps"], output["old_per_token_logps"]
    assert sampled.shape == own.shape == model_tokens.shape
    assert torch.allclose(sampled[model_tokens], own[model_tokens], atol=1e-4)
    assert not sampled[~model_tokens].any()  # environment tokens, the appended EOS, padding
    assert torch.allclose(output["importance_sampling_ratio"], torch.ones(6, 1), atol=1e-3)
    trainer.current_gradient_accumulation_steps = 1  # what train() sets before a loss
    assert torch.isfinite(trainer._compute_loss(trainer.model, output))


def test_a_tied_head_is_not_reported_missing_when_the_best_checkpoint_is_loaded(caplog):
    """The Trainer's loader calls a tied model's checkpoint incomplete (its head is stored once, as the embedding):
    that one line is dropped for a tied model, and kept for a model whose head is its own."""
    import logging

    from transformers import Qwen2Config, Qwen2ForCausalLM

    from searchlab.rl.dev import TiedHeadNotMissing

    def reported(tie: bool) -> list[str]:
        model = Qwen2ForCausalLM(Qwen2Config(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                             num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=tie))
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=TiedHeadNotMissing.LOGGER), TiedHeadNotMissing(model):
            logging.getLogger(TiedHeadNotMissing.LOGGER).warning(
                "There were missing keys in the checkpoint model loaded: ['lm_head.weight'].")
            logging.getLogger(TiedHeadNotMissing.LOGGER).warning(
                "There were missing keys in the checkpoint model loaded: ['model.norm.weight'].")
        return [r.getMessage() for r in caplog.records]

    assert reported(tie=True) == ["There were missing keys in the checkpoint model loaded: ['model.norm.weight']."]
    assert len(reported(tie=False)) == 2
    assert not logging.getLogger(TiedHeadNotMissing.LOGGER).filters  # gone after the block
