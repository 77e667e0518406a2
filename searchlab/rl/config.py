"""The ``rl`` section: curriculum RL's settings, and the GRPO settings the rl and selfplay stages share
(:class:`GRPOTrainingParams`), beside the code they configure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field, model_validator

from searchlab.config import EXECUTION, LoraParams, Section, check_init, check_registry_alias
from searchlab.questions.record import Bucket


CurriculumKind = Literal["difficulty", "sec", "noise", "clpo"]
Estimator = Literal["grpo", "stratified", "igpo"]


def clpo_clash(kinds) -> list[str]:
    """The curricula of ``kinds`` that ``clpo`` cannot be combined with: it draws from its own pool, and only
    ``noise`` composes with it (the rule the params and :class:`searchlab.rl.curriculum.Curriculum` both apply)."""
    return sorted({"difficulty", "sec"} & set(kinds)) if "clpo" in kinds else []


class RewardParams(Section):
    """How an RL episode is rewarded: outcome of the parsed answer, format penalty, evidence bonus, hack guards."""

    metric: Literal["em", "f1", "cover_em"] = Field(
        "em", description="outcome of the parsed `<answer>`: `em` (exact match), `f1` (token F1) or `cover_em` (a "
                          "gold inside the answer, on token boundaries); evaluation scores EM whatever this says")
    format_penalty: float = Field(0.1, ge=0, description="subtracted once from an episode that broke the protocol (no "
                                                         "answer, an invalid action, cut off at `rollout.max_turns`)")
    evidence_bonus: float = Field(0.0, ge=0, description="added when the searches retrieved every gold passage; "
                                                         "0: off")
    evidence_share: float = Field(0.0, ge=0, description="graded credit for search (David-GRPO's): this weight times "
                                                         "the share of the question's evidence passages the "
                                                         "episode's searches retrieved, added whatever the answer; "
                                                         "questions without known evidence get none; 0: off")
    format_credit: Literal["penalty", "graded"] = Field(
        "penalty", description="how the protocol is paid for: `penalty`, `format_penalty` off a broken episode; "
                               "`graded`, Search-R1's format reward (with `format_weight` 1: right and well-formed "
                               "1.0, right but ill-formed 0.8, well-formed and wrong 0.2, an answer but ill-formed "
                               "0.1, else 0), for RL from a model that does not yet follow the protocol")
    format_weight: float = Field(1.0, ge=0, description="scales `graded` format credit (its parts beside the "
                                                        "outcome: +0.2, −0.2, +0.1) and `search_bonus`")
    search_bonus: float = Field(0.0, ge=0, description="R1-Searcher's stage-1 credit: added when the episode ran at "
                                                       "least one search for more than the prompt's own words (a "
                                                       "copied placeholder such as \"query\" earns none), whatever "
                                                       "the answer; 0: off")
    fade_steps: int | None = Field(None, ge=1, description="`graded` format credit and `search_bonus` fall linearly "
                                                           "to 0 over this many steps, leaving the outcome alone "
                                                           "(R1-Searcher's stage 2); null: they stay")
    max_answer_words: int = Field(20, ge=1, description="a longer answer (unless a gold is that long) is a reward "
                                                        "hack and earns nothing")
    rubric_weight: float = Field(0.0, ge=0, le=1, description="C-GRPO's citation-aware rubric reward (CaRR): total = "
                                                              "(1 − w)·outcome + w·outcome·rubric + format + "
                                                              "evidence, the rubric the share of the question's "
                                                              "evidence-chain hops the episode names and supports "
                                                              "with a cited (`<cite>`) passage that states them; 0: "
                                                              "off (the paper uses 0.3)")


class DifficultyCurriculumParams(Section):
    """``difficulty``: easy → medium → hard, advancing when the current bucket's success rate is high enough."""

    advance_at: float = Field(0.6, gt=0, le=1, description="success rate (mean EM over the window) that advances")
    window: int = Field(64, ge=1, description="episodes of the current level the success rate is measured over")
    replay: float = Field(0.2, ge=0, le=1, description="share of questions drawn from easier, unlocked levels")


class SECParams(Section):
    """``sec``: Self-Evolving Curriculum, a bandit over (type, bucket) arms rewarded by how much they teach."""

    alpha: float = Field(0.5, gt=0, le=1, description="TD(0) step size of the arms' values")
    reward: Literal["advantage", "learnability"] = Field(
        "advantage", description="an arm's reward per question: advantage, its group's mean |advantage| (SEC); "
                                 "learnability, 4p(1 - p) of its group's success rate p, so an arm that never (or "
                                 "always) succeeds fades")
    temperature: float = Field(1.0, gt=0, description="Boltzmann temperature of the arm draw")


class NoiseCurriculumParams(Section):
    """``noise``: ZeroSearch's schedule of distractor passages, p_i = p_s + (b^(i/m) - 1)/(b - 1)·(p_e - p_s)."""

    start: float = Field(0.0, ge=0, le=1, description="p_s: the share of passages replaced at the first step")
    end: float = Field(0.5, ge=0, le=1, description="p_e: the share at the last step")
    base: float = Field(2.0, gt=1, description="b: the curve's base (larger: noise rises later)")


class LLDSParams(Section):
    """LLDS: likelihood-preserving regularisation against GRPO's lazy-likelihood-displacement collapse."""

    coef: float = Field(0.0, ge=0, description="weight of the penalty on model tokens whose log-probability fell "
                                               "below their rollout-time value, in trajectories whose likelihood "
                                               "fell; 0: off (needs rl.num_iterations >= 2 to act)")


class GuidanceParams(Section):
    """Expert guidance (LUFFY's, David-GRPO's warm-up): a group the policy fails entirely gets a known path to
    the answer in place of one of its sampled episodes, so GRPO has a right episode to push towards."""

    enabled: bool = Field(False, description="when no sampled episode of a group answers right (EM), replace its "
                                             "last one by a known path to the answer, played through the live "
                                             "environment: in rl the question's demonstration (the qa stage's "
                                             "`demos.jsonl`), in self-play the "
                                             "proposer's searches of the verified question, then its answer")


class DevParams(Section):
    """A fixed dev set the training stage scores at every checkpoint: questions of qa's dev split, never trained on."""

    questions: int = Field(0, ge=0, description="dev questions (the first of qa's dev.jsonl); 0: no dev scoring")
    samples: int = Field(1, ge=0, description="sampled episodes per dev question at the training temperature and "
                                              "answer decoding (sampled EM, beside greedy EM); 0: greedy only")


class SearchBackendParams(Section):
    """Where the rl stage's training rollouts get their passages: the real retriever or a simulated one."""

    backend: Literal["real", "simulated"] = Field(
        "real", description="real: the retriever params; simulated: a language model writes the passages (SSRL's "
                            "self-search, ZeroSearch's simulation LLM); evaluation always searches for real")
    simulator: str | None = Field(None, description="model folder that writes simulated passages, relative to the "
                                                    "root; null: the policy being trained (self-search)")
    passage_tokens: int = Field(48, ge=8, description="most tokens of one simulated passage")


class CLPOParams(Section):
    """``clpo``: CLPO's online curriculum from each question's group success rate, with problem restructuring."""

    mastered_at: float = Field(1.0, gt=0, le=1, description="group success rate at or above which a question is "
                                                            "mastered")
    mastered_weight: float = Field(0.0, ge=0, le=1, description="draw weight of a mastered question (0: dropped)")
    too_hard_at: float = Field(0.0, ge=0, lt=1, description="group success rate at or below which a question is "
                                                            "too hard")
    restructure: bool = Field(True, description="add, for a too-hard multi-hop question, an easier one from its "
                                                "own evidence chain (its first hop dropped, the entity it reached "
                                                "named); the source stays in the pool")
    diversify: bool = Field(True, description="add a rephrasing of a question in reach (from the synthesis "
                                              "templates)")

    @model_validator(mode="after")
    def _thresholds_ordered(self) -> "CLPOParams":
        if self.too_hard_at >= self.mastered_at:
            raise ValueError(f"rl.clpo.too_hard_at ({self.too_hard_at}) must lie below rl.clpo.mastered_at "
                             f"({self.mastered_at})")
        return self


@dataclass(frozen=True)
class GRPOPlan:
    """What one stage's GRPO run is beyond the settings both stages share: its length, the groups of a step, when it
    saves and logs, how training rollouts decode answers, and the loss's options. The defaults are plain GRPO (the
    options rl adds and self-play leaves off)."""

    steps: int
    groups_per_step: int
    save_steps: int = 1
    logging_steps: int = 1
    extractive_answers: Literal["free", "masked", "scored"] = "free"
    estimator: Estimator = "grpo"
    stratified_alpha: float = 0.5
    igpo_weight: float = 1.0
    llds_coef: float = 0.0
    epsilon_high: float | None = None
    num_iterations: int = 1


class GRPOTrainingParams(Section):
    """What the rl and selfplay stages share: TRL's GRPO trainer over the agent's episodes, its optimisation, its
    dev set and what it outputs. A selfplay round is one optimizer step, so "step" reads "round" there.

    Each stage's section says the rest of its run as :attr:`plan`, which the GRPO engine
    (:func:`searchlab.rl.trainer.make_search_trainer`) reads beside these settings."""

    num_generations: int = Field(4, ge=2, description="episodes per question: the GRPO group (in self-play, both "
                                                      "roles': proposals per seed answer, solver episodes per "
                                                      "question, whose success rate is s)")
    grad_accum: int = Field(1, ge=1, description="micro-batches each step's (round's) episodes are split into (one "
                                                 "optimizer step per rollout batch, less memory per pass)")
    learning_rate: float = Field(1e-4, gt=0, description="peak learning rate of AdamW with a cosine schedule")
    warmup_ratio: float = Field(0.0, ge=0, lt=1, description="share of the steps (rounds) the learning rate warms up "
                                                              "over")
    max_grad_norm: float = Field(1.0, gt=0, description="gradient clipping norm")
    temperature: float = Field(1.0, gt=0, description="sampling temperature of the training rollouts (the loss's "
                                                      "log-probabilities use the same)")
    loss_type: Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo"] = Field(
        "grpo", description="TRL's GRPO loss aggregation")
    scale_rewards: Literal["group", "batch", "none"] = Field("group", description="TRL's reward scaling")
    beta: float = Field(0.0, ge=0, description="KL coefficient to the starting policy; 0 loads no reference")
    epsilon: float = Field(0.2, gt=0, description="PPO clip range (lower side)")
    reward: RewardParams = Field(RewardParams(), description="how an episode is rewarded against its gold answer (in "
                                                             "self-play, the solver's against the seed answer): "
                                                             "outcome, format penalty, evidence bonus, hack guards")
    dev: DevParams = Field(DevParams(), description="a fixed dev set scored at the start and at every checkpoint (every "
                                                    "round in self-play): greedy EM as evaluation decodes (`dev/em`) "
                                                    "and sampled EM (`dev/sampled_em`), logged to MLflow and "
                                                    "`train_log.jsonl`")
    guidance: GuidanceParams = Field(GuidanceParams(), description="expert demonstrations in the groups the policy "
                                                                   "fails entirely (in self-play, the solver's)")
    keep: Literal["last", "best"] = Field("last", description="the policy the stage outputs: `last`, the last step's "
                                                              "(round's), or `best`, the checkpoint of the best greedy "
                                                              "dev EM, the starting policy included (the first of "
                                                              "equals; needs `dev.questions`); the "
                                                              "manifest records `kept_step`, `dev_em_start`, "
                                                              "`dev_em_kept`")
    seed: int = Field(0, description="seed of the question draws (rl's curriculum; self-play's seed answers and "
                                     "solver questions) and of every step's rollouts")
    samples: int = Field(100, ge=0, description="held-out questions the trained agent answers after training "
                                                "(`samples.md`)")
    use_vllm: bool = Field(False, description="roll out with TRL's colocated vLLM engine (CUDA only: refused on a "
                                              "machine without it, naming the key)")
    vllm_gpu_memory_utilization: float = Field(
        0.3, gt=0, le=1, json_schema_extra=EXECUTION,
        description="share of GPU memory TRL's colocated vLLM engine may take")
    threads: int | None = Field(None, ge=1, description="torch threads on a CPU; null: torch's default")
    num_processes: int | None = Field(None, ge=1, description="training processes (one per GPU); null: as sft")
    accelerate_config: str | None = Field(None, description="an accelerate config file, relative to the root")
    activation_checkpointing: bool | None = Field(None, description="recompute activations in the backward pass "
                                                                  "(less memory, more compute); null: on GPUs only")
    cpu_bf16: bool = Field(False, description="on a CPU too, train under bfloat16 autocast (float32 weights and "
                                              "optimizer, as on GPUs, where it is always on when they have "
                                              "bfloat16): SmolLM2's SFT ran 61% faster on a 2-core AMX CPU "
                                              "(bench/smollm2_speed.py)")
    lora: LoraParams = Field(LoraParams(), description="LoRA adapters for the policy (merged in before it is saved)")
    registry_name: str = Field("searchlab-agent", description="MLflow registered model the policy becomes a "
                                                               "version of")

    @property
    def plan(self) -> GRPOPlan:
        """This stage's run: set by each stage's section."""
        raise NotImplementedError(f"{type(self).__name__} states no GRPO plan")


class RLParams(GRPOTrainingParams):
    """Curriculum RL: TRL's GRPOTrainer over the agent's own multi-turn search episodes, from ``rl.init``."""

    init: str = Field("sft", description="the policy RL starts from: sft, base (the pretrained or tiny model, with "
                                         "the agent's instruction: Search-R1's setting) or selfplay (those stages' "
                                         "models), a local Hugging Face folder, or models:/NAME@ALIAS; the rl stage "
                                         "depends on the stage it names only")
    steps: int = Field(60, ge=1, description="optimizer steps; each rolls out a fresh batch")
    questions_per_step: int = Field(8, ge=1, description="distinct training questions per step (per process)")
    extractive_answers: Literal["free", "masked", "scored"] = Field(
        "free", description="answers of the training rollouts: free, sampled freely; masked, decoded under "
                           "rollout.extractive_answers' constraint (as evaluation decodes them) with the constrained "
                           "answer tokens out of the loss; scored, constrained and in the loss (the policy learns to "
                           "put its mass on the span it copied)")
    dynamic_sampling: int = Field(0, ge=0, description="DAPO's dynamic sampling: up to this many extra draws of a "
                                                       "step's questions replace groups whose episodes all earned the "
                                                       "same reward (no advantage); the last draw's uniform groups "
                                                       "fill what is left; 0: off")
    renamed: bool = Field(False, description="training episodes play in the world under a random permutation of the "
                                             "corpus's titles, new every step (question, passages and answers "
                                             "renamed, queries restored before searching): recalling the names "
                                             "sft showed cannot earn the reward, only reading can")
    epsilon_high: float | None = Field(None, gt=0, description="upper clip range (DAPO's clip-higher); null: epsilon")
    num_iterations: int = Field(1, ge=1, description="optimizer passes over each rolled-out batch")
    estimator: Estimator = Field(
        "grpo", description="grpo: TRL's group advantage; stratified: Stratified GRPO (strata of equal search "
                            "count); igpo: plus IGPO's turn-level information gain")
    stratified_alpha: float = Field(0.5, ge=0, le=1, description="Stratified GRPO's blend: alpha·stratified + "
                                                                  "(1 - alpha)·global")
    igpo_weight: float = Field(1.0, ge=0, description="IGPO: weight of a turn's information gain in its advantage")
    buckets: list[Bucket] = Field(default_factory=lambda: ["easy", "medium", "hard"],
                                  description="difficulty buckets RL trains on (DeReason's split with sft.buckets)")
    questions: list[Literal["qa", "selfplay"]] = Field(
        default_factory=lambda: ["qa"], description="question sets RL trains on: `qa` (the qa stage's training "
                                                    "questions), `selfplay` (the selfplay stage's verified questions: "
                                                    "the seed answer is the gold, type `selfplay`, bucket easy / "
                                                    "medium / hard by the solver's success rate s during self-play, s "
                                                    "≥ 0.75 / ≥ 0.25 / below), or both")
    curriculum: list[CurriculumKind] = Field(
        default_factory=list, description="any of `difficulty`, `sec`, `noise`, `clpo` (composable, except `clpo` "
                                          "with `difficulty` or `sec`); `[]`: questions drawn uniformly")
    difficulty: DifficultyCurriculumParams = Field(
        DifficultyCurriculumParams(), description="the `difficulty` curriculum: easy → medium → hard")
    sec: SECParams = Field(SECParams(), description="the `sec` curriculum: Self-Evolving Curriculum, a bandit over "
                                                    "(type, bucket) arms")
    noise: NoiseCurriculumParams = Field(
        NoiseCurriculumParams(), description="the `noise` curriculum, ZeroSearch's schedule: at step i of m a "
                                             "retrieved passage is replaced by a random corpus passage with p = start "
                                             "+ (base^(i/m) − 1)/(base − 1)·(end − start)")
    clpo: CLPOParams = Field(CLPOParams(), description="the `clpo` curriculum: CLPO's online curriculum from each "
                                                       "question's group success rate, with problem restructuring; "
                                                       "the questions it adds are verified by the qa stage's checks "
                                                       "(needs the corpus's `kb.jsonl`)")
    near_miss: bool = Field(False, description="David-GRPO's near-miss re-sampling: in a group no episode solved, "
                                               "the episode that retrieved the largest share of the evidence is "
                                               "continued by the policy from the end of the search that reached "
                                               "it, in place of the group's worst episode; needs known evidence "
                                               "(synthesized questions)")
    llds: LLDSParams = Field(LLDSParams(), description="LLDS: likelihood-preserving regularisation against GRPO's "
                                                       "lazy-likelihood-displacement collapse")
    search: SearchBackendParams = Field(
        SearchBackendParams(), description="where the training rollouts get their passages: the real retriever or a "
                                           "simulated one")
    save_steps: int = Field(10, ge=1, description="checkpoint every this many steps, in `data/.work/rl/` (the unit of "
                                                  "resume and of dev scoring)")
    logging_steps: int = Field(1, ge=1, json_schema_extra=EXECUTION, description="log metrics every this many steps")
    registry_alias: str = Field("rl", description="alias pointed at the newest version")

    @property
    def plan(self) -> GRPOPlan:
        """rl's run: ``steps`` steps of ``questions_per_step`` groups, and every loss option of the section."""
        return GRPOPlan(steps=self.steps, groups_per_step=self.questions_per_step, save_steps=self.save_steps,
                        logging_steps=self.logging_steps, extractive_answers=self.extractive_answers,
                        estimator=self.estimator, stratified_alpha=self.stratified_alpha,
                        igpo_weight=self.igpo_weight, llds_coef=self.llds.coef, epsilon_high=self.epsilon_high,
                        num_iterations=self.num_iterations)

    @model_validator(mode="after")
    def _check(self) -> "RLParams":
        check_registry_alias(self.registry_alias, "rl")
        check_init(self.init, "rl", ("base", "sft", "selfplay"))
        if not self.buckets:
            raise ValueError("rl.buckets: name at least one of easy, medium, hard")
        episodes = self.questions_per_step * self.num_generations
        if episodes % self.grad_accum:
            raise ValueError(f"rl.grad_accum {self.grad_accum} does not divide the {episodes} episodes of a step "
                             f"(rl.questions_per_step x rl.num_generations)")
        if len(set(self.curriculum)) != len(self.curriculum):
            raise ValueError(f"rl.curriculum: each kind once, got {self.curriculum}")
        if not self.questions or len(set(self.questions)) != len(self.questions):
            raise ValueError(f"rl.questions: qa, selfplay or both, each once; got {self.questions}")
        if clpo_clash(self.curriculum):
            raise ValueError(f"rl.curriculum: clpo draws from its own pool and combines only with noise, got "
                             f"{self.curriculum}")
        if self.search.backend == "simulated" and self.search.simulator is None and self.use_vllm:
            raise ValueError("rl.search.simulator: self-search (null) writes passages with the policy's Hugging Face "
                             "model, which rl.use_vllm replaces; name a simulator folder or set rl.use_vllm: false")
        if self.keep == "best" and not self.dev.questions:
            raise ValueError("rl.keep: best chooses by dev EM; set rl.dev.questions (e.g. 64) or rl.keep: last")
        if self.extractive_answers != "free" and self.use_vllm:
            raise ValueError("rl.extractive_answers: the constraint needs the Hugging Face engine (vLLM has no "
                             "per-step hook for it); set it to free or rl.use_vllm: false")
        if self.guidance.enabled and self.renamed:
            raise ValueError("rl.guidance.enabled: a demonstration names the corpus's own titles, which rl.renamed "
                             "permutes; set one of them to false")
        if self.llds.coef > 0 and self.num_iterations < 2:
            raise ValueError("rl.llds.coef: LLDS compares each token's likelihood with its rollout-time value, which "
                             "equals the current one when every batch is used once; set rl.num_iterations >= 2")
        return self
