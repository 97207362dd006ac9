import pytest
import torch

from harness.algorithms.advantages import AdvantageInputs, compute_advantages
from harness.algorithms.aggregation import make_aggregator
from harness.algorithms.config import RLConfig
from harness.algorithms.critic import value_loss
from harness.algorithms.kl import kl_estimate
from harness.algorithms.parts import ADVANTAGES, POLICY_LOSSES
from harness.algorithms.presets import (
    PRESETS,
    check_algorithm,
    describe_presets,
    resolve_algorithm,
)
from harness.errors import ConfigError

#: the papers' algorithms the harness promises; more presets may be registered beside them
NAMES = ["ppo", "grpo", "dr_grpo", "rloo", "reinforce_pp", "cispo", "dpo", "dapo", "gspo"]
#: the presets of the later parts (issue 26)
LATER = ["sapo", "gmpo", "clip_cov", "kl_cov", "dppo", "reinforce_pp_baseline", "lite_ppo", "topr"]
RL_PRESETS = [n for n, p in PRESETS.items() if p.config.kind == "rl"]


def differing_fields(a: RLConfig, b: RLConfig) -> set[str]:
    return {k for k in RLConfig.model_fields if getattr(a, k) != getattr(b, k)}


def test_every_named_preset_resolves_and_passes_its_own_checks():
    assert set(NAMES) <= set(PRESETS)
    for name in PRESETS:
        cfg = resolve_algorithm(name)
        assert cfg.name == name
        assert check_algorithm(cfg) is cfg
        assert PRESETS[name].citation and PRESETS[name].departs


def test_preset_parts_follow_the_papers():
    grpo = resolve_algorithm("grpo")
    assert (grpo.advantage, grpo.aggregation, grpo.policy_loss) == (
        "group_zscore",
        "seq_mean_token_mean",
        "clipped",
    )
    assert (grpo.kl_estimator, grpo.kl_placement, grpo.kl_coef) == ("k3", "loss", 0.04)
    assert (grpo.eps_low, grpo.eps_high, grpo.group_size) == (0.2, 0.2, 8)

    dapo = resolve_algorithm("dapo")
    assert (dapo.eps_low, dapo.eps_high, dapo.aggregation) == (0.2, 0.28, "token_mean")
    assert dapo.drop_degenerate and dapo.kl_placement == "none" and dapo.kl_coef == 0

    ppo = resolve_algorithm("ppo")
    assert (ppo.advantage, ppo.critic, ppo.kl_estimator, ppo.kl_placement) == (
        "gae",
        "value_head",
        "k1",
        "reward",
    )
    assert ppo.whiten_advantages and ppo.critic_lr is not None

    cispo = resolve_algorithm("cispo")
    assert (cispo.policy_loss, cispo.advantage, cispo.aggregation) == (
        "cispo",
        "group_zscore",
        "token_mean",
    )
    assert 1 + cispo.eps_high == 5.0 and 1 - cispo.eps_low <= 0  # cap 5, no lower bound

    assert resolve_algorithm("gspo").policy_loss == "gspo"
    assert resolve_algorithm("gspo").eps_high < 1e-3
    assert resolve_algorithm("rloo").advantage == "leave_one_out"
    assert resolve_algorithm("reinforce_pp").kl_placement == "reward"
    dpo = resolve_algorithm("dpo")
    assert (dpo.kind, dpo.dpo_beta) == ("dpo", 0.1)
    rl_lrs = {resolve_algorithm(n).lr for n in NAMES}
    assert len(rl_lrs) == 1  # one shared testbed learning rate


def test_later_presets_follow_their_papers_and_frameworks():
    assert set(LATER) <= set(PRESETS)
    grpo = resolve_algorithm("grpo")
    sapo = resolve_algorithm("sapo")
    assert (sapo.policy_loss, sapo.sapo_tau_pos, sapo.sapo_tau_neg) == ("sapo", 1.0, 1.05)
    assert sapo.aggregation == "seq_mean_token_mean" and sapo.kl_placement == "none"
    gmpo = resolve_algorithm("gmpo")
    assert (gmpo.policy_loss, gmpo.eps_low, gmpo.eps_high, gmpo.aggregation) == (
        "gmpo",
        0.4,
        0.4,
        "seq_mean_token_mean",
    )
    clip_cov = resolve_algorithm("clip_cov")
    assert (clip_cov.policy_loss, clip_cov.clip_cov_ratio, clip_cov.clip_cov_lb, clip_cov.clip_cov_ub) == (
        "clip_cov",
        2e-4,
        1.0,
        5.0,
    )
    kl_cov = resolve_algorithm("kl_cov")
    assert (kl_cov.policy_loss, kl_cov.kl_cov_ratio, kl_cov.kl_cov_coef) == ("kl_cov", 2e-3, 1.0)
    dppo = resolve_algorithm("dppo")
    assert (dppo.policy_loss, dppo.eps_low, dppo.eps_high, dppo.aggregation) == (
        "dppo_tv",
        0.15,
        0.15,
        "seq_mean_token_sum_norm",
    )
    rppb = resolve_algorithm("reinforce_pp_baseline")
    assert (rppb.advantage, rppb.kl_placement, rppb.kl_estimator) == ("reinforce_pp_baseline", "loss", "k2")
    lite = resolve_algorithm("lite_ppo")
    assert (lite.advantage, lite.aggregation, lite.policy_loss, lite.critic) == (
        "group_mean_batch_std",
        "token_mean",
        "clipped",
        "none",
    )
    topr = resolve_algorithm("topr")
    assert (topr.policy_loss, topr.aggregation) == ("topr", "seq_mean_token_sum")
    # the testbed's budget, whatever the parts: group size, learning rate, schedule
    for name in LATER:
        cfg = resolve_algorithm(name)
        assert (cfg.group_size, cfg.lr, cfg.minibatches) == (grpo.group_size, grpo.lr, grpo.minibatches), name


def test_dr_grpo_is_grpo_with_exactly_two_parts_switched():
    grpo, dr = resolve_algorithm("grpo"), resolve_algorithm("dr_grpo")
    assert differing_fields(grpo, dr) == {"name", "advantage", "aggregation"}
    assert (dr.advantage, dr.aggregation) == ("group_mean", "seq_mean_token_sum_norm")


def test_dr_grpo_equals_grpo_without_std_division_and_length_normalisation():
    # seeds/002 eq. (6): no division by the group std, no 1/|o_i|; a constant instead.
    grpo, dr = resolve_algorithm("grpo"), resolve_algorithm("dr_grpo")
    g = torch.Generator().manual_seed(0)
    B, T, G = 16, 6, 8
    mask = (torch.arange(T) < torch.randint(1, T + 1, (B, 1), generator=g)).float()
    rewards = torch.zeros(B, T)
    rewards[torch.arange(B), mask.sum(1).long() - 1] = torch.rand(B, generator=g)
    inputs = AdvantageInputs(rewards, mask, G, scores=rewards.sum(1))
    adv_grpo = ADVANTAGES.get(grpo.advantage)(inputs, grpo).advantages
    adv_dr = ADVANTAGES.get(dr.advantage)(inputs, dr).advantages

    std = rewards.sum(1).view(-1, G).std(dim=1) + grpo.adv_eps
    assert torch.allclose(adv_dr, adv_grpo * std.repeat_interleave(G)[:, None], atol=1e-6)

    logp = -torch.rand(B, T, generator=g)
    old = logp - 0.3 * torch.randn(B, T, generator=g)  # off-policy, so the clip acts
    loss = POLICY_LOSSES.get("clipped")
    dr_loss, _ = loss(logp, old, adv_dr, mask, dr, make_aggregator(dr, T))
    grpo_mean = make_aggregator(grpo, T)
    undo_length_norm = lambda x, m: grpo_mean(x * m.sum(1, keepdim=True) / T, m)  # noqa: E731
    grpo_undone, _ = loss(logp, old, adv_dr, mask, grpo, undo_length_norm)
    assert dr_loss.item() == pytest.approx(grpo_undone.item(), rel=1e-5)
    grpo_loss, _ = loss(logp, old, adv_grpo, mask, grpo, grpo_mean)
    assert dr_loss.item() != pytest.approx(grpo_loss.item(), rel=1e-2)


def test_unknown_preset_lists_the_presets():
    with pytest.raises(ConfigError, match="unknown algorithm preset 'grpo2'; valid: cispo, clip_cov, dapo"):
        resolve_algorithm("grpo2")


def test_unknown_override_key_lists_the_fields():
    with pytest.raises(ConfigError, match=r"unknown algorithm field 'eps_hi'; valid: .*eps_high"):
        resolve_algorithm("grpo", {"eps_hi": 0.3})
    with pytest.raises(ConfigError, match="algorithm.name comes from the preset"):
        resolve_algorithm("grpo", {"name": "mine"})


def test_wrong_type_names_the_field():
    with pytest.raises(ConfigError, match=r"algorithm\.eps_high: .*number.*'lots'"):
        resolve_algorithm("grpo", {"eps_high": "lots"})
    with pytest.raises(ConfigError, match=r"algorithm\.group_size: .*greater than 0"):
        resolve_algorithm("grpo", {"group_size": 0})
    with pytest.raises(ConfigError, match=r"unknown KL placement 'both'; valid: loss, none, reward"):
        resolve_algorithm("grpo", {"kl_placement": "both"})
    with pytest.raises(ConfigError, match=r"unknown critic 'big'; valid: none, value_head, value_model"):
        resolve_algorithm("ppo", {"critic": "big"})
    with pytest.raises(ConfigError, match=r"algorithm\.eps_low: .*'none'"):
        resolve_algorithm("grpo", {"eps_low": "none"})  # not an optional field


def test_cli_strings_are_coerced():
    cfg = resolve_algorithm(
        "grpo",
        {"eps_high": "0.28", "drop_degenerate": "true", "group_size": "4", "dual_clip": "3"},
    )
    assert (cfg.eps_high, cfg.drop_degenerate, cfg.group_size) == (0.28, True, 4)
    assert cfg.dual_clip == 3.0
    cfg = resolve_algorithm("grpo", {"dual_clip": "None", "kl_coef": "0"})
    assert cfg.dual_clip is None and cfg.kl_coef == 0
    ppo = resolve_algorithm("ppo", {"value_clip": "null", "critic_lr": "none"})
    assert ppo.value_clip is None and ppo.critic_lr is None
    # "none" is a real value of kl_placement, not None
    assert resolve_algorithm("grpo", {"kl_placement": "none"}).kl_placement == "none"


def test_unknown_part_names_list_the_registry():
    with pytest.raises(ConfigError, match="unknown advantage estimator 'zscore'; valid: gae, group_mean, gro"):
        resolve_algorithm("grpo", {"advantage": "zscore"})
    with pytest.raises(ConfigError, match="unknown policy loss 'ppo'; valid: cispo, clip_cov, clipped, dppo_kl"):
        resolve_algorithm("grpo", {"policy_loss": "ppo"})
    with pytest.raises(ConfigError, match="unknown mismatch correction 'tis'; valid: m2po, none, rollout_corr"):
        resolve_algorithm("grpo", {"mismatch": "tis"})
    with pytest.raises(ConfigError, match="unknown sampling 'refill'; valid: dynamic, once"):
        resolve_algorithm("grpo", {"sampling": "refill"})
    with pytest.raises(ConfigError, match="unknown aggregation 'mean'; valid: seq_mean_token_mean"):
        resolve_algorithm("grpo", {"aggregation": "mean"})


@pytest.mark.parametrize(
    "preset, overrides, message",
    [
        (
            "grpo",
            {"group_size": 1},
            r"advantage 'group_zscore' compares the samples of a group and needs group_size >= 2; "
            r"raise group_size or use one of: reinforce_pp, gae",
        ),
        ("rloo", {"group_size": 1}, r"'leave_one_out' .* needs group_size >= 2"),
        ("ppo", {"critic": "none"}, r"advantage 'gae' needs a critic; set critic=value_head"),
        (
            "grpo",
            {"critic": "value_head"},
            r"critic 'value_head' would be trained but advantage 'group_zscore' never uses it; "
            r"set critic=none or advantage to one of: gae",
        ),
        ("dpo", {"group_size": 1}, r"no pairs are possible; set group_size >= 2"),
        ("dpo", {"critic": "value_model"}, r"'critic' belongs to RL algorithms .* kind DPO, which has no critic"),
        ("dpo", {"kl_coef": 0.1}, r"'kl_coef' belongs to RL algorithms"),
        ("grpo", {"dpo_beta": 0.2}, r"'dpo_beta' belongs to DPO algorithms \(dpo\); preset 'grpo' is of kind RL"),
        ("cispo", {"kind": "dpo"}, r"algorithm.kind comes from the preset"),
        (
            "grpo",
            {"kl_placement": "none", "kl_coef": 0.1},
            r"kl_coef is read by none of this algorithm's parts .*kl_placement=none.*; it is read only "
            r"with kl_placement=reward or kl_placement=loss",
        ),
        (
            "cispo",
            {"dual_clip": 3},
            r"dual_clip is read by none .*policy_loss=cispo.*read only with policy_loss=clipped",
        ),
        (
            "grpo",
            {"loss_norm_constant": 16},
            r"loss_norm_constant is read by .*read only with aggregation=seq_mean_token_sum_norm",
        ),
        ("grpo", {"vf_coef": 1.0}, r"vf_coef is read by .*read only with critic=value_head or critic=value_model"),
        ("grpo", {"critic_lr": 1e-3}, r"critic_lr is read by .*critic=none"),
        ("rloo", {"lam": 0.9}, r"lam is read by .*read only with advantage=gae"),
        ("grpo", {"gamma": 0.99}, r"gamma is read by .*read only with advantage=reinforce_pp or advantage=gae"),
        ("rloo", {"eps_high": 0.28}, r"eps_high is read by .*policy_loss=is"),
        ("cispo", {"kl_estimator": "k1"}, r"kl_estimator is read by .*read only with kl_placement=reward"),
        ("reinforce_pp", {"group_size": 1, "drop_degenerate": True}, r"drop_degenerate needs groups"),
        ("grpo", {"sapo_tau_pos": 2.0}, r"sapo_tau_pos is read by .*read only with policy_loss=sapo"),
        ("sapo", {"eps_high": 0.28}, r"eps_high is read by .*policy_loss=sapo"),
        ("grpo", {"clip_cov_ratio": 0.01}, r"clip_cov_ratio is read by .*read only with policy_loss=clip_cov"),
        ("clip_cov", {"clip_cov_lb": 5.0}, r"clip_cov_lb 5.0 is not below clip_cov_ub 5.0"),
        ("dppo", {"kl_cov_coef": 0.5}, r"kl_cov_coef is read by .*read only with policy_loss=kl_cov"),
        ("grpo", {"entropy_top_share": 0.5}, r"entropy_top_share is read by .*token_filter=top_entropy"),
        ("reinforce_pp_baseline", {"group_size": 1}, r"'reinforce_pp_baseline' compares the samples of a group"),
    ],
)
def test_contradictions_fail_saying_what_to_change(preset, overrides, message):
    with pytest.raises(ConfigError, match=message):
        resolve_algorithm(preset, overrides)


def test_all_contradictions_are_reported_at_once():
    with pytest.raises(ConfigError, match=r"^algorithm 'grpo': advantage .*; critic .*; kl_coef"):
        resolve_algorithm("grpo", {"group_size": 1, "critic": "value_head", "kl_placement": "none", "kl_coef": 0.1})


def test_settings_that_are_not_contradictions_pass():
    assert resolve_algorithm("reinforce_pp", {"group_size": 1}).group_size == 1
    assert resolve_algorithm("grpo", {"kl_coef": 0}).kl_coef == 0  # KL logged but not applied
    assert resolve_algorithm("dr_grpo", {"loss_norm_constant": 16}).loss_norm_constant == 16


def test_describe_presets_lists_parts_numbers_citation_and_departures():
    rows = {row["name"]: row for row in describe_presets()}
    assert list(rows) == list(PRESETS)
    grpo = rows["grpo"]
    assert set(grpo) == {"name", "kind", "parts", "hyperparameters", "citation", "departs"}
    assert grpo["parts"]["advantage"] == "group_zscore"
    assert grpo["hyperparameters"]["kl_coef"] == 0.04
    assert rows["dapo"]["hyperparameters"]["eps_high"] == 0.28
    assert "DeepSeekMath" in grpo["citation"]
    assert rows["dpo"]["parts"] == {
        "loss": "dpo",
        "pairs": "best vs worst of each group",
        "pairs_from": "reference",
    }
    assert grpo["parts"]["old_logprobs"] == "auto"
    assert "offline (pairs_from=reference)" in rows["dpo"]["departs"]


@pytest.mark.parametrize("name", RL_PRESETS)
def test_every_rl_preset_runs_the_same_calls_end_to_end(name):
    # The trainer's path, with no branch on the preset's name: a degenerate group included.
    cfg = resolve_algorithm(name)
    g = torch.Generator().manual_seed(0)
    B, T, G = 3 * cfg.group_size, 5, cfg.group_size
    mask = (torch.arange(T) < torch.randint(1, T + 1, (B, 1), generator=g)).float()
    # scores in [0, 1] (not 0/1: under grpo_passk a group with two right answers has no best row)
    scores = torch.rand(B, generator=g)
    scores[:G] = 1.0
    rewards = torch.zeros(B, T)
    rewards[torch.arange(B), mask.sum(1).long() - 1] = scores
    old_logp, ref_logp = -torch.rand(B, T, generator=g), -torch.rand(B, T, generator=g)
    kl = kl_estimate(old_logp, ref_logp, cfg.kl_estimator)
    if cfg.kl_placement == "reward":
        rewards = rewards - cfg.kl_coef * kl * mask
    values = torch.rand(B, T, generator=g) if cfg.critic != "none" else None
    # the policy's token probabilities, for an estimator that reads them: p of the sampled token, p^2 + (1-p)^2 / 2
    probs = {"token_logprobs": old_logp, "sum_pi_squared": old_logp.exp() ** 2 + (1 - old_logp.exp()) ** 2 / 2}
    adv = compute_advantages(AdvantageInputs(rewards, mask, G, values, scores=scores, **probs), cfg)
    assert adv.degenerate[0]  # on the verifier's scores, even where a KL makes the returns differ
    assert adv.keep_rows[:G].any() != cfg.drop_degenerate

    aggregate = make_aggregator(cfg, T)
    logp = (old_logp + 0.1 * torch.randn(B, T, generator=g)).requires_grad_()
    loss, metrics = POLICY_LOSSES.get(cfg.policy_loss)(logp, old_logp, adv.advantages, mask, cfg, aggregate)
    if cfg.kl_placement == "loss":
        loss = loss + cfg.kl_coef * aggregate(kl_estimate(logp, ref_logp, cfg.kl_estimator), mask)
    if values is not None:
        new_values = values.clone().requires_grad_()
        loss = loss + cfg.vf_coef * value_loss(new_values, values, adv.returns, mask, cfg.value_clip, aggregate)[0]
    loss.backward()
    assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()
    assert logp.grad.abs().sum() > 0 and torch.all(logp.grad[mask == 0] == 0)
    assert set(metrics) >= {"clip_frac", "ratio_mean"}
