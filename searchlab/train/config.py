"""The ``sft`` section: supervised fine-tuning's settings, beside the code they configure
(:mod:`searchlab.train.sft`)."""

from __future__ import annotations

from pydantic import Field, model_validator

from searchlab.config import EXECUTION, LoraParams, Section, check_registry_alias
from searchlab.questions.record import Bucket


class SFTParams(Section):
    """Supervised fine-tuning on the demonstrations (TRL ``SFTTrainer``; loss only on the agent's own tokens)."""

    epochs: float = Field(3.0, gt=0, description="passes over the training demonstrations (`max_steps` > 0 overrides)")
    max_steps: int = Field(-1, description="stop after this many optimizer steps (-1: run all epochs)")
    learning_rate: float = Field(1e-3, gt=0, description="peak learning rate of AdamW with a cosine schedule; each "
                                                         "batch is drawn from four random batches' worth of examples "
                                                         "sorted by length (less padding, yet mixed: batches that "
                                                         "each hold one length learned far less, measured)")
    batch_size: int = Field(8, ge=1, description="sequences per device per step")
    grad_accum: int = Field(1, ge=1, description="steps per optimizer update (gradient accumulation)")
    max_length: int = Field(1024, ge=32, description="tokens per example (prompt + completion); longer ones keep "
                                                     "their start")
    warmup_ratio: float = Field(0.05, ge=0, lt=1, description="share of the steps the learning rate warms up over")
    weight_decay: float = Field(0.0, ge=0, description="AdamW's weight decay")
    save_steps: int = Field(50, ge=1, description="checkpoint every this many steps, in `data/.work/sft/` (the unit "
                                                  "of resume)")
    logging_steps: int = Field(5, ge=1, json_schema_extra=EXECUTION, description="log the loss every this many steps")
    eval_steps: int = Field(50, ge=1, json_schema_extra=EXECUTION,
                            description="eval loss on the dev demonstrations every this many steps")
    renamed_copies: int = Field(0, ge=0, description="extra copies of every training demonstration with each "
                                                       "corpus title in it swapped for another title, so that "
                                                       "copying names and reading passages pay, memorising does not")
    buckets: list[Bucket] = Field(default_factory=lambda: ["easy", "medium", "hard"],
                                  description="difficulty buckets of the demonstrations SFT trains on (DeReason's "
                                              "split with rl.buckets)")
    seed: int = Field(0, description="model-side randomness, data order, and which held-out questions are sampled")
    samples: int = Field(100, ge=0, description="held-out questions the trained agent answers after training, for its "
                                                "protocol rates and sample trajectories (`samples.md`)")
    num_processes: int | None = Field(None, ge=1, description="training processes (one per GPU); null: the "
                                                                "accelerate config's count, else one per visible GPU "
                                                                "(one on a CPU)")
    accelerate_config: str | None = Field(None, description="an accelerate config file (multi-GPU, DeepSpeed, FSDP), "
                                                            "relative to the project root")
    activation_checkpointing: bool | None = Field(None, description="recompute activations in the backward pass "
                                                                  "(less memory, more compute); null: on GPUs only")
    cpu_bf16: bool = Field(False, description="on a CPU too, train under bfloat16 autocast (float32 weights and "
                                              "optimizer, as on GPUs, where it is always on when they have "
                                              "bfloat16): SmolLM2's SFT ran 61% faster on a 2-core AMX CPU "
                                              "(bench/smollm2_speed.py)")
    lora: LoraParams = Field(LoraParams(), description="LoRA adapters instead of full fine-tuning")
    registry_name: str = Field("searchlab-agent", description="MLflow registered model the trained folder becomes a "
                                                               "version of")
    registry_alias: str = Field("sft", description="alias pointed at the newest version")

    @model_validator(mode="after")
    def _alias_allowed(self) -> "SFTParams":
        check_registry_alias(self.registry_alias, "sft")
        return self
