"""Self-play rounds as the environment of the rl stage's GRPO trainer: one trainer step is one round.

:class:`SelfPlayRounds` plays :class:`searchlab.rl.env.SearchEpisodes`' part
for :func:`searchlab.rl.trainer.make_search_trainer` (same trainer, rewards, masks and
checkpoints). Each round (the trainer's ``rollout_func`` for step ``k``):

1. **propose**: ``proposals_per_round`` seed answers, ``num_generations``
   proposer episodes each (the proposer's GRPO group), sampled; by the
   policy, or by another, frozen model (``selfplay.proposer``), whose episodes
   are then not trained on;
2. **verify** every proposal (:func:`searchlab.selfplay.verify.verify`);
3. **solve**: ``num_generations`` solver episodes for every verified question
   (their mean EM is its success rate ``s``) and for the earlier rounds'
   kept questions replayed to fill ``solver_questions`` training groups;
4. **update**: the proposer groups (reward ``1 - s`` or ``4s(1 - s)`` for a
   verified proposal, ``invalid_reward`` for one that failed, or with
   ``graded`` a share of it by how far it got: :func:`proposer_reward`) and the
   solver groups (the rl stage's reward of the parsed answer against the seed
   answer) form the step's batch; groups nothing fills (no question to solve
   yet) are one-token episodes with no reward, which TRL gives no advantage.
   With ``guidance``, a solver group with no right episode gets the question's
   known path in place of its last one (:func:`known_path`: the proposer's
   searches, then the seed answer, played through the live retriever), when
   that path answers right; the success rate ``s`` stays the policy's own.

Both roles' environment text (passages, feedback) is masked out of the loss
as in the rl stage. Every proposal with its verdict goes to
``rounds_dir/round-NNNN.jsonl``; a round redone after a crash (the trainer
resumes at its last checkpoint, saved every round) rewrites its file, and the
kept questions of earlier rounds are read back from their files.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from searchlab.agent.episode import Rollout
from searchlab.agent.protocol import proposer_instruction
from searchlab.agent.replay import replay
from searchlab.agent.rollout import rollout
from searchlab.agent.text import chat_prompt, encode_prompt
from searchlab.jsonl import read_jsonl, write_jsonl
from searchlab.params import RolloutParams
from searchlab.rl.env import StepBatch, generation_model, policy_params, training_rollout_params, trl_batch
from searchlab.rl.rewards import reward
from searchlab.scoring import exact_match, normalize_answer
from searchlab.selfplay.config import SelfPlayParams
from searchlab.selfplay.seeds import draw_seeds
from searchlab.selfplay.verify import CHECKS, KBCheck, Proposal, novelty, verify


class HitLog:
    """A retriever that remembers the passages each query returned (a query always returns the same)."""

    def __init__(self, retriever) -> None:
        self.retriever, self.hits = retriever, {}

    def search(self, queries: list[str], k: int):
        results = self.retriever.search(queries, k)
        self.hits.update(zip(queries, results))
        return results


def proposer_reward(proposal: Proposal, params: SelfPlayParams) -> float:
    """SSP's proposer reward: ``1 - s`` (or ``4s(1 - s)``) for a verified question, ``invalid_reward`` otherwise.

    With ``graded``, a failed proposal earns ``invalid_reward * (1 - i / n)``,
    ``i`` the checks it passed of the ``n`` of :data:`~searchlab.selfplay.verify.CHECKS`:
    with no verified question in a group (the tiny proposer's usual case), a
    grounded question that does not name its answer still beats no question,
    so the group has a spread to learn from.
    """
    if not proposal.verified:
        if params.graded:
            return params.invalid_reward * (1 - CHECKS.index(proposal.reason) / len(CHECKS))
        return params.invalid_reward
    s = proposal.solver_success or 0.0
    return 1.0 - s if params.proposer_reward == "1-s" else 4.0 * s * (1.0 - s)


def unique_across_processes(proposals: list[Proposal], rank: int) -> None:
    """Turn this process's verified proposals whose question a process before it verified this round into
    duplicates (:func:`searchlab.selfplay.verify.verify` sees only its own process's proposals and the earlier
    rounds'), so a round keeps each question once however many processes propose. Every process must call it:
    it gathers from all of them."""
    from accelerate.utils import gather_object

    mine = [normalize_answer(x.question) for x in proposals if x.verified]
    earlier = {key for keys in gather_object([mine])[:rank] for key in keys}
    for x in proposals:
        if x.verified and normalize_answer(x.question) in earlier:
            x.verified, x.reason = False, "duplicate"


def known_path(queries: list[str], answer: str) -> list[str]:
    """A verified question's solver turns: the searches its proposer made (which found the passages the question was
    verified on), then its seed answer.

    >>> known_path(["Althouhelm founded"], "1167")
    ['<search> Althouhelm founded </search>', '<answer> 1167 </answer>']
    """
    return [*(f"<search> {query} </search>" for query in queries), f"<answer> {answer} </answer>"]


def round_file(rounds_dir: Path, index: int) -> Path:
    return rounds_dir / f"round-{index:04d}.jsonl"


class _FillerWarning(logging.Filter):
    """TRL warns, printing a whole episode, for every step with a row no reward function scored: self-play's
    fillers are such rows on purpose (module doc), so here the warning is a flood that says nothing."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "All reward functions returned None" not in record.getMessage()


FILLER_WARNING = _FillerWarning()


@dataclass
class _PlayedRound:
    """One round's episodes: the seed answers (each repeated per generation), the proposer's episodes and their
    proposals (the verified among them), the (question, answer) pairs the solver trains on and all it solved, and
    the solver's episodes with their rollout settings."""

    answers: list[str]
    proposer_episodes: list[Rollout]
    proposals: list[Proposal]
    verified: list[Proposal]
    trained: list[tuple[str, str]]
    solved: list[tuple[str, str]]
    solver_episodes: list[Rollout]
    solver_params: RolloutParams


@dataclass(frozen=True)
class SelfPlayWorld:
    """What self-play takes from the corpus and the qa stage: the seed answers (:func:`searchlab.selfplay.seeds.
    seed_answers`), the qa stage's questions normalised (novelty is measured against them, and a proposal that
    repeats one fails), and the KB check (``selfplay.kb_filter``; None: none)."""

    seeds: list[str]
    known: set[str] = field(default_factory=set)
    kb_check: KBCheck | None = None


class SelfPlayRounds:
    """The self-play environment of one training run (see the module doc); ``curriculum`` is None for the trainer.

    ``proposer``: ``(model, tokenizer)`` of a frozen proposer (``selfplay.proposer`` names a model), or None when
    the policy proposes.
    """

    curriculum = None

    def __init__(self, tokenizer, retriever, world: SelfPlayWorld, rollout_params: RolloutParams,
                 params: SelfPlayParams, rounds_dir: Path, proposer: tuple | None = None) -> None:
        seeds = world.seeds
        if len(seeds) < params.proposals_per_round:
            raise ValueError(f"selfplay.proposals_per_round is {params.proposals_per_round}, but the corpus gives only "
                             f"{len(seeds)} seed answers")
        self.tokenizer, self.retriever, self.seeds, self.proposer = tokenizer, retriever, seeds, proposer
        self.rollout_params, self.params = rollout_params, params
        self.rounds_dir, self.known, self.kb_check = rounds_dir, world.known, world.kb_check
        self.kept: set[str] | None = None  # normalised kept questions, read back from earlier rounds when first needed
        self.history: list[dict] = []  # earlier rounds' kept questions: the solver's replay
        self.last: StepBatch | None = None
        self.rollout_seconds = 0.0
        logging.getLogger("trl.trainer.grpo_trainer").addFilter(FILLER_WARNING)  # added once, however many runs

    def _remember(self, records: list[dict]) -> None:
        """Keep the verified ones of a round's ``records``: for the duplicate check and the solver's replay."""
        for record in records:
            if record["verified"]:
                self.kept.add(normalize_answer(record["question"]))
                self.history.append(record)

    def _read_history(self, before: int) -> None:
        self.kept, self.history = set(), []
        for index in range(before):
            path = round_file(self.rounds_dir, index)
            self._remember(read_jsonl(path) if path.is_file() else [])

    # -- TRL's rollout_func
    def rollout_func(self, prompts: list, trainer) -> dict[str, list]:
        """Play one round (module doc); return every episode of both roles for the update."""
        p, generations = self.params, trainer.num_generations
        expected = p.trained_groups * generations
        if len(prompts) != expected:
            raise ValueError(f"the trainer asked for {len(prompts)} episodes, a round has {expected}")
        step = trainer.state.global_step
        if self.kept is None:
            self._read_history(step)
        started = time.perf_counter()
        played = self._play(trainer, step)
        self.rollout_seconds += time.perf_counter() - started

        scored = [reward(e, [a], None, p.reward) for e, (_, a) in
                  zip(played.solver_episodes, [item for item in played.solved for _ in range(generations)])]
        groups = {item: range(i * generations, (i + 1) * generations) for i, item in enumerate(played.solved)}
        for x in played.verified:
            members = groups[(x.question, x.answer)]
            x.solver_success = sum(scored[i].outcome for i in members) / generations
            x.solver_answers = [played.solver_episodes[i].answer for i in members]
        if p.guidance.enabled:
            paths = {(r["question"], r["answer"]): [s["query"] for s in r["searches"]] for r in self.history}
            paths.update({(x.question, x.answer): [query for query, _ in x.searches] for x in played.verified})
            guided = self._guide(played.trained, groups, paths, played.solver_episodes, scored, played.solver_params)
            trainer._log_metric("selfplay/guided", guided)
        proposer_rewards = [proposer_reward(x, p) for x in played.proposals]
        self.last = self._step_batch(step, played, groups, scored, proposer_rewards, generations)
        self._record(trainer, step, played.proposals, proposer_rewards)
        return trl_batch(self.last.episodes, self.tokenizer.eos_token_id)

    def _play(self, trainer, step: int) -> _PlayedRound:
        """Round ``step``'s episodes: the proposer's for this process's seed answers, verification, then the
        solver's on every verified question and the replayed ones it trains on."""
        p, generations = self.params, trainer.num_generations
        rank, world = trainer.accelerator.process_index, trainer.accelerator.num_processes
        answers = [a for a in draw_seeds(self.seeds, step, p.proposals_per_round, p.seed, rank, world)
                   for _ in range(generations)]
        params = training_rollout_params(self.rollout_params, p, step, len(answers), rank)
        log = HitLog(self.retriever)
        with generation_model(trainer) as model:
            proposer, proposer_tokenizer = self.proposer or (model, self.tokenizer)
            if self.proposer:  # a frozen model generates on the device the trainer put the policy on
                proposer.to(trainer.accelerator.device)
            proposer_params = params.model_copy(update={"engine": "hf"}) if self.proposer else policy_params(
                trainer, params)
            proposer_episodes = rollout(proposer, proposer_tokenizer, log, answers, proposer_params,
                                        [chat_prompt(proposer_tokenizer, proposer_instruction(a)) for a in answers])
            proposals = [Proposal(step, a, e.proposed, [(q, log.hits[q]) for q in e.searches[:len(e.retrieved)]],
                                  e.completion) for a, e in zip(answers, proposer_episodes)]
            verify(proposals, model, self.tokenizer, self.retriever, policy_params(trainer, self.rollout_params),
                   self.kept, p, self.kb_check)
            unique_across_processes(proposals, rank)
            verified = [x for x in proposals if x.verified]
            rng = random.Random(f"{p.seed}/selfplay/solver/{step}/{rank}")
            fresh = [(x.question, x.answer) for x in rng.sample(verified, len(verified))]
            replay = [(r["question"], r["answer"]) for r in rng.sample(self.history, len(self.history))]
            trained = list(dict.fromkeys(fresh + replay))[:p.solver_questions]
            solved = list(dict.fromkeys([(x.question, x.answer) for x in verified] + trained))
            # a sampling stream of its own, apart from every process's proposer stream
            solver_params = params.model_copy(update={"seed": params.seed + 10**9,
                                                      "batch_size": max(1, len(solved)) * generations})
            questions = [q for q, _ in solved for _ in range(generations)]
            solver_episodes = rollout(model, self.tokenizer, self.retriever, questions,
                                      policy_params(trainer, solver_params)) if solved else []
        return _PlayedRound(answers, proposer_episodes, proposals, verified, trained, solved, solver_episodes,
                            solver_params)

    def _step_batch(self, step: int, played: _PlayedRound, groups: dict, scored: list,
                    proposer_rewards: list[float], generations: int) -> StepBatch:
        """What the round trains on: the proposer's episodes (when the policy proposes), the trained questions'
        solver groups, and reward-less fillers for the solver groups nothing filled."""
        p = self.params
        episodes: list[Rollout] = [] if self.proposer else list(played.proposer_episodes)
        rewards: list[float | None] = [] if self.proposer else list(proposer_rewards)
        roles = [] if self.proposer else [{"role": "proposer", "answer": a} for a in played.answers]
        for item in played.trained:
            episodes += [played.solver_episodes[i] for i in groups[item]]
            rewards += [scored[i].total for i in groups[item]]
            roles += [{"role": "solver", "question": item[0], "answers": [item[1]]}] * generations
        fillers = (p.solver_questions - len(played.trained)) * generations  # nothing to solve yet: no signal
        episodes += [self._filler(played.answers[0])] * fillers
        rewards += [None] * fillers
        roles += [{"role": "filler"}] * fillers
        return StepBatch(step, roles, episodes, rewards)

    def _record(self, trainer, step: int, proposals: list[Proposal], proposer_rewards: list[float]) -> None:
        """Log the round's figures, write every process's proposals to the round's file, remember the kept ones."""
        from accelerate.utils import gather_object

        records = gather_object([x.record() for x in proposals])
        batch = self.last
        summary = round_summary(step, records, proposer_rewards,
                                [batch.rewards[i] for i, r in enumerate(batch.questions) if r["role"] == "solver"],
                                self.known, self.kb_check is not None)
        for name, value in summary.items():
            if name != "round":
                trainer._log_metric(f"selfplay/{name}", value)
        if trainer.accelerator.is_main_process:
            self.rounds_dir.mkdir(parents=True, exist_ok=True)
            write_jsonl(round_file(self.rounds_dir, step), records)
        self._remember(records)

    def _guide(self, trained: list[tuple[str, str]], groups: dict, paths: dict[tuple[str, str], list[str]],
               episodes: list[Rollout], scored: list, params: RolloutParams) -> int:
        """Put the known path (:func:`known_path`) of each ``trained`` question whose solver group has no right
        episode in place of the group's last episode, in ``episodes`` and ``scored``, when the path played now
        answers right; the number of groups guided."""
        guided = 0
        for question, answer in trained:
            members = groups[(question, answer)]
            if any(exact_match(episodes[i].answer or "", [answer]) for i in members):
                continue
            demo = replay(self.tokenizer, self.retriever, question, known_path(paths[(question, answer)], answer),
                          params)
            if exact_match(demo.answer or "", [answer]):
                episodes[members[-1]], scored[members[-1]] = demo, reward(demo, [answer], None, self.params.reward)
                guided += 1
        return guided

    def _filler(self, answer: str) -> Rollout:
        """A row of the batch that trains nothing: the policy's proposer prompt and one end-of-text token."""
        prompt = chat_prompt(self.tokenizer, proposer_instruction(answer))
        return Rollout(answer, prompt, prompt_ids=encode_prompt(self.tokenizer, prompt),
                       completion_ids=[self.tokenizer.eos_token_id], env_mask=[0])

    # -- TRL's reward function
    def reward_func(self, prompts, completions, **kwargs) -> list[float | None]:
        """The rewards :meth:`rollout_func` gave this round's episodes (None: a filler, no advantage)."""
        batch = self.last
        if batch is None or len(batch.episodes) != len(completions):
            raise RuntimeError("reward_func was called without the episodes of this round's rollout_func")
        return list(batch.rewards)

    reward_func.__name__ = "selfplay_reward"


def round_summary(index: int, records: list[dict], proposer_rewards: list, solver_rewards: list, known: set[str],
                  has_kb: bool) -> dict[str, float]:
    """One round's figures: proposals, verified share (and KB-correct share of those), solver success, searches
    (hops) of verified questions, novelty against the qa stage's questions, mean rewards, rejection shares."""
    verified = [r for r in records if r["verified"]]
    n, v = len(records), len(verified)

    def mean(values) -> float:
        values = [x for x in values if x is not None]
        return sum(values) / len(values) if values else 0.0

    summary = {"round": index, "proposals": n, "verified_share": v / n if n else 0.0,
               "solver_success": mean(r["solver_success"] for r in verified),
               "hops": mean(len(r["searches"]) for r in verified),
               "novelty": novelty([r["question"] for r in verified], known),
               "proposer_reward": mean(proposer_rewards), "solver_reward": mean(solver_rewards)}
    if has_kb:
        summary["kb_correct_share"] = mean(float(bool(r["kb_correct"])) for r in verified)
    for reason, count in Counter(r["reason"] for r in records if r["reason"]).items():
        summary[f"rejected/{reason}"] = count / n
    return summary
