"""A trial run in segments between its compute looks (issue 38): where a segment starts and stops,
and the checkpoint of the whole training state it leaves behind.

``TrialSpec.looks`` names points of the compute axis; look k is the first step whose history
row reaches ``at[k]`` (``looks_crossed``). A segment that pauses after look k writes, right after
that look's evaluation, ``<folder>/resume/look_<k>.pt`` (``checkpoint_path``); the next segment
loads it and goes on from the step after it. The checkpoint holds all a later step reads that
changes as the trial trains:

- the trainable parameters of the policy (a LoRA adapter's, or every weight) and of the critic,
  the optimiser's state (AdamW's moments and step counts) and the learner's ``policy_version``;
- the trial generator's state (sampling, minibatch order, a placebo's shuffle, dynamic
  sampling's extra prompts) and torch's global generator's (dropout), and the device's where
  the policy is on CUDA;
- the history rows (whose last row holds the compute totals and ``tokens/total``) and every
  evaluation's per-prompt scores so far, and the wall seconds spent;
- a header: the format version, the trial id (the whole trial's, which every segment of it
  shares: ``TrialSpec.whole_trial_id``), the look and the step.

What never changes is rebuilt as at the start: the task, the warm start (the policy's frozen
weights), the reference, a distillation teacher, a learned reward model, and the prompt
schedule, which depends on the seed alone (the resumed segment takes it up at the next step).
The held-out evaluations draw from a generator of their own, so the segments give bitwise the
numbers of the trial run whole (on the CPU, with ``rollout.backend: hf``). Nothing else in
the builtin loop carries state from one step to the next (no adaptive KL coefficient, no running
normaliser); a ``module:function`` tool or reward that keeps state of its own between calls
would start afresh in each segment.

A vLLM server's sampling cannot be carried across a restart (it draws from its own engine's
state, and with ``max_staleness`` > 0 which policy samples a batch depends on timing), so
pausing and resuming need ``rollout.backend: hf``.
"""

from __future__ import annotations

import os
import pickle
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from harness.engine.learner import Learner
from harness.engine.spec import LookPoints, PromptScores, TrialSpec
from harness.errors import ConfigError, one_line

#: the version of the checkpoint's layout; a file of another version is refused
FORMAT = 1
#: the folder, inside the trial's folder, that holds its checkpoints
RESUME_DIR = "resume"


def checkpoint_path(folder: Path, look: int) -> Path:
    """Where the checkpoint after look ``look`` is written in the trial's folder."""
    return Path(folder) / RESUME_DIR / f"look_{look}.pt"


def looks_reached(looks: LookPoints | None, row: dict[str, Any]) -> int:
    """How many of the look points the history ``row`` has reached (its axis value at or past them)."""
    return 0 if looks is None else bisect_right(looks.at, row[looks.axis])


def looks_crossed(looks: LookPoints | None, before: dict[str, Any], row: dict[str, Any]) -> range:
    """The looks whose point ``row`` reaches first, ``before`` being the row of the step before it."""
    return range(looks_reached(looks, before), looks_reached(looks, row))


@dataclass(frozen=True)
class Resumed:
    """What a checkpoint gives the loop besides the learner's state: the history rows (step 0 the
    start evaluation), every evaluation's per-prompt scores, and the wall seconds spent so far."""

    history: list[dict[str, Any]]
    evaluations: list[PromptScores]
    elapsed_s: float


@dataclass(frozen=True)
class Segment:
    """The part of a trial one ``run_trial`` call runs: from its start, or from the checkpoint
    after look ``resume_after_look``, to its last step, or to look ``pause_after_look`` (then it
    writes that look's checkpoint). Bad arguments and an unusable checkpoint are a ``ConfigError``
    here, before any work (``Segment.of``)."""

    spec: TrialSpec
    folder: Path | None
    pause_after_look: int | None
    resume_after_look: int | None
    saved: dict[str, Any] | None  # the checkpoint resumed from, read and checked
    progress: Resumed | None  # what it holds besides the learner's state

    @classmethod
    def of(
        cls, spec: TrialSpec, folder: Path | None, pause_after_look: int | None, resume_after_look: int | None
    ) -> Segment:
        saved = progress = None
        if pause_after_look is not None or resume_after_look is not None:
            _check_arguments(spec, folder, pause_after_look, resume_after_look)
        if resume_after_look is not None:
            path = checkpoint_path(folder, resume_after_look)
            saved = _read_checkpoint(path, spec, resume_after_look)
            progress = _progress(saved, path, resume_after_look)
        return cls(spec, folder, pause_after_look, resume_after_look, saved, progress)

    def pauses(self, history: list[dict[str, Any]]) -> bool:
        """Whether the trial stops here: its last row reached the look it pauses after, and steps
        remain (a trial whose last step comes first simply ends, its last evaluation standing)."""
        last = history[-1]
        return (
            self.pause_after_look is not None
            and looks_reached(self.spec.looks, last) > self.pause_after_look
            and last["step"] < self.spec.train.steps
        )

    def resume(self, learner: Learner) -> Resumed | None:
        """The learner restored from the checkpoint (after it was built as at the start), and the
        progress it holds; None for a segment that starts at the beginning."""
        if self.saved is None:
            return None
        path = checkpoint_path(self.folder, self.resume_after_look)
        _restore_learner(learner, self.saved, path)
        return self.progress

    def pause(self, learner: Learner, history: list[dict], evaluations: list[PromptScores], elapsed_s: float) -> None:
        """Write the checkpoint after look ``pause_after_look``, atomically: a reader finds the
        whole file or none."""
        look = self.pause_after_look
        payload = {
            "header": {
                "format": FORMAT,
                "trial_id": self.spec.whole_trial_id(),
                "look": look,
                "step": history[-1]["step"],
            },
            **_learner_state(learner),
            "history": history,
            "prompts": [scores.model_dump() for scores in evaluations],
            "elapsed_s": elapsed_s,
        }
        path = checkpoint_path(self.folder, look)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with temporary.open("wb") as out:
            torch.save(payload, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)


def _check_arguments(
    spec: TrialSpec, folder: Path | None, pause_after_look: int | None, resume_after_look: int | None
) -> None:
    if spec.looks is None:
        raise ConfigError("pause_after_look and resume_after_look need looks in the trial spec (looks: {axis, at})")
    if spec.rollout.backend != "hf":
        raise ConfigError(
            f"a trial with rollout.backend {spec.rollout.backend} cannot be paused and resumed: the server's sampling "
            "cannot be carried across a restart, so the resumed trial would not continue the paused one; run it "
            "whole (no pause_after_look or resume_after_look) or use rollout.backend: hf"
        )
    if folder is None:
        raise ConfigError("pause_after_look and resume_after_look need the trial's folder, where its checkpoints go")
    last = len(spec.looks.at) - 1
    for name, look in (("pause_after_look", pause_after_look), ("resume_after_look", resume_after_look)):
        if look is not None and not 0 <= look < last:
            raise ConfigError(
                f"{name} {look}: the trial has looks 0..{last} and look {last} is the budget, where it ends; "
                f"name a look from 0 to {last - 1}"
            )
    if pause_after_look is not None and resume_after_look is not None and pause_after_look <= resume_after_look:
        raise ConfigError(
            f"pause_after_look {pause_after_look} is not after resume_after_look {resume_after_look}: a segment "
            "pauses at a later look than the one it resumes from"
        )


def _rerun(look: int) -> str:
    """What to do about a checkpoint after ``look`` that cannot be resumed from."""
    return f"run the segment that pauses after look {look} (pause_after_look={look}) again"


def _read_checkpoint(path: Path, spec: TrialSpec, look: int) -> dict[str, Any]:
    """The checkpoint at ``path``, checked to be this trial's after ``look`` in this format."""
    again = _rerun(look)
    if not path.is_file():
        raise ConfigError(f"resume_after_look {look}: there is no checkpoint {path}; {again}")
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, pickle.UnpicklingError, EOFError, OSError, ValueError) as err:  # truncated or foreign
        raise ConfigError(f"{path} cannot be read as a checkpoint ({one_line(err, 200)}); {again}") from None
    header = saved.get("header") if isinstance(saved, dict) else None
    if not isinstance(header, dict):
        raise ConfigError(f"{path} is not a trial checkpoint (it has no header); {again}")
    if header.get("format") != FORMAT:
        raise ConfigError(
            f"{path} is in checkpoint format {header.get('format')!r} and this harness reads format {FORMAT}; {again}"
        )
    if header.get("trial_id") != spec.whole_trial_id() or header.get("look") != look:
        raise ConfigError(
            f"{path} holds trial {header.get('trial_id')!r} after look {header.get('look')!r}, not trial "
            f"{spec.whole_trial_id()} after look {look}; {again}"
        )
    missing = sorted(CHECKPOINT_KEYS - saved.keys())
    if missing:
        raise ConfigError(f"{path} is not a whole checkpoint (it lacks {', '.join(missing)}); {again}")
    return saved


def _progress(saved: dict[str, Any], path: Path, look: int) -> Resumed:
    """The history, per-prompt scores and seconds of a checkpoint, checked: rows that end at its step."""
    history, step = saved["history"], saved["header"].get("step")
    try:
        if not (isinstance(history, list) and all(isinstance(row, dict) for row in history) and history):
            raise ValueError("its history is not a list of rows")
        if history[-1].get("step") != step:
            raise ValueError(f"its history ends at step {history[-1].get('step')!r}, not at its step {step!r}")
        evaluations = [PromptScores.model_validate(scores) for scores in saved["prompts"]]
        return Resumed(history, evaluations, float(saved["elapsed_s"]))
    except (ValueError, TypeError) as err:  # a pydantic ValidationError is a ValueError
        raise ConfigError(f"{path} is not a whole checkpoint ({one_line(err, 200)}); {_rerun(look)}") from None


#: what a checkpoint holds besides its header
CHECKPOINT_KEYS = frozenset(
    {"policy", "critic", "optimizer", "generator", "rng", "device_rng", "policy_version"}
    | {"history", "prompts", "elapsed_s"}
)


def _trainable(module: torch.nn.Module | None) -> dict[str, torch.Tensor] | None:
    """The parameters the optimiser updates, by name, copied (None: no module)."""
    if module is None:
        return None
    return {name: p.detach().clone() for name, p in module.named_parameters() if p.requires_grad}


def _learner_state(learner: Learner) -> dict[str, Any]:
    device = learner.lm.device
    return {
        "policy": _trainable(learner.lm.model),
        "critic": _trainable(learner.critic),
        "optimizer": learner.optimizer.state_dict(),
        "generator": learner.generator.get_state(),
        "rng": torch.get_rng_state(),
        "device_rng": torch.cuda.get_rng_state(device) if device.type == "cuda" else None,
        "policy_version": learner.policy_version,
    }


def _restore_learner(learner: Learner, saved: dict[str, Any], path: Path) -> None:
    """Put the checkpoint's state into ``learner`` (built as at the start); a state that does not
    fit its model (other names or shapes) is a ``ConfigError``."""
    try:
        _load_trainable(learner.lm.model, saved["policy"], "policy")
        _load_trainable(learner.critic, saved["critic"], "critic")
        learner.optimizer.load_state_dict(saved["optimizer"])
        learner.generator.set_state(saved["generator"])
        torch.set_rng_state(saved["rng"])
        if learner.lm.device.type == "cuda":
            torch.cuda.set_rng_state(saved["device_rng"], learner.lm.device)
    except (KeyError, ValueError, RuntimeError, TypeError) as err:
        raise ConfigError(
            f"{path} does not fit this trial's learner ({one_line(err, 200)}); {_rerun(saved['header']['look'])}"
        ) from None
    learner.policy_version = saved["policy_version"]


def _load_trainable(module: torch.nn.Module | None, saved: dict[str, torch.Tensor] | None, what: str) -> None:
    own = dict(module.named_parameters()) if module is not None else {}
    trained = {name: p for name, p in own.items() if p.requires_grad}
    if (saved is None) != (module is None) or set(saved or {}) != set(trained):
        raise ValueError(f"its {what}'s trained parameters are not this trial's")
    with torch.no_grad():
        for name, value in (saved or {}).items():
            shape, own_shape = tuple(value.shape), tuple(trained[name].shape)
            if shape != own_shape:
                raise ValueError(f"{what} parameter {name} has shape {shape}, not {own_shape}")
            trained[name].copy_(value)
