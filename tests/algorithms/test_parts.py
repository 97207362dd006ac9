"""Each part declares the fields it reads; a field no chosen part reads cannot be set."""

import pytest

from harness.algorithms.config import DPOConfig, RLConfig
from harness.algorithms.parts import DPO_SLOTS, SLOTS, STEP_FIELDS, fields_read, readers
from harness.algorithms.presets import PRESETS, check_algorithm, resolve_algorithm
from harness.errors import ConfigError

RL_PRESETS = [n for n, p in PRESETS.items() if isinstance(p.config, RLConfig)]
#: (field, a value other than its default) for every field some part reads
PART_FIELDS = sorted(set(RLConfig.model_fields) - STEP_FIELDS)
OTHER_VALUE = {
    "eps_low": 0.3, "eps_high": 0.3, "dual_clip": 3.0, "adv_eps": 1e-3, "gamma": 0.9, "lam": 0.5,
    "kl_coef": 0.2, "kl_estimator": "k2", "loss_norm_constant": 4, "vf_coef": 0.1, "value_clip": 0.5,
    "critic_lr": 3e-3,
}


def test_declared_reads_are_fields_and_every_field_has_a_reader():
    for slot, registry in SLOTS.items():
        for name in registry.names():
            assert set(registry.meta(name)["reads"]) <= set(RLConfig.model_fields), (slot, name)
    for field in PART_FIELDS:
        assert readers(field), f"{field} is read by no part"
    assert set(OTHER_VALUE) == set(PART_FIELDS)


def test_every_declared_part_resolves_to_its_function():
    for registry in [*SLOTS.values(), *DPO_SLOTS.values()]:
        for name in registry.names():
            assert callable(registry.get(name)), (registry.kind, name)


@pytest.mark.parametrize("preset", RL_PRESETS)
@pytest.mark.parametrize("field", PART_FIELDS)
def test_an_override_no_chosen_part_reads_is_an_error_naming_its_readers(preset, field):
    cfg = PRESETS[preset].config
    if field in fields_read(cfg):
        resolve_algorithm(preset, {field: OTHER_VALUE[field]})  # read: accepted
        return
    with pytest.raises(ConfigError) as err:
        resolve_algorithm(preset, {field: OTHER_VALUE[field]})
    message = str(err.value)
    assert f"{field} is read by none of this algorithm's parts" in message
    assert all(reader in message for reader in readers(field))


@pytest.mark.parametrize("field", PART_FIELDS)
def test_a_config_holding_an_unread_non_default_fails_its_check(field):
    base = RLConfig(name="t", policy_loss="is", aggregation="token_mean", advantage="group_mean")
    if field in fields_read(base):
        return
    with pytest.raises(ConfigError, match=f"{field} is read by none"):
        check_algorithm(base.model_copy(update={field: OTHER_VALUE[field]}))


def test_switching_a_part_off_drops_what_the_preset_set_for_it():
    cfg = resolve_algorithm("grpo", {"kl_placement": "none"})
    assert cfg.kl_coef == RLConfig.model_fields["kl_coef"].default
    cfg = resolve_algorithm("ppo", {"advantage": "group_zscore", "critic": "none"})
    assert cfg.lam == RLConfig.model_fields["lam"].default and cfg.critic_lr is None


def test_rl_and_dpo_configs_have_their_own_fields():
    assert "dpo_beta" not in RLConfig.model_fields and "eps_high" not in DPOConfig.model_fields
    with pytest.raises(ConfigError, match="'eps_high' belongs to RL algorithms"):
        resolve_algorithm("dpo", {"eps_high": 0.28})
    for preset in RL_PRESETS:
        with pytest.raises(ConfigError, match="'dpo_beta' belongs to DPO algorithms"):
            resolve_algorithm(preset, {"dpo_beta": 0.2})
        with pytest.raises(ConfigError, match="algorithm.kind comes from the preset"):
            resolve_algorithm(preset, {"kind": "dpo"})
