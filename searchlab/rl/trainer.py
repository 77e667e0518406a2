"""The GRPO trainer of the rl and selfplay stages: TRL's ``GRPOTrainer`` plus what its hooks cannot do.

:class:`SearchGRPOTrainer` adds the curriculum's updates, the Stratified GRPO
and IGPO advantages, LLDS and the likelihood curves, and the curriculum's state
in every checkpoint (see :mod:`searchlab.rl.env` for the rollouts it is fed).
Its environment is anything that implements :class:`Environment`: the rl
stage's :class:`~searchlab.rl.env.SearchEpisodes` or self-play's
:class:`~searchlab.selfplay.rounds.SelfPlayRounds`. This module imports TRL,
which is slow: import it only to build a trainer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from accelerate.utils import gather_object
from trl import GRPOTrainer
from trl.trainer.utils import shuffle_sequence_dict, split_tensor_dict

from searchlab.agent.protocol import ANSWER_OPEN
from searchlab.rl.advantages import igpo_token_advantages, information_gains, stratified_grpo_advantages, turn_index
from searchlab.rl.config import GRPOTrainingParams
from searchlab.rl.env import CURRICULUM_FILE, Environment, StepBatch, check_trl_batch, evaluating
from searchlab.rl.loss_pass import length_sorted, scored_logps_and_entropies, trimmed
from searchlab.rl.rewards import RewardBreakdown
from searchlab.train.common import ignore_fast_checkpoints, ignore_trl_deprecation, peft_config, trainer_settings
from searchlab.train.launch import world_size
from searchlab.train.lm_head import plain_head_applies


# Everything the GRPO engine relies on that is private to TRL's GRPOTrainer (or transformers' Trainer under it),
# in one place: the methods overridden or called, with the parameters they were written against, and the attributes
# read or written. They were checked on TRL 1.16.0; tests/searchlab/rl/test_trl_private.py fails on any other
# version and on any of these that changed, so an upgrade is checked here before it runs.
WRITTEN_FOR_TRL = "1.16.0"
PRIVATE_METHODS = {
    "_generate_and_score_completions": ("inputs",),  # overridden: the curriculum's update, IGPO's advantages
    "_prepare_inputs": ("generation_batch",),  # overridden: padding trimmed from each micro-batch
    "_get_per_token_logps_and_entropies": ("model", "input_ids", "attention_mask", "logits_to_keep", "batch_size"),
    "_compute_loss": ("model", "inputs"),  # overridden: LLDS and the likelihood curves
    "_save_checkpoint": ("model", "trial"),  # overridden: the curriculum's state in every checkpoint
    "_log_metric": ("name", "value"),  # called by the environments (searchlab.rl.env, searchlab.selfplay.rounds)
    "_load_from_checkpoint": ("resume_from_checkpoint", "model"),  # called by rl.keep: best (searchlab.rl.dev)
}
PRIVATE_ATTRIBUTES = ("_step", "_buffered_inputs", "_metrics")  # _prepare_inputs' buffer; the logged metrics


class SearchGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` plus the curriculum's updates, the seeds' estimators, LLDS, the likelihood curves and
    resumable curriculum state.

    ``episodes`` is the environment: :class:`SearchEpisodes` (the rl stage) or
    :class:`searchlab.selfplay.rounds.SelfPlayRounds` (self-play, no curriculum: ``curriculum`` None).
    """

    def __init__(self, *args, episodes: Environment, grpo: GRPOTrainingParams, **kwargs) -> None:
        self.episodes, self.plan = episodes, grpo.plan
        self._scored = None  # the loss pass's mask of the tokens whose log-probabilities it reads
        super().__init__(*args, rollout_func=self._checked_rollout, reward_funcs=[episodes.reward_func],
                         **kwargs)

    def _checked_rollout(self, prompts: list, trainer) -> dict[str, list]:
        # a broken contract fails here by name, not as a shape or None error deep in TRL's step
        return check_trl_batch(self.episodes.rollout_func(prompts, trainer),
                               needs_logprobs=trainer.use_vllm and trainer.vllm_importance_sampling_correction)

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        batch = self.episodes.last
        generations = self.num_generations
        rank, local = self.accelerator.process_index, len(batch.episodes)
        if self.plan.estimator == "stratified":
            rewards = gather_object([r.total for r in batch.rewards])
            searches = gather_object([len(e.searches) for e in batch.episodes])
            advantages = stratified_grpo_advantages(rewards, searches, generations, self.plan.stratified_alpha)
            output["advantages"] = advantages[rank * local:(rank + 1) * local].to(output["advantages"].device)
        flat = output["advantages"]
        if self.plan.estimator == "igpo":
            output["advantages"] = flat[:, None] + self._information_gain_advantages(batch, output).to(flat.device)
        if self.episodes.curriculum is not None:
            self._update_curriculum(batch, flat)
        if all(isinstance(r, RewardBreakdown) for r in batch.rewards):  # not self-play's role rewards
            # each row's outcome travels with it through TRL's shuffle and micro-batch split, for the loss
            output["episode_correct"] = torch.tensor([r.outcome > 0 for r in batch.rewards], device=flat.device)
        return output

    def _prepare_inputs(self, generation_batch):
        # TRL's, but the micro-batches are cut from the rollout batch sorted by length, each without the padding
        # every row of it has (searchlab.rl.loss_pass; bnpo's loss depends on the grouping: shuffled as in TRL)
        if not self.model.training:
            return super()._prepare_inputs(generation_batch)
        if self._step % (self.args.steps_per_generation * self.num_iterations) == 0 or self._buffered_inputs is None:
            batch = shuffle_sequence_dict(self._generate_and_score_completions(generation_batch))
            if self.loss_type != "bnpo":
                batch = length_sorted(batch)
            self._buffered_inputs = [trimmed(part) for part in split_tensor_dict(batch, self.args.steps_per_generation)]
        return self._buffered_inputs[self._step % self.args.steps_per_generation]

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                           compute_entropy=False, compute_aux_loss=False, **multimodal):
        unwrapped = self.accelerator.unwrap_model(model)
        if (model is unwrapped and plain_head_applies(unwrapped) and not compute_aux_loss
                and all(value is None for value in multimodal.values())):
            # the loss pass scores the model's own tokens; the others (old or reference log-probabilities) every one
            scored = self._scored if self._scored is not None else attention_mask[:, -logits_to_keep:]
            rows = batch_size or input_ids.size(0)
            with self.accelerator.autocast():  # past the model's forward, which accelerate wrapped in autocast
                parts = [scored_logps_and_entropies(model, input_ids[start:start + rows],
                                                    attention_mask[start:start + rows], scored[start:start + rows],
                                                    self.temperature, compute_entropy)
                         for start in range(0, input_ids.size(0), rows)]
            result = (torch.cat([logps for logps, _ in parts]),
                      torch.cat([entropy for _, entropy in parts]) if compute_entropy else None, None)
        else:
            result = super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy, compute_aux_loss,
                **multimodal)
        if torch.is_grad_enabled():  # the policy's pass inside _compute_loss (the others run without grad)
            self._policy_logps = result[0]
        return result

    def _compute_loss(self, model, inputs):
        mask = inputs["completion_mask"] * inputs.get("tool_mask", 1)  # the model's own tokens
        self._scored = mask  # the only log-probabilities the loss reads: the others are multiplied by 0
        try:
            loss = super()._compute_loss(model, inputs)
        finally:
            self._scored = None
        logps, old = self._policy_logps, inputs.get("old_per_token_logps")
        likelihood = {}
        if "episode_correct" in inputs:
            likelihood = likelihood_metrics(logps.detach(), mask, inputs["episode_correct"])
        if self.plan.llds_coef > 0 and old is not None:
            advantages = inputs["advantages"]
            if advantages.dim() == 2:  # IGPO's per-token advantages: the trajectory's mean over its own tokens
                advantages = (advantages * mask).sum(-1) / mask.sum(-1).clamp(min=1)
            penalty, touched = llds_penalty(logps, old, mask, preserve=advantages >= 0)
            likelihood.update(touched)
            likelihood["llds/penalty"] = penalty.item()
            loss = loss + self.plan.llds_coef * penalty / self.current_gradient_accumulation_steps
        for name, value in likelihood.items():
            self._metrics["train"][name].append(value)
        return loss

    def _information_gain_advantages(self, batch: StepBatch, output: dict) -> torch.Tensor:
        """IGPO's per-token additions: each searching turn gets the information gain of the block it brought."""
        mask = output["completion_mask"]
        if "tool_mask" in output:
            mask = mask * output["tool_mask"]
        mask = mask.cpu()
        model = self.accelerator.unwrap_model(self.model)
        gains = []
        with evaluating(model):
            for e, q in zip(batch.episodes, batch.questions):  # the episode's own tokens: no EOS, no padding
                gains.append(information_gains(model, self.episodes.tokenizer, e.prompt_ids, e.completion_ids,
                                               [1 - m for m in e.env_mask], f"{ANSWER_OPEN} {q.answers[0]}")
                             .tolist() if e.completion_ids else [])
        adds = igpo_token_advantages(gains, turn_index(mask), mask, self.plan.igpo_weight)
        flat_gains = [g for row in gains for g in row]
        # straight into this step's metrics: the pending ones were flushed before the advantages are made
        self._metrics["train"]["igpo/mean_gain"].append(sum(flat_gains) / len(flat_gains) if flat_gains else 0.0)
        return adds

    def _update_curriculum(self, batch: StepBatch, advantages: torch.Tensor) -> None:
        """Report each question's group outcome and mean |advantage| (all processes') to the curriculum, with
        the groups dynamic sampling replaced (all advantages zero). The outcome is the policy's own: a
        demonstration guidance put into a group is left out of it."""
        generations = self.num_generations
        guided = batch.guided or [False] * len(batch.rewards)
        spread = advantages.abs().tolist()
        groups = range(len(batch.questions) // generations)
        own = [[r.outcome for r, g in zip(batch.rewards[i * generations:(i + 1) * generations],
                                          guided[i * generations:(i + 1) * generations]) if not g] for i in groups]
        success = [sum(outcomes) / max(len(outcomes), 1) for outcomes in own]
        magnitude = [sum(spread[g * generations:(g + 1) * generations]) / generations for g in groups]
        questions = gather_object(batch.questions[::generations] + [q for q, _ in batch.untrained])
        success = gather_object(success + [s for _, s in batch.untrained])
        magnitude = gather_object(magnitude + [0.0] * len(batch.untrained))
        self.episodes.curriculum.update(batch.step, questions, success, magnitude)

    def _save_checkpoint(self, model, trial):
        # written before the Trainer's own files: trainer_state.json, written last, marks the checkpoint complete
        from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

        folder = Path(self.args.output_dir) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        if self.is_world_process_zero() and self.episodes.curriculum is not None:
            folder.mkdir(parents=True, exist_ok=True)
            (folder / CURRICULUM_FILE).write_text(json.dumps(self.episodes.curriculum.state_dict()))
        return super()._save_checkpoint(model, trial)


# A fall in log-likelihood (nats) smaller than this is float noise between the rollout-time and training passes
# over unchanged weights, not a displacement: LLDS leaves it alone.
LIKELIHOOD_TOLERANCE = 1e-5


def llds_penalty(logps: torch.Tensor, old_logps: torch.Tensor, mask: torch.Tensor,
                 preserve: torch.Tensor | None = None) -> tuple[torch.Tensor, dict]:
    """LLDS's likelihood-preserving penalty of a micro-batch, and the shares of trajectories and tokens it touched.

    A trajectory is penalised only when its likelihood under the current policy
    (``logps``, per token) fell below its likelihood at rollout time
    (``old_logps``), and then only on the tokens whose log-probability fell, by
    how much it fell; ``mask`` is 1 on the model's own tokens, so passages the
    environment inserted are never regularised. ``preserve`` (bool per
    trajectory; None: all) is the paper's preserving set: the trainer passes the
    trajectories of non-negative advantage, since pulling up a trajectory GRPO
    means to push down would fight the policy gradient. Per trajectory the drops
    are averaged over its model tokens; the penalty is the mean over the batch
    (the GRPO loss's own aggregation).
    """
    mask = mask.to(logps.dtype)
    fell = (old_logps - logps) * mask
    gate = fell.sum(-1) > LIKELIHOOD_TOLERANCE  # the trajectory's likelihood fell
    if preserve is not None:
        gate = gate & preserve
    gate = gate.to(logps.dtype)
    token_drops = torch.where(fell > LIKELIHOOD_TOLERANCE, fell, torch.zeros_like(fell))
    per_trajectory = token_drops.sum(-1) / mask.sum(-1).clamp(min=1.0)
    penalty = (per_trajectory * gate).mean()
    touched_tokens = ((token_drops > 0).to(logps.dtype) * gate[:, None]).sum() / mask.sum().clamp(min=1.0)
    return penalty, {"llds/trajectories": gate.mean().item(), "llds/tokens": touched_tokens.item()}


def likelihood_metrics(logps: torch.Tensor, mask: torch.Tensor, correct: torch.Tensor) -> dict[str, float]:
    """Mean per-token log-likelihood of the micro-batch's correct and incorrect responses (model tokens only):
    the two curves whose joint decline is LLDS's "lazy likelihood displacement"."""
    mask = mask.to(logps.dtype)
    per_trajectory = (logps * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
    metrics = {}
    for name, rows in (("likelihood/correct", correct), ("likelihood/incorrect", ~correct)):
        if rows.any():
            metrics[name] = per_trajectory[rows].mean().item()
    return metrics


def grpo_config(grpo: GRPOTrainingParams, checkpoint_dir: Path, save_total_limit: int | None = 2):
    """TRL's ``GRPOConfig`` for a stage's GRPO section ``grpo`` and its :attr:`~GRPOTrainingParams.plan`: one rollout
    batch of ``plan.groups_per_step`` groups per optimizer step, in ``grpo.grad_accum`` micro-batches, over
    ``plan.steps`` steps; checkpoints in ``checkpoint_dir`` (the newest ``save_total_limit``; None: all). Building it
    needs neither a GPU nor vLLM.

    With ``use_vllm`` TRL's ``vllm_importance_sampling_correction`` stays on (its default): the rollouts report
    vLLM's sampling log-probabilities (:func:`searchlab.rl.env.trl_batch`)."""
    from trl import GRPOConfig

    plan = grpo.plan
    settings = trainer_settings(checkpoint_dir, grpo.seed, plan.save_steps, plan.logging_steps,
                                grpo.activation_checkpointing, grpo.cpu_bf16)
    args = GRPOConfig(
        **{**settings, "save_total_limit": save_total_limit},
        max_steps=plan.steps,
        per_device_train_batch_size=plan.groups_per_step * grpo.num_generations // grpo.grad_accum,
        gradient_accumulation_steps=grpo.grad_accum, steps_per_generation=grpo.grad_accum,
        num_generations=grpo.num_generations, learning_rate=grpo.learning_rate,
        warmup_steps=grpo.warmup_ratio,  # a float < 1: a share of all steps
        max_grad_norm=grpo.max_grad_norm, temperature=grpo.temperature, top_p=1.0,
        loss_type=grpo.loss_type, scale_rewards=grpo.scale_rewards, beta=grpo.beta, epsilon=grpo.epsilon,
        epsilon_high=plan.epsilon_high, num_iterations=plan.num_iterations, mask_truncated_completions=False,
        log_completions=False, use_vllm=grpo.use_vllm, vllm_mode="colocate",
        vllm_gpu_memory_utilization=grpo.vllm_gpu_memory_utilization, remove_unused_columns=False,
    )
    # GRPO counts the tokens it rolls out itself; the Trainer's own count looks for input_ids the slots lack
    args.include_num_input_tokens_seen = "no"
    return args


def make_search_trainer(grpo: GRPOTrainingParams, model, tokenizer, episodes, checkpoint_dir: Path,
                        callbacks: list | None = None, save_total_limit: int | None = 2):
    """The :class:`SearchGRPOTrainer` of a stage's GRPO section ``grpo`` (rl's or self-play's: :func:`grpo_config`)
    with ``episodes`` as its environment: the one way the rl and selfplay stages (and the benches) build their
    trainer."""
    from datasets import Dataset

    args = grpo_config(grpo, checkpoint_dir, save_total_limit)
    plan = grpo.plan
    # one slot per question drawn, by every process (each draws plan.groups_per_step a step): the environment fills
    # the slots of each step when they are rolled out, and the run is one pass over them in every process count
    slots = Dataset.from_dict({"prompt": [str(i) for i in range(plan.steps * plan.groups_per_step * world_size())]})
    # TRL warns that rollout_func is experimental; the pinned TRL version is the one this module was checked on
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    ignore_trl_deprecation()
    ignore_fast_checkpoints()
    return SearchGRPOTrainer(model=model, args=args, train_dataset=slots, processing_class=tokenizer,
                             callbacks=callbacks, episodes=episodes, grpo=grpo, peft_config=peft_config(grpo.lora))
