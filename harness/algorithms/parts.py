"""The slots of an RL algorithm, the parts that can fill each, and which configuration fields
each chosen part reads.

Every part is declared here, once: its name, its metadata and where its function lives (a
``module:attr`` the registry imports on first use). So the names, and the checks a study file
gets, need no torch; the torch modules hold the functions only.

Every part declares the fields it reads (the ``reads`` metadata of its registry entry); the RL
step itself reads ``STEP_FIELDS``. A field that no chosen part reads cannot be set: an override
of it is an error naming the parts that would read it, and a resolved config must hold its
default there. One rule covers what used to be special cases (``dual_clip`` on a loss with no
clip, ``vf_coef`` without a critic, ``lam`` without GAE, ``kl_coef`` with no KL placement...).
DPO has one slot of its own (``DPO_SLOTS``: where its pairs are sampled) and reads all its fields.
"""

from __future__ import annotations

from harness.algorithms.config import DPOConfig, RLConfig
from harness.algorithms.registry import Registry

_PACKAGE = "harness.algorithms"

#: ``fn(inputs, cfg) -> AdvantageOutput`` (``advantages.py``); ``reads`` besides the shared
#: ``whiten_advantages`` and ``drop_degenerate``
ADVANTAGES = Registry("advantage estimator", meta_keys=("needs_groups", "needs_critic", "reads"))
ADVANTAGES.declare("group_zscore", f"{_PACKAGE}.advantages:group_zscore", needs_groups=True, needs_critic=False,
                   reads=("adv_eps",))
ADVANTAGES.declare("group_mean", f"{_PACKAGE}.advantages:group_mean", needs_groups=True, needs_critic=False,
                   reads=())
ADVANTAGES.declare("leave_one_out", f"{_PACKAGE}.advantages:leave_one_out", needs_groups=True, needs_critic=False,
                   reads=())
ADVANTAGES.declare("reinforce_pp", f"{_PACKAGE}.advantages:reinforce_pp", needs_groups=False, needs_critic=False,
                   reads=("gamma",))
ADVANTAGES.declare("gae", f"{_PACKAGE}.advantages:gae", needs_groups=False, needs_critic=True,
                   reads=("gamma", "lam"))

#: ``fn(logprobs, old_logprobs, advantages, mask, cfg, aggregate) -> (loss, metrics)`` (``losses.py``)
POLICY_LOSSES = Registry("policy loss", meta_keys=("reads",))
POLICY_LOSSES.declare("clipped", f"{_PACKAGE}.losses:clipped", reads=("eps_low", "eps_high", "dual_clip"))
POLICY_LOSSES.declare("cispo", f"{_PACKAGE}.losses:cispo", reads=("eps_low", "eps_high"))
POLICY_LOSSES.declare("gspo", f"{_PACKAGE}.losses:gspo", reads=("eps_low", "eps_high"))
POLICY_LOSSES.declare("is", f"{_PACKAGE}.losses:importance_sampling", reads=())

#: ``fn(per_token, mask, norm_constant) -> scalar`` (``aggregation.py``)
AGGREGATIONS = Registry("aggregation", meta_keys=("reads",))
AGGREGATIONS.declare("token_mean", f"{_PACKAGE}.aggregation:token_mean", reads=())
AGGREGATIONS.declare("seq_mean_token_mean", f"{_PACKAGE}.aggregation:seq_mean_token_mean", reads=())
AGGREGATIONS.declare("seq_mean_token_sum_norm", f"{_PACKAGE}.aggregation:seq_mean_token_sum_norm",
                     reads=("loss_norm_constant",))

#: ``fn(logprobs, ref_logprobs) -> per-token estimate`` (``kl.py``); no field of their own
KL_ESTIMATORS = Registry("KL estimator", meta_keys=("reads",))
KL_ESTIMATORS.declare("k1", f"{_PACKAGE}.kl:k1", reads=())
KL_ESTIMATORS.declare("k2", f"{_PACKAGE}.kl:k2", reads=())
KL_ESTIMATORS.declare("k3", f"{_PACKAGE}.kl:k3", reads=())

#: ``fn(cfg) -> KLWeights`` (``kl.py``)
KL_PLACEMENTS = Registry("KL placement", meta_keys=("reads",))
_KL_FIELDS = ("kl_coef", "kl_estimator")
KL_PLACEMENTS.declare("none", f"{_PACKAGE}.kl:no_kl", reads=())
KL_PLACEMENTS.declare("reward", f"{_PACKAGE}.kl:kl_in_reward", reads=_KL_FIELDS)
KL_PLACEMENTS.declare("loss", f"{_PACKAGE}.kl:kl_in_loss", reads=_KL_FIELDS)

#: ``fn(policy) -> ValueCritic | None`` (``critic.py``); ``trained``: whether there is a critic at all
CRITICS = Registry("critic", meta_keys=("reads", "trained"))
_VALUE_FIELDS = ("vf_coef", "value_clip", "critic_lr")
CRITICS.declare("none", f"{_PACKAGE}.critic:no_critic", reads=(), trained=False)
CRITICS.declare("value_head", f"{_PACKAGE}.critic:value_head", reads=_VALUE_FIELDS, trained=True)
CRITICS.declare("value_model", f"{_PACKAGE}.critic:value_model", reads=_VALUE_FIELDS, trained=True)

#: ``fn(weight_dtypes) -> whether the step recomputes the old log-probs`` (``old_logprobs.py``)
OLD_LOGPROBS = Registry("old log-probs source", meta_keys=("reads",))
OLD_LOGPROBS.declare("sampler", f"{_PACKAGE}.old_logprobs:from_sampler", reads=())
OLD_LOGPROBS.declare("recompute", f"{_PACKAGE}.old_logprobs:recompute", reads=())
OLD_LOGPROBS.declare("auto", f"{_PACKAGE}.old_logprobs:by_precision", reads=())

#: ``fn(policy, reference) -> the sampler of the pairs`` (``dpo.py``); no field of their own
PAIR_SOURCES = Registry("DPO pair source", meta_keys=("reads",))
PAIR_SOURCES.declare("reference", f"{_PACKAGE}.dpo:from_reference", reads=())
PAIR_SOURCES.declare("policy", f"{_PACKAGE}.dpo:from_policy", reads=())

#: slot field -> the registry of its parts
SLOTS: dict[str, Registry] = {
    "advantage": ADVANTAGES,
    "policy_loss": POLICY_LOSSES,
    "aggregation": AGGREGATIONS,
    "kl_estimator": KL_ESTIMATORS,
    "kl_placement": KL_PLACEMENTS,
    "critic": CRITICS,
    "old_logprobs": OLD_LOGPROBS,
}
#: slot field -> the registry of its parts, for DPO
DPO_SLOTS: dict[str, Registry] = {"pairs_from": PAIR_SOURCES}

#: fields the RL step reads whatever the parts: the optimisation schedule, the advantage's shared
#: post-processing, the entropy bonus, and the slots (the KL estimator only where a placement
#: reads it)
STEP_FIELDS = frozenset({
    "name", "kind", "group_size", "lr", "epochs", "minibatches", "max_grad_norm", "entropy_coef",
    "whiten_advantages", "drop_degenerate", *(slot for slot in SLOTS if slot != "kl_estimator"),
})


def fields_read(cfg: RLConfig) -> set[str]:
    """Every field of ``cfg`` that the step or one of its chosen parts reads."""
    read = set(STEP_FIELDS)
    for slot, registry in SLOTS.items():
        read.update(registry.meta(getattr(cfg, slot))["reads"])
    return read


def readers(field: str) -> list[str]:
    """The parts that read ``field``, as ``slot=name`` (empty for fields the step reads)."""
    return [
        f"{slot}={name}"
        for slot, registry in SLOTS.items()
        for name in registry.names()
        if field in registry.meta(name)["reads"]
    ]


def unread_problem(cfg: RLConfig, field: str) -> str:
    """Why ``field`` cannot be set on ``cfg``, and what would read it."""
    chosen = ", ".join(f"{slot}={getattr(cfg, slot)}" for slot in SLOTS)
    return (
        f"{field} is read by none of this algorithm's parts ({chosen}); it is read only with "
        f"{' or '.join(readers(field))}: remove {field} or choose such a part"
    )


def slots_of(cfg: RLConfig | DPOConfig) -> dict[str, Registry]:
    """The slots of ``cfg``'s kind."""
    return DPO_SLOTS if isinstance(cfg, DPOConfig) else SLOTS


def check_part_names(cfg: RLConfig | DPOConfig) -> None:
    """Each slot names a registered part (a ``ConfigError`` listing the valid names otherwise)."""
    for slot, registry in slots_of(cfg).items():
        registry.check(getattr(cfg, slot))


def unread_non_defaults(cfg: RLConfig) -> list[str]:
    """Fields no chosen part reads that hold something other than their default."""
    read = fields_read(cfg)
    return [
        name for name, info in RLConfig.model_fields.items()
        if name not in read and getattr(cfg, name) != info.default
    ]
