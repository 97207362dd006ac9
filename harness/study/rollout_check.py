"""What ``harness validate`` can tell about a study's generation backend: with ``rollout.backend:
vllm`` and no server of the user's (``rollout.vllm.url`` or ``$HARNESS_VLLM_URL``), the vLLM
environment the trials would start servers from must exist and hold vLLM (one line naming what
to install and where, ``harness.engine.vllm.environment.check_vllm_environment``)."""

from __future__ import annotations

from harness.engine.spec import RolloutConfig
from harness.engine.vllm.environment import check_vllm_environment, user_endpoint, vllm_python


def check_rollout(rollout: RolloutConfig) -> None:
    if rollout.backend != "vllm" or user_endpoint(rollout.vllm.url) is not None:
        return
    check_vllm_environment(vllm_python(rollout.vllm.python))
