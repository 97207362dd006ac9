"""The slots of an RL algorithm, the parts that can fill each, and which configuration fields
each chosen part reads.

Every part is declared here: its name, its metadata, its citation and where its function lives
(a ``module:attr`` the registry imports on first use). So the names, the citations that
``harness algorithms --parts`` lists and the checks a study file gets need no torch. The function,
in its torch module, carries its name and citation too, as verl's ``@register_policy_loss``:
``@POLICY_LOSSES.implements("clipped", cites="PPO: ...")`` (the advantage estimators through
``advantages._estimator``), which refuses, when the module is imported, a name not declared here, a
citation that differs from the one here, or a function that is not at the declared ``module:attr``;
``get`` refuses a declared function without it (``registry.py``). How to add a part:
``docs/contributing.md``.

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


def _slot(kind: str, *meta_keys: str) -> Registry:
    """The registry of one slot's parts: each declares ``meta_keys``, the fields it ``reads`` and
    what it ``cites``, and its function states its name and ``cites`` again (``implements``)."""
    return Registry(kind, meta_keys=(*meta_keys, "reads", "cites"), on_function=("cites",))


# Every entry declares ``cites``: the paper (or the framework) whose formula it implements, which
# ``harness algorithms --parts`` lists. The function's docstring holds the formula itself.

#: ``fn(inputs, cfg) -> AdvantageOutput`` (``advantages.py``); ``reads`` besides the shared
#: ``whiten_advantages`` and ``drop_degenerate``; ``needs_token_probs``: whether it reads the
#: policy's per-token probabilities (its log-probs of the sampled tokens and the sum of squared
#: probabilities over the vocabulary), so the step runs the policy's own pass for them
ADVANTAGES = _slot("advantage estimator", "needs_groups", "needs_critic", "needs_token_probs")
ADVANTAGES.declare(
    "group_zscore",
    f"{_PACKAGE}.advantages:group_zscore",
    needs_groups=True,
    needs_critic=False,
    needs_token_probs=False,
    reads=("adv_eps",),
    cites="GRPO: Shao et al. 2024, DeepSeekMath (arXiv:2402.03300)",
)
ADVANTAGES.declare(
    "group_mean",
    f"{_PACKAGE}.advantages:group_mean",
    needs_groups=True,
    needs_critic=False,
    needs_token_probs=False,
    reads=(),
    cites="Dr. GRPO: Liu et al. 2025 (arXiv:2503.20783)",
)
ADVANTAGES.declare(
    "leave_one_out",
    f"{_PACKAGE}.advantages:leave_one_out",
    needs_groups=True,
    needs_critic=False,
    needs_token_probs=False,
    reads=(),
    cites="RLOO: Ahmadian et al. 2024 (arXiv:2402.14740)",
)
ADVANTAGES.declare(
    "reinforce_pp",
    f"{_PACKAGE}.advantages:reinforce_pp",
    needs_groups=False,
    needs_critic=False,
    needs_token_probs=False,
    reads=("gamma",),
    cites="REINFORCE++: Hu 2025 (arXiv:2501.03262)",
)
ADVANTAGES.declare(
    "gae",
    f"{_PACKAGE}.advantages:gae",
    needs_groups=False,
    needs_critic=True,
    needs_token_probs=False,
    reads=("gamma", "lam"),
    cites="GAE: Schulman et al. 2016 (arXiv:1506.02438)",
)
ADVANTAGES.declare(
    "reinforce_pp_baseline",
    f"{_PACKAGE}.advantages:reinforce_pp_baseline",
    needs_groups=True,
    needs_critic=False,
    needs_token_probs=False,
    reads=("gamma",),
    cites="REINFORCE++-baseline: Hu 2025 (arXiv:2501.03262), as OpenRLHF and verl",
)
ADVANTAGES.declare(
    "group_mean_batch_std",
    f"{_PACKAGE}.advantages:group_mean_batch_std",
    needs_groups=True,
    needs_critic=False,
    needs_token_probs=False,
    reads=("adv_eps",),
    cites="Lite PPO: Liu et al. 2025, Tricks or Traps (arXiv:2508.08221); TRL scale_rewards='batch'",
)
ADVANTAGES.declare(
    "group_passk",
    f"{_PACKAGE}.advantages:group_passk",
    needs_groups=True,
    needs_critic=False,
    needs_token_probs=False,
    reads=("adv_eps",),
    cites="pass@k group advantage: verl grpo_passk (arXiv:2503.19595), verl/trainer/ppo/core_algos.py@b178a3c",
)
# issue 35: advantage estimators
ADVANTAGES.declare(
    "maxrl",
    f"{_PACKAGE}.advantages:maxrl",
    needs_groups=True,
    needs_critic=False,
    needs_token_probs=False,
    reads=("adv_eps",),
    cites="MaxRL: Tajwar et al. 2026, Maximum Likelihood RL (arXiv:2602.02710); SkyRL maxrl, "
    "skyrl/backends/skyrl_train/utils/ppo_utils.py@a956457",
)
ADVANTAGES.declare(
    "optimal_token_baseline",
    f"{_PACKAGE}.advantages:optimal_token_baseline",
    needs_groups=False,
    needs_critic=False,
    needs_token_probs=True,
    reads=(),
    cites="Optimal Token Baseline: verl optimal_token_baseline (verl PR #4678, docs/algo/otb.md), "
    "verl/trainer/ppo/core_algos.py@b178a3c",
)

#: ``fn(logprobs, old_logprobs, advantages, mask, cfg, aggregate) -> (loss, metrics)`` (``losses.py``)
POLICY_LOSSES = _slot("policy loss")
POLICY_LOSSES.declare(
    "clipped",
    f"{_PACKAGE}.losses:clipped",
    reads=("eps_low", "eps_high", "dual_clip", "two_sided_delta"),
    cites="PPO: Schulman et al. 2017 (arXiv:1707.06347); dual clip: Ye et al. 2020 (arXiv:1912.09729); "
    "two-sided clip: INTELLECT-2 (arXiv:2505.07291), "
    "TRL trl/trainer/grpo_trainer.py@f2cd577 (and 1.16.0) delta",
)
POLICY_LOSSES.declare(
    "cispo",
    f"{_PACKAGE}.losses:cispo",
    reads=("eps_low", "eps_high"),
    cites="CISPO: MiniMax 2025, MiniMax-M1 (arXiv:2506.13585)",
)
POLICY_LOSSES.declare(
    "gspo",
    f"{_PACKAGE}.losses:gspo",
    reads=("eps_low", "eps_high", "two_sided_delta"),
    cites="GSPO: Zheng et al. 2025 (arXiv:2507.18071); two-sided clip: INTELLECT-2 (arXiv:2505.07291), "
    "TRL trl/trainer/grpo_trainer.py@f2cd577 (and 1.16.0) delta",
)
POLICY_LOSSES.declare(
    "is", f"{_PACKAGE}.losses:importance_sampling", reads=(), cites="REINFORCE: Williams 1992, importance-weighted"
)
POLICY_LOSSES.declare(
    "sapo",
    f"{_PACKAGE}.losses:sapo",
    reads=("sapo_tau_pos", "sapo_tau_neg"),
    cites="SAPO: Gao et al. 2025, Soft Adaptive Policy Optimization (arXiv:2511.20347)",
)
POLICY_LOSSES.declare(
    "gmpo",
    f"{_PACKAGE}.losses:gmpo",
    reads=("eps_low", "eps_high"),
    cites="GMPO: Zhao et al. 2025, Geometric-Mean Policy Optimization (arXiv:2507.20673)",
)
POLICY_LOSSES.declare(
    "clip_cov",
    f"{_PACKAGE}.covariance_losses:clip_cov",
    reads=("eps_low", "eps_high", "clip_cov_ratio", "clip_cov_lb", "clip_cov_ub"),
    cites="Clip-Cov: Cui et al. 2025, The Entropy Mechanism of RL (arXiv:2505.22617)",
)
POLICY_LOSSES.declare(
    "kl_cov",
    f"{_PACKAGE}.covariance_losses:kl_cov",
    reads=("kl_cov_ratio", "kl_cov_coef"),
    cites="KL-Cov: Cui et al. 2025, The Entropy Mechanism of RL (arXiv:2505.22617)",
)
POLICY_LOSSES.declare(
    "dppo_tv",
    f"{_PACKAGE}.losses:dppo_tv",
    reads=("eps_low", "eps_high", "dppo_ratio_cap"),
    cites="DPPO-Binary-TV: Qi et al. 2026, Rethinking the Trust Region (arXiv:2602.04879)",
)
POLICY_LOSSES.declare(
    "dppo_kl",
    f"{_PACKAGE}.losses:dppo_kl",
    reads=("eps_low", "eps_high", "dppo_ratio_cap"),
    cites="DPPO-Binary-KL: Qi et al. 2026, Rethinking the Trust Region (arXiv:2602.04879)",
)
POLICY_LOSSES.declare(
    "topr",
    f"{_PACKAGE}.losses:topr",
    reads=(),
    cites="TOPR: Le Roux et al. 2025, Tapered Off-Policy REINFORCE (arXiv:2503.14286)",
)
# issue 35: prime-rl's default loss
POLICY_LOSSES.declare(
    "prime_rl",
    f"{_PACKAGE}.losses:prime_rl",
    reads=("eps_low", "eps_high", "kl_tau", "adv_tau"),
    cites="prime-rl default loss: DPPO-Binary-TV, Qi et al. 2026 (arXiv:2602.04879), and the KL of Kimi K2.5 "
    "(arXiv:2602.02276); prime-rl src/prime_rl/trainer/rl/loss.py@559b447",
)
# issue 35: TRL loss types
POLICY_LOSSES.declare(
    "vespo",
    f"{_PACKAGE}.losses:vespo",
    reads=("vespo_k_pos", "vespo_lambda_pos", "vespo_k_neg", "vespo_lambda_neg"),
    cites="VESPO: Shen et al. 2026, Variational Sequence-Level Soft Policy Optimization (arXiv:2602.10693); "
    "TRL trl/trainer/grpo_trainer.py@f2cd577 (and 1.16.0) loss_type='vespo'",
)

#: ``fn(per_token, mask, norm_constant) -> scalar`` (``aggregation.py``)
AGGREGATIONS = _slot("aggregation")
AGGREGATIONS.declare(
    "token_mean",
    f"{_PACKAGE}.aggregation:token_mean",
    reads=(),
    cites="DAPO: Yu et al. 2025 (arXiv:2503.14476); verl token-mean, TRL loss_type='dapo'",
)
AGGREGATIONS.declare(
    "seq_mean_token_mean",
    f"{_PACKAGE}.aggregation:seq_mean_token_mean",
    reads=(),
    cites="GRPO: Shao et al. 2024 (arXiv:2402.03300); verl seq-mean-token-mean",
)
AGGREGATIONS.declare(
    "seq_mean_token_sum_norm",
    f"{_PACKAGE}.aggregation:seq_mean_token_sum_norm",
    reads=("loss_norm_constant",),
    cites="Dr. GRPO: Liu et al. 2025 (arXiv:2503.20783); verl seq-mean-token-sum-norm",
)
AGGREGATIONS.declare(
    "seq_mean_token_sum",
    f"{_PACKAGE}.aggregation:seq_mean_token_sum",
    reads=(),
    cites="verl seq-mean-token-sum: each sequence's log-likelihood term, as REINFORCE",
)
AGGREGATIONS.declare("token_sum", f"{_PACKAGE}.aggregation:token_sum", reads=(), cites="verl token-sum: no normaliser")

#: ``fn(logprobs, ref_logprobs, old_logprobs) -> per-token estimate`` (``kl.py``); no field of their own
KL_ESTIMATORS = _slot("KL estimator")
_SCHULMAN = "Schulman 2020, Approximating KL Divergence (joschu.net/blog/kl-approx.html)"
KL_ESTIMATORS.declare("k1", f"{_PACKAGE}.kl:k1", reads=(), cites=_SCHULMAN)
KL_ESTIMATORS.declare("k2", f"{_PACKAGE}.kl:k2", reads=(), cites=_SCHULMAN)
KL_ESTIMATORS.declare("k3", f"{_PACKAGE}.kl:k3", reads=(), cites=_SCHULMAN)
KL_ESTIMATORS.declare(
    "k1+",
    f"{_PACKAGE}.kl:k1_straight_through",
    reads=(),
    cites=f"{_SCHULMAN}; straight-through k2 gradient as verl kl_penalty 'k1+'",
)
KL_ESTIMATORS.declare(
    "k3+",
    f"{_PACKAGE}.kl:k3_straight_through",
    reads=(),
    cites=f"{_SCHULMAN}; straight-through k2 gradient as verl kl_penalty 'k3+'",
)
KL_ESTIMATORS.declare(
    "k3_unbiased",
    f"{_PACKAGE}.kl:k3_unbiased",
    reads=(),
    cites="DeepSeek-AI 2025, DeepSeek-V3.2 (arXiv:2512.02556), eq. 8: k3 times pi/pi_old",
)

#: ``fn(cfg) -> KLWeights`` (``kl.py``)
KL_PLACEMENTS = _slot("KL placement")
_KL_FIELDS = ("kl_coef", "kl_estimator")
KL_PLACEMENTS.declare("none", f"{_PACKAGE}.kl:no_kl", reads=(), cites="no KL term (DAPO drops it)")
KL_PLACEMENTS.declare(
    "reward",
    f"{_PACKAGE}.kl:kl_in_reward",
    reads=_KL_FIELDS,
    cites="InstructGPT: Ouyang et al. 2022 (arXiv:2203.02155)",
)
KL_PLACEMENTS.declare(
    "loss", f"{_PACKAGE}.kl:kl_in_loss", reads=_KL_FIELDS, cites="GRPO: Shao et al. 2024 (arXiv:2402.03300)"
)

#: ``fn(policy) -> ValueCritic | None`` (``critic.py``); ``trained``: whether there is a critic at all
CRITICS = _slot("critic", "trained")
_VALUE_FIELDS = ("vf_coef", "value_clip", "critic_lr")
CRITICS.declare("none", f"{_PACKAGE}.critic:no_critic", reads=(), trained=False, cites="no critic")
CRITICS.declare(
    "value_head",
    f"{_PACKAGE}.critic:value_head",
    reads=_VALUE_FIELDS,
    trained=True,
    cites="PPO: Schulman et al. 2017 (arXiv:1707.06347), a head on the policy's trunk",
)
CRITICS.declare(
    "value_model",
    f"{_PACKAGE}.critic:value_model",
    reads=_VALUE_FIELDS,
    trained=True,
    cites="PPO-RLHF: Ouyang et al. 2022 (arXiv:2203.02155), a separate value model",
)

#: ``fn(weight_dtypes) -> whether the step recomputes the old log-probs`` (``old_logprobs.py``)
#: ``may_recompute``: whether it ever recomputes them
OLD_LOGPROBS = _slot("old log-probs source", "may_recompute")
OLD_LOGPROBS.declare(
    "sampler",
    f"{_PACKAGE}.old_logprobs:from_sampler",
    reads=(),
    may_recompute=False,
    cites="the sampler's own log-probs (TRL without vLLM)",
)
OLD_LOGPROBS.declare(
    "recompute",
    f"{_PACKAGE}.old_logprobs:recompute",
    reads=(),
    may_recompute=True,
    cites="a training forward pass, as the actors of verl and OpenRLHF",
)
OLD_LOGPROBS.declare(
    "auto",
    f"{_PACKAGE}.old_logprobs:by_precision",
    reads=(),
    may_recompute=True,
    cites="recompute where the weights are bf16/fp16",
)

#: ``fn(old_logprobs, sampler_logprobs, mask, cfg) -> (weights, metrics)`` (``mismatch.py``);
#: ``compares``: whether it reads the trainer's old log-probs against the sampler's (so the step
#: recomputes them)
MISMATCH = _slot("mismatch correction", "compares")
_TIS = "TIS: Yao et al. 2025, Your Efficient RL Framework Secretly Brings You Off-Policy RL Training"
_MIS = (
    "MIS: Liu, Li et al. 2025, When Speed Kills Stability; IcePop: Ling Team 2025, Every Step Evolves "
    "(Ring-1T), band [0.5, 5]"
)
MISMATCH.declare("none", f"{_PACKAGE}.mismatch:no_correction", reads=(), compares=False, cites="no correction")
MISMATCH.declare(
    "token_truncate",
    f"{_PACKAGE}.mismatch:token_truncate",
    reads=("mismatch_cap", "mismatch_floor"),
    compares=True,
    cites=f"{_TIS}; verl rollout_is=token, TRL token_truncate",
)
MISMATCH.declare(
    "sequence_truncate",
    f"{_PACKAGE}.mismatch:sequence_truncate",
    reads=("mismatch_cap",),
    compares=True,
    cites=f"{_TIS}; verl rollout_is=sequence, TRL sequence_truncate",
)
MISMATCH.declare(
    "token_mask",
    f"{_PACKAGE}.mismatch:token_mask",
    reads=("mismatch_cap", "mismatch_floor"),
    compares=True,
    cites=f"{_MIS}; TRL token_mask",
)
MISMATCH.declare(
    "sequence_mask",
    f"{_PACKAGE}.mismatch:sequence_mask",
    reads=("mismatch_cap", "mismatch_floor"),
    compares=True,
    cites=f"{_MIS}; TRL sequence_mask (its default)",
)
# issue 35: verl's rollout correction (batch-normalised weights, rejection on the mask), OpenRLHF's seq-mask-tis
MISMATCH.declare(
    "rollout_corr",
    f"{_PACKAGE}.mismatch:rollout_corr",
    reads=(
        "rollout_is",
        "mismatch_cap",
        "rollout_is_batch_normalize",
        "rollout_rs",
        "rollout_rs_threshold",
    ),
    compares=True,
    cites=(
        "MIS: Liu, Li et al. 2025, When Speed Kills Stability; verl rollout correction "
        "(verl/trainer/ppo/rollout_corr_helper.py@b178a3c)"
    ),
)
MISMATCH.declare(
    "seq_mask_tis",
    f"{_PACKAGE}.mismatch:seq_mask_tis",
    reads=("mismatch_cap", "mismatch_floor"),
    compares=True,
    cites=f"{_TIS}; OpenRLHF is_correction_type=seq-mask-tis (openrlhf/models/loss.py@3c3be62)",
)
# issue 35: AReaL's objectives for asynchronous training
MISMATCH.declare(
    "m2po",
    f"{_PACKAGE}.mismatch:m2po",
    reads=("m2_threshold", "mismatch_cap", "mismatch_floor"),
    compares=True,
    cites="M2PO: Zheng et al. 2025, Prosperity before Collapse (arXiv:2510.01161); AReaL m2_threshold",
)
MISMATCH.declare(
    "sequence_geomean_mask",
    f"{_PACKAGE}.mismatch:sequence_geomean_mask",
    reads=("mismatch_cap", "mismatch_floor"),
    compares=True,
    cites="AReaL rejection_sampling level=sequence, metric=ratio, agg=mean, action=mask (arXiv:2505.24298)",
)
MISMATCH.declare(
    "sequence_geomean_truncate",
    f"{_PACKAGE}.mismatch:sequence_geomean_truncate",
    reads=("mismatch_cap", "mismatch_floor"),
    compares=True,
    cites="AReaL rejection_sampling level=sequence, metric=ratio, agg=mean, action=clamp (arXiv:2505.24298)",
)

#: ``fn(entropy, mask, cfg) -> (weights, metrics)`` (``token_filters.py``)
TOKEN_FILTERS = _slot("token filter")
TOKEN_FILTERS.declare("all", f"{_PACKAGE}.token_filters:all_tokens", reads=(), cites="every token")
TOKEN_FILTERS.declare(
    "top_entropy",
    f"{_PACKAGE}.token_filters:top_entropy",
    reads=("entropy_top_share",),
    cites="Wang et al. 2025, Beyond the 80/20 Rule (arXiv:2506.01939); TRL top_entropy_quantile",
)

#: ``fn(scores, group_size, cfg) -> GroupChoice`` (``sampling.py``); ``needs_groups``: whether it
#: compares the samples of a group
SAMPLING = _slot("sampling", "needs_groups")
SAMPLING.declare(
    "once", f"{_PACKAGE}.sampling:once", reads=(), needs_groups=False, cites="one draw of G samples per prompt"
)
SAMPLING.declare(
    "dynamic",
    f"{_PACKAGE}.sampling:dynamic",
    reads=("max_draws",),
    needs_groups=True,
    cites="DAPO dynamic sampling: Yu et al. 2025 (arXiv:2503.14476)",
)

#: ``fn(cut_off, cfg) -> (rows the loss reads, metrics)`` (``sampling.py``)
TRUNCATED = _slot("truncation handling")
TRUNCATED.declare("keep", f"{_PACKAGE}.sampling:keep_truncated", reads=(), cites="train on every completion")
TRUNCATED.declare(
    "mask",
    f"{_PACKAGE}.sampling:mask_truncated",
    reads=(),
    cites="DAPO overlong filtering: Yu et al. 2025 (arXiv:2503.14476); TRL mask_truncated_completions",
)

#: ``fn(policy, reference) -> the sampler of the pairs`` (``dpo.py``); no field of their own
PAIR_SOURCES = _slot("DPO pair source")
PAIR_SOURCES.declare(
    "reference",
    f"{_PACKAGE}.dpo:from_reference",
    reads=(),
    cites="DPO: Rafailov et al. 2023 (arXiv:2305.18290), offline",
)
PAIR_SOURCES.declare(
    "policy", f"{_PACKAGE}.dpo:from_policy", reads=(), cites="online DPO: Guo et al. 2024 (arXiv:2402.04792)"
)

# issue 35: on-policy distillation
#: ``fn(cfg) -> TeacherWeights`` (``distill.py``): where the reverse KL to the teacher goes
DISTILL = _slot("distillation", "needs_teacher")
_DISTILL_FIELDS = ("teacher_model", "distill_coef", "distill_task_reward")
DISTILL.declare("none", f"{_PACKAGE}.distill:no_teacher", needs_teacher=False, reads=(), cites="no teacher")
DISTILL.declare(
    "advantage",
    f"{_PACKAGE}.distill:in_advantage",
    needs_teacher=True,
    reads=(*_DISTILL_FIELDS, "distill_discount"),
    cites="On-policy distillation: Thinking Machines 2025 (thinkingmachines.ai/blog/on-policy-distillation); "
    "tinker-cookbook tinker_cookbook/distillation/train_on_policy.py@9dfcc3a",
)
DISTILL.declare(
    "loss",
    f"{_PACKAGE}.distill:in_loss",
    needs_teacher=True,
    reads=_DISTILL_FIELDS,
    cites="GKD: Agarwal et al. 2024 (arXiv:2306.13649), beta=1 reverse KL on the sampled token's top-1 support "
    "with tail; TRL trl/experimental/server_distillation/server_distillation_trainer.py@f2cd577",
)
# issue 35: TRL GRPOTrainer's off-policy sequence masking
#: ``fn(logprobs, sampler_logprobs, advantages, mask, cfg) -> (weights, metrics)`` (``off_policy_masks.py``)
OFF_POLICY_MASKS = _slot("off-policy mask", "reads_sampler")
OFF_POLICY_MASKS.declare(
    "none", f"{_PACKAGE}.off_policy_masks:no_mask", reads_sampler=False, reads=(), cites="every sequence"
)
OFF_POLICY_MASKS.declare(
    "opsm",
    f"{_PACKAGE}.off_policy_masks:opsm",
    reads_sampler=True,
    reads=("off_policy_mask_threshold",),
    cites="Off-policy sequence masking: DeepSeek-AI 2025, DeepSeek-V3.2 (arXiv:2512.02556), eq. 9, against the "
    "sampler's log-probs; TRL trl/trainer/grpo_trainer.py@f2cd577 (and 1.16.0) off_policy_mask_threshold",
)

#: slot field -> the registry of its parts
SLOTS: dict[str, Registry] = {
    "advantage": ADVANTAGES,
    "policy_loss": POLICY_LOSSES,
    "aggregation": AGGREGATIONS,
    "kl_estimator": KL_ESTIMATORS,
    "kl_placement": KL_PLACEMENTS,
    "critic": CRITICS,
    "old_logprobs": OLD_LOGPROBS,
    "mismatch": MISMATCH,
    "token_filter": TOKEN_FILTERS,
    "sampling": SAMPLING,
    "truncated": TRUNCATED,
    "distill": DISTILL,  # issue 35: on-policy distillation
    "off_policy_mask": OFF_POLICY_MASKS,  # issue 35
}
#: slot field -> the registry of its parts, for DPO
DPO_SLOTS: dict[str, Registry] = {"pairs_from": PAIR_SOURCES}

#: fields the RL step reads whatever the parts: the optimisation schedule, the advantage's shared
#: post-processing, the entropy bonus, and the slots (the KL estimator only where a placement
#: reads it)
STEP_FIELDS = frozenset(
    {
        "name",
        "kind",
        "group_size",
        "lr",
        "epochs",
        "minibatches",
        "max_grad_norm",
        "entropy_coef",
        "whiten_advantages",
        "drop_degenerate",
        *(slot for slot in SLOTS if slot != "kl_estimator"),
    }
)


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
        name for name, info in RLConfig.model_fields.items() if name not in read and getattr(cfg, name) != info.default
    ]


#: metadata that makes a part read something of the step's besides the batch and the fields: what it reads
_INPUTS: dict[str, tuple[str, ...]] = {
    "needs_critic": ("the critic's values",),
    "needs_token_probs": ("the policy's token log-probs and sums of squared probabilities, from its own pass",),
    # a mismatch part that compares: the behaviour policy's log-probs (perhaps steps stale) against the old ones
    "compares": ("sampler log-probs", "recomputed old log-probs"),
    "reads_sampler": ("sampler log-probs",),
    "needs_teacher": ("the teacher's log-probs on the sampled tokens, from its own pass",),
}


def part_inputs(slot: str, name: str) -> list[str]:
    """What a part reads besides its fields and the batch every part sees (the policy's log-probs,
    the old ones, the advantages, the mask): what its declaration's metadata says it needs
    (``_INPUTS``)."""
    meta = {**SLOTS, **DPO_SLOTS}[slot].meta(name)
    return [what for key, whats in _INPUTS.items() if meta.get(key) for what in whats]


def describe_parts() -> list[dict[str, str | list[str]]]:
    """One row per part of every slot, RL's then DPO's, for ``harness algorithms --parts``: its
    slot, name, the fields it reads, what else of the step it reads (``inputs``: ``part_inputs``)
    and its citation."""
    return [
        {
            "slot": slot,
            "name": name,
            "reads": list(registry.meta(name)["reads"]),
            "inputs": part_inputs(slot, name),
            "cites": registry.meta(name)["cites"],
        }
        for slot, registry in {**SLOTS, **DPO_SLOTS}.items()
        for name in registry.names()
    ]
