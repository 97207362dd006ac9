"""The probe's kept results are checked entries: a result whose file changed is never trusted; it
is probed again after a one-line warning."""

from __future__ import annotations

import json

import pytest

from harness.algorithms import resolve_algorithm
from harness.algorithms.probe_result import ProbeResult
from harness.study.probe_cache import PROBE_FOLDER, RESULT_FILE, ProbeCacheWarning, probe_result

RESULT = ProbeResult(loss=0.5, gradient=(0.125, -2.0, 3.0e-9))


@pytest.fixture
def probes(monkeypatch):
    """The probe's calls, each giving ``RESULT`` (the real probe is tested in tests/algorithms)."""
    calls = []

    def fake(cfg, max_new_tokens):
        calls.append((cfg.name, max_new_tokens))
        return RESULT

    monkeypatch.setattr("harness.algorithms.probe.probe", fake)
    return calls


def test_a_result_is_kept_and_read_back_exactly(tmp_path, probes):
    cfg = resolve_algorithm("grpo", {})
    assert probe_result(cfg, 4, tmp_path) == RESULT
    assert probe_result(cfg, 4, tmp_path) == RESULT and probes == [("grpo", 4)]
    (entry,) = [p for p in (tmp_path / PROBE_FOLDER).iterdir() if p.is_dir()]  # beside it: its lock
    assert sorted(p.name for p in entry.iterdir()) == ["manifest.json", RESULT_FILE]


@pytest.mark.parametrize(
    "damage",
    [
        lambda f: f.write_text(json.dumps({"loss": 0.25, "gradient": [0.125, -2.0, 3.0e-9]})),  # parses, but changed
        lambda f: f.write_text("{not json"),
        lambda f: f.unlink(),
    ],
    ids=["edited", "garbled", "removed"],
)
def test_a_changed_entry_is_probed_again_with_a_one_line_warning(tmp_path, probes, damage):
    cfg = resolve_algorithm("grpo", {})
    probe_result(cfg, 4, tmp_path)
    (kept,) = (tmp_path / PROBE_FOLDER).glob(f"*/{RESULT_FILE}")
    damage(kept)
    with pytest.warns(ProbeCacheWarning) as caught:
        assert probe_result(cfg, 4, tmp_path) == RESULT
    (line,) = [str(w.message) for w in caught]
    assert "\n" not in line and RESULT_FILE in line and line.endswith("; probing again")
    assert len(probes) == 2
    assert probe_result(cfg, 4, tmp_path) == RESULT and len(probes) == 2  # kept again, whole


def test_a_cache_that_cannot_be_written_still_gives_the_result_probed_once(tmp_path, probes):
    (tmp_path / PROBE_FOLDER).write_text("a file where the folder should be")
    assert probe_result(resolve_algorithm("grpo", {}), 4, tmp_path) == RESULT
    assert probes == [("grpo", 4)]
