"""Every file in tests/study/malformed/ must fail to load with one line that names the field.

EXPECTED maps each file to a substring of its error; a new file without an entry fails the
completeness test, so the corpus and the expectations cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.errors import ConfigError
from harness.ground.exit_codes import EXIT_BAD_INPUT
from harness.study.load import load_study

MALFORMED = Path(__file__).parent / "malformed"

EXPECTED: dict[str, str] = {
    # unknown keys, at every depth
    "unknown_top_key.yaml": "nmae: unknown key; valid: name, description",
    "unknown_nested_key.yaml": "train.stepz: unknown key; valid: steps, prompts_per_step",
    "unknown_deep_key.yaml": "model.tiny.hidden: unknown key; valid: hidden_size",
    "unknown_arm_key.yaml": "arms[1].algo: unknown key; valid: name, algorithm",
    "unknown_override_key.yaml": "arms[0].set.eps_hgh: unknown key; valid: group_size, lr, epochs",
    "override_preset_name.yaml": "arms[0].set.name: unknown key",
    # wrong types
    "wrong_type_steps.yaml": "train.steps: Input should be a valid integer",
    "wrong_type_arms.yaml": "arms: Input should be a valid list",
    "wrong_type_seeds.yaml": "seeds: expected a number of seeds",
    "override_wrong_type.yaml": "arms[0].set.lr: Input should be a valid number",
    # non-finite numbers, wherever a setting is a number
    "nonfinite_override.yaml": "arms[0].set.lr: Input should be a finite number (got inf)",
    "nonfinite_train.yaml": "train.temperature: Input should be a finite number (got nan)",
    "nonfinite_grid.yaml": "grid.eps_high[1]: Input should be a finite number (got -inf)",
    # algorithms: unknown preset, contradictions found by the presets
    "unknown_algorithm.yaml": "arms[1].algorithm: unknown algorithm 'rlooo'; valid: ",
    "override_contradiction.yaml": "arms[1].set: algorithm 'cispo': kl_coef is read by none of this algorithm's parts",
    "group_size_one_grpo.yaml": "arms[0].set: algorithm 'grpo': advantage 'group_zscore'",
    # arms and control
    "empty_arms.yaml": "arms: at least one arm is required",
    "missing_arms.yaml": "required field missing: arms",
    "missing_control.yaml": "control: required when the study has more than one arm",
    "control_not_arm.yaml": "control: 'ppo' is not an arm; arms: grpo, rloo",
    "duplicate_arm_names.yaml": "arms[1].name: duplicate arm name 'grpo'",
    "bad_arm_name.yaml": "arms[1].name: arm name 'my arm' must match",
    # seeds and budgets
    "negative_seed.yaml": "seeds: seed at index 1 is negative",
    "duplicate_seeds.yaml": "seeds: duplicate seed 1",
    "zero_seeds.yaml": "seeds: the number of seeds must be at least 1",
    "zero_steps.yaml": "train.steps: Input should be greater than 0",
    "zero_steps_in_arm.yaml": "arms[1].train.steps: Input should be greater than 0",
    # includes
    "missing_include.yaml": "include[0]: no_such_base.yaml (from ",
    "include_cycle_a.yaml": "include[0]: include_cycle_a.yaml (from ",  # b's include closes it
    "include_cycle_b.yaml": "include[0]: include_cycle_b.yaml (from ",
    "include_wrong_type.yaml": "include: expected a file name or a list of file names",
    # the file itself
    "bad_yaml_syntax.yaml": "invalid YAML at line 4",
    "duplicate_yaml_key.yaml": "duplicate key 'seeds'",
    "python_tag.yaml": "invalid YAML at line 1",
    "top_level_list.yaml": "top level must be a mapping of study fields, got list",
    "empty_file.yaml": "top level must be a mapping of study fields, got nothing",
    # names, direction, metric, task
    "name_with_slash.yaml": "name: study name 'studies/bad' must not contain a path separator",
    "name_with_dotdot.yaml": "name: study name 'bad..study' must not contain '..'",
    "unknown_direction.yaml": "direction: Input should be 'maximize' or 'minimize'",
    "unknown_metric.yaml": "primary_metric: unknown metric 'eval/acuracy'",
    "unknown_task.yaml": "task.name: unknown task 'division'; valid: ",
    # grid
    "grid_unknown_key.yaml": "grid.lrr: unknown key; valid: ",
    "grid_empty_list.yaml": "grid.lr: must list at least one value",
    "grid_not_a_list.yaml": "grid.lr: expected a list of values",
    "grid_bad_value.yaml": "grid.lr[1]: Input should be greater than 0",
    "grid_duplicate_value.yaml": "grid.train.steps[2]: duplicate value 10",
    "grid_group_size_one.yaml": "grid.group_size[0] (with arms[0] grpo): algorithm 'grpo'",
    "grid_conflicts_with_arm.yaml": "grid.lr: also fixed by arms[0].set.lr",
    # tuning
    "tuning_unknown_field.yaml": "tuning.search_space.learning_rate: unknown key; valid: ",
    "tuning_low_above_high.yaml": "tuning.search_space.lr.low: low (0.01) must be less than high",
    "tuning_log_zero_low.yaml": "tuning.search_space.lr.low: a log-uniform range needs low > 0",
    "tuning_range_and_choices.yaml": "tuning.search_space.lr: give either {low, high",
    "tuning_int_field_float_bound.yaml": "tuning.search_space.group_size.low: group_size is an integer",
    "tuning_range_on_name_field.yaml": "tuning.search_space.advantage: is not numeric",
    "tuning_group_size_one.yaml": "tuning.search_space.group_size.choices[0] (with arms[0] grpo)",
    "tuning_seeds_overlap.yaml": "tuning.seeds: 2 also in the study's seeds",
    "tuning_zero_trials.yaml": "tuning.n_trials: Input should be greater than 0",
    "tuning_empty_space.yaml": "tuning.search_space: must name at least one parameter",
    "tuning_with_grid.yaml": "tuning: cannot be combined with grid",
    "tuning_conflicts_with_arm.yaml": "tuning.search_space.lr: also fixed by arms[1].set.lr",
}


def test_every_malformed_file_has_an_expectation():
    on_disk = sorted(p.name for p in MALFORMED.glob("*.yaml"))
    assert on_disk == sorted(EXPECTED)
    assert len(on_disk) >= 22


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_malformed_study_fails_with_one_line_naming_the_field(name):
    with pytest.raises(ConfigError) as info:
        load_study(MALFORMED / name)
    message = str(info.value)
    assert "\n" not in message
    assert EXPECTED[name] in message


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_validate_command_exits_2_with_the_same_line(name):
    result = CliRunner().invoke(app, ["validate", str(MALFORMED / name)])
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: ")
    assert EXPECTED[name] in lines[0]
    assert result.stdout == ""


def test_python_tag_is_never_executed(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "pwned"
    text = f"name: !!python/object/apply:os.system ['touch {marker}']\nseeds: 3\narms: []\n"
    study = tmp_path / "evil.yaml"
    study.write_text(text)
    with pytest.raises(ConfigError):
        load_study(study)
    assert not marker.exists()
