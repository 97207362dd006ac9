"""A vLLM server for as long as a piece of work needs one: one the harness starts from the vLLM
environment (``server.VllmServer``), or one the user runs (``rollout.vllm.url`` or
``$HARNESS_VLLM_URL``, its key from ``$HARNESS_VLLM_API_KEY`` only)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.engine.vllm.client import VllmClient
from harness.engine.vllm.environment import check_vllm_environment, user_endpoint, vllm_python
from harness.engine.vllm.server import VllmServer


@dataclass(frozen=True)
class Served:
    """A server to send requests to: its client and the base model's name there."""

    client: VllmClient
    base_model: str


@contextmanager
def served(
    folder: str | Path,
    *,
    vocab_size: int,
    log_path: str | Path,
    python: str | None = None,
    url: str | None = None,
    seed: int = 0,
    lora_rank: int | None = None,
    max_loras: int = 1,
    dtype: str = "float32",
    start_timeout_s: float = 600.0,
    request_timeout_s: float = 600.0,
) -> Iterator[Served]:
    """A server of the model ``folder``: the user's at ``url`` (it must serve that folder), else
    one started now (``python``: the vLLM environment, checked first) and stopped on leaving."""
    endpoint = user_endpoint(url)
    if endpoint is not None:
        client = VllmClient(endpoint.url, vocab_size=vocab_size, api_key=endpoint.api_key, timeout_s=request_timeout_s)
        yield Served(client, client.served_models()[0])
        return
    interpreter = vllm_python(python)
    check_vllm_environment(interpreter)
    server = VllmServer(
        interpreter,
        folder,
        log_path=log_path,
        seed=seed,
        lora_rank=lora_rank,
        max_loras=max_loras,
        dtype=dtype,
        start_timeout_s=start_timeout_s,
    )
    with server:
        yield Served(server.client(vocab_size=vocab_size, timeout_s=request_timeout_s), server.model_name)
