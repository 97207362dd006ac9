"""The trial function of every trial process: the builtin loop, or a program under the contract."""

from __future__ import annotations

from harness.engine import trial
from harness.engine.spec import TrialResult, TrialSpec
from harness.trainers.program_trial import run_program_trial
from harness.trainers.trial_dir import checkpoint_dir, fresh_trial_dir


def run_trial(spec: TrialSpec) -> TrialResult:
    """Run ``spec`` with its trainer: ``harness.engine.trial.run_trial`` for builtin (with the
    trial's folder, ``fresh_trial_dir``, when a vLLM server generates for it: its log goes there;
    a segment of a compute-look trial with the folder of its checkpoints, ``checkpoint_dir``, which
    every segment of the trial shares), ``run_program_trial`` for a command or the TRL adapter."""
    if spec.trainer.is_builtin and spec.looks is not None and spec.looks.run_to is not None:
        looks = spec.looks
        return trial.run_trial(
            spec,
            checkpoint_dir(spec.whole_trial_id()),
            pause_after_look=looks.pause_after,
            resume_after_look=looks.resume_after,
        )
    if spec.trainer.is_builtin:
        folder = fresh_trial_dir(spec.trial_id) if spec.rollout.backend == "vllm" else None
        return trial.run_trial(spec, folder)
    return run_program_trial(spec)
