"""The sampling-side slots: which groups count (DAPO's dynamic sampling) and which rows the loss
reads (truncated completions)."""

import pytest
import torch

from harness.algorithms.config import RLConfig
from harness.algorithms.presets import resolve_algorithm
from harness.algorithms.sampling import choose_groups, trained_rows
from harness.errors import ConfigError


def test_once_counts_every_group_in_one_draw():
    choice = choose_groups(torch.tensor([1.0, 1.0, 0.0, 1.0]), 2, RLConfig(name="t"))
    assert choice.counted.tolist() == [True, True] and choice.max_draws == 1


def test_dynamic_counts_only_groups_with_a_spread_and_allows_max_draws():
    # groups (1, 1) degenerate, (0, 1) mixed, (0.5, 0.5) degenerate
    cfg = RLConfig(name="t", sampling="dynamic", max_draws=5)
    choice = choose_groups(torch.tensor([1.0, 1.0, 0.0, 1.0, 0.5, 0.5]), 2, cfg)
    assert choice.counted.tolist() == [False, True, False] and choice.max_draws == 5


def test_truncated_completions_are_kept_or_masked():
    cut_off = torch.tensor([False, True, False, True])
    rows, metrics = trained_rows(cut_off, RLConfig(name="t"))
    assert rows.tolist() == [True] * 4 and metrics == {}
    rows, metrics = trained_rows(cut_off, RLConfig(name="t", truncated="mask"))
    assert rows.tolist() == [True, False, True, False]
    assert metrics["train/frac_truncated"].item() == 0.5


def test_sampling_side_settings_are_checked():
    with pytest.raises(
        ConfigError, match="sampling=dynamic keeps the groups whose scores differ and needs group_size >= 2"
    ):
        resolve_algorithm("reinforce_pp", {"group_size": 1, "sampling": "dynamic"})
    with pytest.raises(ConfigError, match="max_draws is read by none .* read only with sampling=dynamic"):
        resolve_algorithm("grpo", {"max_draws": 3})
    assert resolve_algorithm("dapo", {"sampling": "dynamic", "max_draws": 10}).max_draws == 10
    assert resolve_algorithm("dapo", {"truncated": "mask"}).truncated == "mask"
