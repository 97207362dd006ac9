"""Off-policy rollouts: the batches of later steps sampled while the current step trains.

``rollout.max_staleness: k``. The trial's prompt schedule is known in advance
(``harness.engine.trial.prompt_batches``), so a background thread samples step ``s``'s batch as
soon as the policy the server holds is recent enough, and the step takes it when it needs it.
Step ``s`` (from 1) trains the policy of version ``s - 1`` (the optimiser steps taken so far);
its batch may be sampled once version ``s - 1 - k`` or newer has been published, and is sampled
with the newest version the server holds when its request starts (PolicySync.serving). So no
trained sample is more than ``k`` versions older than the policy it trains, generation of the
next batches overlaps the current update, and ``k = 0`` is the synchronous loop (each batch
waits for the policy of the step before it).

The rule is AReaL's staleness control and prime-rl's async level, read in:
- AReaL (inclusionAI/AReaL, ``areal/core/staleness_manager.py`` at 08911ddfaa93fe2b5dc1f2c5c803c9c0dbf3a02c):
  ``StalenessManager.get_capacity``, samples admitted while
  ``(max_staleness + current_version + 1) * consumer_batch_size > accepted + running``: batch
  ``b`` (from 0) may start once ``current_version >= b - max_staleness``; the rollouts run on the
  newest weights the servers hold.
- prime-rl (PrimeIntellect-ai/prime-rl, ``src/prime_rl/orchestrator/scheduler.py`` at
  02b49f938a4f04a9c08e0e7f8b27f29c947b2557): ``Scheduler.update_policy``, the orchestrator at
  step ``n`` waits for checkpoint ``n - max_async_level`` and otherwise takes the latest one
  (``strict_async_level`` off, its default); ``batch/off_policy_level`` logs the lag.

Each row records the version that sampled it (``Rollout.policy_version``); the step logs the
staleness reached (``rollout/staleness_mean``, ``rollout/staleness_max``), and this module
refuses a batch older than ``k`` (it cannot happen under the rule: the check makes that a fact).

Reproducibility: with ``k > 0`` which version samples a batch depends on timing (whether the
step before it had published when its request started), so the versions, and with them the
samples and every number after them, can differ between two runs of one seed. The prompt
schedule, the bound ``k`` and every computation given the samples are reproducible. With
``k = 0`` the versions are fixed (batch ``s`` by version ``s - 1``); the samples are then as
reproducible as the server's own sampling, which is not promised: its engine is seeded once with
the trial seed (per-request seeds fail on vLLM's CPU backend), and vLLM may batch the same
requests differently from run to run (a server the user runs, shared with other work, more so).

Extra draws of a step (dynamic sampling's more prompts) are not in the schedule: they are
sampled when asked, with the newest policy (staleness 0).
"""

from __future__ import annotations

import threading
from functools import partial

from harness.engine.models import LoadedModel
from harness.engine.rollout import Rollout, prompt_token_ids
from harness.engine.samplers.server_sampler import VllmSampler


class StaleSampler:
    """``inner`` sampling the schedule's batches (``batches``: each step's prompts, in order)
    ahead, at most ``max_staleness`` versions behind the trained policy."""

    def __init__(
        self,
        inner: VllmSampler,
        lm: LoadedModel,
        batches: list[list[str]],
        *,
        group_size: int,
        max_new_tokens: int,
        temperature: float,
        max_staleness: int,
    ):
        self.inner, self.batches, self.max_staleness = inner, batches, max_staleness
        self._ids = [prompt_token_ids(lm, prompts) for prompts in batches]  # tokenised here, not in the thread
        self._sampling = {"max_new_tokens": max_new_tokens, "temperature": temperature}
        self.group_size = group_size
        self._published = -1  # the newest version published
        self._next = 0  # the index of the next batch a step takes
        self._ready: dict[int, Rollout] = {}
        self._failure: BaseException | None = None
        self._closed = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._sample_ahead, name="stale-sampler", daemon=True)
        self._thread.start()

    def _sample_ahead(self) -> None:
        try:
            for index, ids in enumerate(self._ids):  # batch index = step - 1
                with self._changed:
                    self._changed.wait_for(partial(self._may_start, index))
                    if self._closed:
                        return
                rollout = self.inner.sample_ids(ids, self.group_size, **self._sampling)
                with self._changed:
                    self._ready[index] = rollout
                    self._changed.notify_all()
        except Exception as err:  # noqa: BLE001 - raised again in the step that waits for the batch
            with self._changed:
                self._failure = err
                self._changed.notify_all()

    def _may_start(self, index: int) -> bool:
        """Whether batch ``index`` may be sampled now (or sampling ahead is over)."""
        return self._closed or self._published >= index - self.max_staleness

    def sample_groups(self, lm: LoadedModel, prompts: list[str], group_size: int, **sampling) -> Rollout:
        """The next step's batch when these are its prompts (sampled ahead), else sampled now."""
        scheduled = self._next < len(self.batches) and prompts == self.batches[self._next]
        if not (scheduled and group_size == self.group_size):
            return self.inner.sample_groups(lm, prompts, group_size, **sampling)
        index, self._next = self._next, self._next + 1
        with self._changed:
            self._changed.wait_for(lambda: index in self._ready or self._failure is not None)
            if index not in self._ready:
                raise self._failure
            rollout = self._ready.pop(index)
        oldest = int(rollout.policy_version.min())
        if self._published - oldest > self.max_staleness:
            raise RuntimeError(
                f"step {index + 1}: a sample of policy version {oldest} is {self._published - oldest} steps stale, "
                f"beyond rollout.max_staleness {self.max_staleness}"
            )
        return rollout.to(lm.device)

    def publish(self, lm: LoadedModel, version: int) -> float:
        seconds = self.inner.publish(lm, version)
        with self._changed:
            self._published = version
            self._changed.notify_all()
        return seconds

    def close(self) -> None:
        """Stop sampling ahead (a request in flight ends with the server, which the trial stops next)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self.inner.close()
