"""A record says how its compute/flops was counted (``harness.engine.spec.FLOPS_COUNTING``), and
a study whose trials were counted two ways says so in one warning line when it is read."""

from __future__ import annotations

import warnings

import yaml

from harness.engine.spec import FLOPS_COUNTING, TrialResult
from harness.study.expand import expand
from harness.study.load import load_study
from harness.tracking import records
from harness.tracking.results import load_results


def _study(folder):
    path = folder / "flops.yaml"
    data = {
        "name": "flops",
        "output_dir": str(folder / "out"),
        "control": "grpo",
        "seeds": 2,
        "arms": [{"name": "grpo", "algorithm": "grpo"}, {"name": "rloo", "algorithm": "rloo"}],
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, load_study(path)


def _write(study, spec, *, counting):
    result = TrialResult(trial_id=spec.trial_id, final={"eval/accuracy": 0.5, "compute/flops": 1e9})
    record = records.make_record(spec, result)
    assert record.flops_counting == FLOPS_COUNTING
    records.write_record(study.output_dir, record.model_copy(update={"flops_counting": counting}))


def _read(path) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load_results(path)
    return [str(w.message) for w in caught if "compute/flops" in str(w.message)]


def test_trials_counted_two_ways_are_one_warning_line_naming_one(tmp_path):
    path, study = _study(tmp_path)
    specs = expand(study)
    _write(study, specs[0], counting=None)  # a record from before the field: counting 1
    for spec in specs[1:]:
        _write(study, spec, counting=FLOPS_COUNTING)
    [line] = _read(path)
    assert line.startswith(
        f"compute/flops of 1 trial(s) was counted by an older harness (counting 1; now {FLOPS_COUNTING}"
    )
    assert specs[0].trial_id in line and "\n" not in line


def test_one_counting_reads_quietly_and_a_record_without_flops_has_no_field(tmp_path):
    path, study = _study(tmp_path)
    for spec in expand(study):
        _write(study, spec, counting=FLOPS_COUNTING)
    assert _read(path) == []
    spec = expand(study)[0]
    plain = records.make_record(spec, TrialResult(trial_id=spec.trial_id, final={"eval/accuracy": 0.5}))
    assert plain.flops_counting is None and "flops_counting" not in plain.model_dump()
