"""Every user of the checked cache trusts a manifest's fields only while they match its own
checksum: an edited field (a metric, a file's checksum beside the edited file) is one warning
line and a rebuild, never a silently changed result. (The reward model's cache is tested with
the reward model, in tests/engine/test_reward_model.py.)"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from harness.algorithms import resolve_algorithm
from harness.algorithms.probe_result import ProbeResult
from harness.ground.checked_cache import MANIFEST_FILE

EDITED = "manifest.json was edited after it was written (its fields do not match its manifest_sha256)"


def edit_manifest(folder: Path, change) -> None:
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    change(manifest)
    (folder / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True))


def test_a_warm_start_whose_recorded_accuracy_was_edited_is_rebuilt(tmp_path):
    """An edited val_accuracy would hide the warm start's below-target warning."""
    import torch

    from harness.engine.spec import TrialSpec
    from harness.engine.tasks import build_task
    from harness.engine.warmstart import WarmStartCacheWarning, load_policy
    from harness.engine.warmstart_key import cache_folder

    torch.set_num_threads(1)
    spec = TrialSpec(
        arm="grpo",
        algorithm=resolve_algorithm("grpo", {}),
        cache_dir=str(tmp_path / "cache"),
        task={"n_train": 300, "n_eval": 24},
        train={"max_new_tokens": 4},
        model={"tiny": {"hidden_size": 32, "layers": 1, "heads": 2, "intermediate_size": 64}, "device": "cpu"},
        warmstart={"steps": 10, "batch_size": 16, "target_accuracy": 1.0},
    )
    task = build_task(spec.task)
    _, _, warnings_before = load_policy(spec, task)
    folder = cache_folder(spec)
    measured = json.loads((folder / MANIFEST_FILE).read_text())["val_accuracy"]
    assert measured < 1.0 and warnings_before[0].startswith("warmstart_below_target")
    edit_manifest(folder, lambda m: m.update(val_accuracy=1.0))
    with pytest.warns(WarmStartCacheWarning) as caught:
        _, _, warnings_after = load_policy(spec, task)
    (line,) = [str(w.message) for w in caught]
    assert line == f"warm-start cache {folder}: {EDITED}; rebuilding it"
    assert warnings_after == warnings_before  # the edit hid nothing
    assert json.loads((folder / MANIFEST_FILE).read_text())["val_accuracy"] == measured


def test_a_probe_result_changed_with_its_checksum_is_probed_again(tmp_path, monkeypatch):
    from harness.study.probe_cache import (
        PROBE_FOLDER,
        RESULT_FILE,
        ProbeCacheWarning,
        probe_result,
    )

    result = ProbeResult(loss=0.5, gradient=(0.125, -2.0))
    calls = []
    monkeypatch.setattr("harness.algorithms.probe.probe", lambda cfg, budget: calls.append(cfg) or result)
    cfg = resolve_algorithm("grpo", {})
    assert probe_result(cfg, 4, tmp_path) == result
    (kept,) = (tmp_path / PROBE_FOLDER).glob(f"*/{RESULT_FILE}")
    forged = json.dumps({"loss": 0.25, "gradient": [0.125, -2.0]})
    kept.write_text(forged)
    edit_manifest(kept.parent, lambda m: m["sha256"].update({RESULT_FILE: hashlib.sha256(forged.encode()).hexdigest()}))
    with pytest.warns(ProbeCacheWarning) as caught:
        assert probe_result(cfg, 4, tmp_path) == result
    assert [str(w.message) for w in caught] == [f"probe cache {kept.parent}: {EDITED}; probing again"]
    assert len(calls) == 2
