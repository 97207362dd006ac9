"""The slots of an RL algorithm, and which configuration fields each chosen part reads.

Every part declares the fields it reads (the ``reads`` metadata of its registry entry); the RL
step itself reads ``STEP_FIELDS``. A field that no chosen part reads cannot be set: an override
of it is an error naming the parts that would read it, and a resolved config must hold its
default there. One rule covers what used to be special cases (``dual_clip`` on a loss with no
clip, ``vf_coef`` without a critic, ``lam`` without GAE, ``kl_coef`` with no KL placement...).
DPO has one slot of its own (``DPO_SLOTS``: where its pairs are sampled) and reads all its fields.
"""

from __future__ import annotations

from harness.algorithms.advantages import ADVANTAGES
from harness.algorithms.aggregation import AGGREGATIONS
from harness.algorithms.config import DPOConfig, RLConfig
from harness.algorithms.critic import CRITICS
from harness.algorithms.dpo import PAIR_SOURCES
from harness.algorithms.kl import KL_ESTIMATORS, KL_PLACEMENTS
from harness.algorithms.losses import POLICY_LOSSES
from harness.algorithms.old_logprobs import OLD_LOGPROBS
from harness.algorithms.registry import Registry

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
        registry.get(getattr(cfg, slot))


def unread_non_defaults(cfg: RLConfig) -> list[str]:
    """Fields no chosen part reads that hold something other than their default."""
    read = fields_read(cfg)
    return [
        name for name, info in RLConfig.model_fields.items()
        if name not in read and getattr(cfg, name) != info.default
    ]
