"""A task's training reward from a learned reward model (``task.reward: {model: ...}``): the
``task.scorer`` that ``build_task`` sets, its verifier kept as the task's (gold) reward.

Building it is torch-free and cheap: the folder (or the id, looked up in the cache) is checked
to be a scalar-head reward model (``key.resolve_reward_model``), so a bad path is a
one-line error at ``harness validate``, before any work. A reward model named by how it is
trained (``task.reward.train``) is checked the same way (its pair file read, line by line) and
is not built here: the scorer waits for it until the trial builds it (``recipe``) and hands it
over (``LearnedRewardScorer.built``). The model itself loads, its checksums
checked, on the first call, on CUDA when this machine has it (the rule of ``model.device: auto``,
which puts the policy there too) or on ``device`` when set; it scores ``batch_size`` completions
a forward pass, in eval mode and without gradients, so the same completions always score the same.

Each completion's training reward is

    weight * (r(x, y) - mean) / sd  +  verifier_weight * verifier(item, y)

where mean and sd are those of the model's scores over its held-out completions (the manifest's):
a zero-mean reward, as the seed text suggests, on the scale of one sd. With ``weight: 0`` the
model is never loaded and the scores are the verifier's alone (times ``verifier_weight``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.engine.reward_model.key import resolve_reward_model
from harness.engine.reward_model.pairs import read_pairs
from harness.engine.tasks.base import Item, RewardFn, Task
from harness.engine.tasks.rewards import resolve_reward
from harness.errors import HarnessError


class LearnedRewardScorer:
    """``scorer(items, completions) -> scores``, one item per completion. ``folder`` is None while
    the reward model of a ``task.reward.train`` recipe is not built yet (``built`` gives the scorer
    of the built one)."""

    def __init__(self, folder: Path | None, manifest: dict[str, Any] | None, config, verifier: RewardFn):
        self.folder = Path(folder) if folder is not None else None
        self.manifest, self.config, self.verifier = manifest, config, verifier
        self.device = None  # None: CUDA when visible, else the CPU; or a torch device / its name
        self._model = None

    def built(self, folder: Path, manifest: dict[str, Any]) -> LearnedRewardScorer:
        """This scorer, on the reward model built in ``folder`` (its ``manifest``)."""
        return LearnedRewardScorer(folder, manifest, self.config, self.verifier)

    @property
    def model(self):
        """The reward model, loaded (and its files checked) on first use."""
        if self.folder is None:
            raise HarnessError(
                "task.reward.train names a reward model that is not built yet: a trial builds it "
                "before its first step (harness.engine.reward_model.recipe.with_built_reward_model)"
            )
        if self._model is None:
            from harness.engine.reward_model.model import load_reward_model  # torch: on first use only

            self._model = load_reward_model(self.folder, self.device)
        return self._model

    def __call__(self, items: list[Item], completions: list[str]) -> list[float]:
        if len(items) != len(completions):
            raise ValueError(
                f"scorer: {len(items)} items for {len(completions)} completions; give one item per "
                "completion (a prompt's item repeated for each of its samples)"
            )
        total = [0.0] * len(completions)
        if self.config.weight:
            raw = self.model.scores([i.prompt for i in items], list(completions), self.config.batch_size)
            total = [t + self.config.weight * s for t, s in zip(total, self.model.normalised(raw))]
        if self.config.verifier_weight:
            total = [
                t + self.config.verifier_weight * self.verifier(item, text)
                for t, item, text in zip(total, items, completions)
            ]
        return total

    def __getstate__(self) -> dict:  # a pickled task carries the folder, not the loaded weights
        return {**self.__dict__, "_model": None}


def with_learned_reward(task: Task, config, cache_dir: str | Path | None = None) -> Task:
    """``task`` trained on the reward model ``config`` names (a ``LearnedRewardConfig``): its scorer
    set, its reward the verifier (``config.verifier``, else the task's own). A model named by its
    recipe is checked, not built: its scorer waits for the trial to build it."""
    if config.train is not None:
        if config.train.pairs is not None:
            read_pairs(config.train.pairs, where="task.reward.train.pairs")
        folder, manifest = None, None
    else:
        folder, manifest = resolve_reward_model(config.model, cache_dir)
    verifier = resolve_reward(config.verifier) if config.verifier is not None else task.reward
    return replace(task, reward=verifier, scorer=LearnedRewardScorer(folder, manifest, config, verifier))
