"""Loading, expanding and tuning studies (harness.study.schema + harness.study.load)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from harness.errors import ConfigError
from harness.study.expand import (
    apply_best,
    comparisons,
    condition_spec,
    expand,
    study_dir,
    tuning_specs,
)
from harness.study.field_errors import FieldError, format_loc
from harness.study.load import (
    dump_study,
    load_study,
    parse_study,
    read_study_data,
    study_warnings,
)
from harness.study.schema import Study, condition_name
from harness.study.search_space import suggest_params

STUDIES = Path(__file__).resolve().parents[2] / "studies"
SHIPPED = ["quickstart", "seven_algorithms", "grpo_normalisation", "tune_lr"]


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def study(**changes) -> Study:
    data = {
        "name": "t",
        "control": "grpo",
        "seeds": 2,
        "arms": [{"name": "grpo", "algorithm": "grpo"}, {"name": "rloo", "algorithm": "rloo"}],
    }
    data.update(changes)
    return parse_study(data)


# --------------------------------------------------------------------------------------------
# the shipped studies


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_study_loads_from_the_shared_testbed(name):
    s = load_study(STUDIES / f"{name}.yaml")
    assert s.name == name
    assert s.task.name == "addition" and s.model.name == "tiny"
    base = read_study_data(STUDIES / "common" / "base_testbed.yaml")
    assert s.train.steps == base["train"]["steps"]  # budgets come from the one shared file
    assert s.control in [a.name for a in s.arms]
    assert study_dir(s) == Path("runs") / name


def test_quickstart_is_three_arms_by_three_seeds():
    s = load_study(STUDIES / "quickstart.yaml")
    specs = expand(s)
    assert [a.algorithm for a in s.arms] == ["grpo", "dr_grpo", "rloo"]
    assert s.control == "grpo" and s.seeds == [0, 1, 2]
    assert len(specs) == 9


def test_seven_algorithms_has_every_family_with_grpo_as_control():
    s = load_study(STUDIES / "seven_algorithms.yaml")
    assert sorted(a.algorithm for a in s.arms) == sorted(
        ["ppo", "grpo", "dr_grpo", "rloo", "reinforce_pp", "cispo", "dpo"]
    )
    assert s.control == "grpo" and len(s.seeds) == 5
    assert len(expand(s)) == 35
    assert {spec.algorithm.kind for spec in expand(s)} == {"rl", "dpo"}


def test_grpo_normalisation_is_a_full_two_by_two():
    s = load_study(STUDIES / "grpo_normalisation.yaml")
    specs = {spec.arm: spec.algorithm for spec in expand(s) if spec.seed == s.seeds[0]}
    cells = {(a.advantage, a.aggregation) for a in specs.values()}
    assert cells == {
        (adv, agg)
        for adv in ("group_zscore", "group_mean")
        for agg in ("seq_mean_token_mean", "seq_mean_token_sum_norm")
    }
    control = specs[s.control]
    assert (control.advantage, control.aggregation) == ("group_zscore", "seq_mean_token_mean")
    # the arms differ from the control in the two factors only
    for cfg in specs.values():
        rest = cfg.model_dump(exclude={"advantage", "aggregation"})
        assert rest == control.model_dump(exclude={"advantage", "aggregation"})


def test_tune_lr_tunes_lr_log_uniformly_with_the_same_budget_per_arm():
    s = load_study(STUDIES / "tune_lr.yaml")
    assert s.tuning is not None
    assert list(s.tuning.search_space) == ["lr"]
    assert s.tuning.search_space["lr"].log
    assert not set(s.tuning.seeds) & set(s.seeds)
    assert [a.algorithm for a in s.arms] == ["grpo", "dr_grpo"]


# --------------------------------------------------------------------------------------------
# expand, conditions, comparisons


def test_expand_is_seed_major_and_deterministic():
    s = study(seeds=[3, 1])
    specs = expand(s)
    assert [(x.seed, x.arm) for x in specs] == [(3, "grpo"), (3, "rloo"), (1, "grpo"), (1, "rloo")]
    assert [x.trial_id for x in specs] == [x.trial_id for x in expand(study(seeds=[3, 1]))]
    assert len({x.trial_id for x in specs}) == 4
    assert all(x.study == "t" for x in specs)


def test_seeds_as_a_number_mean_zero_to_n_minus_one():
    assert study(seeds=4).seeds == [0, 1, 2, 3]
    assert study(seeds=[7, 2]).seeds == [7, 2]


def test_arm_overrides_reach_the_trial_spec():
    s = study(
        arms=[
            {"name": "grpo", "algorithm": "grpo"},
            {"name": "wide", "algorithm": "grpo", "set": {"eps_high": "0.28"}, "train": {"steps": 7}},
        ],
        train={"steps": 11, "max_new_tokens": 5},
    )
    by_arm = {x.arm: x for x in expand(s) if x.seed == 0}
    assert by_arm["wide"].algorithm.eps_high == 0.28  # the string was coerced
    assert by_arm["wide"].train.steps == 7 and by_arm["wide"].train.max_new_tokens == 5
    assert by_arm["grpo"].algorithm.eps_high == 0.2 and by_arm["grpo"].train.steps == 11
    assert by_arm["wide"].algorithm.name == "grpo"


def test_grid_conditions_are_named_with_sorted_keys_and_compared_within_a_cell():
    s = study(grid={"lr": [0.001, 0.003], "train.steps": [5]})
    assert s.conditions() == [
        "grpo[lr=0.001,train.steps=5]",
        "grpo[lr=0.003,train.steps=5]",
        "rloo[lr=0.001,train.steps=5]",
        "rloo[lr=0.003,train.steps=5]",
    ]
    assert comparisons(s) == [
        ("rloo[lr=0.001,train.steps=5]", "grpo[lr=0.001,train.steps=5]"),
        ("rloo[lr=0.003,train.steps=5]", "grpo[lr=0.003,train.steps=5]"),
    ]
    specs = expand(s)
    assert len(specs) == 8
    first = specs[1]
    assert first.arm == "grpo[lr=0.003,train.steps=5]"
    assert first.algorithm.lr == 0.003 and first.train.steps == 5
    assert [x.seed for x in specs] == [0] * 4 + [1] * 4


def test_grid_values_are_coerced_to_the_field_type():
    s = study(grid={"lr": ["1e-3"], "whiten_advantages": [True, False]})
    assert s.grid["lr"] == [0.001]
    assert "grpo[lr=0.001,whiten_advantages=true]" in s.conditions()


def test_condition_name_formats_values():
    assert condition_name("a", {}) == "a"
    assert condition_name("a", {"z": 1, "b": None, "c": 0.5}) == "a[b=null,c=0.5,z=1]"


def test_condition_spec_rejects_unknown_condition():
    with pytest.raises(ConfigError, match="unknown condition 'nope'; valid: grpo, rloo"):
        condition_spec(study(), "nope", 0)


def test_a_single_arm_is_its_own_control():
    s = study(control=None, arms=[{"name": "grpo", "algorithm": "grpo"}])
    assert s.control == "grpo"
    assert comparisons(s) == []


def test_output_dir_overrides_study_dir():
    assert study_dir(study(output_dir="/tmp/x")) == Path("/tmp/x")


# --------------------------------------------------------------------------------------------
# reading files


def test_include_merges_deeply_and_local_keys_win(tmp_path):
    write(
        tmp_path,
        "base.yaml",
        """\
        train: {steps: 9, max_new_tokens: 6}
        seeds: [0, 1, 2]
        model: {tiny: {layers: 3}}
        """,
    )
    (tmp_path / "sub").mkdir()
    write(tmp_path / "sub", "other.yaml", "include: ../base.yaml\nwarmstart: {steps: 7}\n")
    path = write(
        tmp_path,
        "s.yaml",
        """\
        include: [base.yaml, sub/other.yaml]
        name: merged
        train: {steps: 4}
        seeds: [5]
        arms: [{name: grpo, algorithm: grpo}]
        """,
    )
    s = load_study(path)
    assert s.train.steps == 4 and s.train.max_new_tokens == 6  # merged key by key
    assert s.seeds == [5]  # lists are replaced, not concatenated
    assert s.model.tiny.layers == 3 and s.warmstart.steps == 7
    assert s.source == path


def test_diamond_includes_are_not_cycles(tmp_path):
    write(tmp_path, "d.yaml", "seeds: 3\n")
    write(tmp_path, "b.yaml", "include: d.yaml\n")
    write(tmp_path, "c.yaml", "include: d.yaml\n")
    path = write(tmp_path, "a.yaml", "include: [b.yaml, c.yaml]\nname: a\narms: [{name: g, algorithm: grpo}]\n")
    assert load_study(path).seeds == [0, 1, 2]


def test_yaml_exponent_floats_are_floats(tmp_path):
    path = write(
        tmp_path,
        "s.yaml",
        """\
        name: f
        seeds: 3
        arms: [{name: g, algorithm: grpo, set: {lr: 3e-4}}]
        tuning: {n_trials: 2, seeds: [9], search_space: {eps_high: {low: 1e-1, high: 4e-1}}}
        """,
    )
    assert read_study_data(path)["arms"][0]["set"]["lr"] == 3e-4
    s = load_study(path)
    assert s.arms[0].set["lr"] == 3e-4


def test_missing_study_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="study file not found"):
        load_study(tmp_path / "nope.yaml")


def test_parse_study_rejects_include_and_non_mappings():
    with pytest.raises(ConfigError, match="include: only study files"):
        parse_study({"include": "x.yaml"})
    with pytest.raises(ConfigError, match="top level must be a mapping"):
        parse_study([1, 2])


def test_dump_study_round_trips(tmp_path):
    for name in SHIPPED:
        s = load_study(STUDIES / f"{name}.yaml")
        text = dump_study(s)
        assert "include" not in yaml.safe_load(text)
        again = write(tmp_path, f"{name}.yaml", text)
        assert load_study(again).model_dump() == s.model_dump()


# --------------------------------------------------------------------------------------------
# errors


def test_format_loc():
    assert format_loc(("arms", 1, "set", "lr")) == "arms[1].set.lr"
    assert format_loc(("grid", "train.steps", 0)) == "grid.train.steps[0]"
    assert format_loc(()) == ""


def test_field_error_reads_as_a_path_when_raised_outside_pydantic():
    assert str(FieldError(("control",), "bad")) == "control: bad"


def test_missing_fields_are_named_together():
    with pytest.raises(ConfigError, match=r"^required fields missing: name, seeds, arms$"):
        parse_study({})
    with pytest.raises(ConfigError, match=r"^tuning: required fields missing: n_trials, seeds"):
        study(tuning={"search_space": {"lr": {"low": 0.1, "high": 0.2}}})


def test_errors_in_a_later_arm_name_that_arm():
    with pytest.raises(ConfigError, match=r"^arms\[1\]\.set\.eps_hgh: unknown key"):
        study(arms=[{"name": "grpo", "algorithm": "grpo"}, {"name": "x", "algorithm": "grpo", "set": {"eps_hgh": 1}}])


def test_grid_combination_errors_name_the_condition():
    # each value is fine alone; together they contradict (dual clip on an unclipped loss)
    with pytest.raises(ConfigError, match=r"^grid: condition grpo\[dual_clip=3.0,policy_loss=is\]: "):
        study(
            arms=[{"name": "grpo", "algorithm": "grpo"}],
            control=None,
            grid={"dual_clip": [3.0], "policy_loss": ["clipped", "is"]},
        )


# --------------------------------------------------------------------------------------------
# tuning


def tuned(**space) -> Study:
    return study(
        seeds=3,
        tuning={
            "n_trials": 3,
            "seeds": [100, 101],
            "sampler_seed": 0,
            "search_space": space
            or {
                "lr": {"low": 1e-4, "high": 1e-2, "log": True},
                "train.steps": {"low": 4, "high": 8},
                "group_size": {"choices": [4, 8]},
            },
        },
    )


def test_expand_refuses_a_tuned_study():
    with pytest.raises(ConfigError, match="apply_best"):
        expand(tuned())


def test_tuning_specs_apply_the_sampled_params():
    s = tuned()
    spec = tuning_specs(s, "rloo", {"lr": 0.005, "train.steps": 6, "group_size": 4}, 101)
    assert spec.arm == "rloo" and spec.seed == 101
    assert spec.algorithm.lr == 0.005 and spec.algorithm.group_size == 4
    assert spec.train.steps == 6
    other = tuning_specs(s, "rloo", {"lr": 0.004, "train.steps": 6, "group_size": 4}, 101)
    assert other.trial_id != spec.trial_id


def test_tuning_specs_reject_bad_input():
    s = tuned()
    with pytest.raises(ConfigError, match="arm: unknown arm 'x'"):
        tuning_specs(s, "x", {}, 100)
    with pytest.raises(ConfigError, match=r"params.eps_high: not in tuning.search_space"):
        tuning_specs(s, "grpo", {"eps_high": 0.3}, 100)
    with pytest.raises(ConfigError, match=r"params.lr: Input should be greater than 0"):
        tuning_specs(s, "grpo", {"lr": -1}, 100)
    with pytest.raises(ConfigError, match="seed: 0 is not a tuning seed"):
        tuning_specs(s, "grpo", {"lr": 0.001}, 0)
    with pytest.raises(ConfigError, match="no tuning section"):
        tuning_specs(study(), "grpo", {}, 0)


def test_apply_best_runs_each_arm_at_its_best_over_the_comparison_seeds():
    s = tuned()
    specs = apply_best(s, {"grpo": {"lr": 0.002}, "rloo": {"lr": 0.007, "group_size": 4}})
    assert [(x.seed, x.arm) for x in specs] == [
        (0, "grpo"),
        (0, "rloo"),
        (1, "grpo"),
        (1, "rloo"),
        (2, "grpo"),
        (2, "rloo"),
    ]
    assert {x.algorithm.lr for x in specs if x.arm == "grpo"} == {0.002}
    assert {x.algorithm.group_size for x in specs if x.arm == "rloo"} == {4}
    with pytest.raises(ConfigError, match="best: no parameters for arm"):
        apply_best(s, {"grpo": {"lr": 0.002}})
    with pytest.raises(ConfigError, match="best: unknown arm 'ppo'"):
        apply_best(s, {"grpo": {}, "rloo": {}, "ppo": {}})
    with pytest.raises(ConfigError, match="no tuning section"):
        apply_best(study(), {})


def test_suggest_params_through_optuna():
    optuna = pytest.importorskip("optuna")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    s = tuned()
    ostudy = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=s.tuning.sampler_seed))
    for _ in range(3):
        trial = ostudy.ask()
        params = suggest_params(s, trial)
        assert 1e-4 <= params["lr"] <= 1e-2
        assert isinstance(params["train.steps"], int) and 4 <= params["train.steps"] <= 8
        assert params["group_size"] in (4, 8)
        tuning_specs(s, "grpo", params, 100)  # every sample makes a valid trial
        ostudy.tell(trial, 0.5)


def test_search_space_ranges_on_int_fields_and_choices_on_flags():
    s = tuned(minibatches={"low": 1, "high": 4, "step": 1}, whiten_advantages={"choices": [True, False]})
    assert s.tuning.search_space["whiten_advantages"].choices == [True, False]


# --------------------------------------------------------------------------------------------
# warnings


def test_warnings_for_few_seeds_and_identical_arms():
    s = study(
        seeds=2,
        arms=[
            {"name": "grpo", "algorithm": "grpo"},
            {"name": "grpo2", "algorithm": "grpo", "set": {"eps_high": 0.2}},
        ],
    )
    warnings = study_warnings(s)
    assert any("only 2 seed(s)" in w for w in warnings)
    assert any("grpo and grpo2 have identical configurations" in w for w in warnings)
    assert study_warnings(load_study(STUDIES / "seven_algorithms.yaml")) == []


def test_unknown_keys_are_named_whatever_they_look_like():
    with pytest.raises(ConfigError, match=r"^out-dir: unknown key; valid: name, description, output_dir"):
        study(**{"out-dir": "x"})
    with pytest.raises(ConfigError, match=r"^str: unknown key"):
        study(str=1)


def test_union_branches_do_not_leak_into_the_path():
    with pytest.raises(ConfigError, match=r"^model\.lora\.target_modules\[0\]: Input should be a valid string"):
        study(model={"lora": {"target_modules": [5]}})


def test_yaml_anchors_and_merge_keys_still_work(tmp_path):
    path = write(
        tmp_path,
        "s.yaml",
        """\
        name: anchors
        seeds: 3
        control: a
        arms:
          - &grpo {name: a, algorithm: grpo, set: {eps_high: 0.25}}
          - <<: *grpo
            name: b
        """,
    )
    s = load_study(path)
    assert [a.name for a in s.arms] == ["a", "b"]
    assert s.arms[1].set == {"eps_high": 0.25}


def test_search_space_corners_that_contradict_the_preset_fail_at_load():
    # on grpo, dual_clip is fine alone and policy_loss=is is fine alone, but the sampler could
    # draw them together, and dual clipping needs the clipped loss
    space = {"dual_clip": {"low": 1.5, "high": 3.0}, "policy_loss": {"choices": ["clipped", "is"]}}
    with pytest.raises(ConfigError, match=r"^tuning.search_space: grpo at dual_clip=1.5,policy_loss=is: "):
        study(
            arms=[{"name": "grpo", "algorithm": "grpo"}],
            control=None,
            tuning={"n_trials": 2, "seeds": [100], "search_space": space},
        )


def test_kind_is_not_an_override_in_a_study():
    data = {
        "name": "s",
        "control": "grpo",
        "seeds": 3,
        "arms": [{"name": "grpo", "algorithm": "grpo"}, {"name": "x", "algorithm": "cispo", "set": {"kind": "dpo"}}],
    }
    with pytest.raises(
        ConfigError, match=r"arms\[1\]\.set\.kind: unknown key; valid: .*the kind, is chosen by `algorithm`"
    ):
        parse_study(data)


# --------------------------------------------------------------------------------------------
# rollout per arm


def staleness_study(**changes) -> Study:
    arms = [
        {"name": "sync", "algorithm": "grpo"},
        {"name": "stale2", "algorithm": "grpo", "set": {"rollout.max_staleness": 2}},
        {"name": "in_process", "algorithm": "grpo", "set": {"rollout.backend": "hf"}},
    ]
    vllm = {"backend": "vllm", "vllm": {"url": "http://127.0.0.1:1"}}
    return study(**{"control": "sync", "arms": arms, "rollout": vllm, **changes})


def test_an_arm_sets_the_staleness_and_the_backend_of_its_trials():
    specs = {x.arm: x for x in expand(staleness_study()) if x.seed == 0}
    rollouts = {arm: (x.rollout.backend, x.rollout.max_staleness, x.rollout.vllm.url) for arm, x in specs.items()}
    assert rollouts == {
        "sync": ("vllm", 0, "http://127.0.0.1:1"),
        "stale2": ("vllm", 2, "http://127.0.0.1:1"),
        "in_process": ("hf", 0, None),  # the server's settings are the vllm backend's alone
    }
    assert specs["stale2"].algorithm == specs["sync"].algorithm  # the rollout keys are not the algorithm's
    assert len({x.trial_id for x in specs.values()}) == 3
    # an arm back on hf is the trial it was before the rollout section existed: the same id
    plain = study(control="in_process", arms=[{"name": "in_process", "algorithm": "grpo"}])
    assert [x.trial_id for x in expand(plain) if x.seed == 0] == [specs["in_process"].trial_id]


def test_a_grid_varies_the_staleness_into_named_conditions():
    s = staleness_study(
        arms=[{"name": "sync", "algorithm": "grpo"}], grid={"rollout.max_staleness": [0, 2]}, control=None
    )
    assert s.conditions() == ["sync[rollout.max_staleness=0]", "sync[rollout.max_staleness=2]"]
    by_name = {x.arm: x.rollout.max_staleness for x in expand(s) if x.seed == 0}
    assert by_name == {"sync[rollout.max_staleness=0]": 0, "sync[rollout.max_staleness=2]": 2}


def test_a_rollout_an_arm_cannot_run_is_one_line_naming_the_arm():
    arms = [{"name": "sync", "algorithm": "grpo"}, {"name": "stale", "algorithm": "grpo", "set": {}}]
    arms[1]["set"] = {"rollout.max_staleness": 2}
    with pytest.raises(ConfigError, match=r"^arms\[1\] \(stale\): rollout.max_staleness 2 needs rollout.backend: vllm"):
        study(control="sync", arms=arms)
    arms[1]["set"] = {"rollout.backend": "hf"}  # the study's staleness, on hf
    with pytest.raises(ConfigError, match=r"^arms\[1\] \(stale\): rollout.max_staleness 1 needs rollout.backend: vllm"):
        study(control="sync", arms=arms, rollout={"backend": "vllm", "max_staleness": 1})
    arms[1]["set"] = {"rollout.backend": "sglang"}
    with pytest.raises(ConfigError, match=r"^arms\[1\]\.set\.rollout\.backend: Input should be 'hf' or 'vllm'"):
        study(control="sync", arms=arms)
    arms[1]["set"] = {"rollout.vllm": {"url": "http://127.0.0.1:1"}}  # where the server runs is the study's
    with pytest.raises(ConfigError, match=r"^arms\[1\]\.set\.rollout\.vllm: unknown key; valid: .*, rollout.max"):
        study(control="sync", arms=arms)
    with pytest.raises(ConfigError, match=r"^grid\.rollout\.max_staleness: also fixed by arms\[1\]\.set\.rollout"):
        staleness_study(grid={"rollout.max_staleness": [0, 1]})
    with pytest.raises(ConfigError, match=r"^grid\.rollout\.max_staleness\[1\] \(with arms\[0\] grpo\): rollout.max"):
        study(grid={"rollout.max_staleness": [0, 1]})
