"""Small, fast trial specs for the engine tests (a shared warm-start cache per session)."""

from __future__ import annotations

import pytest
import torch

from harness.algorithms import resolve_algorithm
from harness.engine.spec import TrialSpec

TINY = {
    "task": {"name": "addition", "max_digits": 2, "n_train": 300, "n_eval": 24, "reward": "partial_match"},
    "model": {"name": "tiny", "tiny": {"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64}},
    "warmstart": {"steps": 20, "batch_size": 16, "lr": 3e-3},
    "train": {"steps": 2, "prompts_per_step": 4, "max_new_tokens": 4, "eval_every": 0, "eval_samples": 2},
}


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("harness-cache"))


@pytest.fixture
def make_spec(cache_dir):
    def make(algorithm: str = "grpo", seed: int = 0, overrides: dict | None = None, **sections) -> TrialSpec:
        fields = {key: {**value, **sections.pop(key, {})} for key, value in TINY.items()}
        return TrialSpec(
            arm=algorithm,
            seed=seed,
            algorithm=resolve_algorithm(algorithm, overrides or {}),
            cache_dir=cache_dir,
            **fields,
            **sections,
        )

    return make
