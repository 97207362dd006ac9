"""`harness trial --study FILE --arm NAME --seed N`: one trial of a study, as `harness run` would run it.

The spec is the runner's own (``harness.study.expand.condition_spec``: the study's task, model,
warm start, train and rollout sections, the arm's algorithm and overrides, its grid cell), so
the trial id is the study's for that arm and seed. ``--steps K`` shortens it: the spec's
``train.steps`` is K, which changes the trial id, and the record says it in a warning line.

The record goes beside the study's, never among them: ``<study folder>/trials/records/`` (the
study's results and report read ``<study folder>/records/`` and its database), mirrored to
MLflow under the experiment ``<study>/trials`` (a study name holds no ``/``), so neither a shared
tracking server's study experiment nor the study's own store holds it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from harness.engine.spec import TrainConfig, TrialResult, TrialSpec
from harness.errors import ConfigError
from harness.study.expand import condition_spec, study_dir
from harness.study.field_errors import format_validation_error
from harness.study.load import load_study

#: under the study's folder: the records of its trials run one at a time by `harness trial --study`
STUDY_TRIALS_DIR = "trials"


@dataclass(frozen=True)
class StudyTrial:
    """One trial of a study's arm, and where its record goes."""

    spec: TrialSpec
    folder: Path  # the record's folder (``records/`` under it)
    experiment: str  # the MLflow experiment it is mirrored to
    study_steps: int  # the arm's own steps (the spec's differ when shortened)

    @property
    def shortened(self) -> bool:
        return self.spec.train.steps != self.study_steps

    def noted(self, result: TrialResult) -> TrialResult:
        """``result`` with a warning line saying the trial was shortened, when it was."""
        if not self.shortened:
            return result
        line = (
            f"shortened: {self.spec.train.steps} of arm {self.spec.arm}'s {self.study_steps} steps "
            f"(harness trial --steps); not a trial of study {self.spec.study}"
        )
        return result.model_copy(update={"warnings": [*result.warnings, line]})


def study_trial(path: str | Path, arm: str, seed: int | None, steps: int | None) -> StudyTrial:
    """The spec the runner would run for ``arm`` (an arm, or a grid condition ``arm[key=value]``)
    of the study at ``path`` at ``seed`` (None: the arm's first seed), shortened to ``steps``."""
    study = load_study(path)
    if study.tuning is not None:
        raise ConfigError(
            f"study {study.name!r} tunes its arms first: its trials are known only after tuning; "
            "run it with `harness run`"
        )
    conditions = {c.name: c for c in study.iter_conditions()}
    if arm not in conditions:
        raise ConfigError(f"--arm {arm!r}: study {study.name!r} has no such arm; valid: {', '.join(conditions)}")
    seeds = study.condition_seeds(conditions[arm])
    seed = seeds[0] if seed is None else seed
    if seed not in seeds:
        raise ConfigError(
            f"--seed {seed}: not one of arm {arm}'s seeds in study {study.name!r} "
            f"({', '.join(map(str, seeds))}); the runner never runs it"
        )
    spec = condition_spec(study, conditions[arm], seed)
    study_steps = spec.train.steps
    if steps is not None and steps != study_steps:
        if not 1 <= steps < study_steps:
            raise ConfigError(
                f"--steps {steps}: it shortens the trial, to 1 to {study_steps - 1} of the arm's {study_steps} steps"
            )
        try:
            train = TrainConfig.model_validate({**spec.train.model_dump(), "steps": steps})
        except ValidationError as err:
            raise ConfigError(f"--steps {steps}: {format_validation_error(err, TrainConfig)}") from None
        spec = spec.model_copy(update={"train": train})
    return StudyTrial(spec, study_dir(study) / STUDY_TRIALS_DIR, f"{study.name}/trials", study_steps)
