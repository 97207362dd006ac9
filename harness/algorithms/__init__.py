"""The things being compared: advantage estimators, policy losses, aggregations, KL estimators,
the critic and DPO losses, and the named presets built from them."""

from harness.algorithms.advantages import (
    ADVANTAGES,
    AdvantageInputs,
    AdvantageOutput,
    compute_advantages,
    masked_whiten,
    sequence_returns,
)
from harness.algorithms.aggregation import AGGREGATIONS, Aggregator, make_aggregator
from harness.algorithms.config import AlgorithmConfig
from harness.algorithms.critic import explained_variance, value_loss
from harness.algorithms.dpo import build_pairs, dpo_loss
from harness.algorithms.kl import KL_ESTIMATORS, kl_estimate
from harness.algorithms.losses import POLICY_LOSSES
from harness.algorithms.presets import (
    PRESETS,
    TESTBED_LR,
    Preset,
    check_algorithm,
    describe_presets,
    resolve_algorithm,
)
from harness.algorithms.registry import Registry

__all__ = [
    "ADVANTAGES",
    "AGGREGATIONS",
    "KL_ESTIMATORS",
    "POLICY_LOSSES",
    "PRESETS",
    "TESTBED_LR",
    "AdvantageInputs",
    "AdvantageOutput",
    "Aggregator",
    "AlgorithmConfig",
    "Preset",
    "Registry",
    "build_pairs",
    "check_algorithm",
    "compute_advantages",
    "describe_presets",
    "dpo_loss",
    "explained_variance",
    "kl_estimate",
    "make_aggregator",
    "masked_whiten",
    "resolve_algorithm",
    "sequence_returns",
    "value_loss",
]
