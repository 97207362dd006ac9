"""How a reward model is trained: the settings ``harness reward-model train`` takes as flags, and a
study names as ``task.reward.train`` (``RewardModelRecipe``) instead of naming a built model.

Torch-free and free of the trial spec (``harness.engine.spec`` imports the recipe). What a
training reads beyond these (the model, the task, the warm start, the generation budget) comes
from the study's set-up; ``key.RewardModelInputs`` gathers it all and hashes it.
"""

from __future__ import annotations

from pydantic import (
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    field_validator,
    model_validator,
)

from harness.ground.strict import StrictModel


class _Frozen(StrictModel):
    model_config = ConfigDict(frozen=True)


class RewardTraining(_Frozen):
    """How the scalar head (and the trunk) are fitted to the pairs."""

    steps: PositiveInt | None = Field(None, description="optimiser steps; null: `epochs` passes over the train pairs")
    # the testbed's default: 20% label noise needs ~7k steps to break out of its plateau
    epochs: PositiveInt = Field(15, description="passes over the train pairs, when `steps` is null")
    lr: PositiveFloat = Field(5e-4, description="AdamW learning rate (the tiny model's; about 1e-5 for real models)")
    batch_size: PositiveInt = Field(32, description="pairs per optimiser step")
    held_out: float = Field(0.2, gt=0, lt=1, description="share of pairs (whole prompts) held out for the metrics")
    seed: NonNegativeInt = Field(0, description="pair choice, label noise, split, head initialisation and pair order")
    max_grad_norm: PositiveFloat = Field(1.0, description="gradients are clipped to this norm")


class VerifierSampling(_Frozen):
    """Pairs built from the task's verifier on the warm-start policy's samples: per prompt, a sample
    the verifier scores higher against one it scores lower, each label flipped with probability
    ``label_noise`` (seeded), as a human labeller disagrees with the verifier."""

    prompts: PositiveInt | None = Field(None, description="train prompts sampled; null: all of the task's")
    samples_per_prompt: int = Field(8, ge=2, description="completions sampled per prompt")
    pairs_per_prompt: PositiveInt = Field(3, description="pairs kept per prompt, at most")
    label_noise: float = Field(0.0, ge=0, le=0.5, description="probability that a pair's label is flipped")

    def with_budget(self, temperature: float, max_new_tokens: int) -> VerifierPairs:
        """These settings, sampled at the study's ``train.temperature`` and ``train.max_new_tokens``."""
        return VerifierPairs(**self.model_dump(), temperature=temperature, max_new_tokens=max_new_tokens)


class VerifierPairs(VerifierSampling):
    """``VerifierSampling`` with the sampling budget: what a training reads (and its key hashes)."""

    temperature: PositiveFloat = 1.0
    max_new_tokens: PositiveInt = 8


class RewardModelRecipe(RewardTraining):
    """A reward model named by how it is trained: the pairs (a JSONL file, or built from the
    verifier), the trunk and the fit. The first trial that needs it builds it, once, in the cache
    that ``harness reward-model train`` uses (the same settings give the same model and id)."""

    from_verifier: VerifierSampling | None = Field(
        None,
        description="build the pairs from the task's verifier on the warm-started policy's samples "
        "(at the study's train.temperature and train.max_new_tokens)",
    )
    pairs: str | None = Field(
        None,
        description="or read them from a JSONL file of {prompt, chosen, rejected} objects (like task.path: "
        "relative to the folder harness runs in)",
    )
    base: str = Field(
        "warmstart",
        description="the trunk: warmstart (the study's warm-started policy), model (the "
        "model as configured: a fresh tiny one, or the pretrained one), or a hub id / local folder",
    )

    @field_validator("base")
    @classmethod
    def _a_base(cls, base: str) -> str:
        if not base.strip():
            raise ValueError("give warmstart, model, or a hub id / local folder")
        return base

    @model_validator(mode="after")
    def _one_source_of_pairs(self) -> RewardModelRecipe:
        if (self.pairs is None) == (self.from_verifier is None):
            raise ValueError(
                "give the pairs either as a file (pairs: FILE.jsonl) or built from the verifier "
                "(from_verifier: {label_noise: 0.2}), one of the two"
            )
        return self

    def training(self) -> RewardTraining:
        """The fit's settings alone."""
        return RewardTraining(**self.model_dump(include=set(RewardTraining.model_fields)))
