"""Each part declares the fields it reads; a field no chosen part reads cannot be set."""

import pkgutil
import subprocess
import sys
from importlib import import_module

import pytest

import harness.algorithms
from harness.algorithms.config import DPOConfig, RLConfig
from harness.algorithms.parts import (
    DPO_SLOTS,
    POLICY_LOSSES,
    SLOTS,
    STEP_FIELDS,
    describe_parts,
    fields_read,
    readers,
)
from harness.algorithms.presets import PRESETS, check_algorithm, resolve_algorithm
from harness.algorithms.registry import Implements
from harness.errors import ConfigError

RL_PRESETS = [n for n, p in PRESETS.items() if isinstance(p.config, RLConfig)]
#: (field, a value other than its default) for every field some part reads
PART_FIELDS = sorted(set(RLConfig.model_fields) - STEP_FIELDS)
OTHER_VALUE = {
    "eps_low": 0.3,
    "eps_high": 0.3,
    "dual_clip": 3.0,
    "adv_eps": 1e-3,
    "gamma": 0.9,
    "lam": 0.5,
    "kl_coef": 0.2,
    "kl_estimator": "k2",
    "loss_norm_constant": 4,
    "vf_coef": 0.1,
    "value_clip": 0.5,
    "critic_lr": 3e-3,
    "sapo_tau_pos": 1.5,
    "sapo_tau_neg": 2.0,
    "clip_cov_ratio": 0.01,
    "clip_cov_lb": 0.5,
    "clip_cov_ub": 4.0,
    "kl_cov_ratio": 0.01,
    "kl_cov_coef": 0.5,
    "dppo_ratio_cap": 10.0,
    "mismatch_cap": 3.0,
    "mismatch_floor": 0.5,
    "entropy_top_share": 0.3,
    "max_draws": 2,
    # issue 35: on-policy distillation
    "teacher_model": "some/teacher",
    "distill_coef": 0.5,
    "distill_discount": 0.9,
    "distill_task_reward": False,
    # issue 35: prime-rl's default loss
    "kl_tau": 0.01,
    "adv_tau": 0.5,
    # issue 35: verl's rollout correction
    "rollout_is": "token",
    "rollout_is_batch_normalize": True,
    "rollout_rs": "seq_mean_k3",
    "rollout_rs_threshold": 0.01,
    # issue 35: AReaL's objectives for asynchronous training
    "m2_threshold": 0.1,
    # issue 35: TRL GRPOTrainer's newer options
    "two_sided_delta": 4.0,
    "vespo_k_pos": 1.0,
    "vespo_lambda_pos": 1.5,
    "vespo_k_neg": 1.0,
    "vespo_lambda_neg": 1.5,
    "off_policy_mask_threshold": 0.1,
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


def _marked_functions() -> dict[tuple[str, str], object]:
    """Every function of every ``harness.algorithms`` module that carries ``implements``, by
    (kind, name) as it states them; a pair stated twice fails."""
    found: dict[tuple[str, str], object] = {}
    for module_info in pkgutil.iter_modules(harness.algorithms.__path__):
        module = import_module(f"harness.algorithms.{module_info.name}")
        for value in vars(module).values():
            mark = getattr(value, "implements", None)
            if isinstance(mark, Implements) and value.__module__ == module.__name__:
                key = (mark.kind, mark.name)
                assert found.setdefault(key, value) is value, f"{key} is stated by two functions"
    return found


def test_the_parts_listing_imports_no_torch():
    # `harness algorithms --parts` reads the declarations only; the functions' modules need torch
    script = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from harness.cli import app\n"
        "out = CliRunner().invoke(app, ['algorithms', '--parts'])\n"
        "assert out.exit_code == 0 and 'policy_loss=clipped' in out.output, out.output\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_each_part_is_one_function_carrying_its_declared_name_and_citation():
    registries = [*SLOTS.values(), *DPO_SLOTS.values()]
    declared = {(registry.kind, name): registry for registry in registries for name in registry.names()}
    marked = _marked_functions()
    assert sorted(set(declared) - set(marked)) == [], "declared parts without a marked function"
    assert sorted(set(marked) - set(declared)) == [], "marked functions without a declaration"
    for (kind, name), registry in declared.items():
        fn = marked[kind, name]
        assert registry.get(name) is fn, (kind, name)
        assert dict(fn.implements.stated) == {"cites": registry.meta(name)["cites"]}, (kind, name)


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


def test_every_part_cites_its_source_and_is_listed():
    rows = describe_parts()
    for slot, registry in {**SLOTS, **DPO_SLOTS}.items():
        for name in registry.names():
            assert registry.meta(name)["cites"], (slot, name)
    assert [(r["slot"], r["name"]) for r in rows] == [
        (slot, name) for slot, registry in {**SLOTS, **DPO_SLOTS}.items() for name in registry.names()
    ]
    sapo = next(r for r in rows if r["name"] == "sapo")
    assert sapo == {
        "slot": "policy_loss",
        "name": "sapo",
        "reads": ["sapo_tau_pos", "sapo_tau_neg"],
        "inputs": [],
        "cites": POLICY_LOSSES.meta("sapo")["cites"],
    }
    assert "arXiv:2511.20347" in sapo["cites"]


def test_the_sampling_side_and_mismatch_slots_are_slots_of_every_rl_config():
    assert {"mismatch", "token_filter", "sampling", "truncated"} <= set(SLOTS)
    defaults = {
        slot: RLConfig.model_fields[slot].default for slot in ("mismatch", "token_filter", "sampling", "truncated")
    }
    assert defaults == {"mismatch": "none", "token_filter": "all", "sampling": "once", "truncated": "keep"}


def test_parts_list_what_they_read_of_the_step_besides_their_fields():
    rows = {(r["slot"], r["name"]): r for r in describe_parts()}
    assert rows["advantage", "gae"]["inputs"] == ["the critic's values"]
    assert rows["advantage", "optimal_token_baseline"]["inputs"] == [
        "the policy's token log-probs and sums of squared probabilities, from its own pass"
    ]
    assert rows["advantage", "group_zscore"]["inputs"] == [] and rows["policy_loss", "clipped"]["inputs"] == []
