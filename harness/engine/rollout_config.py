"""A trial's ``rollout`` section: what samples its training rollouts (the policy in the trial
process, or a vLLM server) and how stale a sample may be; part of the trial spec
(``harness.engine.spec.TrialSpec.rollout``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, NonNegativeInt, PositiveFloat, model_validator

from harness.ground.strict import StrictModel


class VllmConfig(StrictModel):
    """Where the vLLM server runs (``harness.engine.vllm``): started by the trial from a Python
    environment of its own, or one the user already runs."""

    python: str | None = Field(
        None,
        description="the vLLM environment's Python; null: $HARNESS_VLLM_PYTHON, else .venv-vllm/bin/python in the "
        "working folder or beside the harness checkout",
    )
    url: str | None = Field(
        None,
        description="a server already running (http://127.0.0.1:PORT, runtime LoRA loading on) that serves the "
        "trial's model folder, instead of one the trial starts; null: $HARNESS_VLLM_URL, else start one",
    )
    start_timeout_s: PositiveFloat = Field(600.0, description="how long a started server may take to answer /health")
    request_timeout_s: PositiveFloat = Field(600.0, description="how long one request may take to be answered")


class RolloutConfig(StrictModel):
    """Where a trial's training rollouts are sampled, and how stale they may be.

    ``hf`` samples with the policy itself, in the trial process (the embedded path every study
    used before this section existed). ``vllm`` samples with a vLLM server in a process (and a
    Python environment) of its own: the trial sends the same prompt token ids, token budget,
    temperature and stop token (EOS) and gets back the completions with the sampler's per-token
    log-probs; after each step the new policy is synced to the server. With ``max_staleness: k``
    a background thread samples the batches of later steps while the current one trains, each
    with the newest policy the server has, never one more than ``k`` steps older than the policy
    it trains (AReaL's and prime-rl's rule; ``harness.engine.samplers.staleness``)."""

    backend: Literal["hf", "vllm"] = Field(
        "hf",
        description="what samples training rollouts: hf, the policy in the trial process; vllm, a vLLM server "
        "the trial starts (or rollout.vllm_url) with the policy synced to it after every step",
    )
    max_staleness: NonNegativeInt = Field(
        0,
        description="the most optimiser steps a trained sample's policy may lag the trained one; 0: the "
        "synchronous loop; k > 0: the next batches are sampled while the current one trains (backend: vllm)",
    )
    vllm: VllmConfig = Field(
        VllmConfig(), description="the vLLM server's environment, or one already running (backend: vllm)"
    )

    @model_validator(mode="after")
    def _staleness_needs_a_server(self) -> RolloutConfig:
        if self.max_staleness and self.backend == "hf":
            raise ValueError(
                f"rollout.max_staleness {self.max_staleness} needs rollout.backend: vllm (hf samples with the "
                "policy being trained, in the same process); set backend: vllm or max_staleness: 0"
            )
        if self.backend == "hf" and self.vllm != VllmConfig():
            raise ValueError("rollout.vllm is read only with rollout.backend: vllm; set backend: vllm or drop it")
        return self

    def keyed(self) -> dict[str, Any] | None:
        """What a trial's id hashes of it: the backend and the staleness; where the server runs
        does not change what it samples. None at the defaults: a trial that samples as every
        trial did before this section existed keeps its id."""
        out = {"backend": self.backend, "max_staleness": self.max_staleness}
        return None if out == {"backend": "hf", "max_staleness": 0} else out
