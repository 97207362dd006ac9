"""The warm start says what it is doing (issue 13, item 4): it ran for minutes without a word and
said nothing when it stopped at its step limit far below its target (1000 steps, val accuracy
0.117 vs 0.4), so RL ran on a policy that could not learn. It now prints progress on stderr and,
when it misses its target, warns in the trial's output and result, built now or cached."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import harness.engine.warmstart as warmstart
from harness.engine.spec import WARMSTART_BELOW_TARGET
from harness.engine.trial import run_trial
from harness.engine.warmstart_key import MANIFEST_FILE, WarmStartInputs, cache_key


def _folder(spec) -> Path:
    return Path(spec.cache_dir) / "warmstart" / cache_key(WarmStartInputs.of(spec))


@pytest.fixture
def spec(make_spec, tmp_path, monkeypatch):
    """A warm start of 30 steps (checks at 25 and 30) in a cache of its own; progress every check."""
    monkeypatch.setattr(warmstart, "PROGRESS_EVERY_S", 0.0)

    def make(target: float):
        s = make_spec(warmstart={"steps": 30, "target_accuracy": target})
        return s.model_copy(update={"cache_dir": str(tmp_path / "cache")})

    return make


def test_progress_and_a_missed_target_are_reported_built_or_cached(spec, capsys):
    missed = spec(target=1.0)
    result = run_trial(missed)
    err = capsys.readouterr().err
    assert re.search(
        r"warm start: building \S+: SFT of up to 30 steps until greedy accuracy on \d+ "
        r"train-validation prompts reaches 1",
        err,
    ), err
    assert re.search(
        r"warm start: step 25/30, val accuracy \d\.\d{3} \(target 1\), \d+ s so far, "
        r"at most \d+ s left",
        err,
    ), err
    assert "warm start: SFT stopped at its step limit below its target 1: val accuracy" in err
    (line,) = result.warnings
    assert line.startswith(f"{WARMSTART_BELOW_TARGET}: after 30 of at most 30 SFT steps")
    assert f"greedy val accuracy {result.final['warmstart/val_accuracy']:.3f}" in line
    assert "raise warmstart.steps" in line
    assert f"warning: {line}" in err

    folder = _folder(missed)
    manifest = json.loads((folder / MANIFEST_FILE).read_text())
    assert f"{manifest['val_accuracy']:.3f}" in line  # the outcome the cache keeps

    again = run_trial(missed)  # from the cache: no SFT, the same warning
    err = capsys.readouterr().err
    assert f"warm start: using the cached warm start {folder} (30 SFT steps" in err
    assert "building" not in err and again.warnings == result.warnings


def test_a_warm_start_that_reaches_its_target_does_not_warn(spec, capsys):
    result = run_trial(spec(target=0.01))
    assert result.warnings == []
    err = capsys.readouterr().err
    assert "warm start: SFT reached its target 0.01" in err and "warning:" not in err
