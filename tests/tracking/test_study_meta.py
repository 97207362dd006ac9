"""A study's typed metadata: built where the results are loaded, and convertible key for key to
and from the plain mapping the results carried before it was typed."""

from harness.study.load import parse_study
from harness.tracking.results import load_results
from harness.tracking.study_meta import BenchmarkMeta, ComputeLookDesign, LookDesign, StudyMeta

#: the keys of the results' meta mapping before it was typed (a sequential study adds its rules)
KEYS = [
    "study",
    "description",
    "study_dir",
    "primary_metric",
    "direction",
    "min_effect",
    "test",
    "failures",
    "metric_ranges",
    "control",
    "conditions",
    "comparisons",
    "calibration",
    "seed_pools",
    "mirrors",
    "seeds",
    "seed_matched",
    "sequential",
    "primary_at",
    "scaling",
    "configs",
    "seeds_by_condition",
    "benchmarks",
    "status_counts",
    "harness_version",
    "git_commit",
    "earlier_design",
]


def sequential_study(tmp_path):
    return parse_study(
        {
            "name": "seq",
            "output_dir": str(tmp_path / "seq"),
            "control": "grpo",
            "seeds": 6,
            "min_effect": 0.05,
            "sequential": {"looks": [3, 6], "spending": "pocock"},
            "arms": [{"name": "grpo", "algorithm": "grpo"}, {"name": "dr", "algorithm": "dr_grpo"}],
        }
    )


def test_the_loaded_meta_is_typed_and_converts_key_for_key(tmp_path):
    meta = load_results(sequential_study(tmp_path)).meta
    assert isinstance(meta, StudyMeta)
    assert meta.sequential == LookDesign(looks=[3, 6], spending="pocock")
    assert (meta.control, meta.min_effect, meta.seeds) == ("grpo", 0.05, [0, 1, 2, 3, 4, 5])
    plain = meta.to_dict()
    assert sorted(plain) == sorted([*KEYS, "sequential_rules"])
    assert plain["sequential"] == {"looks": [3, 6], "spending": "pocock"} and plain["sequential_rules"] == []
    assert StudyMeta.from_dict(plain) == meta


def test_a_plain_mapping_takes_the_readers_defaults():
    meta = StudyMeta.from_dict(
        {"name": "made by hand", "direction": None, "benchmarks": [{"name": "b", "metric": "eval/b/accuracy"}]}
    )
    assert (meta.study, meta.direction, meta.test, meta.failures) == ("made by hand", "maximize", "auto", "drop")
    assert meta.benchmarks == [BenchmarkMeta("b", "eval/b/accuracy", None)] and meta.sequential is None
    assert "sequential_rules" not in meta.to_dict() and "source" not in meta.to_dict()


def test_a_compute_look_study_carries_its_looks_resolved(tmp_path):
    study = parse_study(
        {
            "name": "cl",
            "output_dir": str(tmp_path / "cl"),
            "control": "grpo",
            "seeds": 4,
            "min_effect": 0.05,
            "train": {"steps": 40},
            "compute_looks": {"at": [0.25, 0.5, 1.0], "spending": "pocock"},
            "arms": [{"name": "grpo", "algorithm": "grpo"}, {"name": "dr", "algorithm": "dr_grpo"}],
        }
    )
    meta = load_results(study).meta
    assert meta.compute_looks == ComputeLookDesign([0.25, 0.5, 1.0], "pocock", 0.05, "control", "step", 40.0, "budget")
    plain = meta.to_dict()
    assert sorted(plain) == sorted([*KEYS, "compute_looks", "sequential_rules"])  # its rule's versions (none yet)
    assert meta.sequential_rules == [] and set(meta.configs) == {"grpo", "dr"}
    assert StudyMeta.from_dict(plain) == meta
