"""The runner's question, what a sequential study needs next: a storage that cannot be read is a
typed error raised where the read fails, never a replay on the local records alone."""

import pytest

from harness.decide.sequential.schedule import look_state
from harness.store import StorageError, StorageUnreadable
from harness.study.load import dump_study, parse_study
from harness.tracking.results import load_results


def study_file(tmp_path):
    study = parse_study(
        {
            "name": "seq",
            "output_dir": str(tmp_path / "seq"),
            "control": "grpo",
            "seeds": 10,
            "sequential": {"looks": [3, 5], "spending": "pocock"},
            "arms": [{"name": "grpo", "algorithm": "grpo"}, {"name": "dr", "algorithm": "dr_grpo"}],
        }
    )
    (tmp_path / "seq").mkdir()
    path = tmp_path / "seq" / "study.yaml"
    path.write_text(dump_study(study), encoding="utf-8")
    return path


def broken_storage(tmp_path) -> str:
    path = tmp_path / "broken.db"
    path.write_bytes(b"not a database at all" * 100)
    return f"sqlite:///{path}"


@pytest.mark.filterwarnings("ignore:cannot read the (records|sequential rules) stored")
def test_an_unreadable_storage_is_a_warning_for_a_reader_and_an_error_when_every_trial_is_needed(tmp_path):
    path, url = study_file(tmp_path), broken_storage(tmp_path)
    with pytest.warns(UserWarning, match=r"^cannot read the Optuna storage .*; showing local records only$"):
        lenient = load_results(path, storage=url)
    assert lenient.trials.empty
    with pytest.raises(StorageUnreadable, match=r"^cannot read the Optuna storage sqlite:///.*broken\.db: ") as err:
        load_results(path, storage=url, strict_storage=True)
    assert "showing" not in str(err.value)
    assert isinstance(err.value, StorageError)  # the runner's "try again later"


def test_the_look_state_raises_the_storage_error_by_type(tmp_path):
    path, url = study_file(tmp_path), broken_storage(tmp_path)
    with pytest.raises(StorageUnreadable, match="cannot read the Optuna storage"):
        look_state(path, url)
