"""The things being compared: advantage estimators, policy losses, aggregations, KL estimators,
the critic, where the old log-probs come from, DPO's loss and pair sources, and the named
presets built from them.

Names are loaded on first use, so importing ``harness.algorithms.config`` (which every trial
spec does) does not import torch: the runner, the queue and light CLI commands start fast.
"""

from importlib import import_module

_EXPORTS = {
    "advantages": ["ADVANTAGES", "AdvantageInputs", "AdvantageOutput", "compute_advantages",
                   "masked_whiten", "sequence_returns"],
    "aggregation": ["AGGREGATIONS", "Aggregator", "make_aggregator"],
    "config": ["AlgorithmConfig", "DPOConfig", "RLConfig"],
    "critic": ["CRITICS", "ValueCritic", "build_critic", "explained_variance", "value_loss"],
    "dpo": ["PAIR_SOURCES", "build_pairs", "dpo_loss", "pair_sampler"],
    "kl": ["KL_ESTIMATORS", "KL_PLACEMENTS", "KLWeights", "kl_estimate", "kl_weights"],
    "losses": ["POLICY_LOSSES"],
    "objective": ["UpdateBatch", "token_rewards", "update_loss"],
    "old_logprobs": ["OLD_LOGPROBS", "recomputes_old_logprobs"],
    "parts": ["SLOTS", "fields_read"],
    "presets": ["PRESETS", "TESTBED_LR", "Preset", "check_algorithm", "describe_presets",
                "resolve_algorithm"],
    "registry": ["Registry"],
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'harness.algorithms' has no attribute {name!r}")
    value = getattr(import_module(f"harness.algorithms.{module}"), name)
    globals()[name] = value
    return value
