"""Arms that differ in the study file but compute the same thing are an error before any work."""

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli.app import app
from harness.errors import ConfigError
from harness.ground.exit_codes import EXIT_BAD_INPUT
from harness.runner.options import RunOptions
from harness.runner.run import prepare
from harness.study import probe_cache
from harness.study.load import load_study
from harness.study.noop import noop_pairs


def study_file(folder, arms: str, extra: str = ""):
    path = folder / "s.yaml"
    path.write_text(
        textwrap.dedent(f"""\
        name: s
        output_dir: {folder / "out"}
        control: grpo
        seeds: 3
        arms:
        """)
        + textwrap.indent(textwrap.dedent(arms), "  ")
        + extra
    )
    return path


PLANTED = """\
- {name: grpo, algorithm: grpo}
- {name: grpo_dual, algorithm: grpo, set: {dual_clip: 1000.0}}
- {name: clip_higher, algorithm: grpo, set: {eps_high: 0.28}}
"""


def test_a_planted_no_op_pair_is_found(tmp_path):
    lines = noop_pairs(load_study(study_file(tmp_path, PLANTED)))
    assert len(lines) == 1
    assert lines[0].startswith("grpo and grpo_dual differ only in dual_clip (null vs 1000.0), yet their loss")
    assert "the difference is a no-op" in lines[0]


def test_validate_plan_and_run_stop_on_it(tmp_path):
    path = study_file(tmp_path, PLANTED)
    for command in ("validate", "plan"):
        result = CliRunner().invoke(app, [command, str(path)])
        assert result.exit_code == EXIT_BAD_INPUT, result.output
        assert "grpo and grpo_dual differ only in dual_clip" in result.stderr
        assert "Traceback" not in result.output
    with pytest.raises(ConfigError, match="grpo and grpo_dual differ only in dual_clip"):
        prepare(path, RunOptions())
    assert not (tmp_path / "out").exists()  # nothing was created


def test_the_same_algorithm_under_two_preset_names_is_found(tmp_path):
    arms = """\
    - {name: grpo, algorithm: grpo}
    - {name: dr_grpo, algorithm: dr_grpo}
    - {name: by_hand, algorithm: grpo, set: {advantage: group_mean, aggregation: seq_mean_token_sum_norm}}
    """
    lines = noop_pairs(load_study(study_file(tmp_path, arms)))
    assert lines == [
        "dr_grpo and by_hand differ only in name (dr_grpo vs grpo), yet their loss and gradient agree "
        "to 1e-07 on the probe batch: the difference is a no-op; drop one of them or change a setting "
        "their parts act on"
    ]


def test_differences_the_probe_cannot_see_and_real_ablations_pass(tmp_path):
    arms = """\
    - {name: grpo, algorithm: grpo}
    - {name: fast, algorithm: grpo, set: {lr: 3.0e-4}}
    - {name: long, algorithm: grpo, train: {max_new_tokens: 6}}
    - {name: clip_higher, algorithm: grpo, set: {eps_high: 0.28}}
    - {name: dpo, algorithm: dpo}
    """
    assert noop_pairs(load_study(study_file(tmp_path, arms))) == []
    grid = study_file(tmp_path, "- {name: grpo, algorithm: grpo}\n", "grid: {dual_clip: [2.0, 1000.0, 2000.0]}\n")
    lines = noop_pairs(load_study(grid))
    assert len(lines) == 1 and lines[0].startswith("grpo[dual_clip=1000.0] and grpo[dual_clip=2000.0]")


def test_probe_results_are_kept_until_the_code_changes(tmp_path, monkeypatch):
    study = load_study(study_file(tmp_path, PLANTED))
    found = noop_pairs(study)
    kept = sorted((Path(".cache") / "harness" / "probe").glob("*/result.json"))
    assert len(kept) == 3  # one per configuration, under the working folder's cache

    def no_probe(cfg, max_new_tokens):
        raise AssertionError("probed again")

    monkeypatch.setattr("harness.algorithms.probe.probe", no_probe)
    assert noop_pairs(study) == found  # read back, not probed
    kept[0].write_text("{not json")
    with pytest.raises(AssertionError, match="probed again"):  # an unreadable entry is probed again
        noop_pairs(study)
    monkeypatch.setattr(probe_cache, "_code_digest", lambda: "edited")
    with pytest.raises(AssertionError, match="probed again"):  # so is every entry after an edit
        noop_pairs(study)
