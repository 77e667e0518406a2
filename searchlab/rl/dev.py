"""A dev set scored while RL trains: does the policy evaluation will run get better, step by step?

Training reward moves within its own sampling noise and is earned under the
training decoding; the question that matters is whether the policy that
evaluation runs (greedy, ``rollout`` params) answers more held-out questions.
:class:`DevScoring` answers it at every checkpoint on a fixed set of questions
from ``qa``'s dev split (never trained on): greedy EM as evaluation decodes, and
sampled EM at the training temperature and answer decoding, which sees shifts
in the distribution that greedy decoding hides. Both are logged with the step's
metrics (``dev/em``, ``dev/sampled_em``: the curves in MLflow and
``train_log.jsonl``); the starting policy's are logged as step 0.

With ``keep: best`` the checkpoint of the best greedy dev EM is recorded in the
Trainer's state (``best_model_checkpoint``, which checkpoint rotation keeps and
a resumed run restores) and loaded back when training ends, so the stage
outputs that policy. The starting policy competes too: it is saved beside the
checkpoints (``step-0``) and kept when no checkpoint beats its dev EM, so a run
that only made the policy worse on dev outputs the policy it started from.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from transformers import TrainerCallback

from searchlab.agent.rollout import rollout
from searchlab.params import RolloutParams
from searchlab.questions.record import QuestionRecord, read_questions
from searchlab.rl.config import GRPOTrainingParams
from searchlab.scoring import exact_match

START = "step-0"  # the starting policy's folder beside the checkpoints (keep: best)
SAMPLING_SEED = 10 ** 6  # the dev samples' own seed offset: the same draws at every checkpoint, apart from training's


def dev_questions(dev_jsonl: Path, n: int) -> list[QuestionRecord]:
    """The first ``n`` questions of ``dev_jsonl`` (the qa stage's dev split); a ValueError naming the key when it
    has none."""
    questions = read_questions(dev_jsonl)[:n] if dev_jsonl.is_file() else []
    if not questions:
        raise ValueError(f"{dev_jsonl} holds no dev question to score; set rl.dev.questions (selfplay.dev.questions) "
                         f"to 0")
    return questions


def dev_em(model, tokenizer, retriever, questions: list[QuestionRecord], params: RolloutParams,
           samples: int = 1) -> float:
    """Mean EM of ``model`` on ``questions``, each answered ``samples`` times under ``params``."""
    asked = [q for q in questions for _ in range(samples)]
    episodes = rollout(model, tokenizer, retriever, [q.question for q in asked],
                       params.model_copy(update={"batch_size": max(1, min(len(asked), params.batch_size))}))
    return sum(exact_match(e.answer or "", q.answers) for e, q in zip(episodes, asked)) / max(len(asked), 1)


class DevScoring(TrainerCallback):
    """Scores ``questions`` with the trainer's policy at every checkpoint (and before the first step); see the
    module docstring. ``greedy`` and ``sampled`` are the two decodings; ``samples`` per question for the second."""

    def __init__(self, trainer, retriever, questions: list[dict], greedy: RolloutParams, sampled: RolloutParams,
                 rl: GRPOTrainingParams) -> None:
        self.trainer, self.retriever, self.questions = trainer, retriever, questions
        self.greedy, self.sampled, self.rl = greedy, sampled, rl

    @classmethod
    def of(cls, trainer, retriever, rl: GRPOTrainingParams, rollout_params: RolloutParams, dev_jsonl: Path | None):
        """The callback of ``rl.dev`` for ``trainer``: greedy as ``rollout_params`` (evaluation's decoding), sampled
        as the training rollouts, on the first ``rl.dev.questions`` of ``dev_jsonl``."""
        from searchlab.rl.env import training_rollout_params

        if dev_jsonl is None:
            raise ValueError("rl.dev.questions: no dev split was given to score")
        sampled = training_rollout_params(rollout_params, rl, 0, rollout_params.batch_size)
        sampled = sampled.model_copy(update={"seed": rl.seed + SAMPLING_SEED})
        return cls(trainer, retriever, dev_questions(dev_jsonl, rl.dev.questions), rollout_params, sampled, rl)

    def scores(self) -> dict[str, float]:
        """Greedy and sampled dev EM of the policy now; every process scores its share, all get the means."""
        from accelerate.utils import gather_object

        from searchlab.rl.env import generation_model

        accelerator = self.trainer.accelerator
        rank, world = accelerator.process_index, accelerator.num_processes
        mine = self.questions[rank::world]
        tokenizer = self.trainer.processing_class
        results = {}
        with generation_model(self.trainer) as model:
            runs = [("dev/em", self.greedy, 1)]
            if self.rl.dev.samples:
                runs.append(("dev/sampled_em", self.sampled, self.rl.dev.samples))
            for name, params, samples in runs:
                em = dev_em(model, tokenizer, self.retriever, mine, params, samples) if mine else 0.0
                shares = gather_object([(em, len(mine))])
                results[name] = round(sum(e * n for e, n in shares) / max(sum(n for _, n in shares), 1), 4)
        return results

    def on_train_begin(self, args, state, control, **kwargs):
        if state.global_step == 0:  # the starting policy, once (a resumed run has it in its restored history)
            scores = self.scores()
            state.log_history.append({"step": 0, **scores})
            if self.rl.keep == "best":  # the first of equals: a checkpoint is kept only if it beats the start
                start = Path(args.output_dir).parent / START
                self.trainer.save_model(str(start))
                state.best_metric, state.best_model_checkpoint, state.best_global_step = scores["dev/em"], str(start), 0

    def on_step_end(self, args, state, control, **kwargs):
        if not control.should_save:
            return
        scores = self.scores()
        for name, value in scores.items():  # logged with this step's metrics
            self.trainer._metrics["train"][name].append(value)
        if self.rl.keep == "best" and (state.best_metric is None or scores["dev/em"] > state.best_metric):
            state.best_metric = scores["dev/em"]
            state.best_model_checkpoint = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
            state.best_global_step = state.global_step

    def on_train_end(self, args, state, control, **kwargs):
        best = state.best_model_checkpoint
        if self.rl.keep == "best" and best and Path(best).name != f"checkpoint-{state.global_step}":
            with TiedHeadNotMissing(self.trainer.model):
                self.trainer._load_from_checkpoint(best)  # the Trainer's own loader: full weights, LoRA or sharded


class TiedHeadNotMissing(logging.Filter):
    """Inside the block, the Trainer's "missing keys ... ['lm_head.weight']" warning is dropped for ``model`` when
    its head is its input embedding (tied, as the tiny model's): a checkpoint stores that weight once, under the
    embedding, and loading it sets the head too. The Trainer recognises only ``_keys_to_ignore_on_save``, not tied
    weights, so it would call a complete checkpoint incomplete."""

    LOGGER = "transformers.trainer"

    def __init__(self, model) -> None:
        super().__init__()
        unwrapped = getattr(model, "module", model)
        head, embedding = getattr(unwrapped, "lm_head", None), unwrapped.get_input_embeddings()
        self.tied = head is not None and head.weight is embedding.weight

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.tied and record.getMessage()
                    == "There were missing keys in the checkpoint model loaded: ['lm_head.weight'].")

    def __enter__(self) -> TiedHeadNotMissing:
        logging.getLogger(self.LOGGER).addFilter(self)
        return self

    def __exit__(self, *exc) -> None:
        logging.getLogger(self.LOGGER).removeFilter(self)
