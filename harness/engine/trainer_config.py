"""Which program trains a trial (``trainer:`` in a study, ``TrialSpec.trainer``).

``builtin`` is the harness's own loop (``harness.engine.trial``). ``command`` runs any program from
an argument-list template and ``trl`` runs the shipped TRL adapter; both obey the trial-program
contract (docs/trainers.md): the harness writes a trial file, runs the program, then judges its
checkpoint with its own evaluator. A bare string (``trainer: trl``) is short for ``{kind: trl}``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.ground.strict import StrictModel

TRAINER_KINDS = ("builtin", "command", "trl")
#: who scores the held-out prompts: the harness's evaluator on the checkpoints, or the program
SCORE_SOURCES = ("judge", "program")
#: an environment variable's name a study may set for its program
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: the variables the harness itself sets (the contract's) or keeps from programs (storage URLs)
RESERVED_ENV_PREFIX = "HARNESS_"


class VllmSettings(BaseModel):
    """vLLM rollouts for the TRL adapter on a GPU: ``use_vllm`` and its ``mode``; any other key is
    passed through to TRL's ``GRPOConfig`` as ``vllm_<key>`` is named there."""

    model_config = ConfigDict(extra="allow")

    use_vllm: bool = Field(False, description="generate rollouts with vLLM (a GPU with vLLM installed)")
    mode: Literal["server", "colocate"] = Field("colocate", description="vLLM beside the trainer or as a server")


class TrainerConfig(StrictModel):
    """The program that trains a trial, and who scores its held-out prompts."""

    kind: Literal[TRAINER_KINDS] = Field(  # type: ignore[valid-type]
        "builtin",
        description="builtin: the harness's own loop; command: any program (`command`); trl: the shipped TRL "
        "adapter. command and trl follow docs/trainers.md",
    )
    command: list[str] | None = Field(
        None,
        description="kind: command only: the program's argument list; each {dotted.name} is replaced by that "
        "field of the trial file, e.g. ['{python}', train.py, '{trial_file}', --lr, '{algorithm.lr}'] ({python}: the "
        "harness's interpreter); run without a shell",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="extra environment variables for the program, values templated like `command` (names "
        "starting HARNESS_ are the harness's own)",
    )
    scores: Literal[SCORE_SOURCES] = Field(  # type: ignore[valid-type]
        "judge",
        description="judge: the harness evaluates the program's checkpoints on the held-out prompts; program: "
        "the program writes per-prompt scores to the trial file's scores_file, checked for every prompt once",
    )
    vllm: VllmSettings | None = Field(
        None, description="kind: trl only: vLLM settings passed to TRL ({use_vllm: true, mode: colocate})"
    )

    @model_validator(mode="before")
    @classmethod
    def _bare_kind(cls, value: Any) -> Any:
        """``trainer: trl`` is ``trainer: {kind: trl}``."""
        return {"kind": value} if isinstance(value, str) else value

    @model_validator(mode="after")
    def _fits_kind(self) -> TrainerConfig:
        if self.kind == "command" and not self.command:
            raise ValueError(
                "kind: command needs `command`, the program's argument list, e.g. [python, train.py, '{trial_file}']"
            )
        if self.kind != "command" and self.command is not None:
            raise ValueError(f"`command` is read only by kind: command (this trainer is {self.kind}); drop it")
        if self.kind != "trl" and self.vllm is not None:
            raise ValueError(f"`vllm` is read only by kind: trl (this trainer is {self.kind}); drop it")
        for i, part in enumerate(self.command or []):
            if "\0" in part:
                raise ValueError(f"command[{i}] holds a NUL byte, which no program argument can carry; remove it")
        if self.kind == "builtin" and (self.env or self.scores != "judge"):
            raise ValueError("`env` and `scores` are read only by a program trainer (kind: command or trl)")
        for name in self.env:
            if not ENV_NAME.fullmatch(name):
                raise ValueError(f"env: {name!r} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)")
            if name.startswith(RESERVED_ENV_PREFIX):
                raise ValueError(f"env: {name} starts with {RESERVED_ENV_PREFIX}, which the harness sets itself")
            if "\0" in self.env[name]:
                raise ValueError(f"env: {name} holds a NUL byte, which no environment variable can carry; remove it")
        return self

    @property
    def is_builtin(self) -> bool:
        return self.kind == "builtin"
