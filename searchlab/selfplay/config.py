"""The ``selfplay`` section: search self-play's settings, beside the code they configure."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from searchlab.config import check_init, check_registry_alias
from searchlab.rl.config import GRPOPlan, GRPOTrainingParams


class SelfPlayParams(GRPOTrainingParams):
    """Search self-play (SSP): the sft policy proposes questions, retrieval verifies them, and it learns to solve them.

    Each round is one optimizer step of the rl stage's GRPO trainer over both roles' episodes; the optimisation
    settings mean what they mean under ``rl``.
    """

    init: str = Field("sft", description="the policy self-play starts from: sft or base (those stages' models), a "
                                         "local Hugging Face folder, or models:/NAME@ALIAS")
    rounds: int = Field(4, ge=1, description="propose -> verify -> solve -> update rounds; a round is the unit of "
                                             "resume")
    proposals_per_round: int = Field(4, ge=1, description="seed answers per round (per process), never a held-out "
                                                          "answer; the proposer writes num_generations questions for "
                                                          "each")
    solver_questions: int = Field(4, ge=1, description="verified questions the solver trains on per round (this "
                                                       "round's first, then earlier rounds' kept questions replayed); "
                                                       "groups nothing fills carry no learning signal")
    seeds: Literal["names", "values"] = Field("names", description="where seed answers come from: `names` (the names "
                                                                   "of KB entities that another entity's fact points "
                                                                   "to, as in 'founded by X'; all names if the KB has "
                                                                   "no relations), `values` (also the values of all "
                                                                   "facts: dates, numbers, words); passage titles "
                                                                   "without a KB")
    proposer_reward: Literal["1-s", "4s(1-s)"] = Field(
        "1-s", description="reward of a verified question: 1 - s (SSP), or 4s(1 - s) (highest at s = 0.5)")
    invalid_reward: float = Field(-1.0, le=0, description="reward of a proposal that fails verification (with "
                                                          "graded, of one that fails the first check)")
    graded: bool = Field(False, description="`true`: a failed proposal earns `invalid_reward` × (1 − i/n), i the "
                                            "checks it passed of the n run in order (no question, too long, no "
                                            "search, names the answer, ungrounded, RAG check, closed book, KB, "
                                            "duplicate): a grounded question that does not name its answer beats no "
                                            "question, so a group with no verified question still has a spread to "
                                            "learn from")
    proposer: str = Field("policy", description="who proposes: policy (the policy being trained plays both roles), "
                                                "or a frozen model that proposes while the policy only solves: base "
                                                "or sft (those stages' models), smollm2-135m-instruct or a .gguf "
                                                "file, a local Hugging Face folder, or models:/NAME@ALIAS")
    max_question_words: int = Field(40, ge=3, description="a longer proposed question fails verification")
    grounded: bool = Field(True, description="reject a question that uses no name (a run of capitalised words), "
                                             "or one the proposer's passages do not contain")
    kb_filter: bool = Field(False, description="also reject a question the knowledge base does not confirm (right and "
                                               "unique); uses the KB as a label, so off by default; needs a corpus "
                                               "with `kb.jsonl`")
    keep_checkpoints: int | None = Field(None, ge=1, description="round checkpoints kept in `data/.work/selfplay/`; "
                                                                 "null: every round's")
    registry_alias: str = Field("selfplay", description="alias pointed at the newest version")

    @model_validator(mode="after")
    def _check(self) -> "SelfPlayParams":
        check_registry_alias(self.registry_alias, "selfplay")
        check_init(self.init, "selfplay", ("base", "sft"))
        if self.proposer != "policy":
            check_init(self.proposer, "selfplay", ("base", "sft"), key="proposer")
        if self.keep == "best" and not self.dev.questions:
            raise ValueError("selfplay.keep: best chooses by dev EM; set selfplay.dev.questions (e.g. 64) or "
                             "selfplay.keep: last")
        episodes = self.trained_groups * self.num_generations
        if episodes % self.grad_accum:
            raise ValueError(f"selfplay.grad_accum {self.grad_accum} does not divide the {episodes} trained episodes "
                             f"of a round ((proposals_per_round + solver_questions) x num_generations, without "
                             f"the proposals when selfplay.proposer is another model)")
        return self

    @property
    def trained_groups(self) -> int:
        """GRPO groups per round: the solver's, and the proposer's when the policy proposes."""
        return self.solver_questions + (self.proposals_per_round if self.proposer == "policy" else 0)

    @property
    def plan(self) -> GRPOPlan:
        """Self-play's run: one step per round over both roles' groups, each round saved and logged (its unit of
        resume), plain GRPO's loss."""
        return GRPOPlan(steps=self.rounds, groups_per_step=self.trained_groups)
