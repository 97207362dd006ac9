"""The seed check: one seed repeats bitwise on a CPU, two seeds differ, and each failure says so."""

import pytest
import torch

from harness.algorithms import resolve_algorithm
from harness.engine import seed_check
from harness.engine.spec import TrialSpec


@pytest.fixture()
def spec(tmp_path) -> TrialSpec:
    return TrialSpec(
        arm="grpo",
        seed=3,
        algorithm=resolve_algorithm("grpo"),
        warmstart={"enabled": False},
        train={"prompts_per_step": 2, "max_new_tokens": 6},
        cache_dir=str(tmp_path),
    )


def test_the_engines_seeds_reach_the_rollouts(spec):
    result = seed_check.check_seeds(spec)
    assert result.final["check/same_seed_tokens_alike"] == 1.0
    assert result.final["check/same_seed_logprob_gap"] == 0.0
    assert result.final["check/other_seed_tokens_alike"] < 0.5


def test_a_seed_that_never_reaches_the_sampler_is_caught(spec, monkeypatch):
    monkeypatch.setattr(seed_check, "trial_generator", lambda s, device: torch.Generator(device=device).manual_seed(0))
    with pytest.raises(seed_check.SeedCheckError, match="seeds 3 and 4 gave identical rollouts"):
        seed_check.check_seeds(spec)


def test_sampling_that_does_not_repeat_is_caught(spec, monkeypatch):
    draws = iter(range(100))
    monkeypatch.setattr(
        seed_check, "trial_generator", lambda s, device: torch.Generator(device=device).manual_seed(next(draws))
    )
    with pytest.raises(seed_check.SeedCheckError, match="seed 3 twice gave different rollouts"):
        seed_check.check_seeds(spec)
