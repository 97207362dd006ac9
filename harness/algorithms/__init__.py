"""The things being compared: advantage estimators, policy losses, aggregations, KL estimators,
the critic, where the old log-probs come from, the sampler-trainer mismatch correction, the token
filter, the sampling side (dynamic sampling, truncated completions), DPO's loss and pair sources,
and the named presets built from them.

Two layers: ``config``, ``registry``, ``parts`` (every part's name, metadata and where its
function lives), ``presets`` and ``probe_result`` need no torch, so checking a study file or a
trial spec does not import it; the parts' functions (``advantages``, ``losses``, ``kl``...) and
the probe are torch code, imported when something computes with them. Names below are loaded on
first use, so ``from harness.algorithms import PRESETS`` stays on the light layer.
"""

from importlib import import_module

_EXPORTS = {
    "advantages": ["AdvantageInputs", "AdvantageOutput", "compute_advantages", "masked_whiten", "sequence_returns"],
    "aggregation": ["Aggregator", "make_aggregator"],
    "config": ["AlgorithmConfig", "DPOConfig", "RLConfig"],
    "critic": ["ValueCritic", "build_critic", "explained_variance", "value_loss"],
    "dpo": ["build_pairs", "dpo_loss", "pair_sampler"],
    "kl": ["KLWeights", "kl_estimate", "kl_weights"],
    "objective": ["UpdateBatch", "token_rewards", "update_loss"],
    "old_logprobs": ["recomputes_old_logprobs"],
    "parts": [
        "ADVANTAGES",
        "AGGREGATIONS",
        "CRITICS",
        "KL_ESTIMATORS",
        "KL_PLACEMENTS",
        "MISMATCH",
        "OLD_LOGPROBS",
        "PAIR_SOURCES",
        "POLICY_LOSSES",
        "SAMPLING",
        "SLOTS",
        "TOKEN_FILTERS",
        "TRUNCATED",
        "describe_parts",
        "fields_read",
    ],
    "presets": ["PRESETS", "TESTBED_LR", "Preset", "check_algorithm", "describe_presets", "resolve_algorithm"],
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
