"""The GRPO engine's environment: the :class:`Environment` protocol and the rl stage's search episodes.

GRPO here trains over the agent's own multi-turn search episodes: TRL's ``GRPOTrainer`` fed by this project's
rollouts (the trainer is :mod:`searchlab.rl.trainer`; self-play's rounds implement the same protocol).

TRL's ``rollout_func`` hook replaces its single-turn generation with
:func:`searchlab.agent.rollout.rollout` (the same batched multi-turn loop that
evaluation runs), and a thin subclass, :class:`searchlab.rl.trainer.SearchGRPOTrainer`, adds what the
hook cannot: the curriculum's update from each batch's outcomes, the Stratified
GRPO and IGPO advantages (TRL computes its group advantage inline, with no
hook), and the curriculum's state in every checkpoint.

The dataset the trainer iterates over is a list of *slots*: which question a
slot holds is decided when it is rolled out, by the curriculum
(:class:`searchlab.rl.curriculum.Curriculum`) from the step number and its own
state. That keeps the curriculum online (it sees every step's outcomes) and
resumable (its state is saved with the checkpoint, its draws are seeded by the
step).

Masks: ``Rollout.env_mask`` is 1 on environment tokens; TRL's ``env_mask`` is
1 on *model* tokens (the loss uses ``completion_mask × env_mask``), so
:func:`trl_batch` inverts it. A finished episode ends with its ``</answer>``
turn; an EOS token is appended to it (masked: the model never sampled it) so
TRL does not count it as truncated; an episode cut off at ``max_turns`` has no
EOS and is logged as clipped, but keeps its (penalised) reward in the loss.
Rewards read the parsed ``<answer>`` of each :class:`~searchlab.agent.episode.Rollout`
(:mod:`searchlab.rl.rewards`), never the decoded completion, which contains the
retrieved passages.

Sampling log-probabilities: with ``rl.use_vllm`` TRL corrects for the
mismatch between vLLM's sampling and the trainer's forward pass
(``vllm_importance_sampling_correction``, on by default), subtracting the
``logprobs`` that ``rollout_func`` returns: one per completion token. They are
vLLM's log-probabilities of the tokens it sampled (TRL's colocated engine
reports them after temperature scaling, as the trainer computes its own) and
0.0 on environment tokens and the appended EOS, as TRL's own tool loop fills
tool-result tokens; the correction multiplies the difference by the loss mask,
so those values never count. The Hugging Face path reports none (TRL takes
``None`` there: no correction without vLLM).

Likelihood: the subclass also logs the mean log-likelihood of correct and
incorrect responses per step and, with ``rl.llds.coef``, adds LLDS's
likelihood-preserving penalty (:func:`searchlab.rl.trainer.llds_penalty`) to TRL's loss; both read
the policy's per-token log-probabilities from TRL's own forward pass, so they
cost no extra pass.

Decoding: rollouts sample at ``rl.temperature`` with top-p 1; answers are
free, or (``rl.extractive_answers``: masked, scored) decoded under the
extractive constraint evaluation uses; with ``masked`` the constrained answer
tokens leave the loss (:func:`trl_batch`), since they are not samples of the
policy whose log-probabilities TRL computes. TRL computes the log-probabilities
at the same temperature. Every step rolls out with its own seed (``rl.seed``,
the step, the process and, under dynamic sampling, the draw).

Expert guidance (``rl.guidance``, LUFFY's and David-GRPO's): a group none of whose
episodes answers right (EM) teaches only what not to do; its last episode is
replaced by the question's demonstration (sft's ``demos.jsonl``) played through
the same retriever and rollout settings (:func:`searchlab.agent.replay.replay`),
scored like any episode, so the group has a right episode GRPO pushes towards.
Its tokens enter the loss as a sample of the current policy (TRL's ratio of 1 at
``num_iterations: 1``): the gradient is the advantage times the demonstration's
log-likelihood gradient, an advantage-weighted SFT step on it. An importance
ratio against the demonstrator (LUFFY's π_θ/1) would scale that by the policy's
own probability of each token, which is near 0 on exactly the tokens it has to
learn. A demonstration that does not score right under the live retriever is not
used. Logged per step: the share of groups with no right episode
(``guidance/all_wrong``) and how many were guided (``guidance/guided``).

Dynamic sampling (``rl.dynamic_sampling``, DAPO's): a group whose episodes all
earned the same reward has zero advantage everywhere and teaches nothing; such
groups are replaced by the groups of freshly drawn questions, up to that many
extra draws, before TRL sees the batch. Rewards are therefore scored at rollout
time (:meth:`SearchEpisodes.score`); TRL's reward function returns them. The
curriculum learns from every group rolled out, replaced ones included.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from searchlab.agent.episode import Rollout
from searchlab.agent.extractive import constrained_start
from searchlab.agent.replay import continued, prefix_through_search, replay
from searchlab.agent.rollout import rollout
from searchlab.agent.samples import protocol_shares, trajectory_record
from searchlab.jsonl import write_jsonl
from searchlab.params import RolloutParams
from searchlab.questions.record import QuestionRecord, present
from searchlab.rl.config import GRPOTrainingParams, RLParams
from searchlab.rl.curriculum import Curriculum
from searchlab.rl.noisy import NoisyRetriever
from searchlab.rl.renamed import RenamedRetriever, renamed_question
from searchlab.rl.rewards import RewardBreakdown, fade, retrieved_share, reward
from searchlab.rl.simulated import SimulatedRetriever, simulated_counts
from searchlab.scoring import exact_match
from searchlab.train.renaming import TitleRenamer


CURRICULUM_FILE = "curriculum.json"  # the curriculum's state, in every checkpoint folder


def completion_logprobs(episode: Rollout) -> list[float] | None:
    """One sampling log-probability per token of ``episode.completion_ids``: the model tokens' own
    (``Rollout.logprobs``, in order) and 0.0 on environment tokens; None when the engine reported none."""
    if episode.logprobs is None:
        return None
    model_tokens = episode.env_mask.count(0)
    if len(episode.logprobs) != model_tokens:
        raise ValueError(f"{len(episode.logprobs)} sampling log-probabilities for {model_tokens} model tokens")
    sampled = iter(episode.logprobs)
    return [0.0 if m else next(sampled) for m in episode.env_mask]


def trl_batch(episodes: Sequence[Rollout], eos_id: int, answer_tokenizer=None) -> dict[str, list]:
    """The episodes as ``rollout_func`` returns them to TRL: ids, ``env_mask`` 1 on the model's own tokens, and
    ``logprobs`` per completion token (:func:`completion_logprobs`; None unless every episode has them).

    A finished episode gets ``eos_id`` appended with mask 0 and log-probability 0.0 (see the module docstring).
    With ``answer_tokenizer`` the tokens of each episode's constrained answer
    (:func:`searchlab.agent.extractive.constrained_start`) are masked too: they were not sampled from the policy.
    """
    completion_ids, masks, logprobs = [], [], []
    for e in episodes:
        ids, mask, sampled = list(e.completion_ids), [1 - m for m in e.env_mask], completion_logprobs(e)
        if answer_tokenizer is not None:
            start = constrained_start(answer_tokenizer, e.completion_ids, e.env_mask)
            if start is not None:
                mask[start:] = [0] * (len(mask) - start)
        if e.finished and (not ids or ids[-1] != eos_id):
            ids.append(eos_id)
            mask.append(0)
            if sampled is not None:
                sampled.append(0.0)
        completion_ids.append(ids)
        masks.append(mask)
        logprobs.append(sampled)
    return {"prompt_ids": [list(e.prompt_ids) for e in episodes], "completion_ids": completion_ids,
            "logprobs": None if None in logprobs else logprobs, "env_mask": masks}


def check_trl_batch(batch: dict[str, list], needs_logprobs: bool) -> dict[str, list]:
    """``batch`` (a ``rollout_func`` output) if it keeps TRL's contract, else a ValueError saying what breaks it.

    TRL pads ``logprobs`` and ``env_mask`` rows beside ``completion_ids`` without checking their lengths, and
    reads ``logprobs`` (``needs_logprobs``: vLLM with its importance-sampling correction) without checking for None.
    """
    rows = batch["completion_ids"]
    for key in ("logprobs", "env_mask"):
        if batch.get(key) is not None and [len(r) for r in batch[key]] != [len(r) for r in rows]:
            raise ValueError(f"rollout_func's {key} rows are not as long as its completion_ids rows")
    if needs_logprobs and batch["logprobs"] is None:
        raise ValueError("vLLM's importance-sampling correction needs the rollouts' sampling log-probabilities "
                         "(rollout_func returned logprobs None)")
    return batch


def training_rollout_params(rollout_params: RolloutParams, grpo: GRPOTrainingParams, step: int, batch_size: int,
                            rank: int = 0, draw: int = 0) -> RolloutParams:
    """The rollout settings of training step ``step`` (its draw ``draw``) of a stage's GRPO section: sampling at
    ``grpo.temperature``, answers constrained as its plan's ``extractive_answers`` says, an own seed per step,
    process and draw."""
    return rollout_params.model_copy(update={
        "temperature": grpo.temperature, "top_p": 1.0, "extractive_answers": grpo.plan.extractive_answers != "free",
        "batch_size": batch_size, "seed": (grpo.seed * 1_000_003 + step) * 64 + rank + draw * 2 ** 40,
        "engine": "hf"})


@dataclass
class StepBatch:
    """One step's local episodes: the questions (each repeated per generation), episodes and their rewards; and
    ``untrained``, (question, success rate) of the groups dynamic sampling rolled out but replaced."""

    step: int
    questions: list  # rl: each episode's QuestionRecord; self-play: each episode's role (a dict)
    episodes: list[Rollout]
    rewards: list[RewardBreakdown] = field(default_factory=list)
    untrained: list[tuple[QuestionRecord, float]] = field(default_factory=list)
    guided: list[bool] = field(default_factory=list)  # per episode: the demonstration expert guidance put in


@dataclass
class Group:
    """One question's GRPO group: its episodes and their rewards."""

    question: QuestionRecord
    episodes: list[Rollout]
    rewards: list[RewardBreakdown]
    guided: bool = False  # its last episode is the question's demonstration (expert guidance)
    rerolled: bool = False  # its worst episode was replaced by a re-roll from its best near miss

    @property
    def uniform(self) -> bool:
        """Whether every episode earned the same reward: the group's advantages are all zero, it teaches nothing."""
        return max(r.total for r in self.rewards) - min(r.total for r in self.rewards) < 1e-9

    @property
    def success(self) -> float:
        """The group's mean outcome (EM or F1)."""
        return sum(r.outcome for r in self.rewards) / len(self.rewards)

    @property
    def solved(self) -> bool:
        """Whether some episode's answer is an exact match of a gold answer."""
        return any(exact_match(e.answer or "", self.question.answers) for e in self.episodes)


class Environment(Protocol):
    """What the trainer rolls out and rewards with: one step's episodes, scored, as TRL's ``rollout_func`` and
    reward function; the last step's batch; the tokenizer; and a curriculum to update (None: none)."""

    tokenizer: Any
    curriculum: Curriculum | None
    last: StepBatch | None

    def rollout_func(self, prompts: list, trainer) -> dict[str, list]: ...

    def reward_func(self, prompts, completions, **kwargs) -> list[float]: ...


@dataclass(frozen=True)
class WorldAids:
    """What some rl options take from the world besides the retriever: ``distractors``, the (id, contents) pool the
    noise curriculum draws replacement passages from; ``renamer`` (``rl.renamed``), the corpus's titles, permuted
    anew for every draw of a step (:mod:`searchlab.rl.renamed`); ``demos``, each question id's demonstration turns
    (:func:`searchlab.agent.replay.demonstration_turns`), what expert guidance puts into a group that failed
    (``rl.guidance``)."""

    distractors: Sequence[tuple[str, str]] = ()
    renamer: TitleRenamer | None = None
    demos: dict[str, list[str]] = field(default_factory=dict)


class SearchEpisodes:
    """The environment side of RL: draws a step's questions, rolls them out, scores them.

    ``curriculum`` holds the qa stage's training questions; ``retriever`` is the
    real one, or a :class:`~searchlab.rl.simulated.SimulatedRetriever`
    (``rl.search.backend: simulated``; with no ``rl.search.simulator`` it is
    handed the policy before every rollout); ``aids`` what the noise curriculum, renaming and guidance take from
    the world (:class:`WorldAids`). ``trajectory_dir``: where the main process keeps
    the episodes of every ``keep_every``-th step (``step-N.jsonl``, rewritten
    identically when a resumed run repeats a step; ``rl.steps`` // 10).
    """

    def __init__(self, tokenizer, retriever, curriculum: Curriculum, rollout_params: RolloutParams, rl: RLParams,
                 aids: WorldAids = WorldAids(), trajectory_dir: Path | None = None) -> None:
        self.tokenizer, self.retriever, self.curriculum = tokenizer, retriever, curriculum
        self.renamer, self.demos = aids.renamer, aids.demos
        self.rollout_params, self.rl = rollout_params, rl
        self.distractors = list(aids.distractors)
        # every tenth step's episodes (every step's in a run of under 20): enough to read how the policy changed
        self.trajectory_dir, self.keep_every = trajectory_dir, max(1, rl.steps // 10)
        self.last: StepBatch | None = None
        self.timings: dict[str, float] = {"rollout": 0.0, "reward": 0.0, "near_miss": 0.0}
        self.reward_scale = 1.0
        self.rollouts = 0  # steps' rollout batches this process rolled out, each with all its draws (several
        # optimizer steps may share one)

    # -- TRL's rollout_func
    def rollout_func(self, prompts: list, trainer) -> dict[str, list]:
        """Roll out and score this step's questions, ``num_generations`` episodes each (TRL repeats each slot that
        often); with ``rl.dynamic_sampling`` a group whose episodes all earned the same reward is replaced by a
        freshly drawn question's, up to that many extra draws (the last draw's uniform groups fill what is left)."""
        generations = trainer.num_generations
        if len(prompts) % generations:
            raise ValueError(f"{len(prompts)} prompts are not whole groups of {generations}")
        step, rank, world = trainer.state.global_step, trainer.accelerator.process_index, trainer.accelerator.num_processes
        self.reward_scale = fade(self.rl.reward, step)  # the format credit this step pays (rl.reward.fade_steps)
        wanted = len(prompts) // generations
        chosen = self.curriculum.select(step, wanted * world)[rank * wanted:(rank + 1) * wanted]
        retriever, noise = self._step_retriever(step, rank)
        self.rollouts += 1
        informative, uniform, first_uniform, draw = [], [], None, 0
        played = []
        while True:
            for group in self._play(trainer, retriever, step, chosen, draw, rank):
                played.append(group)
                (uniform if group.uniform else informative).append(group)
            if first_uniform is None:  # the share a run without dynamic sampling would have trained on
                first_uniform = len(uniform) / wanted
            needed = wanted - len(informative)
            if not needed or draw == self.rl.dynamic_sampling:
                break
            draw += 1
            chosen = self.curriculum.select(step, needed, draw=draw * world + rank)
        trained = informative + uniform[:wanted - len(informative)]
        batch = StepBatch(step, [q for g in trained for q in [g.question] * generations],
                          [e for g in trained for e in g.episodes], [r for g in trained for r in g.rewards],
                          untrained=[(g.question, g.success) for g in uniform[wanted - len(informative):]],
                          guided=[g.guided and i == generations - 1 for g in trained for i in range(generations)])
        self.last = batch
        metrics = {**self.curriculum.metrics(step), "groups/uniform_first_draw": first_uniform,
                   "groups/uniform_trained": sum(g.uniform for g in trained) / wanted, "groups/extra_draws": draw}
        if self.rl.near_miss:
            metrics["near_miss/rerolled"] = sum(g.rerolled for g in trained)
            metrics["near_miss/solved"] = sum(g.rerolled and g.solved for g in trained)
        if self.rl.guidance.enabled:  # over every group rolled out, replaced ones included
            metrics["guidance/all_wrong"] = sum(not g.solved or g.guided for g in played) / len(played)
            metrics["guidance/guided"] = sum(g.guided for g in trained)
        if isinstance(retriever, SimulatedRetriever):
            counts = simulated_counts(r for e in batch.episodes for r in e.retrieved)
            metrics["search/simulated_passages"] = counts["simulated_passages"]
            metrics["search/noisy_share"] = counts["noisy_passages"] / max(counts["passages"], 1)
        elif noise > 0:
            metrics["curriculum/noise_replaced"] = retriever.replaced / max(retriever.total, 1)
        for name, value in metrics.items():
            trainer._log_metric(name, value)
        return trl_batch(batch.episodes, self.tokenizer.eos_token_id, self.answer_mask)

    @property
    def answer_mask(self):
        """The tokenizer to find constrained answers with when ``rl.extractive_answers: masked`` (they leave the
        loss), else None."""
        return self.tokenizer if self.rl.extractive_answers == "masked" else None

    def _step_retriever(self, step: int, rank: int):
        """The retriever of step ``step``: the noise curriculum's share of its passages replaced; and that share."""
        retriever, noise = self.retriever, self.curriculum.noise_probability(step)
        # per step, so a resumed run simulates the same; per process (rank 0 as a one-process run), so processes
        # do not replace the same passages
        seed = self.rl.seed * 7919 + step + rank * 10 ** 6
        if isinstance(retriever, SimulatedRetriever):  # the noise curriculum sets its share of noisy passages
            retriever.noise_probability = noise
            retriever.rng.seed(seed)
        elif noise > 0:
            retriever = NoisyRetriever(self.retriever, self.distractors, noise, seed=seed)
        return retriever, noise

    def _play(self, trainer, retriever, step: int, questions: list[QuestionRecord], draw: int,
              rank: int) -> list["Group"]:
        """Roll out and score ``num_generations`` episodes of each question (draw ``draw`` of step ``step``)."""
        generations = trainer.num_generations
        if self.renamer is not None:  # a seed per draw of a step and process: a resumed run renames the same
            names = self.renamer.permutation(random.Random(f"{self.rl.seed}/{step}/{draw}/{rank}"))
            questions = [renamed_question(q, names) for q in questions]
            retriever = RenamedRetriever(retriever, names)
        repeated = [q for q in questions for _ in range(generations)]
        params = training_rollout_params(self.rollout_params, self.rl, step, len(repeated), rank, draw)
        started = time.perf_counter()
        episodes = self._rollout(trainer, retriever, [q.question for q in repeated], params)
        self.timings["rollout"] += time.perf_counter() - started
        started = time.perf_counter()
        rewards = [self.score(e, q) for e, q in zip(episodes, repeated)]
        self.timings["reward"] += time.perf_counter() - started
        groups = [Group(q, episodes[g * generations:(g + 1) * generations],
                        rewards[g * generations:(g + 1) * generations]) for g, q in enumerate(questions)]
        if self.rl.near_miss:
            started = time.perf_counter()
            groups = self._near_misses(trainer, retriever, groups, params)
            self.timings["near_miss"] += time.perf_counter() - started
        if self.rl.guidance.enabled:
            groups = [self._guided(group, retriever, params) for group in groups]
        return groups

    def _near_misses(self, trainer, retriever, groups: list[Group], params: RolloutParams) -> list[Group]:
        """``groups`` with, in each that no episode solved, the worst episode replaced by a re-roll of its best near
        miss (David-GRPO's): the episode that retrieved the largest share of the evidence, continued by the policy
        from the end of the search that reached that share. Groups without such an episode stay as they are."""
        starts = []  # (group, its best episode, prefix text, tokens, turns, searches) of each re-roll
        for g, group in enumerate(groups):
            shares = [r.evidence_share or 0.0 for r in group.rewards]
            best = max(range(len(shares)), key=shares.__getitem__)
            if group.solved or shares[best] == 0:
                continue
            episode, evidence = group.episodes[best], group.question.evidence
            searches = next(k for k in range(1, len(episode.retrieved) + 1)
                            if retrieved_share(episode.retrieved[:k], evidence) == shares[best])
            text, tokens, turns = prefix_through_search(self.tokenizer, episode, searches)
            if turns < params.max_turns:
                starts.append((g, best, text, tokens, turns, searches))
        if not starts:
            return groups
        # one batch for every re-roll, each with the turns its episode had left, from a stream of its own
        rerolled = list(groups)
        for turns_left in sorted({params.max_turns - s[4] for s in starts}):
            chunk = [s for s in starts if params.max_turns - s[4] == turns_left]
            prompts = [groups[g].episodes[0].prompt + text for g, _, text, *_ in chunk]
            chunk_params = params.model_copy(update={"max_turns": turns_left, "batch_size": len(chunk),
                                                     "seed": params.seed + 7 * turns_left + 1})
            with generation_model(trainer) as model:
                rests = rollout(model, self.tokenizer, retriever, [groups[g].question.question for g, *_ in chunk],
                                policy_params(trainer, chunk_params), prompts)
            for (g, best, _, tokens, turns, searches), rest in zip(chunk, rests):
                group = groups[g]
                episode = continued(group.episodes[best], tokens, turns, searches, rest)
                worst = min((i for i in range(len(group.rewards)) if i != best), key=lambda i: group.rewards[i].total)
                episodes, rewards = list(group.episodes), list(group.rewards)
                episodes[worst], rewards[worst] = episode, self.score(episode, group.question)
                rerolled[g] = Group(group.question, episodes, rewards, rerolled=True)
        return rerolled

    def _guided(self, group: Group, retriever, params: RolloutParams) -> Group:
        """``group`` with its last episode replaced by the question's demonstration when no episode of it is right
        and the demonstration, played now, is (see the module docstring); else ``group`` as it is."""
        turns = self.demos.get(group.question.id)
        if group.solved or turns is None:
            return group
        demo = replay(self.tokenizer, retriever, group.question.question, turns, params)
        scored = self.score(demo, group.question)
        if not exact_match(demo.answer or "", group.question.answers):
            return group
        return Group(group.question, [*group.episodes[:-1], demo], [*group.rewards[:-1], scored], guided=True,
                     rerolled=group.rerolled)

    def _rollout(self, trainer, retriever, questions: list[str], params: RolloutParams) -> list[Rollout]:
        with generation_model(trainer) as model:
            if isinstance(retriever, SimulatedRetriever) and self.rl.search.simulator is None:
                retriever.use(model)  # self-search: the policy being trained writes its own search results
            return rollout(model, self.tokenizer, retriever, questions, policy_params(trainer, params))

    def score(self, episode: Rollout, question: QuestionRecord) -> RewardBreakdown:
        """The reward of one episode of ``question`` (:func:`searchlab.rl.rewards.reward` under ``rl.reward``)."""
        return reward(episode, question.answers, present(question.evidence), self.rl.reward,
                      chain=present(question.constraints), scale=self.reward_scale)

    # -- TRL's reward function
    def reward_func(self, prompts, completions, **kwargs) -> list[float]:
        """The total reward of each of the last step's episodes, scored when rolled out (its parts are logged)."""
        batch = self.last
        if batch is None or len(batch.episodes) != len(completions):
            raise RuntimeError("reward_func was called without the episodes of this step's rollout_func")
        log_metric = kwargs["log_metric"]
        for name, value in episode_metrics(batch).items():
            log_metric(name, value)
        self._keep_trajectories(batch, kwargs.get("trainer_state"))
        return [r.total for r in batch.rewards]

    reward_func.__name__ = "search_reward"  # TRL names the reward's metrics after the function

    def _keep_trajectories(self, batch: StepBatch, state) -> None:
        """Every ``keep_every``-th step's episodes of all processes (in process order), written by the main one;
        every process calls it, as it gathers from all of them."""
        from accelerate.utils import gather_object

        if self.trajectory_dir is None or batch.step % self.keep_every:
            return
        records = []
        for e, q, r, guided in zip(batch.episodes, batch.questions, batch.rewards,
                                   batch.guided or [False] * len(batch.episodes)):
            records.append({"step": batch.step, **trajectory_record(e, q), "reward": r.total, "outcome": r.outcome,
                            "format": r.format, "rubric": r.rubric, "hack": r.hack,
                            "evidence_share": r.evidence_share, "guided": guided,
                            "bucket": q.bucket})
        records = gather_object(records)
        if not getattr(state, "is_world_process_zero", True):
            return
        self.trajectory_dir.mkdir(parents=True, exist_ok=True)
        write_jsonl(self.trajectory_dir / f"step-{batch.step:06d}.jsonl", records)


def episode_metrics(batch: StepBatch) -> dict[str, float]:
    """Means over a step's episodes: reward parts, EM, format rate, searches, turns, answered and hack shares, and
    the well-formed and prompt-copied shares of :func:`~searchlab.agent.samples.protocol_shares`."""
    n = len(batch.episodes)
    rewards, episodes = batch.rewards, batch.episodes

    def mean(values) -> float:
        return float(sum(values)) / n if n else 0.0

    evidence = [r.evidence_share for r in rewards if r.evidence_share is not None]
    shares = protocol_shares(episodes)
    return {
        "episode/evidence_share": sum(evidence) / len(evidence) if evidence else 0.0,
        "episode/evidence_credit": mean(r.evidence for r in rewards),
        "episode/outcome": mean(r.outcome for r in rewards),
        "episode/format_ok": mean(r.format == 0 for r in rewards),
        "episode/evidence": mean(r.evidence > 0 for r in rewards),
        "episode/rubric": mean(r.rubric for r in rewards),
        "episode/hack": mean(r.hack is not None for r in rewards),
        "episode/answered": mean(e.answer is not None for e in episodes),
        "episode/searches": mean(len(e.searches) for e in episodes),
        "episode/turns": mean(e.turns for e in episodes),
        "episode/generated_tokens": mean(e.generated_tokens for e in episodes),
        # the protocol as evaluation parses it, whatever the reward paid for it
        "episode/well_formed": shares["well_formed"],
        "episode/prompt_copied_queries": shares["prompt_copied_queries"],
    }


@contextmanager
def generation_model(trainer):
    """The policy being trained, ready to roll out inside the block: TRL's colocated vLLM engine (whose weights TRL
    synced before calling ``rollout_func``) or the unwrapped model in eval mode."""
    if trainer.use_vllm:
        yield trainer.vllm_generation.llm
        return
    from trl.models import unwrap_model_for_generation

    with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                     gather_deepspeed3_params=trainer.args.ds3_gather_for_generation) as model:
        with evaluating(model):
            yield model


def policy_params(trainer, params: RolloutParams) -> RolloutParams:
    """``params`` with the engine :func:`generation_model` yields for ``trainer``."""
    return params.model_copy(update={"engine": "vllm" if trainer.use_vllm else "hf"})


@contextmanager
def evaluating(model):
    """``model`` in eval mode inside the block, back in the mode it was in after it (training steps need train)."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def load_curriculum_state(curriculum: Curriculum, checkpoint: str | None) -> None:
    """Restore the curriculum saved in ``checkpoint`` (a run resumed there continues its curriculum)."""
    if checkpoint is None:
        return
    path = Path(checkpoint) / CURRICULUM_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the checkpoint has no curriculum state; delete the checkpoint to restart")
    curriculum.load_state_dict(json.loads(path.read_text()))

