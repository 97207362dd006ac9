"""The trial function of every trial process: the builtin loop, or a program under the contract."""

from __future__ import annotations

from harness.engine import trial
from harness.engine.spec import TrialResult, TrialSpec
from harness.trainers.program_trial import run_program_trial


def run_trial(spec: TrialSpec) -> TrialResult:
    """Run ``spec`` with its trainer: ``harness.engine.trial.run_trial`` unchanged for builtin,
    ``run_program_trial`` for a command or the TRL adapter."""
    if spec.trainer.is_builtin:
        return trial.run_trial(spec)
    return run_program_trial(spec)
