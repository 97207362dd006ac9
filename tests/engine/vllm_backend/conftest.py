"""The vLLM tests' shared pieces: the vLLM environment (skipped, saying so, where it is missing)
and one real server of SmolLM2-135M-Instruct for the whole session, LoRA enabled.

The environment is ``$HARNESS_VLLM_PYTHON``, else ``.venv-vllm`` in the checkout (what ``.ci/run``
builds). The server starts once (about a minute on 2 cores) and is stopped at the session's end.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.engine.vllm.environment import check_vllm_environment, vllm_python
from harness.engine.vllm.server import VllmServer
from harness.errors import ConfigError

#: the rank of the test adapters, and the one the session server holds room for
LORA_RANK = 8


def _vllm_python_or_skip() -> str:
    python = vllm_python()
    try:
        check_vllm_environment(python)
    except ConfigError as err:
        pytest.skip(f"needs a vLLM environment ($HARNESS_VLLM_PYTHON or .venv-vllm, as .ci/run builds it): {err}")
    return python


@pytest.fixture(scope="session")
def vllm_env() -> str:
    """The vLLM environment's Python (the test skips without one)."""
    return _vllm_python_or_skip()


@pytest.fixture(scope="session")
def vllm_server(vllm_env, smollm2, tmp_path_factory):
    """One real vLLM server of SmolLM2 for the session, on loopback, LoRA adapters up to rank 8."""
    log = Path(tmp_path_factory.mktemp("vllm-server")) / "vllm.log"
    server = VllmServer(
        vllm_env, smollm2.folder, log_path=log, seed=0, lora_rank=LORA_RANK, max_loras=2, max_model_len=1024
    )
    server.start()
    yield server
    server.stop()
