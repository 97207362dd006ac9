"""Named algorithms as presets of orthogonal parts, and ``resolve_algorithm`` to apply overrides.

Every preset is an ``RLConfig`` or a ``DPOConfig`` with its paper's choices, scaled to the testbed: the RL
presets share one group size, learning rate and update schedule, so arms differ in their parts
and published numbers, not in budget. Each carries a citation and how it departs from the paper.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from harness.algorithms.config import CONFIG_TYPES, DPOConfig, RLConfig
from harness.algorithms.parts import (
    ADVANTAGES,
    CRITICS,
    MISMATCH,
    OLD_LOGPROBS,
    SAMPLING,
    check_part_names,
    fields_read,
    slots_of,
    unread_non_defaults,
    unread_problem,
)
from harness.errors import ConfigError, unknown_name

TESTBED_LR = 1e-4  # GRPO at 1e-4 lifts the addition testbed by ~0.15 in 60 steps; 3e-4 was unstable
TESTBED_CRITIC_LR = 1e-3
TESTBED_GROUP_SIZE = 8
TESTBED_MINIBATCHES = 4  # several updates per batch, so ratios leave 1 and the clips matter

_TESTBED = {"group_size": TESTBED_GROUP_SIZE, "lr": TESTBED_LR, "minibatches": TESTBED_MINIBATCHES}


@dataclass(frozen=True)
class Preset:
    config: RLConfig | DPOConfig
    citation: str
    departs: str  # how this preset departs from the paper


def _variant(base: RLConfig, name: str, **changes: Any) -> RLConfig:
    """``base`` with ``changes``, validated: a preset written as another preset plus a diff."""
    return RLConfig.model_validate({**base.model_dump(exclude_unset=True), "name": name, **changes})


_GRPO = RLConfig(
    name="grpo",
    advantage="group_zscore",
    policy_loss="clipped",
    aggregation="seq_mean_token_mean",
    kl_estimator="k3",
    kl_placement="loss",
    kl_coef=0.04,
    eps_low=0.2,
    eps_high=0.2,
    **_TESTBED,
)
_NO_KL = {"kl_placement": "none", "kl_coef": 0.0}

PRESETS: dict[str, Preset] = {
    "ppo": Preset(
        RLConfig(
            name="ppo",
            advantage="gae",
            critic="value_head",
            critic_lr=TESTBED_CRITIC_LR,
            policy_loss="clipped",
            aggregation="token_mean",
            kl_estimator="k1",
            kl_placement="reward",
            kl_coef=0.02,
            whiten_advantages=True,
            gamma=1.0,
            lam=0.95,
            **_TESTBED,
        ),
        "Schulman et al. 2017, PPO (arXiv:1707.06347), in the RLHF form of Ouyang et al. 2022 "
        "(InstructGPT: per-token k1 KL in the reward, beta 0.02)",
        "value head on the policy trunk instead of a separate value model; 8 samples per prompt "
        "to match the other arms' budget; token-mean aggregation",
    ),
    "grpo": Preset(
        _GRPO,
        "Shao et al. 2024, DeepSeekMath (arXiv:2402.03300)",
        "group size 8 (paper 64); the testbed's learning rate and update schedule",
    ),
    # Dr. GRPO is GRPO with exactly two parts switched: no std division, no 1/|o_i|.
    "dr_grpo": Preset(
        _variant(_GRPO, "dr_grpo", advantage="group_mean", aggregation="seq_mean_token_sum_norm"),
        "Liu et al. 2025, Understanding R1-Zero-Like Training (arXiv:2503.20783)",
        "keeps GRPO's k3 KL and every other setting, so it differs from grpo in the two parts only",
    ),
    "rloo": Preset(
        RLConfig(
            name="rloo",
            advantage="leave_one_out",
            policy_loss="is",
            aggregation="seq_mean_token_sum_norm",
            kl_estimator="k1",
            kl_placement="reward",
            kl_coef=0.05,
            **_TESTBED,
        ),
        "Ahmadian et al. 2024, Back to Basics: REINFORCE-style optimization (arXiv:2402.14740)",
        "minibatch reuse corrected by an unclipped importance ratio (the paper is on-policy); "
        "the sequence-level loss is divided by the generation budget; KL coef 0.05 is ours",
    ),
    "reinforce_pp": Preset(
        RLConfig(
            name="reinforce_pp",
            advantage="reinforce_pp",
            policy_loss="clipped",
            aggregation="token_mean",
            kl_estimator="k1",
            kl_placement="reward",
            kl_coef=0.01,
            gamma=1.0,
            **_TESTBED,
        ),
        "Hu 2025, REINFORCE++ (arXiv:2501.03262)",
        "8 samples per prompt to match the other arms' budget (the method needs only one); KL coef 0.01 is ours",
    ),
    "cispo": Preset(
        _variant(
            _GRPO,
            "cispo",
            policy_loss="cispo",
            eps_low=1.0,
            eps_high=4.0,
            aggregation="token_mean",
            **_NO_KL,
        ),
        "MiniMax 2025, MiniMax-M1 (arXiv:2506.13585)",
        "ratio cap 5 (eps_high 4.0) from the seed tutorial; eps_low 1.0 puts the lower bound at 0, "
        "i.e. none; GRPO's group size 8 and testbed schedule",
    ),
    "dpo": Preset(
        DPOConfig(name="dpo", dpo_beta=0.1, group_size=8, lr=TESTBED_LR),
        "Rafailov et al. 2023, Direct Preference Optimization (arXiv:2305.18290)",
        "offline (pairs_from=reference): each step's pairs are the best and worst of G samples "
        "per prompt from the frozen warm start, ranked by the verifier, not a fixed human "
        "preference set; pairs_from=policy makes it online (the current policy's own samples)",
    ),
    "dapo": Preset(
        _variant(
            _GRPO,
            "dapo",
            eps_high=0.28,
            aggregation="token_mean",
            drop_degenerate=True,
            **_NO_KL,
        ),
        "Yu et al. 2025, DAPO (arXiv:2503.14476)",
        "no overlong reward shaping; degenerate groups are dropped, not resampled to refill "
        "the batch; group size 8 (paper 16)",
    ),
    "gspo": Preset(
        _variant(_GRPO, "gspo", policy_loss="gspo", eps_low=3e-4, eps_high=4e-4, **_NO_KL),
        "Zheng et al. 2025, Group Sequence Policy Optimization (arXiv:2507.18071)",
        "the paper's clip range (3e-4, 4e-4) at the testbed's group size and update schedule",
    ),
    # The later parts, each a preset of GRPO's parts with its own loss (or advantage) switched in.
    "sapo": Preset(
        _variant(_GRPO, "sapo", policy_loss="sapo", **_NO_KL),
        "Gao et al. 2025, Soft Adaptive Policy Optimization (arXiv:2511.20347)",
        "gate temperatures 1.0 / 1.05 (verl's and TRL's defaults); GRPO's advantage and "
        "seq-mean-token-mean aggregation (as verl's SAPO); no KL; the testbed's group size and schedule",
    ),
    "gmpo": Preset(
        _variant(_GRPO, "gmpo", policy_loss="gmpo", eps_low=0.4, eps_high=0.4, **_NO_KL),
        "Zhao et al. 2025, Geometric-Mean Policy Optimization (arXiv:2507.20673)",
        "the paper's log-ratio clip range (e^-0.4, e^0.4); GRPO's advantage; no KL; all-padding "
        "rows are left out of the mean over sequences (verl counts them)",
    ),
    "clip_cov": Preset(
        _variant(_GRPO, "clip_cov", policy_loss="clip_cov", aggregation="token_mean", **_NO_KL),
        "Cui et al. 2025, The Entropy Mechanism of RL for Reasoning LMs (arXiv:2505.22617): Clip-Cov",
        "r = 2e-4 and the band (1, 5) from the paper; the band's tokens are picked by fixed-seed random "
        "keys, not torch's global generator; at the testbed's ~64 tokens a minibatch that is one token",
    ),
    "kl_cov": Preset(
        _variant(_GRPO, "kl_cov", policy_loss="kl_cov", aggregation="token_mean", **_NO_KL),
        "Cui et al. 2025, The Entropy Mechanism of RL for Reasoning LMs (arXiv:2505.22617): KL-Cov",
        "k = 2e-3 and beta 1: the paper's 7B setting, as verl's recipe/entropy/7b_kl_cov.sh (lines 53-54 at "
        "246cac4; its 32B script: 2e-4 and 1); verl's config defaults are 2e-4 and 0.1 (PolicyLossConfig, "
        "verl/workers/config/actor.py lines 98-99 at 1dda039), which no recipe of it uses: set kl_cov_ratio=2e-4 "
        "and kl_cov_coef=0.1 for them; at the testbed's ~64 tokens a minibatch either k is one token",
    ),
    "dppo": Preset(
        _variant(
            _GRPO,
            "dppo",
            policy_loss="dppo_tv",
            eps_low=0.15,
            eps_high=0.15,
            aggregation="seq_mean_token_sum_norm",
            dppo_ratio_cap=1e4,
            **_NO_KL,
        ),
        "Qi et al. 2026, Rethinking the Trust Region in LLM RL (arXiv:2602.04879): DPPO-Binary-TV",
        "TV threshold 0.15, seq-mean-token-sum-norm and ratio cap 1e4 as verl's example "
        "(examples/dppo_trainer/run_qwen3_30b_a3b_megatron.sh lines 18, 76, 79 at 1dda039; a large cap as the "
        "paper's section 5.4 advises); a verl run that leaves clip_ratio_c unset caps at ActorConfig's 3.0, the "
        "dual clip's (verl/workers/config/actor.py line 164), and 20 is only core_algos.py's fallback where the "
        "config lacks it (line 1427); GRPO's z-scored advantage where the example divides by no std "
        "(norm_adv_by_std_in_grpo=False, line 59); dppo_kl is the KL variant",
    ),
    "reinforce_pp_baseline": Preset(
        RLConfig(
            name="reinforce_pp_baseline",
            advantage="reinforce_pp_baseline",
            policy_loss="clipped",
            aggregation="token_mean",
            kl_estimator="k2",
            kl_placement="loss",
            kl_coef=0.01,
            **_TESTBED,
        ),
        "Hu 2025, REINFORCE++ (arXiv:2501.03262): REINFORCE++-baseline",
        "the group-mean baseline, then batch whitening, as OpenRLHF's reinforce_baseline; k2 KL in "
        "the loss as OpenRLHF's example; KL coef 0.01 is ours",
    ),
    "lite_ppo": Preset(
        _variant(_GRPO, "lite_ppo", advantage="group_mean_batch_std", aggregation="token_mean", **_NO_KL),
        "Liu et al. 2025, Part I: Tricks or Traps? A Deep Dive into RL for LLM Reasoning (arXiv:2508.08221)",
        "group-mean, batch-std advantages and token-level aggregation on the clipped loss, no critic, "
        "no KL, as the paper's Lite PPO; the testbed's group size and schedule",
    ),
    "topr": Preset(
        _variant(_GRPO, "topr", advantage="group_mean", policy_loss="topr", aggregation="seq_mean_token_sum", **_NO_KL),
        "Le Roux et al. 2025, Tapered Off-Policy REINFORCE (arXiv:2503.14286)",
        "rewards centred by the group mean (the paper uses a baseline too) and read as advantages; "
        "each sequence's summed log-likelihood term; no KL; minibatch reuse is the off-policy part",
    ),
    # AReaL's decoupled PPO: the clipped ratio against the proximal policy (the trainer's log-probs
    # recomputed at the start of the step), each token's term weighed by proximal / behaviour
    # (the sampler's log-probs, possibly steps stale), masked above the cap: ``ppo_actor_loss_fn``
    # in AReaL's areal/utils/functional.py (commit 56bad8b21a7307fbe53c2c5ad8311a8aa21ffe45) is
    # the clipped loss times the token_mask correction with floor 0 (tests/algorithms/test_decoupled.py).
    # At AReaL's 4aef98d the function is in areal/utils/functional/functional.py and the cap is
    # ``rejection_sampling`` {level: token, action: mask, metric: ratio, upper: 5.0}; the same loss
    # (tests/algorithms/test_areal.py)
    "decoupled_ppo": Preset(
        _variant(
            _GRPO,
            "decoupled_ppo",
            aggregation="token_mean",
            mismatch="token_mask",  # it compares: the old (proximal) log-probs are recomputed every step
            mismatch_cap=5.0,
            mismatch_floor=0.0,
            **_NO_KL,
        ),
        "Fu et al. 2025, AReaL: A Large-Scale Asynchronous RL System (arXiv:2505.24298), decoupled PPO objective",
        "behaviour importance weights masked above 5: AReaL's rejection_sampling {level: token, action: mask, "
        "metric: ratio, upper: 5.0} (examples/math/gsm8k_grpo.yaml@4aef98d lines 71-74; upper's default in "
        "areal/api/cli_args.py line 1300; it replaced behav_imp_weight_cap), which AReaL's PPOActorConfig leaves "
        "off by default (rejection_sampling None: no behaviour weight at all); GRPO's group z-score advantage "
        "(AReaL's examples add batch whitening); eps 0.2 as AReaL's eps_clip default (its GSM8K example: 0.4); "
        "token-mean loss as AReaL's; no KL; the testbed's group size and schedule",
    ),
    # issue 35: AReaL's objectives for asynchronous training
    "m2po": Preset(
        _variant(
            _GRPO,
            "m2po",
            aggregation="token_mean",
            mismatch="m2po",  # it compares: the old (proximal) log-probs are recomputed every step
            mismatch_cap=5.0,
            m2_threshold=0.04,
            **_NO_KL,
        ),
        "Zheng et al. 2025, Prosperity before Collapse: How Far Can Off-Policy RL Reach with Stale Data on "
        "LLMs? (arXiv:2510.01161): M2PO, as AReaL runs it with its decoupled objective",
        "decoupled_ppo with M2PO's mask: m2_threshold 0.04 and the behaviour mask above 5 of AReaL's "
        "examples/math/gsm8k_m2po.yaml@4aef98d (lines 82 and 71-74); AReaL's example sets eps_clip 0.0 with "
        "one minibatch (lines 63, 68), where the only update is at a ratio of 1 and no clip acts (the paper "
        "has no clip): here GRPO's 0.2 band, which acts from the testbed's second minibatch on; GRPO's group "
        "z-score advantage (AReaL adds batch whitening); no KL; the testbed's group size and schedule",
    ),
    # issue 35: on-policy distillation
    # tinker-cookbook's recipe (tinker_cookbook/distillation/train_on_policy.py@9dfcc3a): the advantage
    # -kl_penalty_coef * (log p_sampler - log p_teacher) per token (lines 91-105), kl_penalty_coef 1.0 and
    # kl_discount_factor 0.0 (Config, lines 146-147), loss_fn importance_sampling (line 151), its
    # distillation datasets' reward 0 (distillation/datasets.py: "no correctness or format rewards")
    "on_policy_distill": Preset(
        _variant(
            _GRPO,
            "on_policy_distill",
            advantage="group_mean",
            policy_loss="is",
            aggregation="token_sum",
            distill="advantage",
            distill_coef=1.0,
            distill_discount=0.0,
            distill_task_reward=False,
            **_NO_KL,
        ),
        "Thinking Machines 2025, On-Policy Distillation (thinkingmachines.ai/blog/on-policy-distillation); "
        "tinker-cookbook tinker_cookbook/distillation/train_on_policy.py@9dfcc3a",
        "the teacher is teacher_model (on the testbed the tiny model at twice the width and depth, warm-started "
        "once and cached), not a larger hub model; no task reward, as the recipe's datasets; the importance-sampled "
        "loss summed over tokens as tinker's importance_sampling; no KL to the reference; the testbed's group size "
        "and schedule",
    ),
    # TRL's ServerDistillationTrainer (trl/experimental/server_distillation/server_distillation_trainer.py@f2cd577):
    # beta 1.0 (DistillationConfig, distillation_config.py line 155), loss_top_k 1, loss_add_tail True,
    # reverse_kl_top_1_mode 'sampled' (server_distillation_config.py lines 52-67), the divergence alone as the
    # loss, averaged over the batch's completion tokens ('batchmean', _reduce_divergence_loss)
    "trl_server_distillation": Preset(
        _variant(
            _GRPO,
            "trl_server_distillation",
            aggregation="token_mean",
            distill="loss",
            distill_coef=1.0,
            distill_task_reward=False,
            **_NO_KL,
        ),
        "Agarwal et al. 2024, On-Policy Distillation of Language Models: Learning from Self-Generated Mistakes "
        "(GKD, arXiv:2306.13649); TRL trl/experimental/server_distillation/server_distillation_trainer.py@f2cd577",
        "TRL samples one completion per prompt (num_generations 1, distillation_config.py line 188), here the "
        "testbed's group; the teacher is teacher_model (on the testbed the tiny model at twice the width and depth, "
        "warm-started once and cached), not a server; the policy loss reads zero advantages (no task reward), so "
        "the reverse KL is the whole loss; its log-ratios clamped to +-20; the testbed's schedule",
    ),
    # issue 35: prime-rl's default loss (its loss type "default"; prime-rl names no algorithm for it)
    "prime_rl": Preset(
        _variant(
            _GRPO,
            "prime_rl",
            advantage="group_mean",
            policy_loss="prime_rl",
            eps_low=0.2,
            eps_high=0.2,
            kl_tau=1e-3,
            adv_tau=1.0,
            aggregation="token_mean",
            old_logprobs="sampler",
            drop_degenerate=True,
            **_NO_KL,
        ),
        "prime-rl's default loss, DPPO-Binary-TV masking plus a KL term to the sampler: Qi et al. 2026 "
        "(arXiv:2602.04879) and Kimi K2.5 (arXiv:2602.02276); PrimeIntellect-ai/prime-rl at 559b447",
        "as prime-rl's defaults at 559b447: the reward minus the group mean (src/prime_rl/orchestrator/algo/"
        "grpo.py line 30); mask thresholds 0.2 / 0.2, adv_tau 1, kl_tau 1e-3 (DefaultLossConfig, "
        "packages/prime-rl-configs/src/prime_rl/configs/trainer.py lines 497-506); the sum over tokens divided "
        "by the batch's loss tokens (src/prime_rl/trainer/rl/loss.py line 394, train.py lines 307-323); ratios "
        "against the sampler's log-probs, never recomputed (old_logprobs=sampler); zero-advantage tokens left "
        "out (TrainConfig.filter_zero_advantages, packages/prime-rl-configs/src/prime_rl/configs/orchestrator.py "
        "line 270) as groups of equal scores are here; no KL to a reference. Departs: the testbed's 4 "
        "minibatches per batch move the policy off the sampler where prime-rl takes one optimiser step per "
        "batch and is off-policy through its asynchronous sampler; the ratio's log-ratio clamped at +-20; the "
        "testbed's group size and learning rate",
    ),
    # issue 35: verl's rollout correction and OpenRLHF's seq-mask-tis, each as its framework names it
    "grpo_k3_rs_token_tis": Preset(
        _variant(
            _GRPO,
            "grpo_k3_rs_token_tis",
            mismatch="rollout_corr",
            rollout_is="token",
            mismatch_cap=2.0,
            rollout_rs="seq_mean_k3",
            rollout_rs_threshold=0.01,
        ),
        "Liu, Li et al. 2025, When Speed Kills Stability; verl's RolloutCorrectionConfig.decoupled_k3_rs_token_tis "
        "(verl/trainer/config/algorithm.py@b178a3c lines 530-553)",
        "GRPO with verl's named K3-RS + Token-TIS correction at its defaults (token weights truncated at "
        "is_threshold 2.0, line 532; sequences whose mean k3 exceeds rs_threshold 0.01, line 533, leave the "
        "loss's mask); 'decoupled' is verl's name for recomputed old log-probs, as old_logprobs=auto does in "
        "bf16; the weights are computed per minibatch (verl: per step)",
    ),
    "grpo_seq_mask_tis": Preset(
        _variant(_GRPO, "grpo_seq_mask_tis", mismatch="seq_mask_tis", mismatch_cap=5.0, mismatch_floor=0.5),
        "Yao et al. 2025, Your Efficient RL Framework Secretly Brings You Off-Policy RL Training; OpenRLHF's "
        "--algo.advantage.is_correction_type seq-mask-tis (openrlhf/models/loss.py@3c3be62 lines 206-213)",
        "GRPO with OpenRLHF's seq-mask-tis at its default thresholds [0.5, 5.0] "
        "(openrlhf/cli/train_ppo_ray.py@3c3be62 line 262); the token weights unclamped, as OpenRLHF's code; "
        "the log-weights clamped at +-20 (OpenRLHF: none)",
    ),
    # issue 35: TRL loss types. LUSPO is GSPO's loss with each sequence's term summed over its
    # tokens (TRL 1.16 grpo_trainer.py: loss_type "luspo" is the clipped surrogate, then
    # ``(per_token_loss * mask).sum(-1).mean()``), so it is a preset of two existing parts.
    "luspo": Preset(
        _variant(
            _GRPO,
            "luspo",
            policy_loss="gspo",
            aggregation="seq_mean_token_sum",
            eps_low=2e-3,
            eps_high=2.5e-3,
            **_NO_KL,
        ),
        "Liu et al. 2026, Length-Unbiased Sequence Policy Optimization (arXiv:2602.05261); TRL loss_type='luspo'",
        "GSPO's sequence ratio with each sequence's term scaled by its length (seq_mean_token_sum); clip range "
        "(2e-3, 2.5e-3) from the paper's section 5.1 as TRL's docs/source/paper_index.md (huggingface/trl f2cd577, "
        "lines 655-656); no KL (TRL's beta default 0.0, grpo_config.py:681 in 1.16); the sequence log-ratio "
        "clamped at 10 (TRL does not clamp) and all-padding rows left out of the mean (TRL counts them)",
    ),
    # INTELLECT-2's recipe as TRL's docs/source/paper_index.md (huggingface/trl f2cd577, lines 224-236) gives it
    "intellect2": Preset(
        _variant(_GRPO, "intellect2", two_sided_delta=4.0, eps_low=0.2, eps_high=0.2, kl_coef=0.001),
        "Prime Intellect 2025, INTELLECT-2 (arXiv:2505.07291), two-sided GRPO clipping; TRL GRPOConfig delta",
        "delta 4, epsilon 0.2, beta 0.001 (the KL to the reference in the loss, k3, as TRL's beta) as TRL's "
        "paper_index.md lines 229-233 reproduce section 4.1; GRPO's group z-score advantage and sequence-mean "
        "aggregation; not the paper's 16 samples per prompt and learning rate 3e-7: the testbed's group size and "
        "schedule; asynchronous in the paper, synchronous here",
    ),
    # DeepSeek-V3.2's off-policy sequence masking as TRL's docs suggest it (paper_index.md lines 589-601)
    "grpo_opsm": Preset(
        _variant(_GRPO, "grpo_opsm", off_policy_mask="opsm", off_policy_mask_threshold=0.5),
        "DeepSeek-AI 2025, DeepSeek-V3.2 (arXiv:2512.02556), eq. 9, off-policy sequence masking; TRL GRPOConfig "
        "off_policy_mask_threshold",
        "GRPO with negative-advantage sequences left out of the loss when their mean log(sampler/policy) per token "
        "exceeds 0.5: the paper gives no value, 0.5 is the starting point TRL's paper_index.md (f2cd577, line 600) "
        "suggests; against the sampler's log-probs (the old ones on the synchronous testbed, where the two are "
        "the same process's)",
    ),
    "vespo": Preset(
        _variant(_GRPO, "vespo", policy_loss="vespo", aggregation="token_mean", **_NO_KL),
        "Shen et al. 2026, VESPO: Variational Sequence-Level Soft Policy Optimization (arXiv:2602.10693); "
        "TRL loss_type='vespo'",
        "k, lambda = 2, 3 for A >= 0 and 3, 2 for A < 0 (TRL 1.16 grpo_config.py:730-755, the paper's c1, c2); "
        "token-mean aggregation (TRL's vespo divides by the generation's tokens per optimiser step); GRPO's "
        "group z-score advantage (TRL's scale_rewards default); no KL; the testbed's group size and schedule",
    ),
    # issue 35: advantage estimators. verl's grpo_passk under verl's name: the estimator keeps the
    # harness's descriptive name (group_passk; renaming it would change the ids of trials that set it)
    "grpo_passk": Preset(
        _variant(
            _GRPO,
            "grpo_passk",
            advantage="group_passk",
            adv_eps=1e-6,
            aggregation="token_mean",
            dual_clip=3.0,
            **_NO_KL,
        ),
        "pass@k training as verl's adv_estimator=grpo_passk (after arXiv:2503.19595; "
        "verl/trainer/ppo/core_algos.py@b178a3c)",
        "only each group's best row learns, from its gap to the runner-up over the group std (with 0/1 "
        "rewards: only groups with exactly one right answer); epsilon 1e-6 "
        "(core_algos.py line 365); verl's actor defaults (verl/trainer/config/actor/actor.yaml@b178a3c): "
        "clip 0.2 both ways (lines 36-42), dual clip 3 (79), token-mean loss (82), no KL (95); the testbed's "
        "group size and schedule",
    ),
    "maxrl": Preset(
        _variant(
            _GRPO, "maxrl", advantage="maxrl", adv_eps=1e-6, aggregation="token_mean", kl_estimator="k3", kl_coef=0.001
        ),
        "Tajwar et al. 2026, Maximum Likelihood Reinforcement Learning (arXiv:2602.02710), as SkyRL's "
        "advantage_estimator=maxrl (examples/train/algorithms/maxrl/run_maxrl_gsm8k.sh@a956457)",
        "SkyRL's AlgorithmConfig defaults (skyrl/train/config/config.py@a956457): PPO clip 0.2 both ways "
        "(lines 906, 908), token-mean loss (876), k3 KL in the loss (828, 833) at 0.001 (836); epsilon 1e-6 "
        "(ppo_utils.py line 1401); the testbed's group size and schedule (SkyRL's example: 5 samples per prompt)",
    ),
    "optimal_token_baseline": Preset(
        _variant(
            _GRPO,
            "optimal_token_baseline",
            advantage="optimal_token_baseline",
            aggregation="token_mean",
            dual_clip=3.0,
            **_NO_KL,
        ),
        "verl's Optimal Token Baseline (adv_estimator=optimal_token_baseline, docs/algo/otb.md and "
        "examples/otb_trainer/run_qwen2_5-7b.sh@b178a3c)",
        "a per-token baseline weighted by each path's accumulated 1 - 2p + sum p^2, from the policy's own pass "
        "(run every step for it); verl's actor defaults (verl/trainer/config/actor/actor.yaml@b178a3c): clip 0.2 "
        "both ways (lines 36-42), dual clip 3 (79), token-mean loss (82); no KL as the example (use_kl_loss=False); "
        "no rollout-IS scaling of the weights; the testbed's group size (the example's n=8) and schedule",
    ),
}


def resolve_algorithm(name: str, overrides: Mapping[str, Any] | None = None) -> RLConfig | DPOConfig:
    """Preset ``name`` with ``overrides`` applied, type-checked and checked for contradictions.

    Override values may be strings from ``--set key=value``: pydantic coerces them ("0.28",
    "true"), and "none"/"null" mean None for the fields that accept None. An override of a field
    that no chosen part reads is an error naming the parts that would; a field the preset set
    for a part the overrides switched off goes back to its default (``kl_placement=none`` on
    GRPO drops GRPO's ``kl_coef``).
    """
    if name not in PRESETS:
        raise unknown_name("algorithm preset", name, PRESETS)
    preset = PRESETS[name].config
    config_type = type(preset)
    fields = config_type.model_fields
    values = preset.model_dump(exclude_unset=True)
    overrides = dict(overrides or {})
    for key, value in overrides.items():
        if key in ("name", "kind"):
            raise ConfigError(f"algorithm.{key} comes from the preset; choose a preset instead")
        if key not in fields:
            raise _not_a_field(name, preset, key)
        none_allowed = type(None) in typing.get_args(fields[key].annotation)
        is_none = isinstance(value, str) and value.strip().lower() in {"none", "null"}
        values[key] = None if none_allowed and is_none else value
    cfg = _validate(config_type, values)
    unread: list[str] = []
    if isinstance(cfg, RLConfig):
        check_part_names(cfg)
        read = fields_read(cfg)
        unread = [unread_problem(cfg, key) for key in overrides if key not in read]
        cfg = _validate(config_type, {k: v for k, v in values.items() if k in read})
    problems = _problems(cfg) + unread
    if problems:
        raise ConfigError(f"algorithm {name!r}: " + "; ".join(problems))
    return cfg


def _not_a_field(name: str, preset: RLConfig | DPOConfig, key: str) -> ConfigError:
    for kind, other in CONFIG_TYPES.items():
        if kind != preset.kind and key in other.model_fields:
            owners = ", ".join(n for n, p in PRESETS.items() if p.config.kind == kind)
            return ConfigError(
                f"algorithm field {key!r} belongs to {kind.upper()} algorithms ({owners}); "
                f"preset {name!r} is of kind {preset.kind.upper()}, which has no {key}"
            )
    return unknown_name("algorithm field", key, set(type(preset).model_fields) - {"name", "kind"})


def _validate(config_type: type[RLConfig] | type[DPOConfig], values: dict[str, Any]) -> RLConfig | DPOConfig:
    try:
        return config_type.model_validate(values)
    except ValidationError as err:
        raise ConfigError(
            "; ".join(
                f"algorithm.{'.'.join(map(str, e['loc']))}: {e['msg']} (got {e['input']!r})" for e in err.errors()
            )
        ) from None


def check_algorithm(cfg: RLConfig | DPOConfig) -> RLConfig | DPOConfig:
    """``cfg`` unchanged if its part names exist and its parts fit together; otherwise a
    ``ConfigError`` naming each contradiction and what to change.
    """
    problems = _problems(cfg)
    if problems:
        raise ConfigError(f"algorithm {cfg.name!r}: " + "; ".join(problems))
    return cfg


def _problems(cfg: RLConfig | DPOConfig) -> list[str]:
    check_part_names(cfg)
    if isinstance(cfg, DPOConfig):
        return _dpo_problems(cfg)
    return _rl_problems(cfg) + [unread_problem(cfg, f) for f in unread_non_defaults(cfg)]


def _estimators(**meta: bool) -> str:
    """Names of the advantage estimators whose metadata matches ``meta``."""
    names = ADVANTAGES.names()
    return ", ".join(n for n in names if all(ADVANTAGES.meta(n)[k] == v for k, v in meta.items()))


def _rl_problems(cfg: RLConfig) -> list[str]:
    meta, problems = ADVANTAGES.meta(cfg.advantage), []
    if meta["needs_groups"] and cfg.group_size < 2:
        problems.append(
            f"advantage {cfg.advantage!r} compares the samples of a group and needs "
            f"group_size >= 2; raise group_size or use one of: {_estimators(needs_groups=False)}"
        )
    if cfg.drop_degenerate and cfg.group_size < 2:
        problems.append("drop_degenerate needs groups; set group_size >= 2 or drop_degenerate=false")
    trained = CRITICS.meta(cfg.critic)["trained"]
    if meta["needs_critic"] and not trained:
        problems.append(f"advantage {cfg.advantage!r} needs a critic; set critic=value_head or value_model")
    if not meta["needs_critic"] and trained:
        problems.append(
            f"critic {cfg.critic!r} would be trained but advantage {cfg.advantage!r} never uses "
            f"it; set critic=none or advantage to one of: {_estimators(needs_critic=True)}"
        )
    return problems + _sampling_side_problems(cfg)


def _sampling_side_problems(cfg: RLConfig) -> list[str]:
    problems = []
    if MISMATCH.meta(cfg.mismatch)["compares"] and not OLD_LOGPROBS.meta(cfg.old_logprobs)["may_recompute"]:
        problems.append(
            f"mismatch {cfg.mismatch!r} weighs the trainer's old log-probs against the sampler's, but "
            f"old_logprobs={cfg.old_logprobs} makes them the same; set old_logprobs to auto or recompute, or "
            "mismatch=none"
        )
    if cfg.mismatch_floor >= cfg.mismatch_cap:
        problems.append(
            f"mismatch_floor {cfg.mismatch_floor} is not below mismatch_cap {cfg.mismatch_cap}, so every "
            "weight would be masked; lower mismatch_floor or raise mismatch_cap"
        )
    if cfg.clip_cov_lb >= cfg.clip_cov_ub:
        problems.append(
            f"clip_cov_lb {cfg.clip_cov_lb} is not below clip_cov_ub {cfg.clip_cov_ub}: the covariance "
            "band is empty; lower clip_cov_lb or raise clip_cov_ub"
        )
    if SAMPLING.meta(cfg.sampling)["needs_groups"] and cfg.group_size < 2:
        problems.append(f"sampling={cfg.sampling} keeps the groups whose scores differ and needs group_size >= 2")
    return problems + _rollout_rs_problems(cfg)


# issue 35: verl's rollout correction
def _rollout_rs_problems(cfg: RLConfig) -> list[str]:
    """The rejection bound of ``mismatch=rollout_corr``: one where a rejection is chosen (verl has no
    default either), and for a k1 statistic above 1, or its band ``[1/bound, bound]`` is empty."""
    if cfg.mismatch != "rollout_corr" or cfg.rollout_rs == "none":
        return []
    if cfg.rollout_rs_threshold is None:
        return [
            f"rollout_rs={cfg.rollout_rs} needs rollout_rs_threshold (verl's presets: 0.01 for seq_mean_k3, "
            "1.001 for seq_mean_k1); set it or rollout_rs=none"
        ]
    if cfg.rollout_rs.endswith("k1") and cfg.rollout_rs_threshold <= 1:
        return [
            f"rollout_rs={cfg.rollout_rs} keeps ratios in [1/rollout_rs_threshold, rollout_rs_threshold], which is "
            f"empty at rollout_rs_threshold {cfg.rollout_rs_threshold:g}; set it above 1"
        ]
    return []


def _dpo_problems(cfg: DPOConfig) -> list[str]:
    if cfg.group_size < 2:
        return [
            "dpo pairs the best and worst sample of a group, so with group_size 1 no pairs are "
            "possible; set group_size >= 2"
        ]
    return []


def describe_presets() -> list[dict[str, Any]]:
    """One row per preset for ``harness algorithms``: name, parts, key numbers, citation and
    departures. Key numbers are the group size, the learning rate and every field that differs
    from its config type's default.
    """
    rows = []
    for name, preset in PRESETS.items():
        cfg = preset.config
        slots = slots_of(cfg)
        parts = {k: getattr(cfg, k) for k in slots}
        if cfg.kind == "dpo":
            parts = {"loss": "dpo", "pairs": "best vs worst of each group", **parts}
        defaults = {k: f.default for k, f in type(cfg).model_fields.items()}
        numbers = {
            k: v
            for k, v in cfg.model_dump(exclude={*slots, "name", "kind"}).items()
            if k in ("group_size", "lr") or v != defaults[k]
        }
        rows.append(
            {
                "name": name,
                "kind": cfg.kind,
                "parts": parts,
                "hyperparameters": numbers,
                "citation": preset.citation,
                "departs": preset.departs,
            }
        )
    return rows
