"""A study's reward model named by how it is trained (``task.reward.train``), built where the
trial's warm start is built: in the trial process, as the trial starts (``trial.start_policy``,
after the task and tokenizer checks, before the policy loads). ``harness run``'s seed check
starts the control's trial that way before anything is queued, so it builds the model first, as
it builds the warm start; with the check off, the first trial does.

It is ``harness reward-model train``'s training and cache (``training.train_reward_model``): the
recipe in the study's set-up is exactly what the command reads with the same flags, so both
build, or find, the same entry ``<cache_dir>/reward_models/<key>/``, keyed by the content hash
of every input. Exactly once: the checked cache builds under a lock beside the entry, so of the
trials, workers and seed checks that ask at the same time one builds it and the others wait on
the lock, then load the checked entry. It says what it does on stderr (the trial's log), with
the prefix ``reward model:``, as the warm start does with ``warm start:``.
"""

from __future__ import annotations

from dataclasses import replace

from harness.engine.reward_model.training import train_reward_model
from harness.engine.spec import TrialSpec
from harness.engine.task_config import LearnedRewardConfig
from harness.engine.tasks.base import Task


def with_built_reward_model(spec: TrialSpec, task: Task) -> Task:
    """``task`` (built from ``spec.task``) with its scorer on the reward model ``task.reward.train``
    names, built now or found in the cache; any other task as it is."""
    reward = spec.task.reward
    if not (isinstance(reward, LearnedRewardConfig) and reward.train is not None):
        return task
    built = train_reward_model(spec, reward.train)
    return replace(task, scorer=task.scorer.built(built.folder, built.manifest))
