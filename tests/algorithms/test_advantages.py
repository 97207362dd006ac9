import math
from collections import defaultdict

import numpy as np
import pytest
import torch

from harness.algorithms.advantages import AdvantageInputs, masked_whiten, sequence_returns
from harness.algorithms.config import RLConfig
from harness.algorithms.objective import token_rewards
from harness.algorithms.parts import ADVANTAGES
from harness.algorithms.presets import PRESETS

GROUP_ESTIMATORS = ["group_zscore", "group_mean", "leave_one_out"]


def cfg(**kw) -> RLConfig:
    return RLConfig(name="test", **kw)


def outcome_inputs(scores, lengths, group_size, T=4, values=None) -> AdvantageInputs:
    """One verifier score per row on its last real token; padding holds garbage (99). The
    policy's token probabilities (only estimators with needs_token_probs read them): the sampled
    token's at 0.6, squared probabilities summing to 0.5."""
    B = len(scores)
    mask, rewards = torch.zeros(B, T), torch.full((B, T), 99.0)
    for i, (score, n) in enumerate(zip(scores, lengths)):
        mask[i, :n] = 1
        rewards[i, :n] = 0
        rewards[i, n - 1] = score
    return AdvantageInputs(
        rewards,
        mask,
        group_size,
        values,
        scores=torch.tensor(scores, dtype=torch.float),
        token_logprobs=torch.full((B, T), math.log(0.6)),
        sum_pi_squared=torch.full((B, T), 0.5),
    )


def run(name, inputs, **kw):
    return ADVANTAGES.get(name)(inputs, cfg(advantage=name, **kw))


def test_group_zscore_reproduces_seed_000_groups():
    # seeds/000 (Debugshala, "How GRPO computes advantages"): 3 prompts, G=4, eps 1e-4.
    rewards = [[1.0, 0.0, 1.0, 0.0], [0.9, 0.7, 0.8, 0.2], [0.0, 0.0, 0.0, 0.0]]
    lengths = [4, 2, 3, 1] * 3
    inputs = outcome_inputs(sum(rewards, []), lengths, 4)
    out = run("group_zscore", inputs)
    # Bessel std (torch.std, as verl/TRL): row 0 std sqrt(1/3); row 1 std sqrt(0.29/3).
    expected = torch.tensor(
        [
            [0.865875, -0.865875, 0.865875, -0.865875],
            [0.803826, 0.160765, 0.482296, -1.446887],
            [0.0, 0.0, 0.0, 0.0],
        ]
    ).reshape(-1)
    first_tokens = out.advantages[:, 0]
    assert torch.allclose(first_tokens, expected, atol=1e-5)
    # The seed's own numbers use the population std (np.std): rescaling by sqrt(G/(G-1)) gives
    # its [1, -1, 1, -1] and [0.93, 0.19, 0.56, -1.67] (to the eps).
    seed_numbers = torch.tensor([1.0, -1.0, 1.0, -1.0, 0.9281, 0.1856, 0.5569, -1.6706])
    assert torch.allclose(first_tokens[:8] * math.sqrt(4 / 3), seed_numbers, atol=1e-3)
    # every real token of a sequence carries its advantage; padding carries exactly 0
    assert torch.equal(out.advantages, first_tokens[:, None] * inputs.mask)
    assert out.degenerate.tolist() == [False, False, True]  # "degenerate groups: [2]"


def test_group_mean_reproduces_seed_001_example():
    # seeds/001 (PyTRIO GRPO, step 3): rewards [1, 0, 1, 0] -> advantages [+0.5, -0.5, +0.5, -0.5];
    # [0, 0, 0, 0] and [1, 1, 1, 1] have no training signal.
    scores = [1, 0, 1, 0] + [0, 0, 0, 0] + [1, 1, 1, 1]
    out = run("group_mean", outcome_inputs(scores, [2] * 12, 4))
    assert out.advantages[:, 0].tolist() == [0.5, -0.5, 0.5, -0.5] + [0.0] * 8
    assert out.degenerate.tolist() == [False, True, True]


@pytest.mark.parametrize("name", [*GROUP_ESTIMATORS, "reinforce_pp"])
def test_equal_reward_group_gives_exactly_zero_advantage_and_is_flagged(name):
    inputs = outcome_inputs([0.7] * 4 + [1, 0, 0, 0], [3, 1, 4, 2] * 2, 4)
    out = run(name, inputs)
    if name != "reinforce_pp":  # reward-to-go whitening is global, not per group
        assert torch.all(out.advantages[:4] == 0)
    assert out.degenerate.tolist() == [True, False]


def test_drop_degenerate_keeps_only_rows_of_informative_groups():
    inputs = outcome_inputs([1, 1] + [1, 0] + [0, 0], [2] * 6, 2)
    assert run("group_zscore", inputs, drop_degenerate=True).keep_rows.tolist() == [
        False,
        False,
        True,
        True,
        False,
        False,
    ]
    assert run("group_zscore", inputs).keep_rows.tolist() == [True] * 6


def test_leave_one_out_is_g_over_g_minus_1_times_group_mean():
    # seeds/002: RLOO advantage r_i - 1/(k-1) sum_{j != i} r_j.
    scores = torch.randn(15, generator=torch.Generator().manual_seed(0)).tolist()
    inputs = outcome_inputs(scores, [1, 2, 3, 4, 4] * 3, 5)
    loo = run("leave_one_out", inputs).advantages
    centred = run("group_mean", inputs).advantages
    assert torch.allclose(loo, 5 / 4 * centred, atol=1e-6)
    assert loo[0, 0].item() == pytest.approx(scores[0] - sum(scores[1:5]) / 4, abs=1e-6)


@pytest.mark.parametrize(
    "lam, expected",
    [(0.0, [0.1, 0.1, 0.3]), (0.5, [0.225, 0.25, 0.3]), (1.0, [0.5, 0.4, 0.3])],
)
def test_gae_reproduces_seed_003_table(lam, expected):
    # seeds/003 ("Credit assignment: GAE"): gamma 1, r = (0, 0, 1), V = (0.5, 0.6, 0.7).
    inputs = AdvantageInputs(
        torch.tensor([[0.0, 0.0, 1.0]]),
        torch.ones(1, 3),
        1,
        torch.tensor([[0.5, 0.6, 0.7]]),
        scores=torch.ones(1),
    )
    out = run("gae", inputs, gamma=1.0, lam=lam, critic="value_head")
    assert out.advantages[0].tolist() == pytest.approx(expected, abs=1e-6)
    assert out.returns[0].tolist() == pytest.approx([a + v for a, v in zip(expected, [0.5, 0.6, 0.7])], abs=1e-6)


def test_gae_reproduces_seed_000_ppo_example():
    # seeds/000 ("How PPO uses a critic and GAE"): 5 tokens, KL penalty per token, score 1 at
    # the end, gamma 1, lam 0.95. deltas = (0.04, 0.03, 0.09, 0.12, 0.43) by hand, then
    # A_t = delta_t + 0.95 * A_{t+1}.
    values = torch.tensor([[0.20, 0.25, 0.30, 0.40, 0.55]])
    rewards = -torch.tensor([[0.01, 0.02, 0.01, 0.03, 0.02]])
    rewards[0, -1] += 1.0
    out = run("gae", AdvantageInputs(rewards, torch.ones(1, 5), 1, values, scores=torch.ones(1)), gamma=1.0, lam=0.95)
    expected = [0.6028476875, 0.59247125, 0.592075, 0.5285, 0.43]
    assert out.advantages[0].tolist() == pytest.approx(expected, abs=1e-6)
    assert out.returns[0].tolist() == pytest.approx([0.8028476875, 0.84247125, 0.892075, 0.9285, 0.98], abs=1e-6)


def test_gae_on_a_padded_row_equals_the_unpadded_row():
    values = torch.tensor([[0.2, 0.4, 0.1, 0.3], [0.2, 0.4, 99.0, 99.0]])
    rewards = torch.tensor([[0.0, 0.1, -0.2, 1.0], [0.0, 1.0, 99.0, 99.0]])
    mask = torch.tensor([[1.0, 1, 1, 1], [1, 1, 0, 0]])
    scores = torch.ones(2)
    padded = run("gae", AdvantageInputs(rewards, mask, 1, values, scores=scores), gamma=0.9, lam=0.8)
    alone = run(
        "gae",
        AdvantageInputs(rewards[1:, :2], mask[1:, :2], 1, values[1:, :2], scores=scores[1:]),
        gamma=0.9,
        lam=0.8,
    )
    assert torch.allclose(padded.advantages[1, :2], alone.advantages[0])
    assert padded.advantages[1, 2:].tolist() == [0.0, 0.0]
    assert padded.returns[1, 2:].tolist() == [0.0, 0.0]
    # row 0 by hand: delta_3 = 1 - 0.3 = 0.7; delta_2 = -0.2 + 0.9 * 0.3 - 0.1 = -0.03
    assert padded.advantages[0, 3].item() == pytest.approx(0.7)
    assert padded.advantages[0, 2].item() == pytest.approx(-0.03 + 0.72 * 0.7)


def test_reinforce_pp_whitens_the_reward_to_go_over_the_batch():
    # reward-to-go with gamma 0.5: row 0 (0, 0, 1) -> (0.25, 0.5, 1); row 1 (0, 2) -> (1, 2).
    # Batch of 5 tokens: mean 0.95, Bessel variance 1.8 / 4 = 0.45.
    rewards = torch.tensor([[0.0, 0.0, 1.0], [0.0, 2.0, 0.0]])
    mask = torch.tensor([[1.0, 1, 1], [1, 1, 0]])
    out = run("reinforce_pp", AdvantageInputs(rewards, mask, 1, scores=torch.tensor([1.0, 2.0])), gamma=0.5)
    to_go = torch.tensor([[0.25, 0.5, 1.0], [1.0, 2.0, 0.95]])
    assert torch.allclose(out.advantages, (to_go - 0.95) / math.sqrt(0.45) * mask, atol=1e-5)
    assert out.returns is None


def test_whitening_is_applied_after_any_estimator_and_not_to_gae_returns():
    inputs = outcome_inputs([3, 0, 1, 0, 2, 2, 5, 1], [4, 1, 2, 3] * 2, 4)
    out = run("group_mean", inputs, whiten_advantages=True)
    on = inputs.mask.bool()
    assert out.advantages[on].mean().item() == pytest.approx(0, abs=1e-6)
    assert out.advantages[on].std().item() == pytest.approx(1, abs=1e-4)
    assert torch.all(out.advantages[~on] == 0)

    values = torch.rand(8, 4, generator=torch.Generator().manual_seed(1))
    gae_inputs = outcome_inputs([1, 0] * 4, [4, 1, 2, 3] * 2, 1, values=values)
    raw = run("gae", gae_inputs)
    whitened = run("gae", gae_inputs, whiten_advantages=True)
    assert torch.equal(raw.returns, whitened.returns)
    assert torch.allclose(raw.returns, (raw.advantages + values) * gae_inputs.mask)
    assert not torch.allclose(raw.advantages, whitened.advantages)


@pytest.mark.parametrize("name", ADVANTAGES.names())
def test_padding_gets_exactly_zero_advantage(name):
    values = torch.full((4, 4), 99.0)
    inputs = outcome_inputs([1, 0, 0.5, 0.2], [4, 1, 2, 3], 2, values=values)
    out = run(name, inputs, whiten_advantages=True)
    assert torch.all(out.advantages[inputs.mask == 0] == 0)
    assert torch.all(out.advantages[inputs.mask == 1] != 0)


def test_group_size_one_flags_nothing_and_group_estimators_refuse_it():
    inputs = outcome_inputs([1, 1, 1], [1, 2, 3], 1, values=torch.zeros(3, 4))
    out = run("reinforce_pp", inputs)
    assert out.degenerate.tolist() == [False, False, False]
    assert out.keep_rows.tolist() == [True, True, True]
    with pytest.raises(ValueError, match="group_zscore.*group_size >= 2"):
        run("group_zscore", inputs)


def test_input_errors_are_named():
    with pytest.raises(ValueError, match="gae.*critic values"):
        run("gae", outcome_inputs([1, 0], [1, 2], 1))
    with pytest.raises(ValueError, match="5 rows do not split into groups of 2"):
        run("group_mean", outcome_inputs([1, 0, 1, 0, 1], [1] * 5, 2))


def test_estimators_declare_groups_and_critic_needs():
    needs = {n: dict(ADVANTAGES.meta(n)) for n in ADVANTAGES.names()}
    published = {
        "group_zscore": {"needs_groups": True, "needs_critic": False, "reads": ("adv_eps",)},
        "group_mean": {"needs_groups": True, "needs_critic": False, "reads": ()},
        "leave_one_out": {"needs_groups": True, "needs_critic": False, "reads": ()},
        "reinforce_pp": {"needs_groups": False, "needs_critic": False, "reads": ("gamma",)},
        "gae": {"needs_groups": False, "needs_critic": True, "reads": ("gamma", "lam")},
        "reinforce_pp_baseline": {"needs_groups": True, "needs_critic": False, "reads": ("gamma",)},
        "group_mean_batch_std": {"needs_groups": True, "needs_critic": False, "reads": ("adv_eps",)},
        "group_passk": {"needs_groups": True, "needs_critic": False, "reads": ("adv_eps",)},
        "maxrl": {"needs_groups": True, "needs_critic": False, "reads": ("adv_eps",)},
        "optimal_token_baseline": {
            "needs_groups": False,
            "needs_critic": False,
            "needs_token_probs": True,
            "reads": (),
        },
    }
    assert {n: {k: needs[n][k] for k in published[n]} for n in published} == published
    assert all(ADVANTAGES.meta(n)["cites"] for n in ADVANTAGES.names())


@pytest.mark.parametrize("name", ADVANTAGES.names())
@pytest.mark.parametrize("drop", [True, False])
def test_degenerate_groups_are_found_on_the_verifier_scores_not_the_kl_shaped_returns(name, drop):
    # kl_placement reward: group 0 scores (1, 1) but its KL penalties differ, so its returns do
    # (0.9 vs 0.7); it still says nothing about which answer is better: counted, and dropped.
    scores = torch.tensor([1.0, 1.0, 1.0, 0.0])
    mask = torch.ones(4, 2)
    kl = torch.tensor([[0.5, 0.5], [1.0, 2.0], [0.0, 0.0], [0.0, 0.0]])
    critic = ADVANTAGES.meta(name)["needs_critic"]
    kl_cfg = cfg(
        advantage=name,
        kl_placement="reward",
        kl_coef=0.1,
        drop_degenerate=drop,
        critic="value_head" if critic else "none",
    )
    rewards = token_rewards(scores, mask, kl, kl_cfg)
    inputs = AdvantageInputs(rewards, mask, 2, torch.zeros(4, 2) if critic else None, scores=scores)
    inputs = with_token_probs(inputs, torch.full((4, 2), -0.5), torch.full((4, 2), 0.6))
    assert sequence_returns(inputs).tolist() == pytest.approx([0.9, 0.7, 1.0, 0.0])
    out = ADVANTAGES.get(name)(inputs, kl_cfg)
    assert out.degenerate.tolist() == [True, False]
    assert out.keep_rows.tolist() == ([False, False, True, True] if drop else [True] * 4)


# --- REINFORCE++-baseline, batch-std scaling and pass@k, by hand ---


def test_reinforce_pp_baseline_subtracts_the_group_mean_then_whitens_the_batch():
    # groups (1, 0) and (1, 1), lengths (2, 1) and (1, 2), gamma 1: every token of a row holds
    # r - mean_group(r): tokens (0.5, 0.5 | -0.5 | 0 | 0, 0). Their mean 1/12, Bessel variance
    # 102/720: whitened (5/12, 5/12, -7/12, -1/12, -1/12, -1/12) / sqrt(102/720 + 1e-8)
    inputs = outcome_inputs([1, 0, 1, 1], [2, 1, 1, 2], 2, T=2)
    out = run("reinforce_pp_baseline", inputs)
    real = out.advantages[inputs.mask.bool()].tolist()
    assert real == pytest.approx([1.1070186, 1.1070186, -1.5498260, -0.2214037, -0.2214037, -0.2214037], abs=1e-6)
    assert out.advantages[1, 1] == 0  # padding
    # verl's form (no reward-to-go: the centred score on every token) gives the same at gamma 1
    centred = torch.tensor([0.5, -0.5, 0.0, 0.0])[:, None] * inputs.mask
    verl = masked_whiten(centred, inputs.mask)
    assert torch.allclose(out.advantages, verl, atol=1e-6)
    # it differs from plain REINFORCE++, which whitens the raw returns (no group baseline)
    assert not torch.allclose(out.advantages, run("reinforce_pp", inputs).advantages, atol=1e-3)


def test_reinforce_pp_baseline_discounts_the_reward_to_go():
    # gamma 0.5, one row of 2 tokens per group of 2: the centred score 0.5 at the last token is
    # 0.25 one step earlier; row (0, 1) of group 1: -0.5 and -0.25. Before whitening: 0.25, 0.5, -0.25, -0.5
    inputs = outcome_inputs([1, 0], [2, 2], 2, T=2)
    out = run("reinforce_pp_baseline", inputs, gamma=0.5)
    assert torch.allclose(
        out.advantages.flatten(),
        masked_whiten(torch.tensor([[0.25, 0.5], [-0.25, -0.5]]), torch.ones(2, 2)).flatten(),
        atol=1e-6,
    )


def test_group_mean_batch_std_scales_by_the_batch_std_not_the_groups():
    # groups (1, 0) and (1, 1): centred (0.5, -0.5, 0, 0); std of (1, 0, 1, 1) (Bessel) = 0.5,
    # so (0.5, -0.5, 0, 0) / 0.5001. GRPO divides group 0 by its own std sqrt(0.5) instead.
    inputs = outcome_inputs([1, 0, 1, 1], [1, 1, 1, 1], 2, T=1)
    out = run("group_mean_batch_std", inputs)
    assert out.advantages[:, 0].tolist() == pytest.approx([0.5 / 0.5001, -0.5 / 0.5001, 0.0, 0.0])
    assert run("group_zscore", inputs).advantages[0, 0].item() == pytest.approx(0.5 / (math.sqrt(0.5) + 1e-4))
    # a group with a small spread keeps a small advantage: (0.6, 0.4) next to (1, 0)
    small = run("group_mean_batch_std", outcome_inputs([0.6, 0.4, 1, 0], [1] * 4, 2, T=1)).advantages[:, 0]
    assert abs(small[0].item()) < abs(small[2].item()) / 4


def test_group_passk_gives_only_the_best_row_the_gap_to_the_runner_up():
    # group (0.1, 0.7, 0.4, 0.2): best 0.7, runner-up 0.4, Bessel std 0.2645751: 0.3 / 0.2646751 on row 1
    # group (0.2, 0.9, 0.5, 0.9): a tie at the top, gap 0; group of equal scores: 0
    scores = [0.1, 0.7, 0.4, 0.2] + [0.2, 0.9, 0.5, 0.9] + [1.0] * 4
    out = run("group_passk", outcome_inputs(scores, [2] * 12, 4, T=2))
    assert out.advantages[:, 0].tolist() == pytest.approx([0, 1.1334650, 0, 0] + [0] * 8, abs=1e-6)
    assert torch.equal(out.advantages[:, 1], out.advantages[:, 0])
    assert out.degenerate.tolist() == [False, False, True]


@pytest.mark.parametrize("name", ["reinforce_pp_baseline", "group_mean_batch_std", "group_passk", "maxrl"])
def test_new_group_estimators_need_groups_and_give_zero_to_a_degenerate_batch(name):
    with pytest.raises(ValueError, match="needs group_size >= 2"):
        run(name, outcome_inputs([1, 0], [1, 2], 1))
    out = run(name, outcome_inputs([1, 1, 0, 0], [1, 2, 2, 1], 2))
    assert torch.all(out.advantages == 0) and torch.all(torch.isfinite(out.advantages))


# --- issue 35: verl's grpo_passk and optimal_token_baseline, SkyRL's maxrl, against the frameworks ---


def verl_grpo_passk(token_level_rewards, response_mask, index, epsilon=1e-6, norm_adv_by_std_in_grpo=True):
    """compute_grpo_passk_outcome_advantage, transcribed from verl verl/trainer/ppo/core_algos.py@b178a3c
    (lines 360-422)."""
    scores = token_level_rewards.sum(dim=-1)
    advantages = torch.zeros_like(scores)
    id2scores, id2indices = defaultdict(list), defaultdict(list)
    for i in range(scores.shape[0]):
        id2scores[index[i]].append(scores[i])
        id2indices[index[i]].append(i)
    for idx in id2scores:
        rewards = torch.stack(id2scores[idx])
        if rewards.numel() < 2:
            raise ValueError(f"Pass@k requires at least 2 samples per group. Got {rewards.numel()} for group {idx}.")
        topk, topk_idx = torch.topk(rewards, 2)
        r_max, r_second_max = topk[0], topk[1]
        i_max = id2indices[idx][topk_idx[0].item()]
        advantage = r_max - r_second_max
        if norm_adv_by_std_in_grpo:
            advantage = advantage / (torch.std(rewards) + epsilon)
        advantages[i_max] = advantage
    return advantages.unsqueeze(-1) * response_mask


def skyrl_maxrl(token_level_rewards, response_mask, index, epsilon=1e-6):
    """compute_maxrl_advantage, transcribed from SkyRL
    skyrl/backends/skyrl_train/utils/ppo_utils.py@a956457 (lines 1396-1428)."""
    scores = token_level_rewards.sum(dim=-1)
    id2score, id2mean = defaultdict(list), {}
    for i in range(scores.shape[0]):
        id2score[index[i]].append(scores[i])
    for idx in id2score:
        id2mean[idx] = torch.tensor(0.0) if len(id2score[idx]) == 1 else torch.mean(torch.tensor(id2score[idx]))
    for i in range(scores.shape[0]):
        if len(id2score[index[i]]) > 1:
            scores[i] = (scores[i] - id2mean[index[i]]) / (id2mean[index[i]] + epsilon)
        else:
            scores[i] = scores[i] - id2mean[index[i]]
    return scores.unsqueeze(-1) * response_mask


def verl_optimal_token_baseline(token_level_rewards, response_mask, index, old_log_probs, sum_pi_squared, epsilon=1e-8):
    """compute_optimal_token_baseline_advantage (handle_zero_tail and rollout_is_weights at their
    defaults, off), transcribed from verl verl/trainer/ppo/core_algos.py@b178a3c (lines 758-873)."""
    returns = (token_level_rewards * response_mask).flip(dims=[-1]).cumsum(dim=-1).flip(dims=[-1])
    w_per_timestep = 1 - 2 * torch.exp(old_log_probs) + sum_pi_squared
    w_cumulative = (w_per_timestep * response_mask).cumsum(dim=-1)
    prompt_groups = defaultdict(list)
    for i in range(token_level_rewards.shape[0]):
        prompt_groups[index[i]].append(i)
    baselines = torch.zeros_like(returns)
    for trajectory_indices in prompt_groups.values():
        if len(trajectory_indices) == 1:
            continue
        traj_idx = torch.tensor(trajectory_indices)
        returns_group, w_group, mask_group = returns[traj_idx], w_cumulative[traj_idx], response_mask[traj_idx]
        numerator = (returns_group * w_group * mask_group).sum(dim=0)
        denominator = (w_group * mask_group).sum(dim=0) + epsilon
        baselines[traj_idx] = (numerator / denominator).unsqueeze(0).expand(len(trajectory_indices), -1)
    return (returns - baselines) * response_mask


def random_outcome_batch(seed, n_groups, group_size, T=6, binary=False):
    """Groups of rows of random lengths 1..T with one score each (0/1 or in [0, 1]); NaN on padding.
    Returns the harness's inputs and the frameworks' (zero padding, a group index per row)."""
    g = torch.Generator().manual_seed(seed)
    rows = n_groups * group_size
    lengths = torch.randint(1, T + 1, (rows,), generator=g)
    scores = torch.rand(rows, generator=g)
    scores = (scores < 0.5).float() if binary else scores
    inputs = outcome_inputs(scores.tolist(), lengths.tolist(), group_size, T=T)
    inputs.token_rewards = torch.where(inputs.mask.bool(), inputs.token_rewards, torch.nan)
    framework_rewards = torch.where(inputs.mask.bool(), inputs.token_rewards, 0.0)
    index = np.repeat(np.arange(n_groups), group_size)
    return inputs, framework_rewards, index


@pytest.mark.parametrize("seed", range(4))
def test_group_passk_matches_verls_grpo_passk(seed):
    # verl's epsilon (1e-6) as the grpo_passk preset's adv_eps; scores in [0, 1] and 0/1 (ties at the top)
    for binary in (False, True):
        inputs, rewards, index = random_outcome_batch(seed, n_groups=5, group_size=4, binary=binary)
        ours = run("group_passk", inputs, adv_eps=PRESETS["grpo_passk"].config.adv_eps).advantages
        theirs = verl_grpo_passk(rewards, inputs.mask, index)
        assert torch.all(torch.isfinite(ours))
        # on a tie at the top verl's topk may pick another of the tied rows: its gap is 0 either way
        assert torch.allclose(ours, theirs, atol=1e-6)
    # a group of equal scores gets 0 from both; a group of one is refused by both
    inputs = outcome_inputs([0.5] * 4, [2, 1, 3, 2], 4)
    assert torch.all(run("group_passk", inputs).advantages == 0)
    assert torch.all(
        verl_grpo_passk(torch.where(inputs.mask.bool(), inputs.token_rewards, 0.0), inputs.mask, [0] * 4) == 0
    )
    with pytest.raises(ValueError, match="at least 2 samples"):
        verl_grpo_passk(torch.ones(1, 2), torch.ones(1, 2), [0])
    with pytest.raises(ValueError, match="needs group_size >= 2"):
        run("group_passk", outcome_inputs([1.0], [2], 1))


def test_grpo_passk_preset_is_verls_estimator_under_verls_name():
    cfg = PRESETS["grpo_passk"].config
    assert (cfg.advantage, cfg.adv_eps) == ("group_passk", 1e-6)


def test_maxrl_divides_the_centred_return_by_the_group_mean():
    # SkyRL's own test (tests/backends/skyrl_train/utils/test_ppo_utils.py@a956457): groups (6, 3), (9, 12)
    inputs = outcome_inputs([6.0, 3.0, 9.0, 12.0], [3, 1, 2, 3], 2)
    out = run("maxrl", inputs, adv_eps=1e-6)
    expected = [1.5 / (4.5 + 1e-6), -1.5 / (4.5 + 1e-6), -1.5 / (10.5 + 1e-6), 1.5 / (10.5 + 1e-6)]
    assert out.advantages[:, 0].tolist() == pytest.approx(expected, rel=1e-6)
    assert torch.equal(out.advantages, out.advantages[:, :1] * inputs.mask)
    # 0/1 rewards, K of N correct: N r / K - 1. One of four: (3, -1, -1, -1); three of four: (1/3, 1/3, 1/3, -1)
    out = run("maxrl", outcome_inputs([1, 0, 0, 0, 1, 1, 0, 1], [2] * 8, 4), adv_eps=1e-6)
    assert out.advantages[:, 0].tolist() == pytest.approx([3, -1, -1, -1, 1 / 3, 1 / 3, -1, 1 / 3], rel=1e-5)
    # the correct row of the hard group against the easy group's: GRPO 1.5 vs 0.5 (equal stds), MaxRL 3 vs 1/3
    grpo = run("group_zscore", outcome_inputs([1, 0, 0, 0, 1, 1, 0, 1], [2] * 8, 4)).advantages
    assert grpo[0, 0] / grpo[4, 0] == pytest.approx(3, rel=1e-4)
    assert out.advantages[0, 0] / out.advantages[4, 0] == pytest.approx(9, rel=1e-4)


@pytest.mark.parametrize("seed", range(4))
def test_maxrl_matches_skyrls(seed):
    for binary in (False, True):
        inputs, rewards, index = random_outcome_batch(seed, n_groups=5, group_size=4, binary=binary)
        ours = run("maxrl", inputs, adv_eps=PRESETS["maxrl"].config.adv_eps).advantages
        assert torch.all(torch.isfinite(ours))
        assert torch.allclose(ours, skyrl_maxrl(rewards, inputs.mask, index), atol=1e-5)


def test_maxrl_gives_zero_to_groups_of_equal_scores_and_refuses_groups_of_one():
    # all wrong: 0 / (0 + eps) = 0; all right, or all 0.4: 0
    out = run("maxrl", outcome_inputs([0] * 3 + [1] * 3 + [0.4] * 3, [1, 2, 3] * 3, 3))
    assert torch.all(out.advantages == 0) and out.degenerate.tolist() == [True] * 3
    with pytest.raises(ValueError, match="needs group_size >= 2"):
        run("maxrl", outcome_inputs([1.0, 0.0], [2, 2], 1))
    # SkyRL instead hands a group of one its raw return (it means a mean of 0)
    assert skyrl_maxrl(torch.tensor([[0.0, 0.75]]), torch.ones(1, 2), [0]).tolist() == [[0.75, 0.75]]


def otb_batch(seed, n_groups, group_size, T=6):
    """Random per-token probabilities for an OTB test: the sampled token's log-prob and the sum of
    squared probabilities of a random distribution over 5 tokens that contains it (NaN on padding
    in the harness's inputs)."""
    inputs, rewards, index = random_outcome_batch(seed, n_groups, group_size, T=T)
    g = torch.Generator().manual_seed(seed + 100)
    probs = torch.softmax(3 * torch.randn(*inputs.mask.shape, 5, generator=g), dim=-1)
    old_logprobs, sum_pi_squared = probs[..., 0].log(), (probs**2).sum(-1)
    on = inputs.mask.bool()
    inputs.token_logprobs = torch.where(on, old_logprobs, torch.nan)
    inputs.sum_pi_squared = torch.where(on, sum_pi_squared, torch.nan)
    return inputs, rewards, index, old_logprobs, sum_pi_squared


def with_token_probs(inputs, logprobs, sum_pi_squared):
    inputs.token_logprobs, inputs.sum_pi_squared = logprobs, sum_pi_squared
    return inputs


def test_optimal_token_baseline_by_hand():
    # one group of two rows, scores 1 (2 tokens) and 0 (1 token); pi = 0.5 on every sampled
    # token and sum pi^2 = 0.5, so each token adds w = 1 - 1 + 0.5 = 0.5: W = (0.5, 1.0) and (0.5).
    # t=0: G = (1, 0), B = (1 * 0.5 + 0 * 0.5) / 1.0 = 0.5: A = (0.5, -0.5).
    # t=1: only row 0: G = 1, B = 1 * 1.0 / 1.0 = 1: A = 0 (to the 1e-8).
    half = torch.full((2, 2), 0.5)
    inputs = with_token_probs(outcome_inputs([1.0, 0.0], [2, 1], 2, T=2), half.log(), half)
    out = run("optimal_token_baseline", inputs)
    assert out.advantages.flatten().tolist() == pytest.approx([0.5, 0.0, -0.5, 0.0], abs=1e-7)
    assert out.returns is None and out.degenerate.tolist() == [False]
    # a group of one: no baseline, the reward-to-go
    inputs = with_token_probs(outcome_inputs([1.0, 0.0], [2, 1], 1, T=2), half.log(), half)
    assert run("optimal_token_baseline", inputs).advantages.tolist() == [[1.0, 1.0], [0.0, 0.0]]
    # a more confident token adds less energy: pi = 0.9 of two tokens (0.9, 0.1): w = 1 - 1.8 + 0.82 = 0.02
    sure = with_token_probs(
        outcome_inputs([1.0, 0.0], [1, 1], 2, T=1), torch.tensor([[0.9], [0.5]]).log(), torch.tensor([[0.82], [0.5]])
    )
    # B = (1 * 0.02 + 0 * 0.5) / 0.52: the unsure row's return dominates the baseline
    expected = [1 - 0.02 / 0.52, -0.02 / 0.52]
    assert run("optimal_token_baseline", sure).advantages[:, 0].tolist() == pytest.approx(expected, rel=1e-5)


def test_optimal_token_baseline_needs_the_policys_token_probabilities():
    with pytest.raises(ValueError, match="needs the policy's token log-probs"):
        run("optimal_token_baseline", with_token_probs(outcome_inputs([1.0, 0.0], [2, 1], 2), None, None))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("group_size", [1, 2, 4])
def test_optimal_token_baseline_matches_verls(seed, group_size):
    inputs, rewards, index, old_logprobs, sum_pi_squared = otb_batch(seed, 4, group_size)
    ours = run("optimal_token_baseline", inputs).advantages
    theirs = verl_optimal_token_baseline(rewards, inputs.mask, index, old_logprobs, sum_pi_squared)
    assert torch.all(torch.isfinite(ours)) and torch.all(ours[~inputs.mask.bool()] == 0)
    assert torch.allclose(ours, theirs, atol=1e-6)


def test_optimal_token_baseline_of_a_group_with_equal_scores_is_zero():
    # every row scores 1 at its own length: G_t = 1 on every real token, so B_t = 1 (to the 1e-8)
    inputs, _, _, _, _ = otb_batch(0, 1, 4)
    inputs.token_rewards = torch.where(inputs.mask.bool(), 0.0, torch.nan)
    last = (inputs.mask.cumsum(1) == inputs.mask.sum(1, keepdim=True)) & inputs.mask.bool()
    inputs.token_rewards[last] = 1.0
    inputs.scores = torch.ones(4)
    out = run("optimal_token_baseline", inputs)
    assert torch.allclose(out.advantages, torch.zeros_like(out.advantages), atol=1e-6)
    assert out.degenerate.tolist() == [True]
