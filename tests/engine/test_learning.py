"""The testbed really learns: GRPO lifts held-out accuracy over the warm start at a fixed seed."""

import pytest

from harness.algorithms import resolve_algorithm
from harness.engine.spec import TrialSpec
from harness.engine.trial import run_trial


@pytest.mark.slow
def test_grpo_beats_the_warm_start_on_the_default_testbed(cache_dir):
    spec = TrialSpec(arm="grpo", seed=0, algorithm=resolve_algorithm("grpo"), cache_dir=cache_dir)
    result = run_trial(spec)
    start, end = result.final["eval/accuracy_start"], result.final["eval/accuracy"]
    assert 0.2 <= start <= 0.6, "the warm start should leave groups mixed"
    assert end - start >= 0.08, f"GRPO moved held-out accuracy {start:.3f} -> {end:.3f}"
    assert result.final["eval/mean_reward"] > result.final["eval/mean_reward_start"]
