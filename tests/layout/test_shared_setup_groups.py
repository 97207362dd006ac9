"""The groups of tests that share an expensive setup (``tests/shared_setup.py``) name paths that
exist, and the scheduler maps each test to its group: a renamed folder would otherwise let every
xdist process start its own vLLM server or clusters again, silently."""

from __future__ import annotations

from pathlib import Path

from shared_setup import SHARED_SETUP_GROUPS, shared_setup_scope

REPO = Path(__file__).resolve().parents[2]


def test_every_group_names_a_test_folder_or_file_that_exists():
    for path in SHARED_SETUP_GROUPS:
        target = REPO / path
        assert target.is_dir() if path.endswith("/") else target.is_file(), path


def test_a_test_goes_to_its_group_and_any_other_test_alone():
    assert shared_setup_scope("tests/engine/vllm_backend/test_real_server.py::test_x") == "vllm"
    assert shared_setup_scope("tests/executors/test_ray_runs.py::test_y[1]") == "clusters"
    assert shared_setup_scope("tests/engine/test_model_prepare.py::test_z") == "model-prepare"
    alone = "tests/engine/test_model_prepare_more.py::test_z"  # a file name that merely starts alike
    assert shared_setup_scope(alone) == alone
    beside = "tests/engine/vllm_backend_old/test_a.py::t"  # a folder that merely starts alike
    assert shared_setup_scope(beside) == beside
