"""What ``harness validate`` can tell about a study's generation backends: for every rollout its
conditions use (the study's, or an arm's or a grid cell's ``rollout.backend``) that is ``vllm``
with no server of the user's (``rollout.vllm.url`` or ``$HARNESS_VLLM_URL``), the vLLM
environment the trials would start servers from must exist and hold vLLM (one line naming what
to install and where, ``harness.engine.vllm.environment.check_vllm_environment``)."""

from __future__ import annotations

from harness.engine.rollout_config import RolloutConfig
from harness.engine.vllm.environment import check_vllm_environment, user_endpoint, vllm_python
from harness.study.expand import arm_rollout, split_params
from harness.study.schema import Study


def study_rollouts(study: Study) -> list[RolloutConfig]:
    """The distinct rollouts of the study's conditions, in condition order."""
    out: list[RolloutConfig] = []
    for c in study.iter_conditions():
        rollout = arm_rollout(study, study.arm(c.arm), split_params(c.cell).rollout, c.name)
        if rollout not in out:
            out.append(rollout)
    return out


def check_rollout(study: Study) -> None:
    for rollout in study_rollouts(study):
        if rollout.backend == "vllm" and user_endpoint(rollout.vllm.url) is None:
            check_vllm_environment(vllm_python(rollout.vllm.python))
